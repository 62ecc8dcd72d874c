"""One real export: a run's spans and metrics sent over OTLP/HTTP (protobuf) to a receiver on
loopback, decoded with the OpenTelemetry protocol's own message types — the wire format, not
the SDK's objects. The model is ``OpenAIChatModel`` talking to a chat-completions endpoint on
loopback, so the request side comes from its description and the response side from the wire.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

import polyloop
from polyloop import Action, ActionOutcome, FinalAnswer, ModelReply, ParsedReply
from polyloop.stores import MemoryStore
from tests.conftest import require_extra
from tests.unit._doubles import agent

require_extra("otel")
require_extra("openai")

from opentelemetry.exporter.otlp.proto.http.metric_exporter import (  # noqa: E402
    OTLPMetricExporter,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # noqa: E402
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (  # noqa: E402
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: E402
    ExportTraceServiceRequest,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue  # noqa: E402
from opentelemetry.proto.trace.v1.trace_pb2 import Span  # noqa: E402
from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import BatchSpanProcessor  # noqa: E402

from polyloop.instrumentation import OpenTelemetryInstrumentation  # noqa: E402
from polyloop.models import OpenAIChatModel  # noqa: E402
from tests.unit.test_openai_model import FakeEndpoint, completion  # noqa: E402
from tests.unit.test_openai_model import endpoint as endpoint  # noqa: E402  (the fixture)


class Receiver(BaseHTTPRequestHandler):
    """An OTLP/HTTP receiver: keeps each POST's path, content type and body; answers 200."""

    received: list[tuple[str, str, bytes]]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.received.append((self.path, self.headers.get("Content-Type", ""), body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return None


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[tuple[str, str, bytes]]]]:
    with serving_receiver() as served:
        yield served


@contextlib.contextmanager
def serving_receiver() -> Iterator[tuple[str, list[tuple[str, str, bytes]]]]:
    """An OTLP/HTTP receiver on a loopback port: its endpoint and what it received."""
    received: list[tuple[str, str, bytes]] = []
    handler = type("Handler", (Receiver,), {"received": received})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


TOOLS = polyloop.ToolRegistry([polyloop.Tool(name="search", description="search the shelves")])


class ToolOrAnswer:
    def parse(self, reply: ModelReply) -> ParsedReply:
        if reply.text == "search":
            return Action(text="search cats", tool_name="search", tool_args={"q": "cats"})
        return FinalAnswer(text=reply.text)


class Executor:
    async def execute(self, action: Action) -> ActionOutcome:
        return ActionOutcome(status=polyloop.ActionStatus.EXECUTED, observation="3 cats")


def value(any_value: AnyValue) -> object:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [value(v) for v in any_value.array_value.values]
    return getattr(any_value, kind) if kind else None


def attributes(span: Span) -> dict[str, object]:
    return {kv.key: value(kv.value) for kv in span.attributes}


@pytest.mark.asyncio
async def test_a_run_exported_over_otlp_http_decodes_as_the_genai_span_tree_and_metrics(
    receiver: tuple[str, list[tuple[str, str, bytes]]], endpoint: FakeEndpoint
) -> None:
    url, received = receiver
    endpoint.responses += [
        (
            200,
            completion("search", id="chatcmpl-a", model="gpt-x-2026", finish_reason="tool_calls"),
        ),
        (200, completion("done", id="chatcmpl-b", model="gpt-x-2026")),
    ]
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{url}/v1/traces", timeout=10))
    )
    reader = PeriodicExportingMetricReader(
        OTLPMetricExporter(endpoint=f"{url}/v1/metrics", timeout=10),
        export_interval_millis=3_600_000,
    )
    meter_provider = MeterProvider(metric_readers=[reader])
    instrumentation = OpenTelemetryInstrumentation(
        agent_name="librarian",
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        capture_content=True,
    )
    model = OpenAIChatModel(
        "gpt-x",
        base_url=endpoint.base_url,
        api_key="k",
        max_retries=0,
        options={"temperature": 0.5},
    )
    store = MemoryStore()
    try:
        await run_and_check(
            tracer_provider, meter_provider, instrumentation, model, store, received
        )
    finally:  # the providers' last exports must not outlive the receiver
        tracer_provider.shutdown()
        meter_provider.shutdown()


async def run_and_check(
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    instrumentation: OpenTelemetryInstrumentation,
    model: OpenAIChatModel,
    store: MemoryStore,
    received: list[tuple[str, str, bytes]],
) -> None:
    caller = tracer_provider.get_tracer("app")

    with caller.start_as_current_span("POST /ask") as request:
        result = await polyloop.run(
            agent(tools=TOOLS),
            "Count the cats — ünïcode ✓",
            model=model,
            parser=ToolOrAnswer(),
            executor=Executor(),
            store=store,
            run_id="otlp-run",
            instrumentation=instrumentation,
        )
    await model.aclose()
    await asyncio.to_thread(tracer_provider.force_flush)
    await asyncio.to_thread(meter_provider.force_flush)

    assert result.stop_reason is polyloop.StopReason.AGENT_FINISHED
    assert {(path, kind) for path, kind, _ in received} == {
        ("/v1/traces", "application/x-protobuf"),
        ("/v1/metrics", "application/x-protobuf"),
    }
    spans = [
        span
        for path, _, body in received
        if path == "/v1/traces"
        for resource in ExportTraceServiceRequest.FromString(body).resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]
    by_name = {span.name: span for span in spans}
    assert sorted(by_name) == [
        "POST /ask",
        "chat gpt-x",
        "execute_tool search",
        "invoke_agent librarian",
    ]  # no step span: steps are polyloop.step events of the run span
    run_span = by_name["invoke_agent librarian"]
    assert run_span.parent_span_id == request.get_span_context().span_id.to_bytes(8, "big")
    assert {span.trace_id for span in spans} == {run_span.trace_id}
    started = (await store.read_log("otlp-run")).started
    assert started is not None
    assert started.trace_parent is not None
    assert started.trace_parent.split("-")[1:3] == [run_span.trace_id.hex(), run_span.span_id.hex()]
    chats = [span for span in spans if span.name == "chat gpt-x"]
    assert [attributes(c)["gen_ai.response.id"] for c in chats] == ["chatcmpl-a", "chatcmpl-b"]
    first = attributes(chats[0])
    assert {k: first[k] for k in first if k.startswith(("gen_ai.request", "gen_ai.response"))} == {
        "gen_ai.request.model": "gpt-x",
        "gen_ai.request.temperature": 0.5,
        "gen_ai.response.model": "gpt-x-2026",
        "gen_ai.response.id": "chatcmpl-a",
        "gen_ai.response.finish_reasons": ["tool_calls"],
    }
    assert first["gen_ai.provider.name"] == "openai"
    assert first["gen_ai.usage.input_tokens"] == 7
    assert first["server.address"] == "127.0.0.1"
    assert chats[0].kind == Span.SpanKind.SPAN_KIND_CLIENT
    assert "Count the cats — ünïcode ✓" in str(attributes(run_span)["gen_ai.input.messages"])
    assert attributes(by_name["execute_tool search"])["gen_ai.tool.call.result"] == "3 cats"
    assert "gen_ai.tool.call.id" not in attributes(by_name["execute_tool search"])
    assert attributes(run_span)["gen_ai.provider.name"] == "openai"
    assert attributes(run_span)["gen_ai.request.model"] == "gpt-x"
    assert [event.name for event in run_span.events] == ["polyloop.step", "polyloop.step"]

    metrics = {
        metric.name: metric
        for path, _, body in received
        if path == "/v1/metrics"
        for resource in ExportMetricsServiceRequest.FromString(body).resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
    }
    assert sorted(metrics) == [
        "gen_ai.client.operation.duration",
        "gen_ai.client.token.usage",
        "polyloop.runs",
    ]
    tokens = metrics["gen_ai.client.token.usage"]
    assert tokens.unit == "{token}"
    assert sorted(
        ({kv.key: value(kv.value) for kv in p.attributes}["gen_ai.token.type"], p.count, p.sum)
        for p in tokens.histogram.data_points
    ) == [("input", 2, 14.0), ("output", 2, 6.0)]
    assert metrics["gen_ai.client.operation.duration"].unit == "s"
    (runs,) = metrics["polyloop.runs"].sum.data_points
    assert runs.as_int == 1
    assert {kv.key: value(kv.value) for kv in runs.attributes} == {
        "polyloop.stop_reason": "agent_finished",
        "gen_ai.agent.name": "librarian",
    }


@pytest.mark.asyncio
async def test_a_batch_exported_over_otlp_shares_one_batch_attribute_and_bounded_span_names(
    receiver: tuple[str, list[tuple[str, str, bytes]]],
) -> None:
    """run_many with the instrumentation: every run span carries the batch and its task id on
    the wire; a tool the model made up is an attribute, not a span name; a model client
    without ``describe()`` gets the documented provider fallback."""
    from polyloop import Task, run_many
    from tests.batch_doubles import AGENT, seams

    url, received = receiver
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{url}/v1/traces", timeout=10))
    )
    instrumentation = OpenTelemetryInstrumentation(tracer_provider=tracer_provider)
    try:
        summary = await run_many(
            AGENT,
            [Task(f"t{n}", "steps=1") for n in range(3)],
            seams=seams,
            store=MemoryStore(),
            batch="nightly",
            instrumentation=instrumentation,
        )
        await asyncio.to_thread(tracer_provider.force_flush)
    finally:
        tracer_provider.shutdown()
    assert summary.stop_reasons == {"agent_finished": 3}
    spans = [
        span
        for path, _, body in received
        if path == "/v1/traces"
        for resource in ExportTraceServiceRequest.FromString(body).resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]
    runs = [span for span in spans if span.name == "invoke_agent"]
    assert sorted(str(attributes(span)["polyloop.task_id"]) for span in runs) == ["t0", "t1", "t2"]
    assert {attributes(span)["polyloop.batch"] for span in runs} == {"nightly"}
    assert {attributes(span)["gen_ai.provider.name"] for span in runs} == {"unknown"}
    tools = [span for span in spans if span.name.startswith("execute_tool")]
    assert {span.name for span in tools} == {"execute_tool"}  # "do" is in no registry
    assert {attributes(span)["gen_ai.tool.name"] for span in tools} == {"do"}
    assert {span.name for span in spans} == {"invoke_agent", "chat", "execute_tool"}
