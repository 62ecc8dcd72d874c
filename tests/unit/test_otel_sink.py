"""OpenTelemetrySink: the exact span tree of real runs, read back from the SDK's in-memory
exporter (nothing leaves the process)."""

from __future__ import annotations

import asyncio
import dataclasses
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import polyloop
from polyloop import (
    Action,
    ActionOutcome,
    ActionStatus,
    AgentDefinition,
    Event,
    FinalAnswer,
    ModelCallIntent,
    ModelReplied,
    ModelReply,
    Record,
    RunFinished,
    RunResult,
    RunStarted,
    StepCompleted,
    StopReason,
    Tool,
    ToolRegistry,
)
from polyloop.models import ScriptedModel
from polyloop.stores import MemoryStore
from tests.conftest import require_extra
from tests.unit._doubles import (
    GOAL,
    Crash,
    GatedExecutor,
    ScriptedExecutor,
    ScriptedParser,
    act,
    final,
    model_fails,
    script,
)
from tests.unit._doubles import agent as _agent

require_extra("otel")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import StatusCode  # noqa: E402

from polyloop.events import OpenTelemetrySink  # noqa: E402

RUN = "run-otel-1"


def tracing(exporter: SpanExporter | None = None) -> tuple[TracerProvider, InMemorySpanExporter]:
    """A provider that exports every ended span at once into memory (and to ``exporter``)."""
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    if exporter is not None:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, memory


def tree(spans: Sequence[ReadableSpan]) -> list[str]:
    """One line per span, children indented under their parent, siblings in start order.

    A line is the span's name, then ``#<step index>`` when it has one, then ``!ERROR`` when its
    status is an error. Spans whose parent was not exported are roots.
    """
    by_id = {s.context.span_id: s for s in spans if s.context is not None}

    def parent_id(span: ReadableSpan) -> int | None:
        parent = span.parent.span_id if span.parent is not None else None
        return parent if parent in by_id else None

    def lines(parent: int | None, depth: int) -> list[str]:
        children = sorted(
            (s for s in spans if parent_id(s) == parent), key=lambda s: s.start_time or 0
        )
        out = []
        for span in children:
            assert span.context is not None
            out.append("  " * depth + label(span))
            out.extend(lines(span.context.span_id, depth + 1))
        return out

    return lines(None, 0)


def label(span: ReadableSpan) -> str:
    attributes = span.attributes or {}
    text = span.name
    if "polyloop.step_index" in attributes:
        text += f" #{attributes['polyloop.step_index']!s}"
    if span.status.status_code is StatusCode.ERROR:
        text += " !ERROR"
    return text


def named(spans: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    return sorted((s for s in spans if s.name == name), key=lambda s: s.start_time or 0)


#: The tools these runs call, registered: only a registered name names a span (issue 32).
TOOLS = ToolRegistry(
    [
        Tool(name=name, description=f"the {name} tool")
        for name in ("search", "lookup", "db", "add", "fetch", "slow", "t")
    ]
)


def agent(**options: Any) -> AgentDefinition:
    """The tests' agent, with the tools its scripted models call registered."""
    return _agent(**({"tools": TOOLS} | options))


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def two_actions_and_an_answer() -> dict[str, Any]:
    """A search that executes, a lookup the executor refuses, then the answer ``42``."""
    replies = [
        ModelReply(
            text="r0", call_id="call-0", usage={"prompt_tokens": 11, "completion_tokens": 7}
        ),
        ModelReply(text="r1", call_id="call-1", usage={"input_tokens": 13, "output_tokens": 5}),
        ModelReply(text="r2", call_id="call-2"),
    ]
    parser = ScriptedParser(
        {
            "r0": Action(text="search cats", tool_name="search", tool_args={"q": "cats"}),
            "r1": Action(text="lookup dogs", tool_name="lookup"),
            "r2": FinalAnswer(text="42"),
        }
    )
    refused = ActionOutcome(status=ActionStatus.NOT_EXECUTED, observation="lookup is disabled")
    executor = ScriptedExecutor({"lookup dogs": refused})
    return {"model": ScriptedModel(replies), "parser": parser, "executor": executor}


@pytest.mark.asyncio
async def test_a_scripted_run_is_one_trace_run_step_chat_and_tool_spans():
    provider, exporter = tracing()

    result = await polyloop.run(
        agent(),
        GOAL,
        **two_actions_and_an_answer(),
        events=OpenTelemetrySink(provider, capture_content=True),
        run_id=RUN,
    )

    spans = exporter.get_finished_spans()
    assert result.stop_reason is StopReason.AGENT_FINISHED
    assert tree(spans) == [
        "invoke_agent",
        "  step #0",
        "    chat #0",
        "    execute_tool search #0",
        "  step #1 !ERROR",
        "    chat #1",
        "    execute_tool lookup #1 !ERROR",
        "  step #2",
        "    chat #2",
    ]
    (run,) = named(spans, "invoke_agent")
    assert [s.name for s in spans if s.parent is None] == ["invoke_agent"]  # the one root
    assert {s.context.trace_id for s in spans if s.context} == {run.context.trace_id}
    assert attrs(run) | {"polyloop.goal": GOAL} == attrs(run)
    assert {
        k: v for k, v in attrs(run).items() if k.startswith(("gen_ai.", "polyloop.budget."))
    } == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.conversation.id": RUN,
        "polyloop.budget.max_steps": 20,
        "polyloop.budget.max_executed_actions": 20,
        "polyloop.budget.max_consecutive_parse_failures": 5,
        "polyloop.budget.max_prompt_chars": 1_000_000,
    }
    assert attrs(run)["polyloop.stop_reason"] == "agent_finished"
    assert attrs(run)["polyloop.executed_actions"] == 1
    assert attrs(run)["polyloop.final_answer"] == "42"
    assert attrs(run)["polyloop.parameters_hash"] == polyloop.parameters_hash(agent().parameters())
    assert run.status.status_code is StatusCode.UNSET


@pytest.mark.asyncio
async def test_chat_spans_carry_the_genai_model_call_attributes():
    provider, exporter = tracing()

    await polyloop.run(
        agent(), GOAL, **two_actions_and_an_answer(), events=OpenTelemetrySink(provider)
    )

    chats = named(exporter.get_finished_spans(), "chat")
    gen_ai = [{k: v for k, v in attrs(c).items() if k.startswith("gen_ai.")} for c in chats]
    assert gen_ai == [
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "unknown",  # required; the sink never sees the request
            "gen_ai.response.id": "call-0",
            "gen_ai.usage.input_tokens": 11,
            "gen_ai.usage.output_tokens": 7,
        },
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "unknown",
            "gen_ai.response.id": "call-1",
            "gen_ai.usage.input_tokens": 13,
            "gen_ai.usage.output_tokens": 5,
        },
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "unknown",
            "gen_ai.response.id": "call-2",
        },
    ]
    assert attrs(chats[1])["polyloop.response_chars"] == 2
    assert attrs(chats[0])["polyloop.prompt_chars"] > 0


@pytest.mark.asyncio
async def test_tool_and_step_spans_carry_the_tool_call_and_the_step_record():
    provider, exporter = tracing()

    result = await polyloop.run(
        agent(),
        GOAL,
        **two_actions_and_an_answer(),
        events=OpenTelemetrySink(provider, capture_content=True),
        run_id=RUN,
    )

    spans = exporter.get_finished_spans()
    search, lookup = (named(spans, f"execute_tool {n}")[0] for n in ("search", "lookup"))
    assert attrs(search) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "search",
        "polyloop.tool_registered": True,  # no invented gen_ai.tool.call.id any more
        "polyloop.step_index": 0,
        "polyloop.action": "search cats",
        "polyloop.action_status": "executed",
        "polyloop.env_reported_completion": False,
        "polyloop.event_sequences": (3,),  # the ActionIntent it carries
    }
    assert attrs(lookup)["polyloop.action_status"] == "not_executed"
    assert lookup.status.description == "lookup is disabled"
    assert attrs(lookup)["error.type"] == "not_executed"
    step1 = named(spans, "step")[1]
    recorded = result.steps[1]
    assert attrs(step1)["polyloop.step.observation"] == recorded.observation
    assert attrs(step1)["polyloop.step.step_wall_ms"] == recorded.step_wall_ms
    assert attrs(step1)["polyloop.step.action_status"] == "not_executed"
    assert attrs(step1)["polyloop.step.observation_is_synthetic"] is True
    assert attrs(step1)["polyloop.executor_observation"] == "lookup is disabled"
    assert "polyloop.step.tool_args_json" not in attrs(step1)  # None fields are left out
    assert attrs(named(spans, "step")[0])["polyloop.step.tool_args_json"] == '{"q":"cats"}'


@pytest.mark.asyncio
async def test_a_model_that_raises_marks_the_chat_the_step_and_the_run_as_errors():
    provider, exporter = tracing()
    seams = script(act(tool_name="search"), model_fails(RuntimeError("model down")))

    result = await polyloop.run(
        agent(), GOAL, **seams.kwargs(), events=OpenTelemetrySink(provider), run_id=RUN
    )

    spans = exporter.get_finished_spans()
    assert result.stop_reason is StopReason.LLM_ERROR
    assert tree(spans) == [
        "invoke_agent !ERROR",
        "  step #0",
        "    chat #0",
        "    execute_tool search #0",
        "  step #1 !ERROR",
        "    chat #1 !ERROR",
    ]
    failed_chat = named(spans, "chat")[1]
    assert failed_chat.status.description == "RuntimeError: model down"
    assert attrs(failed_chat)["error.type"] == "RuntimeError"
    assert "gen_ai.response.id" not in attrs(failed_chat)
    (run,) = named(spans, "invoke_agent")
    assert attrs(run)["polyloop.stop_reason"] == "llm_error"
    assert run.status.description == "the run stopped llm_error"


@pytest.mark.asyncio
async def test_an_env_error_marks_the_tool_the_step_and_the_run_as_errors():
    provider, exporter = tracing()
    seams = script(act(ActionStatus.ENV_ERROR, tool_name="db", observation="connection lost"))

    result = await polyloop.run(agent(), GOAL, **seams.kwargs(), events=OpenTelemetrySink(provider))

    spans = exporter.get_finished_spans()
    assert result.stop_reason is StopReason.ENV_ERROR
    assert tree(spans) == [
        "invoke_agent !ERROR",
        "  step #0 !ERROR",
        "    chat #0",
        "    execute_tool db #0 !ERROR",
    ]
    # The executor's text is content: without capture_content the status names the outcome.
    assert named(spans, "execute_tool db")[0].status.description == "action env_error"


@pytest.mark.asyncio
@pytest.mark.parametrize("content", [False, True])
async def test_a_refused_tool_span_carries_the_executors_reason(content: bool):
    provider, exporter = tracing()
    seams = script(act(ActionStatus.NOT_EXECUTED, tool_name="add"), final("no"))
    reason = {
        "kind": "invalid_arguments",
        "tool": "add",
        "violations": [{"path": "a", "rule": "type", "message": "'hush' is not of type 'integer'"}],
    }
    seams.executor.outcomes["action-0"] = ActionOutcome(
        status=ActionStatus.NOT_EXECUTED, observation="refused", detail={"refusal": reason}
    )

    await polyloop.run(
        agent(), GOAL, **seams.kwargs(), events=OpenTelemetrySink(provider, capture_content=content)
    )

    (tool,) = named(exporter.get_finished_spans(), "execute_tool add")
    assert attrs(tool)["error.type"] == "invalid_arguments"
    assert attrs(tool)["polyloop.refusal.kind"] == "invalid_arguments"
    assert attrs(tool)["polyloop.refusal.violations.path"] == ("a",)
    assert attrs(tool)["polyloop.refusal.violations.rule"] == ("type",)
    said = [v for v in attrs(tool).values() if "hush" in str(v)]
    assert bool(said) is content  # the message quotes an argument: content


@pytest.mark.asyncio
async def test_a_resumed_run_from_a_new_sink_is_a_new_segment_of_the_remaining_steps():
    store = MemoryStore()
    first_provider, first = tracing()
    crashing = script(act(tool_name="search"), act(tool_name="fetch", error=Crash()), final())
    with pytest.raises(Crash):
        await polyloop.run(
            agent(replay=True),
            GOAL,
            **crashing.kwargs(),
            store=store,
            events=OpenTelemetrySink(first_provider),
            run_id=RUN,
        )
    second_provider, second = tracing()  # a new process: new provider, new sink, no shared state
    healthy = script(act(tool_name="search"), act(tool_name="fetch"), final())

    result = await polyloop.resume(
        RUN,
        agent(replay=True),
        **healthy.kwargs(),
        store=store,
        events=OpenTelemetrySink(second_provider),
    )

    assert result.stop_reason is StopReason.AGENT_FINISHED
    before, after = first.get_finished_spans(), second.get_finished_spans()
    # The crash left the run span, step 1 and its tool call open: they are never exported.
    assert tree(before) == ["step #0", "  chat #0", "  execute_tool search #0", "chat #1"]
    assert tree(after) == [
        "invoke_agent",
        "  step #1",
        "    execute_tool #1",  # a segment never saw RunStarted: no registry, no tool name
        "  step #2",
        "    chat #2",
    ]
    (segment,) = named(after, "invoke_agent")
    assert attrs(segment)["polyloop.resumed"] is True
    assert attrs(segment)["polyloop.resumed_at_sequence"] == 8  # the replayed ActionIntent
    assert segment.parent is None  # a root: no parent derived from the run id any more


@pytest.mark.asyncio
async def test_a_run_emitted_inside_a_callers_span_is_its_child():
    provider, exporter = tracing()

    with provider.get_tracer("app").start_as_current_span("POST /ask") as request:
        await polyloop.run(
            agent(), GOAL, **script(act(), final()).kwargs(), events=OpenTelemetrySink(provider)
        )

    spans = exporter.get_finished_spans()
    (run,) = named(spans, "invoke_agent")
    assert run.parent is not None
    assert run.parent.span_id == request.get_span_context().span_id
    assert {s.context.trace_id for s in spans if s.context} == {request.get_span_context().trace_id}


@pytest.mark.asyncio
async def test_the_sink_records_no_content_by_default_and_all_of_it_when_switched_on(
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    # ("42", the final answer, is left out: a random run id may contain it.)
    texts = (GOAL, "r0", "search cats", "cats", "lookup is disabled", "ran search cats")
    found = {}
    for switch in ("off", "option", "environment"):
        if switch == "environment":
            monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "TRUE")
        provider, exporter = tracing()
        sink = OpenTelemetrySink(provider, capture_content=True if switch == "option" else None)

        await polyloop.run(agent(), GOAL, **two_actions_and_an_answer(), events=sink)

        recorded = "\n".join(
            [str(v) for s in exporter.get_finished_spans() for v in attrs(s).values()]
            + [s.status.description or "" for s in exporter.get_finished_spans()]
        )
        found[switch] = [text for text in texts if text in recorded]
    assert found == {"off": [], "option": list(texts), "environment": list(texts)}


@pytest.mark.asyncio
async def test_the_chat_span_is_named_after_the_model_that_answered():
    provider, exporter = tracing()
    reply = ModelReply(text="r", model="gpt-x-2026", finish_reason="stop")

    await polyloop.run(
        agent(),
        GOAL,
        model=ScriptedModel([reply]),
        parser=ScriptedParser({"r": FinalAnswer(text="x")}),
        executor=ScriptedExecutor({}),
        events=OpenTelemetrySink(provider),
    )

    (chat,) = named(exporter.get_finished_spans(), "chat gpt-x-2026")
    assert attrs(chat)["gen_ai.response.model"] == "gpt-x-2026"
    assert attrs(chat)["gen_ai.response.finish_reasons"] == ("stop",)


@pytest.mark.asyncio
async def test_a_cancelled_run_ends_the_interrupted_step_as_an_error_and_the_run_without():
    provider, exporter = tracing()
    seams = script(act(tool_name="slow"), final())
    executor = GatedExecutor(seams.executor)
    task = asyncio.create_task(
        polyloop.run(
            agent(),
            GOAL,
            model=seams.model,
            parser=seams.parser,
            executor=executor,
            events=OpenTelemetrySink(provider),
        )
    )
    await executor.gate.entered.wait()

    task.cancel()

    with pytest.raises(asyncio.CancelledError):
        await task
    spans = exporter.get_finished_spans()
    assert tree(spans) == [
        "invoke_agent",
        "  step #0 !ERROR",
        "    chat #0",
        "    execute_tool slow #0 !ERROR",
    ]
    (tool,) = named(spans, "execute_tool slow")
    assert tool.status.description == (
        "interrupted: the run stopped (cancelled) before this step completed"
    )
    assert attrs(named(spans, "invoke_agent")[0])["polyloop.stop_reason"] == "cancelled"


@pytest.mark.asyncio
async def test_the_run_span_starts_and_ends_at_the_logged_timestamps():
    provider, exporter = tracing()
    sink = OpenTelemetrySink(provider)

    await sink.emit(Event(run_id=RUN, sequence=0, record=_started("2026-01-01T00:00:00.000Z")))
    await sink.emit(Event(run_id=RUN, sequence=1, record=_finished(StopReason.STEP_BUDGET)))

    (run,) = exporter.get_finished_spans()
    assert run.start_time == 1_767_225_600_000_000_000
    assert run.end_time == 1_767_225_601_500_000_000


@pytest.mark.asyncio
async def test_two_concurrent_runs_on_one_sink_make_two_complete_traces():
    provider, exporter = tracing()
    sink = OpenTelemetrySink(provider)

    results = await asyncio.gather(
        *(
            polyloop.run(
                agent(),
                GOAL,
                **script(act(tool_name="t"), final()).kwargs(),
                events=sink,
                run_id=run_id,
            )
            for run_id in ("run-a", "run-b")
        )
    )

    spans = exporter.get_finished_spans()
    assert [r.event_delivery_failures for r in results] == [0, 0]
    for run_id in ("run-a", "run-b"):
        (run,) = [s for s in spans if attrs(s).get("gen_ai.conversation.id") == run_id]
        mine = [s for s in spans if s.context and s.context.trace_id == run.context.trace_id]
        assert tree(mine) == [
            "invoke_agent",
            "  step #0",
            "    chat #0",
            "    execute_tool t #0",
            "  step #1",
            "    chat #1",
        ]
    assert repr(sink) == "OpenTelemetrySink(open_runs=0)"


# --------------------------------------------------------------------------- failures


class RaisingExporter(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        raise ConnectionError("collector unreachable")


class RaisingProcessor(SimpleSpanProcessor):
    def on_end(self, span: ReadableSpan) -> None:
        raise ConnectionError("processor broke")


def comparable(result: RunResult) -> RunResult:
    steps = tuple(dataclasses.replace(s, step_wall_ms=0) for s in result.steps)
    return dataclasses.replace(result, steps=steps)


async def reference_result(run_id: str) -> RunResult:
    seams = script(act(tool_name="t"), final())
    return await polyloop.run(agent(), GOAL, **seams.kwargs(), run_id=run_id)


@pytest.mark.asyncio
async def test_an_exporter_that_raises_does_not_change_the_runs_result():
    provider, exporter = tracing(RaisingExporter())
    seams = script(act(tool_name="t"), final())

    result = await polyloop.run(
        agent(), GOAL, **seams.kwargs(), events=OpenTelemetrySink(provider), run_id=RUN
    )

    assert comparable(result) == comparable(await reference_result(RUN))
    assert len(exporter.get_finished_spans()) == 6  # the other processor still got every span


@pytest.mark.asyncio
async def test_a_span_processor_that_raises_is_counted_as_delivery_failures_and_nothing_else():
    provider = TracerProvider()
    provider.add_span_processor(RaisingProcessor(InMemorySpanExporter()))
    seams = script(act(tool_name="t"), final())

    result = await polyloop.run(
        agent(), GOAL, **seams.kwargs(), events=OpenTelemetrySink(provider), run_id=RUN
    )

    # The events that end spans fail: 2 ModelReplied, 2 StepCompleted, RunFinished.
    assert result.event_delivery_failures == 5
    expected = dataclasses.replace(await reference_result(RUN), event_delivery_failures=5)
    assert comparable(result) == comparable(expected)


# --------------------------------------------------------------------------- bad input


def _started(at: str) -> RunStarted:
    return RunStarted(
        run_id=RUN,
        goal="g",
        parameters={"budget": {"max_steps": "many", "max_executed_actions": True, "x": 3}},
        parameters_hash="sha256:00",
        started_at=at,
    )


def _finished(stop: StopReason, at: str = "2026-01-01T00:00:01.500Z") -> RunFinished:
    return RunFinished(stop_reason=stop, final_answer=None, executed_actions=0, finished_at=at)


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "at", ["not a time", "", "0001-01-01T00:00:00+14:00", "1969-12-31T23:59:59Z", "2026-13-01"]
)
async def test_an_unusable_timestamp_falls_back_to_now(at: str):
    provider, exporter = tracing()
    sink = OpenTelemetrySink(provider)

    await sink.emit(Event(run_id=RUN, sequence=0, record=_started(at)))
    await sink.emit(Event(run_id=RUN, sequence=1, record=_finished(StopReason.STEP_BUDGET, at)))

    (run,) = exporter.get_finished_spans()
    assert run.start_time is not None
    assert run.end_time is not None
    assert 1_700_000_000_000_000_000 < run.start_time <= run.end_time
    assert {k: v for k, v in attrs(run).items() if k.startswith("polyloop.budget.")} == {
        "polyloop.budget.x": 3
    }


@pytest.mark.asyncio
async def test_records_out_of_order_still_make_a_well_formed_tree():
    provider, exporter = tracing()
    sink = OpenTelemetrySink(provider)
    reply = ModelReply(text="hi", call_id="c", usage={"prompt_tokens": 1.5})
    orphans: list[Record] = [
        ModelReplied(step_index=4, reply=reply),
        StepCompleted(step=dataclasses.replace(_a_step(), step_index=9)),
        ModelCallIntent(step_index=5, prompt_chars=1),
        ModelCallIntent(step_index=5, prompt_chars=2),
        _finished(StopReason.CANCELLED),
        _finished(StopReason.CANCELLED),
    ]

    for sequence, record in enumerate(orphans, start=7):
        await sink.emit(Event(run_id=RUN, sequence=sequence, record=record))

    assert tree(exporter.get_finished_spans()) == [
        "invoke_agent",
        "  step #4 !ERROR",  # never completed: interrupted when the run finished
        "    chat #4",
        "  step #9",
        "  step #5 !ERROR",
        "    chat #5 !ERROR",
        "    chat #5 !ERROR",
        "invoke_agent",
    ]
    chat4 = named(exporter.get_finished_spans(), "chat")[0]
    assert "gen_ai.usage.input_tokens" not in attrs(chat4)  # a float is not a token count


def _a_step() -> polyloop.StepRecord:
    return polyloop.StepRecord(
        step_index=0,
        raw_output="x",
        response_chars=1,
        reasoning_chars=0,
        action=None,
        parse_ok=False,
        parse_error="no",
        observation="no",
        observation_is_synthetic=False,
        observation_truncated_chars=0,
        prompt_chars=1,
        llm_call_id=None,
        step_wall_ms=0,
    )


@pytest.mark.asyncio
async def test_a_run_id_started_again_closes_what_the_first_start_left_open():
    provider, exporter = tracing()
    sink = OpenTelemetrySink(provider)
    first: list[Record] = [
        _started("2026-01-01T00:00:00Z"),
        ModelCallIntent(step_index=0, prompt_chars=1),
    ]

    for sequence, record in enumerate(first):
        await sink.emit(Event(run_id=RUN, sequence=sequence, record=record))
    await sink.emit(Event(run_id=RUN, sequence=0, record=_started("2026-01-01T00:00:02Z")))

    assert tree(exporter.get_finished_spans()) == [
        "invoke_agent !ERROR",
        "  step #0 !ERROR",
        "    chat #0 !ERROR",
    ]


@pytest.mark.parametrize("provider", ["http://collector:4317", object(), InMemorySpanExporter()])
def test_a_tracer_provider_that_is_not_one_is_a_type_error_naming_the_argument(provider: object):
    with pytest.raises(TypeError, match="tracer_provider must be an opentelemetry"):
        OpenTelemetrySink(provider)  # type: ignore[arg-type]


def test_without_the_extra_constructing_the_sink_says_what_to_install(tmp_path: Path):
    shadow = tmp_path / "opentelemetry"
    shadow.mkdir()
    (shadow / "__init__.py").write_text('raise ImportError("No module named opentelemetry")\n')
    probe = (
        "import polyloop.events\n"
        "cls = polyloop.events.OpenTelemetrySink\n"
        "try:\n    cls()\nexcept ImportError as exc:\n    print(exc)\n"
    )

    completed = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(tmp_path)},
    )

    assert completed.stdout.strip() == (
        "OpenTelemetrySink needs OpenTelemetry: pip install 'polyloop[otel]' "
        "(opentelemetry-api and opentelemetry-sdk)"
    )


@pytest.mark.parametrize("switch", ["yes", 1, 0.0])
def test_a_capture_content_that_is_not_a_bool_is_a_type_error(switch: object):
    with pytest.raises(TypeError, match="capture_content must be a bool or None"):
        OpenTelemetrySink(capture_content=switch)  # type: ignore[arg-type]


@pytest.mark.asyncio
async def test_a_tool_name_the_model_made_up_names_no_span_of_the_sink():
    provider, exporter = tracing()
    seams = script(act(tool_name="nope"), act(tool_name="search"), final())

    await polyloop.run(agent(), GOAL, **seams.kwargs(), events=OpenTelemetrySink(provider))

    tools = sorted(
        (s for s in exporter.get_finished_spans() if s.name.startswith("execute_tool")),
        key=lambda s: s.start_time or 0,
    )
    assert [span.name for span in tools] == ["execute_tool", "execute_tool search"]
    assert attrs(tools[0])["gen_ai.tool.name"] == "nope"
    assert attrs(tools[0])["polyloop.tool_registered"] is False
    assert all("gen_ai.tool.call.id" not in attrs(span) for span in tools)


@pytest.mark.asyncio
async def test_a_run_ended_for_its_parser_is_an_error_run():
    provider, exporter = tracing()
    seams = script(final())
    seams.parser.decisions = {
        text: ValueError("NaN is not allowed") for text in seams.parser.decisions
    }

    result = await polyloop.run(
        agent(),
        GOAL,
        **seams.kwargs(),
        events=OpenTelemetrySink(provider),
        run_id=RUN,
        end_on_parser_error=True,
    )

    assert result.stop_reason is StopReason.PARSER_ERROR
    (run,) = named(exporter.get_finished_spans(), "invoke_agent")
    assert attrs(run)["polyloop.stop_reason"] == "parser_error"
    assert run.status.description == "the run stopped parser_error"
