"""MCPExecutor under OpenTelemetryInstrumentation, against the real SDK server (stdio and
streamable HTTP on loopback): the refusal or error reason on the ``execute_tool`` span, and
each progress notification as an event of that span while the call runs."""

from __future__ import annotations

import contextlib
import json
import logging
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import polyloop
from polyloop import Action, ActionStatus
from polyloop.executors import MCPExecutor
from polyloop.models import ScriptedModel
from polyloop.parsers import JsonToolCallParser
from polyloop.stores import MemoryStore
from tests.conftest import mcp_http_server, mcp_stdio_command, require_extra, require_mcp
from tests.unit._doubles import agent

require_mcp()
require_extra("otel")

from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from opentelemetry.trace import StatusCode  # noqa: E402

from polyloop.instrumentation import OpenTelemetryInstrumentation  # noqa: E402

TRANSPORTS = ["stdio", "http"]
CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
ROOT = Path(__file__).resolve().parents[2]


class Started(SpanProcessor):
    """Keeps every span as it starts (so a test can read one before it ends)."""

    def __init__(self) -> None:
        self.spans: list[Span] = []

    def on_start(self, span: Span, parent_context: Any = None) -> None:
        self.spans.append(span)


class Telemetry:
    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.started = Started()
        self.provider = TracerProvider()
        self.provider.add_span_processor(self.started)
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def instrumentation(self, **options: Any) -> OpenTelemetryInstrumentation:
        return OpenTelemetryInstrumentation(tracer_provider=self.provider, **options)

    def tools(self) -> list[ReadableSpan]:
        spans = sorted(self.exporter.get_finished_spans(), key=lambda s: s.start_time or 0)
        return [s for s in spans if s.name.startswith("execute_tool")]


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def tool_call(tool: str, **args: Any) -> str:
    return json.dumps({"tool": tool, "arguments": args})


@contextlib.asynccontextmanager
async def opened(transport: str, **options: Any) -> AsyncIterator[MCPExecutor]:
    if transport == "stdio":
        command, *args = mcp_stdio_command()
        async with MCPExecutor.stdio(command, args, **options) as executor:
            yield executor
        return
    with mcp_http_server() as (url, _):
        async with MCPExecutor.http(url, **options) as executor:
            yield executor


async def traced_run(
    executor: MCPExecutor, telemetry: Telemetry, *calls: str, **options: Any
) -> None:
    await polyloop.run(
        agent(tools=executor.registry), "use the tools",
        model=ScriptedModel([*calls, '{"final_answer": "done"}']), parser=JsonToolCallParser(),
        executor=executor, store=MemoryStore(),
        instrumentation=telemetry.instrumentation(**options),
    )  # fmt: skip


# --------------------------------------------------------------------------- refusal reasons


@pytest.mark.asyncio
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_the_execute_tool_span_says_why_the_call_was_refused(
    transport: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(CONTENT_ENV, raising=False)
    telemetry = Telemetry()
    async with opened(transport) as executor:
        await traced_run(
            executor, telemetry,
            tool_call("add", a="hush-hush", b=5000),
            tool_call("delete", key="pi"),
            tool_call("refuse", code=-32602),
        )  # fmt: skip

    invalid, unknown, refused = telemetry.tools()
    assert [attrs(s)["error.type"] for s in (invalid, unknown, refused)] == [
        "invalid_arguments",
        "unknown_tool",
        "server_refused",
    ]
    assert all(s.status.status_code is StatusCode.ERROR for s in (invalid, unknown, refused))
    assert attrs(invalid)["polyloop.refusal.violations.path"] == ("a", "b")
    assert attrs(invalid)["polyloop.refusal.violations.rule"] == ("type", "maximum")
    assert {"lookup", "add", "refuse"} <= set(attrs(unknown)["polyloop.refusal.available"])
    assert attrs(refused)["polyloop.refusal.code"] == -32602
    assert attrs(refused)["polyloop.refusal.tool"] == "refuse"
    texts = [str(v) for s in telemetry.exporter.get_finished_spans() for v in attrs(s).values()]
    assert not [t for t in texts if "hush-hush" in t or "refused with code" in t]


@pytest.mark.asyncio
async def test_with_content_the_servers_message_and_the_detail_are_on_the_span() -> None:
    telemetry = Telemetry()
    async with opened("stdio") as executor:
        await traced_run(
            executor, telemetry, tool_call("refuse", code=-32602), capture_content=True
        )

    (refused,) = telemetry.tools()
    assert attrs(refused)["polyloop.refusal.message"] == "refused with code -32602"
    assert json.loads(attrs(refused)["polyloop.executor_detail"]) == {
        "refusal": {
            "kind": "server_refused",
            "tool": "refuse",
            "code": -32602,
            "message": "refused with code -32602",
        }
    }


@pytest.mark.asyncio
async def test_a_timed_out_call_has_the_timeout_as_its_error_type() -> None:
    telemetry = Telemetry()
    async with opened("stdio", call_timeouts_s={"nap": 0.2}) as executor:
        await traced_run(executor, telemetry, tool_call("nap", seconds=5))

    (nap,) = telemetry.tools()
    assert attrs(nap)["error.type"] == "timeout"
    assert attrs(nap)["polyloop.error.kind"] == "timeout"
    assert nap.status.description == "the action was env_error: timeout"


# --------------------------------------------------------------------------- progress


@pytest.mark.asyncio
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_each_progress_notification_is_an_event_of_the_tool_span_while_it_runs(
    transport: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(CONTENT_ENV, raising=False)
    telemetry = Telemetry()
    seen_live: list[tuple[int, bool]] = []

    def on_progress(tool: str, done: float, total: float | None, message: str | None) -> None:
        (span,) = [s for s in telemetry.started.spans if s.name == "execute_tool count"]
        seen_live.append((len(span.events), span.end_time is None))

    async with opened(transport, on_progress=on_progress) as executor:
        await traced_run(executor, telemetry, tool_call("count", to=3))

    (count,) = telemetry.tools()
    events = [(e.name, dict(e.attributes or {})) for e in count.events]
    assert events == [
        (
            "polyloop.tool.progress",
            {
                "polyloop.progress.sequence": n,
                "polyloop.progress.value": float(n),
                "polyloop.progress.total": 3.0,
            },
        )
        for n in (1, 2, 3)
    ]  # the message is the server's text: content, off by default
    assert attrs(count)["polyloop.progress.notifications"] == 3
    # on_progress runs on the caller's loop after the event was added, before the span ends
    assert [live for _, live in seen_live] == [True, True, True]
    assert [n >= i for i, (n, _) in enumerate(seen_live, 1)] == [True, True, True]


@pytest.mark.asyncio
async def test_with_content_a_progress_event_carries_the_servers_message() -> None:
    telemetry = Telemetry()
    async with opened("stdio") as executor:
        await traced_run(executor, telemetry, tool_call("count", to=2), capture_content=True)

    (count,) = telemetry.tools()
    messages = [dict(e.attributes or {}).get("polyloop.progress.message") for e in count.events]
    assert messages == ["counted 1", "counted 2"]


@pytest.mark.asyncio
@pytest.mark.parametrize("content", ["true", ""])
async def test_outside_a_run_progress_lands_on_the_callers_current_span(
    content: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CONTENT_ENV, content)
    telemetry = Telemetry()
    tracer = telemetry.provider.get_tracer("test")
    async with opened("stdio") as executor:
        with tracer.start_as_current_span("mine"):
            outcome = await executor.execute(
                Action(text="c", tool_name="count", tool_args={"to": 2})
            )
        untraced = await executor.execute(Action(text="c", tool_name="count", tool_args={"to": 1}))

    assert outcome.status is untraced.status is ActionStatus.EXECUTED
    (mine,) = telemetry.exporter.get_finished_spans()
    assert [e.name for e in mine.events] == ["polyloop.tool.progress"] * 2
    said = [dict(e.attributes or {}).get("polyloop.progress.message") for e in mine.events]
    assert said == (["counted 1", "counted 2"] if content else [None, None])


class Refusing(trace.NonRecordingSpan):
    """A current span that says it records but raises on each event."""

    def is_recording(self) -> bool:
        return True

    def add_event(self, name: str, attributes: Any = None, timestamp: int | None = None) -> None:
        raise RuntimeError("exporter on fire")


@pytest.mark.asyncio
async def test_a_span_that_fails_to_record_progress_never_fails_the_call(
    caplog: pytest.LogCaptureFixture,
) -> None:
    heard: list[float] = []
    span = Refusing(trace.INVALID_SPAN_CONTEXT)
    async with opened("stdio", on_progress=lambda t, d, total, m: heard.append(d)) as executor:
        with caplog.at_level(logging.WARNING, logger="polyloop.otel"), trace.use_span(span):
            outcome = await executor.execute(
                Action(text="c", tool_name="count", tool_args={"to": 3})
            )

    assert outcome.status is ActionStatus.EXECUTED
    assert outcome.observation == "counted to 3"
    assert outcome.detail is not None
    assert outcome.detail["progress"]["notifications"] == 3
    assert heard == [1.0, 2.0, 3.0]
    warnings = [r.getMessage() for r in caplog.records if "progress" in r.getMessage()]
    assert len(warnings) == 1  # once per call
    assert "exporter on fire" in warnings[0]


@pytest.mark.asyncio
async def test_without_opentelemetry_progress_still_reaches_the_callback_and_the_detail(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The MCP SDK needs opentelemetry-api itself: "not installed" is what the lazy import says.
    from polyloop._telemetry import _progress as _otel_progress

    monkeypatch.setattr(_otel_progress, "_opentelemetry", lambda: None)
    heard: list[float] = []
    telemetry = Telemetry()
    async with opened("stdio", on_progress=lambda t, d, total, m: heard.append(d)) as executor:
        with telemetry.provider.get_tracer("test").start_as_current_span("mine"):
            outcome = await executor.execute(
                Action(text="c", tool_name="count", tool_args={"to": 2})
            )

    assert outcome.detail is not None
    assert outcome.detail["progress"]["notifications"] == 2
    assert heard == [1.0, 2.0]
    (mine,) = telemetry.exporter.get_finished_spans()
    assert mine.events == ()


def test_importing_polyloop_and_its_executors_imports_no_opentelemetry() -> None:
    script = (
        "import sys, polyloop, polyloop.executors, polyloop._telemetry._progress\n"
        "from polyloop.executors import _mcp\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=ROOT,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
