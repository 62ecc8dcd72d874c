"""OpenTelemetryInstrumentation: real runs read back from the SDK's in-memory span exporter and
metric reader — parentage, current spans, links across processes, attributes, content, metrics,
and a telemetry pipeline that fails without failing the run."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import polyloop
from polyloop import (
    Action,
    ActionOutcome,
    ActionStatus,
    FinalAnswer,
    Message,
    ModelReply,
    ParsedReply,
    StopReason,
    Task,
    Tool,
    ToolRegistry,
)
from polyloop.models import ScriptedModel
from polyloop.ports import ModelDescription
from polyloop.stores import MemoryStore, SQLiteStore
from tests.conftest import require_extra
from tests.unit._doubles import (
    GOAL,
    SYSTEM_PROMPT,
    Crash,
    ScriptedExecutor,
    ScriptedParser,
    act,
    agent,
    final,
    model_fails,
    script,
)
from tests.unit._hostile_errors import (
    HUGE_MESSAGE,
    Unprintable,
    UnprintableTimeout,
    is_capped_and_clean,
    unprintable_text,
)

require_extra("otel")

from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import (  # noqa: E402
    HistogramDataPoint,
    InMemoryMetricReader,
    NumberDataPoint,
)
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import (  # noqa: E402
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind, StatusCode  # noqa: E402
from opentelemetry.trace.propagation.tracecontext import (  # noqa: E402
    TraceContextTextMapPropagator,
)

from polyloop.instrumentation import OpenTelemetryInstrumentation  # noqa: E402

RUN = "run-otel-i"
ROOT = Path(__file__).resolve().parents[2]
CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"


class Telemetry:
    """A tracer provider exporting every ended span into memory, and an in-memory meter."""

    def __init__(self, *processors: SpanProcessor) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        for processor in processors:
            self.tracer_provider.add_span_processor(processor)
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def instrumentation(self, **options: Any) -> OpenTelemetryInstrumentation:
        return OpenTelemetryInstrumentation(
            tracer_provider=self.tracer_provider, meter_provider=self.meter_provider, **options
        )

    @property
    def spans(self) -> list[ReadableSpan]:
        return sorted(self.exporter.get_finished_spans(), key=lambda s: s.start_time or 0)

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [s for s in self.spans if s.name == prefix or s.name.startswith(prefix + " ")]

    def one(self, prefix: str) -> ReadableSpan:
        (span,) = self.named(prefix)
        return span

    def points(self, metric: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        assert data is not None
        return [
            point
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for found in scope.metrics
            if found.name == metric
            for point in found.data.data_points
        ]


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return int(span.context.span_id)


#: The tools the model of these tests calls, registered: their names may name spans.
TOOLS = ToolRegistry(
    [
        Tool(name=name, description=f"the {name} tool")
        for name in ("search", "fetch", "lookup", "db", "t")
    ]
)


def one_action_then_an_answer(**options: Any) -> dict[str, Any]:
    """search (executed), then the answer ``42``."""
    seams = script(act(tool_name="search", tool_args={"q": "cats"}), final("42"))
    return seams.kwargs() | options


# --------------------------------------------------------------------------- parentage


@pytest.mark.asyncio
async def test_a_run_started_inside_a_callers_span_is_its_child_in_its_trace():
    telemetry = Telemetry()
    tracer = telemetry.tracer_provider.get_tracer("app")

    with tracer.start_as_current_span("POST /agents") as request:
        await polyloop.run(
            agent(),
            GOAL,
            **one_action_then_an_answer(),
            instrumentation=telemetry.instrumentation(),
        )

    run_span = telemetry.one("invoke_agent")
    assert parent_of(run_span) == request.get_span_context().span_id
    assert {s.context.trace_id for s in telemetry.spans if s.context} == {
        request.get_span_context().trace_id
    }


@pytest.mark.asyncio
async def test_without_a_current_span_the_run_span_is_the_one_root_of_its_trace():
    telemetry = Telemetry()

    await polyloop.run(
        agent(), GOAL, **one_action_then_an_answer(), instrumentation=telemetry.instrumentation()
    )

    spans = telemetry.spans
    roots = [s for s in spans if s.parent is None]
    assert [s.name for s in roots] == ["invoke_agent"]
    assert len({s.context.trace_id for s in spans if s.context}) == 1
    ids = {span_id(s) for s in spans}
    assert all(parent_of(s) in ids for s in spans if s.parent is not None)


@pytest.mark.asyncio
async def test_the_span_tree_is_run_then_chat_and_tool_spans_and_steps_are_events():
    """No ``step`` span between ``invoke_agent`` and ``chat`` (docs/design/0004): each step is
    a ``polyloop.step`` event of the run span, and its index an attribute of its spans."""
    telemetry = Telemetry()

    await polyloop.run(
        agent(tools=TOOLS),
        GOAL,
        **one_action_then_an_answer(),
        instrumentation=telemetry.instrumentation(agent_name="librarian"),
    )

    by_id = {span_id(s): s for s in telemetry.spans}
    edges = sorted(
        (by_id[p].name if (p := parent_of(s)) else "-", s.name, attrs(s).get("polyloop.step_index"))
        for s in telemetry.spans
    )
    assert edges == [
        ("-", "invoke_agent librarian", None),
        ("invoke_agent librarian", "chat", 0),
        ("invoke_agent librarian", "chat", 1),
        ("invoke_agent librarian", "execute_tool search", 0),
    ]
    run_span = telemetry.one("invoke_agent")
    steps = [dict(e.attributes or {}) for e in run_span.events if e.name == "polyloop.step"]
    assert steps == [
        {"polyloop.step_index": 0, "polyloop.decision": "action"},
        {"polyloop.step_index": 1, "polyloop.decision": "final_answer"},
    ]


class SpanMakingModel:
    """A model whose own library makes a span while it is called (an instrumented HTTP client)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.tracer = trace.get_tracer("http-client")

    async def complete(self, messages: Sequence[Message]) -> ModelReply:
        with self.tracer.start_as_current_span(f"POST /chat {len(messages)}"):
            await asyncio.sleep(0)
            reply: ModelReply = await self.inner.complete(messages)
            return reply


class SpanMakingParser:
    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def parse(self, reply: ModelReply) -> ParsedReply:
        with trace.get_tracer("parser-lib").start_as_current_span(f"regex {reply.text}"):
            decision: ParsedReply = self.inner.parse(reply)
            return decision


class SpanMakingExecutor:
    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def execute(self, action: Action) -> ActionOutcome:
        with trace.get_tracer("db-driver").start_as_current_span(f"SELECT {action.text}"):
            await asyncio.sleep(0)
            outcome: ActionOutcome = await self.inner.execute(action)
            return outcome


@pytest.mark.asyncio
async def test_spans_a_seam_makes_itself_nest_under_that_steps_chat_tool_or_step_span(
    monkeypatch: pytest.MonkeyPatch,
):
    telemetry = Telemetry()
    # The seams' libraries use the global provider, as instrumented libraries do.
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", telemetry.tracer_provider)
    seams = script(act(tool_name="search"), act(tool_name="fetch"), final())

    await polyloop.run(
        agent(tools=TOOLS),
        GOAL,
        model=SpanMakingModel(seams.model),
        parser=SpanMakingParser(seams.parser),
        executor=SpanMakingExecutor(seams.executor),
        instrumentation=telemetry.instrumentation(),
    )

    by_id = {span_id(s): s for s in telemetry.spans}

    def parent(name: str) -> tuple[str, object]:
        (span,) = [s for s in telemetry.spans if s.name == name]
        above = by_id[parent_of(span) or 0]
        return above.name, attrs(above).get("polyloop.step_index")

    assert parent("POST /chat 2") == ("chat", 0)
    assert parent("POST /chat 4") == ("chat", 1)
    assert parent("POST /chat 6") == ("chat", 2)
    assert parent("regex reply-0") == ("invoke_agent", None)  # a parser runs in the run's span
    assert parent("regex reply-2") == ("invoke_agent", None)
    assert parent("SELECT action-0") == ("execute_tool search", 0)
    assert parent("SELECT action-1") == ("execute_tool fetch", 1)


@pytest.mark.asyncio
async def test_between_seam_calls_the_run_span_is_current_and_after_the_run_the_callers():
    telemetry = Telemetry()
    seen: list[str] = []

    class Sink:
        async def emit(self, event: polyloop.Event) -> None:
            current = trace.get_current_span()
            seen.append(getattr(current, "name", "none"))

    with telemetry.tracer_provider.get_tracer("app").start_as_current_span("caller") as caller:
        await polyloop.run(
            agent(),
            GOAL,
            **script(final()).kwargs(),
            events=Sink(),
            instrumentation=telemetry.instrumentation(),
        )
        after = trace.get_current_span()

    assert set(seen) == {"invoke_agent"}
    assert after is caller


@pytest.mark.asyncio
async def test_concurrent_runs_sharing_one_instrumentation_make_separate_traces():
    telemetry = Telemetry()
    instrumentation = telemetry.instrumentation()

    await asyncio.gather(
        *(
            polyloop.run(
                agent(tools=TOOLS),
                GOAL,
                **script(act(tool_name="t"), act(tool_name="t"), final()).kwargs(),
                run_id=run_id,
                instrumentation=instrumentation,
            )
            for run_id in ("run-a", "run-b")
        )
    )

    runs = telemetry.named("invoke_agent")
    assert sorted(attrs(r)["gen_ai.conversation.id"] for r in runs) == ["run-a", "run-b"]
    for run_span in runs:
        assert run_span.parent is None
        assert run_span.context is not None
        mine = [s for s in telemetry.spans if s.context.trace_id == run_span.context.trace_id]
        assert sorted(s.name for s in mine) == sorted(
            ["invoke_agent", *["chat"] * 3, *["execute_tool t"] * 2]
        )
        conversation = {attrs(s).get("gen_ai.conversation.id") for s in mine} - {None}
        assert conversation == {attrs(run_span)["gen_ai.conversation.id"]}


# --------------------------------------------------------------------------- trace context


@pytest.mark.asyncio
async def test_run_started_records_the_run_spans_traceparent():
    telemetry = Telemetry()
    store = MemoryStore()

    await polyloop.run(
        agent(),
        GOAL,
        **script(final()).kwargs(),
        store=store,
        run_id=RUN,
        instrumentation=telemetry.instrumentation(),
    )

    started = (await store.read_log(RUN)).started
    context = telemetry.one("invoke_agent").context
    assert started is not None
    assert context is not None
    carrier: dict[str, str] = {}  # what the W3C propagator itself writes for this span
    TraceContextTextMapPropagator().inject(
        carrier, trace.set_span_in_context(trace.NonRecordingSpan(context))
    )
    assert started.trace_parent == carrier["traceparent"]
    assert started.trace_parent.startswith(f"00-{context.trace_id:032x}-{context.span_id:016x}-")


@pytest.mark.asyncio
async def test_without_instrumentation_run_started_has_no_traceparent_even_inside_a_span():
    telemetry = Telemetry()
    store = MemoryStore()

    with telemetry.tracer_provider.get_tracer("app").start_as_current_span("caller"):
        await polyloop.run(agent(), GOAL, **script(final()).kwargs(), store=store, run_id=RUN)

    started = (await store.read_log(RUN)).started
    assert started is not None
    assert started.trace_parent is None


RESUME_CHILD = textwrap.dedent(
    """
    import asyncio, json, sys
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    import polyloop
    from polyloop.instrumentation import OpenTelemetryInstrumentation
    from polyloop.stores import SQLiteStore
    from tests.unit._doubles import agent, script, act, final

    async def main():
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        seams = script(act(), final())
        async with SQLiteStore(sys.argv[1]) as store:
            result = await polyloop.resume(
                sys.argv[2], agent(replay=True), **seams.kwargs(), store=store,
                instrumentation=OpenTelemetryInstrumentation(tracer_provider=provider),
            )
        spans = []
        for span in exporter.get_finished_spans():
            spans.append({
                "name": span.name,
                "trace_id": f"{span.context.trace_id:032x}",
                "parent": span.parent.span_id if span.parent else None,
                "resumed": span.attributes.get("polyloop.resumed"),
                "links": [
                    [f"{l.context.trace_id:032x}", f"{l.context.span_id:016x}",
                     dict(l.attributes or {})]
                    for l in span.links
                ],
            })
        print(json.dumps({"stop": result.stop_reason.value, "spans": spans}))

    asyncio.run(main())
    """
)


@pytest.mark.asyncio
async def test_a_resume_in_another_process_links_its_run_span_to_the_original(tmp_path: Path):
    telemetry = Telemetry()
    path = tmp_path / "runs.db"
    async with SQLiteStore(path) as store:
        with pytest.raises(Crash):  # the process "dies" while the action runs
            await polyloop.run(
                agent(replay=True),
                GOAL,
                **script(act(error=Crash()), final()).kwargs(),
                store=store,
                run_id=RUN,
                instrumentation=telemetry.instrumentation(),
            )
        started = (await store.read_log(RUN)).started
    assert started is not None
    assert started.trace_parent is not None
    _, trace_id, original_span, _ = started.trace_parent.split("-")

    child = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", RESUME_CHILD, str(path), RUN],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        timeout=60,
    )

    report = json.loads(child.stdout)
    assert report["stop"] == "agent_finished"
    (run_span,) = [s for s in report["spans"] if s["name"] == "invoke_agent"]
    assert run_span["links"] == [[trace_id, original_span, {"polyloop.link": "resumed_from"}]]
    assert run_span["parent"] is None
    assert run_span["resumed"] is True
    # The first process's run span was exported (it ended with the crash), with that id.
    first = telemetry.one("invoke_agent")
    assert first.context is not None
    assert f"{first.context.span_id:016x}" == original_span
    assert first.status.status_code is StatusCode.ERROR


@pytest.mark.asyncio
async def test_a_resume_with_a_malformed_logged_traceparent_has_no_link_and_runs():
    store = MemoryStore()
    seams = script(act(error=Crash()), final())
    with pytest.raises(Crash):
        await polyloop.run(agent(replay=True), GOAL, **seams.kwargs(), store=store, run_id=RUN)
    log = await store.read_log(RUN)
    assert log.started is not None
    for bad in ("00-zz-11-01", "00-" + "0" * 32 + "-" + "1" * 16 + "-01", "\udcff", ""):
        edited = MemoryStore()
        for sequence, record in enumerate(log.records):
            if isinstance(record, polyloop.RunStarted):
                record = dataclasses.replace(record, trace_parent=bad)
            await edited.append(RUN, record, sequence=sequence)
        telemetry = Telemetry()

        result = await polyloop.resume(
            RUN,
            agent(replay=True),
            **script(act(), final()).kwargs(),
            store=edited,
            instrumentation=telemetry.instrumentation(),
        )

        assert result.stop_reason is StopReason.AGENT_FINISHED
        assert list(telemetry.one("invoke_agent").links) == []


# --------------------------------------------------------------------------- attributes


class DescribedModel:
    """A scripted model that describes itself, as ``OpenAIChatModel`` does."""

    def __init__(self, replies: list[ModelReply | BaseException]) -> None:
        self.inner = ScriptedModel(replies)

    async def complete(self, messages: Sequence[Message]) -> ModelReply:
        reply: ModelReply = await self.inner.complete(messages)
        return reply

    def describe(self) -> ModelDescription:
        return ModelDescription(
            provider="openai",
            model="gpt-x",
            parameters={"temperature": 0.2, "max_tokens": 300, "stop_sequences": ("END",)},
            server_address="127.0.0.1",
            server_port=8123,
        )


def described_run(*replies: ModelReply | BaseException) -> dict[str, Any]:
    parser = ScriptedParser(
        {
            "r0": Action(text="search cats", tool_name="search", tool_args={"q": "cats"}),
            "r1": Action(text="lookup dogs", tool_name="lookup"),
            "r2": FinalAnswer(text="forty-two"),
        }
    )
    refused = ActionOutcome(status=ActionStatus.NOT_EXECUTED, observation="lookup is disabled")
    return {
        "model": DescribedModel(list(replies)),
        "parser": parser,
        "executor": ScriptedExecutor({"lookup dogs": refused}),
    }


REPLIES = (
    ModelReply(
        text="r0",
        call_id="chatcmpl-0",
        usage={"prompt_tokens": 11, "completion_tokens": 7},
        model="gpt-x-2026",
        finish_reason="tool_calls",
    ),
    ModelReply(text="r1", call_id="chatcmpl-1", usage={"input_tokens": 13, "output_tokens": 5}),
    ModelReply(text="r2", model="gpt-x-2026", finish_reason="stop"),
)


@pytest.mark.asyncio
async def test_every_span_carries_the_genai_attributes_of_the_conventions():
    telemetry = Telemetry()

    await polyloop.run(
        agent(tools=TOOLS),
        GOAL,
        **described_run(*REPLIES),
        run_id=RUN,
        instrumentation=telemetry.instrumentation(agent_name="librarian"),
    )

    run_span = telemetry.one("invoke_agent")
    assert run_span.name == "invoke_agent librarian"
    assert run_span.kind is SpanKind.INTERNAL
    assert {k: v for k, v in attrs(run_span).items() if k.startswith("gen_ai.")} == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "librarian",
        "gen_ai.conversation.id": RUN,
        "gen_ai.provider.name": "openai",  # the first described chat's
        "gen_ai.request.model": "gpt-x",
    }
    assert attrs(run_span)["polyloop.stop_reason"] == "agent_finished"
    assert attrs(run_span)["polyloop.executed_actions"] == 1
    assert attrs(run_span)["polyloop.parameters_hash"] == polyloop.parameters_hash(
        agent(tools=TOOLS).parameters()
    )
    chats = telemetry.named("chat")
    assert [c.name for c in chats] == ["chat gpt-x"] * 3
    assert {c.kind for c in chats} == {SpanKind.CLIENT}
    request = {
        "gen_ai.operation.name": "chat",
        "gen_ai.conversation.id": RUN,
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-x",
        "gen_ai.request.temperature": 0.2,
        "gen_ai.request.max_tokens": 300,
        "gen_ai.request.stop_sequences": ("END",),
        "server.address": "127.0.0.1",
        "server.port": 8123,
    }
    assert [
        {k: v for k, v in attrs(c).items() if k.startswith(("gen_ai.", "server."))} for c in chats
    ] == [
        request
        | {
            "gen_ai.response.model": "gpt-x-2026",
            "gen_ai.response.id": "chatcmpl-0",
            "gen_ai.response.finish_reasons": ("tool_calls",),
            "gen_ai.usage.input_tokens": 11,
            "gen_ai.usage.output_tokens": 7,
        },
        request
        | {
            "gen_ai.response.id": "chatcmpl-1",
            "gen_ai.usage.input_tokens": 13,
            "gen_ai.usage.output_tokens": 5,
        },
        request
        | {"gen_ai.response.model": "gpt-x-2026", "gen_ai.response.finish_reasons": ("stop",)},
    ]
    search, lookup = telemetry.named("execute_tool")
    assert (search.name, lookup.name) == ("execute_tool search", "execute_tool lookup")
    assert {k: v for k, v in attrs(search).items() if k.startswith("gen_ai.")} == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.conversation.id": RUN,
        "gen_ai.tool.name": "search",
    }  # no gen_ai.tool.call.id: the reply carries no tool-call id, and none is invented
    assert attrs(search)["polyloop.action_status"] == "executed"
    assert search.status.status_code is StatusCode.UNSET
    assert attrs(lookup)["error.type"] == "not_executed"
    assert lookup.status.status_code is StatusCode.ERROR


@pytest.mark.asyncio
async def test_a_model_without_a_description_names_its_chat_span_after_the_response_model():
    telemetry = Telemetry()
    replies = [ModelReply(text="r", model="local-7b")]

    await polyloop.run(
        agent(),
        GOAL,
        model=ScriptedModel(replies),
        parser=ScriptedParser({"r": FinalAnswer(text="x")}),
        executor=ScriptedExecutor({}),
        instrumentation=telemetry.instrumentation(),
    )

    chat = telemetry.one("chat")
    assert chat.name == "chat local-7b"
    assert "gen_ai.request.model" not in attrs(chat)
    assert attrs(chat)["gen_ai.provider.name"] == "unknown"  # required: the documented fallback
    assert telemetry.one("invoke_agent").name == "invoke_agent"
    assert attrs(telemetry.one("invoke_agent"))["gen_ai.provider.name"] == "unknown"


@pytest.mark.asyncio
async def test_a_model_that_raises_marks_its_chat_span_and_the_run_with_the_error_type():
    telemetry = Telemetry()

    result = await polyloop.run(
        agent(),
        GOAL,
        **described_run(TimeoutError("no reply within 3 s")),
        instrumentation=telemetry.instrumentation(),
    )

    assert result.stop_reason is StopReason.LLM_ERROR
    chat, run_span = telemetry.one("chat"), telemetry.one("invoke_agent")
    assert attrs(chat)["error.type"] == "TimeoutError"
    assert chat.status.status_code is StatusCode.ERROR
    assert chat.status.description == "TimeoutError: no reply within 3 s"
    assert [e.name for e in chat.events] == ["exception"]
    assert attrs(run_span)["error.type"] == "llm_error"
    assert run_span.status.status_code is StatusCode.ERROR


@pytest.mark.asyncio
async def test_an_env_error_marks_the_tool_span_and_the_run():
    telemetry = Telemetry()
    seams = script(act(ActionStatus.ENV_ERROR, tool_name="db"))

    result = await polyloop.run(
        agent(), GOAL, **seams.kwargs(), instrumentation=telemetry.instrumentation()
    )

    assert result.stop_reason is StopReason.ENV_ERROR
    tool = telemetry.one("execute_tool")
    assert attrs(tool)["error.type"] == "env_error"
    assert tool.status.status_code is StatusCode.ERROR
    assert attrs(telemetry.one("invoke_agent"))["error.type"] == "env_error"


SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer", "maximum": 10}},
    "required": ["a"],
}


async def refused_run(*calls: str, **options: Any) -> Telemetry:
    """A ToolExecutor run whose model makes ``calls`` (JSON tool calls), then answers."""
    from polyloop.executors import ToolExecutor
    from polyloop.parsers import JsonToolCallParser
    from polyloop.tools import Tool, ToolRegistry

    tools = ToolRegistry([Tool(name="add", description="", parameters=SCHEMA, func=lambda **k: 1)])
    telemetry = Telemetry()
    await polyloop.run(
        agent(tools=tools), GOAL, model=ScriptedModel([*calls, '{"final_answer": "done"}']),
        parser=JsonToolCallParser(), executor=ToolExecutor(tools), store=MemoryStore(),
        instrumentation=telemetry.instrumentation(**options),
    )  # fmt: skip
    return telemetry


BAD_ADD = '{"tool": "add", "arguments": {"a": "secret-value", "b": 99}}'


@pytest.mark.asyncio
async def test_a_refused_tool_span_carries_the_refusal_kind_and_its_reason(
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.delenv(CONTENT_ENV, raising=False)
    telemetry = await refused_run(BAD_ADD, '{"tool": "delete", "arguments": {}}')

    invalid, unknown = telemetry.named("execute_tool")
    assert attrs(invalid)["error.type"] == "invalid_arguments"
    assert invalid.status.status_code is StatusCode.ERROR
    assert invalid.status.description == "the action was not_executed: invalid_arguments"
    assert attrs(invalid)["polyloop.refusal.kind"] == "invalid_arguments"
    assert attrs(invalid)["polyloop.refusal.tool"] == "add"
    assert attrs(invalid)["polyloop.refusal.violations.path"] == ("a", "b")
    assert attrs(invalid)["polyloop.refusal.violations.rule"] == ("type", "maximum")
    assert attrs(unknown)["error.type"] == "unknown_tool"
    assert attrs(unknown)["polyloop.refusal.tool"] == "delete"
    assert attrs(unknown)["polyloop.refusal.available"] == ("add",)
    # the messages quote the arguments: content, off by default
    assert "secret-value" not in recorded_texts(telemetry)
    assert not any(
        key.endswith(".message") or key == "polyloop.executor_detail"
        for span in telemetry.spans
        for key in attrs(span)
    )


@pytest.mark.asyncio
async def test_with_content_the_refusal_messages_and_the_whole_detail_are_recorded_capped():
    telemetry = await refused_run(BAD_ADD, capture_content=True)

    tool = telemetry.one("execute_tool")
    assert attrs(tool)["polyloop.refusal.violations.message"] == (
        "'secret-value' is not of type 'integer'",
        "99 is greater than the maximum of 10",
    )
    detail = json.loads(attrs(tool)["polyloop.executor_detail"])
    assert detail["refusal"]["violations"][0]["path"] == "a"
    assert "polyloop.executor_detail_truncated_chars" not in attrs(tool)

    capped = (await refused_run(BAD_ADD, capture_content=True, max_content_chars=40)).one(
        "execute_tool"
    )
    full = attrs(tool)["polyloop.executor_detail"]
    assert attrs(capped)["polyloop.executor_detail"] == full[:40]
    assert attrs(capped)["polyloop.executor_detail_truncated_chars"] == len(full) - 40


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("detail", "error_type"),
    [
        ({"error": {"kind": "timeout", "timeout_s": 5}}, "timeout"),
        (
            {"error": {"kind": "authentication", "status": 401, "challenge": "Bearer"}},
            "authentication",
        ),
        ({"refusal": {"kind": "server_refused", "code": -32602, "message": "m"}}, "server_refused"),
        ({"error": {"kind": 7}}, "env_error"),  # not a kind: the status is the type
        ({"error": "timeout"}, "env_error"),
        ({"other": 1}, "env_error"),
        (None, "env_error"),
        ({"error": {"kind": "\ud800" + "k" * 500}}, "\ufffd" + "k" * 199 + "…"),
    ],
)
async def test_the_error_type_of_a_failed_tool_span_is_the_details_kind_else_the_status(
    detail: Any, error_type: str
):
    telemetry = Telemetry()
    outcome = ActionOutcome(status=ActionStatus.ENV_ERROR, observation="down", detail=detail)
    seams = script(act(ActionStatus.ENV_ERROR, tool_name="db"))
    seams.executor.outcomes["action-0"] = outcome

    await polyloop.run(agent(), GOAL, **seams.kwargs(), instrumentation=telemetry.instrumentation())

    tool = attrs(telemetry.one("execute_tool"))
    assert tool["error.type"] == error_type
    kind = detail.get("error", detail.get("refusal")) if isinstance(detail, dict) else None
    if isinstance(kind, dict) and kind.get("kind") == "timeout":
        assert tool["polyloop.error.timeout_s"] == 5.0
    if isinstance(kind, dict) and kind.get("kind") == "authentication":
        assert tool["polyloop.error.status"] == 401
        assert "polyloop.error.challenge" not in tool  # a server's text: content
    if isinstance(kind, dict) and kind.get("kind") == "server_refused":
        assert tool["polyloop.refusal.code"] == -32602
        assert "polyloop.refusal.message" not in tool


@pytest.mark.asyncio
async def test_an_executor_that_raises_ends_every_span_with_its_error_type():
    telemetry = Telemetry()
    seams = script(act(error=KeyError("boom"), tool_name="db"))

    with pytest.raises(KeyError):
        await polyloop.run(
            agent(tools=TOOLS), GOAL, **seams.kwargs(), instrumentation=telemetry.instrumentation()
        )

    assert {s.name: attrs(s).get("error.type") for s in telemetry.spans} == {
        "invoke_agent": "KeyError",
        "chat": None,
        "execute_tool db": "KeyError",
    }
    assert telemetry.one("invoke_agent").status.status_code is StatusCode.ERROR


@pytest.mark.asyncio
async def test_a_cancelled_run_ends_its_spans_and_counts_as_cancelled():
    telemetry = Telemetry()
    started = asyncio.Event()

    class Hanging:
        async def execute(self, action: Action) -> ActionOutcome:
            started.set()
            await asyncio.Event().wait()
            raise AssertionError("unreachable")

    seams = script(act())
    task = asyncio.create_task(
        polyloop.run(
            agent(),
            GOAL,
            model=seams.model,
            parser=seams.parser,
            executor=Hanging(),
            instrumentation=telemetry.instrumentation(),
        )
    )
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert sorted(s.name for s in telemetry.spans) == [
        "chat",
        "execute_tool",
        "invoke_agent",
    ]
    assert attrs(telemetry.one("execute_tool"))["error.type"] == "CancelledError"
    assert attrs(telemetry.one("invoke_agent"))["polyloop.stop_reason"] == "cancelled"
    (counted,) = telemetry.points("polyloop.runs")
    assert dict(counted.attributes) == {
        "polyloop.stop_reason": "cancelled",
        "error.type": "CancelledError",
    }


# --------------------------------------------------------------------------- content


SECRETS = (
    GOAL,
    SYSTEM_PROMPT,
    "r0",
    "r1",
    "search cats",
    "cats",
    "lookup is disabled",
    "forty-two",
)


def recorded_texts(telemetry: Telemetry) -> str:
    """Every attribute value and event attribute of every span, as one text."""
    values: list[str] = []
    for span in telemetry.spans:
        values.extend(str(v) for v in attrs(span).values())
        values.extend(str(v) for event in span.events for v in (event.attributes or {}).values())
        values.append(span.name)
        values.append(span.status.description or "")
    return "\n".join(values)


@pytest.mark.asyncio
async def test_no_content_is_recorded_by_default(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(CONTENT_ENV, raising=False)
    telemetry = Telemetry()

    await polyloop.run(
        agent(), GOAL, **described_run(*REPLIES), instrumentation=telemetry.instrumentation()
    )

    text = recorded_texts(telemetry)
    assert [secret for secret in SECRETS if secret in text] == []
    assert not any(
        key.startswith(("gen_ai.input", "gen_ai.output", "gen_ai.system", "gen_ai.tool.call.a"))
        or key in ("gen_ai.tool.call.result", "polyloop.action")
        for span in telemetry.spans
        for key in attrs(span)
    )


@pytest.mark.asyncio
@pytest.mark.parametrize("switch", ["option", "environment"])
async def test_content_is_recorded_in_the_conventional_attributes_when_switched_on(
    switch: str, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv(CONTENT_ENV, "True" if switch == "environment" else "false")
    telemetry = Telemetry()
    options = {"capture_content": True} if switch == "option" else {}

    await polyloop.run(
        agent(),
        GOAL,
        **described_run(*REPLIES),
        instrumentation=telemetry.instrumentation(**options),
    )

    run_span = attrs(telemetry.one("invoke_agent"))
    assert json.loads(run_span["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": GOAL}]}
    ]
    assert json.loads(run_span["gen_ai.system_instructions"]) == [
        {"type": "text", "content": SYSTEM_PROMPT}
    ]
    assert json.loads(run_span["gen_ai.output.messages"])[0]["parts"] == [
        {"type": "text", "content": "forty-two"}
    ]
    first_chat = attrs(telemetry.named("chat")[0])
    assert json.loads(first_chat["gen_ai.input.messages"]) == [
        {"role": "system", "parts": [{"type": "text", "content": SYSTEM_PROMPT}]},
        {"role": "user", "parts": [{"type": "text", "content": GOAL}]},
    ]
    assert json.loads(first_chat["gen_ai.output.messages"]) == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "r0"}],
            "finish_reason": "tool_calls",
        }
    ]
    search, lookup = (attrs(s) for s in telemetry.named("execute_tool"))
    assert search["gen_ai.tool.call.arguments"] == '{"q":"cats"}'
    assert search["gen_ai.tool.call.result"] == "ran search cats"
    assert search["polyloop.action"] == "search cats"
    assert lookup["gen_ai.tool.call.result"] == "lookup is disabled"


@pytest.mark.asyncio
async def test_an_explicit_false_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(CONTENT_ENV, "true")
    telemetry = Telemetry()

    await polyloop.run(
        agent(),
        GOAL,
        **described_run(*REPLIES),
        instrumentation=telemetry.instrumentation(capture_content=False),
    )

    assert [secret for secret in SECRETS if secret in recorded_texts(telemetry)] == []


@pytest.mark.asyncio
async def test_recorded_content_is_cut_to_the_cap_newest_message_first():
    telemetry = Telemetry()
    long_goal = "g" * 500
    seams = script(act(observation="o" * 900), final("a" * 700))

    await polyloop.run(
        agent(system_prompt="s" * 50),
        long_goal,
        **seams.kwargs(),
        instrumentation=telemetry.instrumentation(capture_content=True, max_content_chars=100),
    )

    run_span = attrs(telemetry.one("invoke_agent"))
    goal = json.loads(run_span["gen_ai.input.messages"])[0]["parts"][0]["content"]
    assert goal == "g" * 100
    assert run_span["polyloop.content_truncated_chars"] == 400 + 0  # the prompt fits
    second_chat = attrs(telemetry.named("chat")[1])
    contents = [m["parts"][0]["content"] for m in json.loads(second_chat["gen_ai.input.messages"])]
    # system, goal, reply-0, observation: the newest (the observation) is kept first.
    assert contents == ["", "", "", "o" * 100]
    assert second_chat["polyloop.content_truncated_chars"] == 50 + 500 + len("reply-0") + 800
    assert attrs(telemetry.one("execute_tool"))["gen_ai.tool.call.result"] == "o" * 100
    assert attrs(telemetry.one("execute_tool"))["polyloop.result_truncated_chars"] == 800


@pytest.mark.asyncio
async def test_lone_surrogates_in_content_are_recorded_as_replacement_characters():
    telemetry = Telemetry()
    seams = script(act(observation="bad \udcff byte", tool_name="t\ud800"), final())

    await polyloop.run(
        agent(),
        "goal \ud83d",
        **seams.kwargs(),
        instrumentation=telemetry.instrumentation(capture_content=True),
    )

    text = recorded_texts(telemetry)
    assert "goal \ufffd" in text
    assert "bad \ufffd byte" in text
    tool = telemetry.one("execute_tool")
    assert tool.name == "execute_tool"  # not a registered tool: its name is no span name
    assert attrs(tool)["gen_ai.tool.name"] == "t\ufffd"
    text.encode("utf-8")  # every recorded text is valid UTF-8 (an exporter can send it)


# --------------------------------------------------------------------------- metrics


@pytest.mark.asyncio
async def test_token_usage_and_operation_duration_histograms_and_a_run_counter():
    telemetry = Telemetry()

    await polyloop.run(
        agent(),
        GOAL,
        **described_run(*REPLIES),
        instrumentation=telemetry.instrumentation(agent_name="librarian"),
    )
    await polyloop.run(
        agent(),
        GOAL,
        **described_run(RuntimeError("down")),
        instrumentation=telemetry.instrumentation(agent_name="librarian"),
    )

    base = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-x",
        "server.address": "127.0.0.1",
        "server.port": 8123,
    }
    tokens = {
        tuple(sorted(dict(p.attributes).items())): (p.count, p.sum)
        for p in telemetry.points("gen_ai.client.token.usage")
    }
    assert tokens == {
        tuple(
            sorted(
                (
                    base | {"gen_ai.response.model": "gpt-x-2026", "gen_ai.token.type": "input"}
                ).items()
            )
        ): (1, 11),
        tuple(
            sorted(
                (
                    base | {"gen_ai.response.model": "gpt-x-2026", "gen_ai.token.type": "output"}
                ).items()
            )
        ): (1, 7),
        tuple(sorted((base | {"gen_ai.token.type": "input"}).items())): (1, 13),
        tuple(sorted((base | {"gen_ai.token.type": "output"}).items())): (1, 5),
    }
    durations = {
        tuple(sorted(dict(p.attributes).items())): p.count
        for p in telemetry.points("gen_ai.client.operation.duration")
    }
    assert durations == {
        tuple(sorted((base | {"gen_ai.response.model": "gpt-x-2026"}).items())): 2,
        tuple(sorted(base.items())): 1,
        tuple(sorted((base | {"error.type": "RuntimeError"}).items())): 1,
    }
    for point in telemetry.points("gen_ai.client.operation.duration"):
        assert isinstance(point, HistogramDataPoint)
        assert point.sum < 10
        assert point.explicit_bounds[:3] == (0.01, 0.02, 0.04)
    assert telemetry.points("gen_ai.client.token.usage")[0].explicit_bounds[:3] == (1, 4, 16)
    runs = {
        dict(p.attributes or {})["polyloop.stop_reason"]: (p.value, dict(p.attributes or {}))
        for p in telemetry.points("polyloop.runs")
        if isinstance(p, NumberDataPoint)
    }
    assert runs == {
        "agent_finished": (
            1,
            {"polyloop.stop_reason": "agent_finished", "gen_ai.agent.name": "librarian"},
        ),
        "llm_error": (
            1,
            {"polyloop.stop_reason": "llm_error", "gen_ai.agent.name": "librarian"},
        ),
    }


@pytest.mark.asyncio
async def test_the_global_meter_provider_is_used_when_none_is_given(
    monkeypatch: pytest.MonkeyPatch,
):
    from opentelemetry import metrics

    telemetry = Telemetry()
    monkeypatch.setattr(metrics._internal, "_METER_PROVIDER", telemetry.meter_provider)

    await polyloop.run(
        agent(),
        GOAL,
        **script(final()).kwargs(),
        instrumentation=OpenTelemetryInstrumentation(tracer_provider=telemetry.tracer_provider),
    )

    assert [p.value for p in telemetry.points("polyloop.runs")] == [1]


# --------------------------------------------------------------------------- failures


class RaisingProcessor(SpanProcessor):
    """A span processor that raises when a chat span starts and when any other span ends."""

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        if span.name.startswith("chat"):
            raise RuntimeError("processor down")

    def on_end(self, span: ReadableSpan) -> None:
        raise ValueError("processor still down")


class RaisingExporter(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        raise ConnectionError("collector unreachable")


@pytest.mark.asyncio
async def test_a_processor_that_raises_costs_one_warning_per_failure_kind_and_never_the_run(
    caplog: pytest.LogCaptureFixture,
):
    telemetry = Telemetry(RaisingProcessor())
    seams = script(act(), act(), final())
    expected = await polyloop.run(agent(), GOAL, **script(act(), act(), final()).kwargs())

    with caplog.at_level(logging.WARNING, logger="polyloop.otel"):
        result = await polyloop.run(
            agent(), GOAL, **seams.kwargs(), instrumentation=telemetry.instrumentation()
        )

    assert result.stop_reason is expected.stop_reason
    assert len(result.steps) == len(expected.steps) == 3
    messages = [r.getMessage() for r in caplog.records if r.name == "polyloop.otel"]
    assert len(messages) == len(set(messages))  # each kind once, though every span failed
    assert any("starting a chat span (RuntimeError: processor down)" in m for m in messages)
    assert any("ending the run span (ValueError: processor still down)" in m for m in messages)
    assert len(messages) == 3  # chat start, and the end of an execute_tool and of the run
    assert all(m.startswith("run ") and "the run goes on" in m for m in messages)


@pytest.mark.asyncio
async def test_an_exporter_that_raises_never_fails_the_run():
    telemetry = Telemetry(SimpleSpanProcessor(RaisingExporter()))

    result = await polyloop.run(
        agent(),
        GOAL,
        **script(act(), final()).kwargs(),
        instrumentation=telemetry.instrumentation(),
    )

    assert result.stop_reason is StopReason.AGENT_FINISHED
    assert len(telemetry.spans) == 4  # the run, two chats, one tool: no step spans


@pytest.mark.asyncio
async def test_a_describe_that_raises_or_lies_is_a_warning_and_the_chat_span_goes_on(
    caplog: pytest.LogCaptureFixture,
):
    class Liar(DescribedModel):
        def describe(self) -> ModelDescription:
            return "gpt-x"  # type: ignore[return-value]

    telemetry = Telemetry()
    with caplog.at_level(logging.WARNING, logger="polyloop.otel"):
        result = await polyloop.run(
            agent(),
            GOAL,
            model=Liar([ModelReply(text="r2")]),
            parser=ScriptedParser({"r2": FinalAnswer(text="x")}),
            executor=ScriptedExecutor({}),
            instrumentation=telemetry.instrumentation(),
        )

    assert result.stop_reason is StopReason.AGENT_FINISHED
    assert telemetry.one("chat").name == "chat"
    assert "describe() returned str, not ModelDescription" in caplog.text


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"agent_name": ""}, ValueError, "agent_name must be a non-blank str"),
        ({"agent_name": " \n"}, ValueError, "agent_name must be a non-blank str"),
        ({"agent_name": "a\udcffb"}, ValueError, "without lone surrogates"),
        ({"agent_name": 7}, TypeError, "agent_name must be a str or None, got int"),
        ({"capture_content": "yes"}, TypeError, "capture_content must be a bool or None"),
        ({"capture_content": 1}, TypeError, "capture_content must be a bool or None"),
        ({"max_content_chars": 0}, ValueError, "max_content_chars must be at least 1"),
        ({"max_content_chars": True}, TypeError, "max_content_chars must be an int"),
        ({"max_content_chars": 1.5}, TypeError, "max_content_chars must be an int"),
        ({"tracer_provider": "http://collector"}, TypeError, "tracer_provider must be an"),
        ({"meter_provider": TracerProvider()}, TypeError, "meter_provider must be an"),
    ],
)
def test_bad_options_are_one_clear_error_naming_the_option(
    options: dict[str, Any], error: type[Exception], match: str
):
    with pytest.raises(error, match=match):
        OpenTelemetryInstrumentation(**options)


def test_a_unicode_and_very_long_agent_name_is_taken_as_it_is():
    name = "агент 🤖 " + "x" * 10_000

    assert OpenTelemetryInstrumentation(agent_name=name).agent_name == name


@pytest.mark.asyncio
@pytest.mark.parametrize("instrumentation", [object(), "otel", MemoryStore()])
async def test_something_that_is_not_an_instrumentation_is_a_type_error_before_any_io(
    instrumentation: object,
):
    store = MemoryStore()

    with pytest.raises(TypeError, match=r"instrumentation must have a callable run\(\)"):
        await polyloop.run(
            agent(),
            GOAL,
            **script(final()).kwargs(),
            store=store,
            instrumentation=instrumentation,  # type: ignore[arg-type]
        )
    assert await store.run_ids() == []


@pytest.mark.asyncio
async def test_a_model_failure_counts_in_the_duration_histogram_with_its_error_type():
    telemetry = Telemetry()

    await polyloop.run(
        agent(), GOAL, **script(model_fails()).kwargs(), instrumentation=telemetry.instrumentation()
    )

    (point,) = telemetry.points("gen_ai.client.operation.duration")
    assert dict(point.attributes) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "unknown",
        "error.type": "RuntimeError",
    }
    assert telemetry.points("gen_ai.client.token.usage") == []


def test_without_the_extra_constructing_it_says_what_to_install(tmp_path: Path):
    shadow = tmp_path / "opentelemetry"
    shadow.mkdir()
    (shadow / "__init__.py").write_text('raise ImportError("No module named opentelemetry")\n')
    probe = (
        "import polyloop.instrumentation as i\n"
        "try:\n    i.OpenTelemetryInstrumentation()\nexcept ImportError as exc:\n    print(exc)\n"
    )

    completed = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(tmp_path)},
        timeout=60,
    )

    assert completed.stdout.strip() == (
        "OpenTelemetryInstrumentation needs OpenTelemetry: pip install 'polyloop[otel]' "
        "(opentelemetry-api and opentelemetry-sdk)"
    )


def test_an_unknown_name_of_the_instrumentation_module_is_an_attribute_error():
    import polyloop.instrumentation

    with pytest.raises(AttributeError, match="has no attribute 'OpenTelemetrySink'"):
        polyloop.instrumentation.OpenTelemetrySink  # noqa: B018


# --------------------------------------------------------------------------- exception text


@pytest.mark.asyncio
async def test_a_failed_seam_calls_span_status_survives_an_exception_whose_str_raises():
    telemetry = Telemetry()
    error = UnprintableTimeout()

    result = await polyloop.run(
        agent(), GOAL, **described_run(error), instrumentation=telemetry.instrumentation()
    )

    assert result.stop_reason is StopReason.LLM_ERROR
    chat = telemetry.one("chat")
    assert chat.status.status_code is StatusCode.ERROR
    assert chat.status.description == unprintable_text(error)


@pytest.mark.asyncio
async def test_a_failed_seam_calls_span_status_is_capped_with_control_characters_escaped():
    telemetry = Telemetry()

    await polyloop.run(
        agent(),
        GOAL,
        **described_run(TimeoutError(HUGE_MESSAGE)),
        instrumentation=telemetry.instrumentation(),
    )

    description = telemetry.one("chat").status.description or ""
    assert description.startswith("TimeoutError: \\x1b[31mxxx")
    assert is_capped_and_clean(description)


class HostileProcessor(SpanProcessor):
    """A span processor that raises ``error`` when a chat span starts."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        if span.name.startswith("chat"):
            raise self.error


@pytest.mark.asyncio
@pytest.mark.parametrize("error", [Unprintable(), ValueError(HUGE_MESSAGE)])
async def test_the_warning_for_an_opentelemetry_failure_shows_any_exception_safely(
    caplog: pytest.LogCaptureFixture, error: Exception
):
    telemetry = Telemetry(HostileProcessor(error))

    with caplog.at_level(logging.WARNING, logger="polyloop.otel"):
        await polyloop.run(
            agent(),
            GOAL,
            **script(act(), final()).kwargs(),
            instrumentation=telemetry.instrumentation(),
        )

    (message,) = [r.getMessage() for r in caplog.records if r.name == "polyloop.otel"]
    if isinstance(error, Unprintable):
        assert f"starting a chat span ({unprintable_text(error)})" in message
    else:
        assert "starting a chat span (ValueError: \\x1b[31mxxx" in message
        assert is_capped_and_clean(message, around=200)


# --------------------------------------------------------------------------- issue 32 §3


@pytest.mark.asyncio
async def test_a_tool_name_the_model_made_up_never_becomes_a_span_name():
    telemetry = Telemetry()
    seams = script(act(tool_name="nope"), act(tool_name="search"), final())

    await polyloop.run(
        agent(tools=TOOLS), GOAL, **seams.kwargs(), instrumentation=telemetry.instrumentation()
    )

    made_up, known = telemetry.named("execute_tool")
    assert made_up.name == "execute_tool"
    assert attrs(made_up)["gen_ai.tool.name"] == "nope"
    assert attrs(made_up)["polyloop.tool_registered"] is False
    assert known.name == "execute_tool search"
    assert attrs(known)["polyloop.tool_registered"] is True
    assert not any("nope" in span.name for span in telemetry.spans)


@pytest.mark.asyncio
async def test_without_a_registry_no_tool_name_becomes_a_span_name():
    telemetry = Telemetry()
    names = [f"tool{n}" for n in range(5)]
    seams = script(*(act(tool_name=name) for name in names), final())

    await polyloop.run(agent(), GOAL, **seams.kwargs(), instrumentation=telemetry.instrumentation())

    tools = telemetry.named("execute_tool")
    assert {span.name for span in tools} == {"execute_tool"}
    assert [attrs(span)["gen_ai.tool.name"] for span in tools] == names


@pytest.mark.asyncio
async def test_every_span_that_names_a_genai_operation_has_a_provider_name():
    telemetry = Telemetry()
    seams = script(act(tool_name="search"), final())

    await polyloop.run(
        agent(tools=TOOLS), GOAL, **seams.kwargs(), instrumentation=telemetry.instrumentation()
    )

    for span in telemetry.spans:
        if attrs(span).get("gen_ai.operation.name") in ("invoke_agent", "chat"):
            assert attrs(span)["gen_ai.provider.name"] == "unknown", span.name
    assert "gen_ai.tool.call.id" not in attrs(telemetry.one("execute_tool"))
    assert not [s for s in telemetry.spans if s.name == "step"]


# --------------------------------------------------------------------------- issue 32 §2


@pytest.mark.asyncio
async def test_a_batchs_run_spans_carry_its_batch_and_their_task_ids():
    from polyloop import run_many
    from tests.batch_doubles import AGENT, seams

    telemetry = Telemetry()
    instrumentation = telemetry.instrumentation()
    store = MemoryStore()
    given = [Task(f"t{n}", "steps=1") for n in range(4)]

    summary = await run_many(
        AGENT, given, seams=seams, store=store, batch="evals", instrumentation=instrumentation
    )
    other = await run_many(
        AGENT, given[:1], seams=seams, store=store, batch="other", instrumentation=instrumentation
    )

    assert summary.stop_reasons == {"agent_finished": 4}
    assert other.stop_reasons == {"agent_finished": 1}
    runs = telemetry.named("invoke_agent")
    by_batch: dict[object, list[object]] = {}
    for span in runs:
        by_batch.setdefault(attrs(span)["polyloop.batch"], []).append(
            attrs(span)["polyloop.task_id"]
        )
    assert {k: sorted(v) for k, v in by_batch.items()} == {  # type: ignore[type-var]
        "evals": ["t0", "t1", "t2", "t3"],
        "other": ["t0"],
    }
    run_ids = {attrs(span)["polyloop.run_id"] for span in runs}
    assert run_ids == {"evals.t0", "evals.t1", "evals.t2", "evals.t3", "other.t0"}


@pytest.mark.asyncio
async def test_run_many_refuses_an_instrumentation_without_run_before_anything_is_written():
    from polyloop import run_many
    from tests.batch_doubles import AGENT, seams

    store = MemoryStore()
    with pytest.raises(TypeError, match="instrumentation must have a callable run"):
        await run_many(
            AGENT, [Task("a", "steps=1")], seams=seams, store=store, batch="b",
            instrumentation=object(),  # type: ignore[arg-type]
        )  # fmt: skip
    assert await store.run_ids() == []


@pytest.mark.asyncio
async def test_a_drained_batch_run_ends_its_span_without_an_error():
    from polyloop._batch import execute, plan, vet
    from tests import batch_doubles
    from tests.batch_doubles import AGENT, seams

    batch_doubles.reset()
    telemetry = Telemetry()
    checked = plan(
        AGENT, [Task("a", "steps=3 slow=0.2")], seams=seams, store=MemoryStore(),
        store_url=None, batch="b", concurrency=1, time_limit_s=None, backend=None,
    )  # fmt: skip
    job = dataclasses.replace(checked.job, instrumentation=telemetry.instrumentation())
    vetted = await vet(dataclasses.replace(checked, job=job))
    interrupt = asyncio.Event()
    waiting = asyncio.ensure_future(batch_doubles.calls_reach(1))
    waiting.add_done_callback(lambda _: interrupt.set())

    summary = await execute(vetted, interrupt=interrupt)

    assert summary.what == {"interrupted": 1}
    run_span = telemetry.one("invoke_agent")
    assert run_span.status.status_code is StatusCode.UNSET
    assert "error.type" not in attrs(run_span)


@pytest.mark.asyncio
async def test_a_run_ended_for_its_parser_marks_the_run_as_an_error():
    """``end_on_parser_error=True`` ends the run ``parser_error``: a failed run, as llm_error
    and env_error are, not a quiet one."""
    telemetry = Telemetry()
    seams = script(final())
    seams.parser.decisions = {
        text: ValueError("NaN is not allowed") for text in seams.parser.decisions
    }

    result = await polyloop.run(
        agent(),
        GOAL,
        **seams.kwargs(),
        instrumentation=telemetry.instrumentation(),
        end_on_parser_error=True,
    )

    assert result.stop_reason is StopReason.PARSER_ERROR
    run_span = telemetry.one("invoke_agent")
    assert attrs(run_span)["error.type"] == "parser_error"
    assert run_span.status.status_code is StatusCode.ERROR
