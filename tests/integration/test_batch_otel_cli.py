"""``polyloop batch --otel``: OpenTelemetry from the ``OTEL_*`` environment, the runs exported
over OTLP/HTTP to a receiver on loopback with their batch and task ids; without the extra, one
line with the install hint and nothing written."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from polyloop.cli import main
from tests.conftest import require_extra
from tests.integration.test_otel_otlp import attributes
from tests.integration.test_otel_otlp import receiver as receiver

require_extra("otel")

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: E402
    ExportTraceServiceRequest,
)


def write_tasks(path: Path, count: int) -> None:
    with path.open("w", encoding="utf-8") as lines:
        for n in range(count):
            lines.write(json.dumps({"id": f"t{n}", "goal": "steps=1"}) + "\n")


def command(tmp_path: Path, *more: str) -> list[str]:
    return [
        "batch", str(tmp_path / "tasks.jsonl"), "--agent", "tests.batch_doubles:AGENT",
        "--seams", "tests.batch_doubles:seams", "--store", f"sqlite:///{tmp_path / 'runs.db'}",
        "--batch", "nightly", *more,
    ]  # fmt: skip


def test_otel_exports_every_run_with_its_batch_and_task_id(
    tmp_path: Path,
    receiver: tuple[str, list[tuple[str, str, bytes]]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url, received = receiver
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)
    monkeypatch.setenv("OTEL_SERVICE_NAME", "nightly-evals")
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "none")
    write_tasks(tmp_path / "tasks.jsonl", 3)
    assert main(command(tmp_path, "--otel")) == 0, capsys.readouterr()
    requests = [
        ExportTraceServiceRequest.FromString(body)
        for path, _, body in received
        if path == "/v1/traces"
    ]
    resources = {
        kv.value.string_value
        for request in requests
        for resource in request.resource_spans
        for kv in resource.resource.attributes
        if kv.key == "service.name"
    }
    assert resources == {"nightly-evals"}
    runs = [
        span
        for request in requests
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
        if span.name == "invoke_agent"
    ]
    assert sorted(str(attributes(span)["polyloop.task_id"]) for span in runs) == ["t0", "t1", "t2"]
    assert {attributes(span)["polyloop.batch"] for span in runs} == {"nightly"}
    assert {attributes(span)["gen_ai.provider.name"] for span in runs} == {"unknown"}


def test_without_the_extra_otel_is_one_line_with_the_install_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)  # import fails
    write_tasks(tmp_path / "tasks.jsonl", 1)
    assert main(command(tmp_path, "--otel")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "pip install 'polyloop[otel]'" in err
    assert not (tmp_path / "runs.db").exists()


def test_an_unknown_exporter_is_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "zipkin")
    write_tasks(tmp_path / "tasks.jsonl", 1)
    assert main(command(tmp_path, "--otel")) == 2
    assert "OTEL_TRACES_EXPORTER='zipkin' is not supported" in capsys.readouterr().err
    assert not (tmp_path / "runs.db").exists()
