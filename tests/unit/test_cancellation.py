"""Cancellation (SPEC §4): ``CancelledError`` is re-raised, never swallowed; the log gets one
``RunFinished(cancelled)`` if the run was started and not finished; an append in flight is never
cut in half. Each test aims the cancellation at one ``await`` by parking a seam on a gate."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import polyloop
from polyloop import ActionStatus, Event, RunFinished, StopReason
from polyloop.events import MemorySink
from polyloop.stores import MemoryStore
from tests.unit._doubles import (
    GOAL,
    Crash,
    FailingStore,
    GatedExecutor,
    GatedModel,
    GatedStore,
    Seams,
    act,
    agent,
    final,
    kinds,
    run_to_end,
    script,
)

pytestmark = pytest.mark.asyncio


def start(seams: Seams, *, store: Any, events: MemorySink, **overrides: Any) -> asyncio.Task[Any]:
    kwargs = {**seams.kwargs(), **overrides}
    return asyncio.create_task(
        polyloop.run(agent(), GOAL, store=store, events=events, run_id="r", **kwargs)
    )


async def test_cancelling_during_the_model_call_logs_cancelled_and_reraises():
    seams = script(act(), final())
    model = GatedModel(seams.model, at_call=1)
    store, sink = MemoryStore(), MemorySink()
    task = start(seams, store=store, events=sink, model=model)
    await model.gate.entered.wait()

    task.cancel()

    with pytest.raises(asyncio.CancelledError):
        await task
    log = await store.read_log("r")
    assert kinds(log)[-2:] == ["model_call_intent", "run_finished"]
    assert log.finished == RunFinished(
        stop_reason=StopReason.CANCELLED,
        final_answer=None,
        executed_actions=1,
        finished_at=log.finished.finished_at if log.finished else "",
    )
    assert [e.sequence for e in sink.events] == list(range(len(log)))
    assert sink.events[-1].record == log.finished


async def test_cancelling_during_the_action_logs_cancelled_without_a_step_for_it():
    seams = script(act(), act(), final())
    executor = GatedExecutor(seams.executor)
    store, sink = MemoryStore(), MemorySink()
    task = start(seams, store=store, events=sink, executor=executor)
    await executor.gate.entered.wait()

    task.cancel()

    with pytest.raises(asyncio.CancelledError):
        await task
    log = await store.read_log("r")
    assert kinds(log) == ["run_started", "model_call_intent", "model_replied", "action_intent",
                          "run_finished"]  # fmt: skip
    assert log.finished is not None
    assert log.finished.stop_reason is StopReason.CANCELLED
    assert log.finished.executed_actions == 0
    assert sink.events[-1].record == log.finished


# The commits of a step: [run_started, model_call_intent], [model_replied, action_intent],
# [step_completed, model_call_intent]. A commit in flight lands whole (this store has no
# append_many, so the loop writes it record by record: the rest of the batch follows).
@pytest.mark.parametrize(
    ("at_sequence", "landed"),
    [(0, ["run_started", "model_call_intent"]), (1, ["model_call_intent"]),
     (2, ["model_replied", "action_intent"]), (3, ["action_intent"]),
     (4, ["step_completed", "model_call_intent"])],
)  # fmt: skip
async def test_an_append_in_flight_when_cancelled_completes_and_the_cancelled_finish_follows(
    at_sequence, landed
):
    seams = script(act(), final())
    store = GatedStore(at_sequence=at_sequence)
    task = start(seams, store=store, events=MemorySink())
    await store.gate.entered.wait()

    task.cancel()
    store.gate.release.set()

    with pytest.raises(asyncio.CancelledError):
        await task
    log = await store.read_log("r")
    assert store.gate.finished
    assert kinds(log)[at_sequence:] == [*landed, "run_finished"]
    assert log.finished is not None
    assert log.finished.stop_reason is StopReason.CANCELLED


async def test_the_cancelled_finish_counts_an_executed_step_whose_append_it_waited_for():
    seams = script(act(), act(), final())
    store = GatedStore(at_sequence=4)  # the first StepCompleted, an executed action
    task = start(seams, store=store, events=MemorySink())
    await store.gate.entered.wait()

    task.cancel()
    store.gate.release.set()

    with pytest.raises(asyncio.CancelledError):
        await task
    log = await store.read_log("r")
    assert [c.step.action_status for c in log.steps] == [ActionStatus.EXECUTED]
    assert log.finished is not None
    assert log.finished.executed_actions == 1


async def test_a_record_whose_append_the_cancellation_waited_for_is_still_emitted():
    seams = script(act(), final())
    store, sink = GatedStore(at_sequence=2), MemorySink()
    task = start(seams, store=store, events=sink)
    await store.gate.entered.wait()

    task.cancel()
    store.gate.release.set()

    with pytest.raises(asyncio.CancelledError):
        await task
    log = await store.read_log("r")
    assert [e.sequence for e in sink.events] == list(range(len(log)))
    assert [e.record for e in sink.events] == list(log.records)


async def test_cancelling_during_the_final_append_leaves_the_real_stop_and_reraises():
    seams = script(final())
    store = GatedStore(at_sequence=4)  # RunFinished(agent_finished)
    task = start(seams, store=store, events=MemorySink())
    await store.gate.entered.wait()

    task.cancel()
    store.gate.release.set()

    with pytest.raises(asyncio.CancelledError):
        await task
    log = await store.read_log("r")
    assert log.finished is not None
    assert log.finished.stop_reason is StopReason.AGENT_FINISHED
    assert kinds(log).count("run_finished") == 1


async def test_a_cancellation_before_run_started_is_written_appends_nothing():
    seams = script(final())
    store, sink = GatedStore(gate_read_log=True), MemorySink()
    task = start(seams, store=store, events=sink)
    await store.gate.entered.wait()

    task.cancel()

    with pytest.raises(asyncio.CancelledError):
        await task
    assert (await store.inner.read_log("r")).records == ()
    assert sink.events == []


async def test_cancelled_error_propagates_even_when_the_cancelled_finish_cannot_be_written():
    seams = script(act(), final())
    model = GatedModel(seams.model, at_call=1)
    store = FailingStore(lambda _, record: isinstance(record, RunFinished), OSError("disk full"))
    task = start(seams, store=store, events=MemorySink(), model=model)
    await model.gate.entered.wait()

    task.cancel()

    with pytest.raises(asyncio.CancelledError):
        await task
    assert [type(r).__name__ for _, r in store.attempts][-1] == "RunFinished"
    assert (await store.read_log("r")).finished is None


async def test_a_cancelled_resume_logs_cancelled_and_reraises():
    seams = script(act(), act(error=Crash()), final())
    store = MemoryStore()
    await run_to_end(seams, agent(), store=store, run_id="r")
    model = GatedModel(seams.model, at_call=0)
    resumed = asyncio.create_task(
        polyloop.resume("r", agent(replay=True), model=model, parser=seams.parser,
                        executor=script(act(), act(), final()).executor, store=store)
    )  # fmt: skip
    await model.gate.entered.wait()

    resumed.cancel()

    with pytest.raises(asyncio.CancelledError):
        await resumed
    log = await store.read_log("r")
    assert kinds(log)[-3:] == ["step_completed", "model_call_intent", "run_finished"]
    assert log.finished is not None
    assert log.finished.stop_reason is StopReason.CANCELLED
    assert log.finished.executed_actions == 2


async def test_a_run_under_asyncio_timeout_ends_in_timeout_error_with_the_log_cancelled():
    seams = script(act(), final())
    model = GatedModel(seams.model, at_call=1)
    store = MemoryStore()

    async def run_until_the_deadline_fires_during_the_model_call() -> None:
        async with asyncio.timeout(None) as deadline:
            task = asyncio.ensure_future(
                polyloop.run(agent(), GOAL, store=store, run_id="r", model=model,
                             parser=seams.parser, executor=seams.executor)
            )  # fmt: skip
            await model.gate.entered.wait()
            deadline.reschedule(asyncio.get_running_loop().time())
            await task

    with pytest.raises(TimeoutError):
        await run_until_the_deadline_fires_during_the_model_call()

    log = await store.read_log("r")
    assert log.finished is not None
    assert log.finished.stop_reason is StopReason.CANCELLED


class SinkFailingOnFinish(MemorySink):
    async def emit(self, event: Event) -> None:
        await super().emit(event)
        if isinstance(event.record, RunFinished):
            raise RuntimeError("sink down at the worst moment")


async def test_a_sink_failing_on_the_cancelled_finish_does_not_replace_the_cancellation():
    seams = script(act(), final())
    model = GatedModel(seams.model, at_call=1)
    store, sink = MemoryStore(), SinkFailingOnFinish()
    task = start(seams, store=store, events=sink, model=model)
    await model.gate.entered.wait()

    task.cancel()

    with pytest.raises(asyncio.CancelledError):
        await task
    assert sink.events[-1].record == (await store.read_log("r")).finished


async def test_a_second_cancellation_does_not_cut_the_cancelled_finish_in_half():
    seams = script(act(), final())
    model = GatedModel(seams.model, at_call=0)
    store = GatedStore(at_sequence=2)  # RunStarted, ModelCallIntent, then the cancelled finish
    task = start(seams, store=store, events=MemorySink(), model=model)
    await model.gate.entered.wait()
    task.cancel()
    await store.gate.entered.wait()

    task.cancel()
    store.gate.release.set()

    with pytest.raises(asyncio.CancelledError):
        await task
    log = await store.read_log("r")
    assert store.gate.finished
    assert kinds(log) == ["run_started", "model_call_intent", "run_finished"]
    assert log.finished is not None
    assert log.finished.stop_reason is StopReason.CANCELLED
