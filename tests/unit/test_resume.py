"""``polyloop.resume`` (SPEC §4): every interrupted log is made by a real run whose seam raises
:class:`Crash` (a ``BaseException``) at the right moment, and the resumed result must equal the
uninterrupted run's (step records compared without ``step_wall_ms``)."""

from __future__ import annotations

import asyncio

import pytest

import polyloop
from polyloop import (
    ActionStatus,
    ParametersChanged,
    RunLog,
    RunNotFound,
    StopReason,
    StoreCorrupted,
    Tool,
    ToolRegistry,
)
from polyloop.events import MemorySink
from polyloop.stores import MemoryStore
from tests.unit._doubles import (
    Crash,
    CrashingSink,
    ForbiddenExecutor,
    ForbiddenModel,
    ForbiddenSink,
    GatedModel,
    ReadOnlyStore,
    StepSpec,
    StoreWrapper,
    act,
    agent,
    final,
    forbidden_seams,
    invalid,
    kinds,
    model_fails,
    run_to_end,
    script,
    trajectory,
)

pytestmark = pytest.mark.asyncio

RUN = "run-1"


class ParserBroke(Exception):
    """A parser that raises: the exception leaves run(), the reply is in the log."""


async def uninterrupted(*specs: StepSpec, **agent_kwargs):
    outcome = await run_to_end(script(*specs), agent(**agent_kwargs))
    assert outcome.result is not None
    return outcome


async def crashed(
    crash_seams, *, error: type[BaseException] = Crash, **agent_kwargs
) -> MemoryStore:
    store = MemoryStore()
    outcome = await run_to_end(crash_seams, agent(**agent_kwargs), store=store)
    assert isinstance(outcome.error, error)
    return store


# --------------------------------------------------------------------------- the model intent


async def test_a_model_intent_without_a_reply_calls_the_model_again():
    specs = (act(), act(), final())
    reference = await uninterrupted(*specs)
    store = await crashed(script(act(), model_fails(Crash()), final()))
    seams, sink = script(*specs), MemorySink()

    result = await polyloop.resume(RUN, agent(), store=store, events=sink, **seams.kwargs())

    log = await store.read_log(RUN)
    assert trajectory(result) == trajectory(reference.result)
    assert len(seams.model.received) == 2
    assert kinds(log)[5:8] == ["model_call_intent", "model_call_intent", "model_replied"]
    assert [e.sequence for e in sink.events] == list(range(6, len(log)))


# --------------------------------------------------------------------------- the logged reply


async def test_a_logged_reply_without_a_step_is_parsed_again_without_a_second_model_call():
    specs = (act(), final("done"))
    reference = await uninterrupted(*specs)
    crash_seams = script(*specs)
    # A log ends at ModelReplied when the parser raised (the reply is committed before the
    # exception leaves run()); a crash while parsing loses it, as it rides with the intent.
    crash_seams.parser.decisions["reply-1"] = ParserBroke("raised while parsing")
    store = await crashed(crash_seams, error=ParserBroke)
    seams = script(*specs)

    result = await polyloop.resume(
        RUN, agent(), store=store, model=ForbiddenModel(), parser=seams.parser,
        executor=ForbiddenExecutor(),
    )  # fmt: skip

    assert trajectory(result) == trajectory(reference.result)
    assert result.final_answer == "done"
    assert kinds(await store.read_log(RUN)).count("model_call_intent") == 2


async def test_a_logged_reply_parsed_again_into_an_action_executes_it_and_continues():
    specs = (invalid(), act(), act(completion=True))
    reference = await uninterrupted(*specs)
    crash_seams = script(*specs)
    # A log ends at ModelReplied when the parser raised (the reply is committed before the
    # exception leaves run()); a crash while parsing loses it, as it rides with the intent.
    crash_seams.parser.decisions["reply-1"] = ParserBroke("raised while parsing")
    store = await crashed(crash_seams, error=ParserBroke)
    seams = script(*specs)

    result = await polyloop.resume(RUN, agent(), store=store, **seams.kwargs())

    assert trajectory(result) == trajectory(reference.result)
    assert len(seams.model.received) == 1  # only step 2's call: step 1's reply was logged


# --------------------------------------------------------------------------- the action intent

SEARCH_REPLAYABLE = ToolRegistry([Tool(name="search", description="read only", replayable=True)])
PAY_NEVER = ToolRegistry([Tool(name="pay", description="moves money", replayable=False)])
PAY_DEFAULT = ToolRegistry([Tool(name="pay", description="moves money")])


@pytest.mark.parametrize(
    ("tools", "tool_name", "agent_flag", "replays"),
    [
        (None, None, False, False),
        (None, None, True, True),
        (SEARCH_REPLAYABLE, "search", False, True),
        (SEARCH_REPLAYABLE, "search", True, True),
        (PAY_NEVER, "pay", True, False),
        (PAY_NEVER, "pay", False, False),
        (PAY_DEFAULT, "pay", True, True),
        (PAY_DEFAULT, "pay", False, False),
        (PAY_NEVER, "unregistered", True, True),
        (PAY_NEVER, "unregistered", False, False),
    ],
    ids=[
        "no-tools-agent-off",
        "no-tools-agent-on",
        "replayable-agent-off",
        "replayable-agent-on",
        "never-agent-on",
        "never-agent-off",
        "default-agent-on",
        "default-agent-off",
        "unregistered-agent-on",
        "unregistered-agent-off",
    ],
)
async def test_an_action_intent_without_a_step_is_replayed_only_when_allowed(
    tools, tool_name, agent_flag, replays
):
    specs = (act(tool_name=tool_name), act(tool_name=tool_name), final())
    reference = await uninterrupted(*specs, tools=tools)
    crash_seams = script(*specs)
    crash_seams.executor.outcomes["action-1"] = Crash("died while acting")
    store = await crashed(crash_seams, tools=tools)
    seams = script(*specs)

    result = await polyloop.resume(
        RUN, agent(tools=tools, replay=agent_flag), store=store, **seams.kwargs()
    )

    log = await store.read_log(RUN)
    if replays:
        assert trajectory(result) == trajectory(reference.result)
        assert [a.text for a in seams.executor.received] == ["action-1"]
        assert kinds(log)[7:10] == ["action_intent", "action_intent", "step_completed"]
    else:
        assert result.stop_reason is StopReason.RESUME_STATE_UNKNOWN
        assert len(result.steps) == 1
        assert seams.executor.received == []
        assert kinds(log)[-2:] == ["action_intent", "run_finished"]


# --------------------------------------------------------------------------- the logged step


@pytest.mark.parametrize(
    ("specs", "agent_kwargs", "stop"),
    [
        ((act(), act(completion=True)), {}, StopReason.TASK_COMPLETED),
        ((act(), act(ActionStatus.ENV_ERROR)), {}, StopReason.ENV_ERROR),
        ((act(), model_fails()), {}, StopReason.LLM_ERROR),
        ((invalid(), invalid()), {"max_consecutive_parse_failures": 2},
         StopReason.PARSE_FAILED_REPEATEDLY),
        ((act(), act()), {"max_steps": 2}, StopReason.STEP_BUDGET),
        ((act(), act()), {"max_executed_actions": 2, "max_steps": 3}, StopReason.ACTION_BUDGET),
        ((act(), act()), {"max_prompt_chars": 60}, StopReason.CONTEXT_OVERFLOW),
    ],
    ids=lambda value: value.value if isinstance(value, StopReason) else None,
)  # fmt: skip
async def test_a_logged_step_that_ended_the_run_gets_its_finish_without_calling_any_seam(
    specs, agent_kwargs, stop
):
    reference = await uninterrupted(*specs, **agent_kwargs)
    assert reference.result is not None
    assert reference.result.stop_reason is stop
    last_step = max(i for i, r in enumerate(reference.log.records) if r.kind == "step_completed")
    store = MemoryStore()
    await run_to_end(script(*specs), agent(**agent_kwargs), store=store,
                     events=CrashingSink(crash_after=last_step))  # fmt: skip

    result = await polyloop.resume(RUN, agent(**agent_kwargs), store=store, **forbidden_seams())

    assert trajectory(result) == trajectory(reference.result)
    assert kinds(await store.read_log(RUN)) == kinds(reference.log)


async def test_a_logged_final_answer_without_its_finish_gets_the_answer_by_parsing_the_reply():
    specs = (act(), final("forty-two"))
    reference = await uninterrupted(*specs)
    store = MemoryStore()
    await run_to_end(script(*specs), agent(), store=store, events=CrashingSink(crash_after=8))

    result = await polyloop.resume(
        RUN, agent(), store=store, model=ForbiddenModel(), parser=script(*specs).parser,
        executor=ForbiddenExecutor(),
    )  # fmt: skip

    log = await store.read_log(RUN)
    assert trajectory(result) == trajectory(reference.result)
    assert log.finished is not None
    assert log.finished.stop_reason is StopReason.AGENT_FINISHED
    assert log.finished.final_answer == "forty-two"


async def test_a_logged_step_that_did_not_end_the_run_continues_at_budget_admission():
    specs = (act(), invalid(), act(), final())
    reference = await uninterrupted(*specs)
    store = MemoryStore()
    await run_to_end(script(*specs), agent(), store=store, events=CrashingSink(crash_after=7))
    seams = script(*specs)

    result = await polyloop.resume(RUN, agent(), store=store, **seams.kwargs())

    assert trajectory(result) == trajectory(reference.result)
    assert len(seams.model.received) == 2


async def test_a_run_with_only_run_started_continues_from_the_first_step():
    specs = (act(), final())
    reference = await uninterrupted(*specs)
    crashed_store = MemoryStore()
    await run_to_end(
        script(*specs), agent(), store=crashed_store, events=CrashingSink(crash_after=0)
    )
    # RunStarted rides with the first model intent; a store without batches can end at it.
    store = MemoryStore()
    await store.append(RUN, (await crashed_store.read_log(RUN)).records[0], sequence=0)
    seams = script(*specs)

    result = await polyloop.resume(RUN, agent(), store=store, **seams.kwargs())

    assert trajectory(result) == trajectory(reference.result)
    assert kinds(await store.read_log(RUN)) == kinds(reference.log)


# --------------------------------------------------------------------------- finished runs


@pytest.mark.parametrize(
    "specs",
    [(act(), final("yes")), (act(), act(ActionStatus.ENV_ERROR)), (model_fails(),)],
    ids=["agent_finished", "env_error", "llm_error"],
)
async def test_a_finished_run_is_rebuilt_from_the_log_without_calling_any_seam(specs):
    store = MemoryStore()
    original = await run_to_end(script(*specs), agent(), store=store)
    assert original.result is not None

    # A different agent too: a finished run is rebuilt "whatever the agent".
    result = await polyloop.resume(
        RUN, agent(max_steps=3, system_prompt="other"), store=ReadOnlyStore(store),
        events=ForbiddenSink(), **forbidden_seams(),
    )  # fmt: skip

    assert trajectory(result) == trajectory(original.result)
    assert result.event_delivery_failures == 0


async def test_a_cancelled_run_is_rebuilt_not_continued():
    seams = script(act(), act(), final())
    model = GatedModel(seams.model, at_call=1)
    store = MemoryStore()
    task = asyncio.create_task(
        polyloop.run(agent(), "goal", store=store, run_id=RUN, model=model,
                     parser=seams.parser, executor=seams.executor)
    )  # fmt: skip
    await model.gate.entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    result = await polyloop.resume(
        RUN, agent(replay=True), store=ReadOnlyStore(store), events=ForbiddenSink(),
        **forbidden_seams(),
    )  # fmt: skip

    assert result.stop_reason is StopReason.CANCELLED
    assert result.executed_actions == 1
    assert len(result.steps) == 1


# --------------------------------------------------------------------------- refusals


async def test_resuming_with_changed_parameters_raises_parameters_changed_and_writes_nothing():
    store = ReadOnlyStore(await crashed(script(act(), act(error=Crash()))))

    with pytest.raises(ParametersChanged):
        await polyloop.resume(RUN, agent(max_steps=7), store=store, **forbidden_seams())


async def test_resuming_with_only_the_replay_flag_changed_is_not_a_parameter_change():
    store = await crashed(script(act(), act(error=Crash())))

    result = await polyloop.resume(
        RUN, agent(replay=True), store=store, **script(act(), act(), final()).kwargs()
    )

    assert result.stop_reason is StopReason.AGENT_FINISHED


async def test_resuming_an_unknown_run_raises_run_not_found():
    with pytest.raises(RunNotFound):
        await polyloop.resume("nobody", agent(), store=MemoryStore(), **forbidden_seams())


class HeadlessStore(StoreWrapper):
    """Reads a real log with its first record cut off (a damaged store)."""

    async def read_log(self, run_id: str) -> RunLog:
        log = await self.inner.read_log(run_id)
        return RunLog(log.records[1:])


async def test_resuming_a_log_without_run_started_raises_store_corrupted():
    store = HeadlessStore(await crashed(script(act(), act(error=Crash()))))

    with pytest.raises(StoreCorrupted):
        await polyloop.resume(RUN, agent(), store=store, **forbidden_seams())


async def test_resume_emits_only_the_records_it_appends():
    store = await crashed(script(act(), act(error=Crash())))
    sink = MemorySink()

    await polyloop.resume(RUN, agent(), store=store, events=sink, **forbidden_seams())

    log = await store.read_log(RUN)
    assert [e.sequence for e in sink.events] == [len(log) - 1]
    assert sink.events[0].record == log.finished


async def test_a_run_that_crashed_again_while_replaying_resumes_to_the_same_result():
    specs = (act(), act(), final())
    reference = await uninterrupted(*specs)
    crash_seams = script(*specs)
    crash_seams.executor.outcomes["action-1"] = Crash("died while acting")
    store = await crashed(crash_seams)
    with pytest.raises(Crash):
        await polyloop.resume(RUN, agent(replay=True), store=store, **crash_seams.kwargs())
    seams = script(*specs)

    result = await polyloop.resume(RUN, agent(replay=True), store=store, **seams.kwargs())

    assert trajectory(result) == trajectory(reference.result)
    assert kinds(await store.read_log(RUN)).count("action_intent") == 4
