"""Events (SPEC §3): one per appended record, ``sequence`` = the record's index in the log,
continuing across a resume; a sink's failure is counted and never interrupts the run."""

from __future__ import annotations

import asyncio

import pytest

import polyloop
from polyloop import Event, StopReason
from polyloop.events import MemorySink
from polyloop.stores import MemoryStore
from tests.unit._doubles import (
    GOAL,
    Crash,
    CrashingSink,
    act,
    agent,
    final,
    kinds,
    run_to_end,
    script,
)

pytestmark = pytest.mark.asyncio


class FlakySink(MemorySink):
    """Delivers every event, then raises ``error`` for the sequences in ``failing`` (and
    :class:`Crash` at ``crash_at``)."""

    def __init__(
        self, failing: set[int], error: BaseException, crash_at: int | None = None
    ) -> None:
        super().__init__()
        self.failing = failing
        self.error = error
        self.crash_at = crash_at

    async def emit(self, event: Event) -> None:
        await super().emit(event)
        if event.sequence == self.crash_at:
            raise Crash(f"crash after record {event.sequence}")
        if event.sequence in self.failing:
            raise self.error


async def test_each_appended_record_is_emitted_once_with_its_index_as_sequence():
    sink = MemorySink()

    outcome = await run_to_end(script(act(), act(), final()), agent(), events=sink)

    assert [e.sequence for e in sink.events] == list(range(len(outcome.log)))
    assert [e.record for e in sink.events] == list(outcome.log.records)
    assert {e.run_id for e in sink.events} == {"run-1"}


async def test_sink_exceptions_are_counted_and_never_interrupt_the_run():
    sink = FlakySink({0, 2, 5}, RuntimeError("sink is down"))

    outcome = await run_to_end(script(act(), final("ok")), agent(), events=sink)

    assert outcome.result is not None
    assert outcome.result.stop_reason is StopReason.AGENT_FINISHED
    assert outcome.result.event_delivery_failures == 3
    assert kinds(outcome.log)[-1] == "run_finished"


async def test_a_sink_that_always_fails_still_lets_the_run_finish():
    sink = FlakySink(set(range(100)), ValueError("bad event"))

    outcome = await run_to_end(script(act(), final()), agent(), events=sink)

    assert outcome.result is not None
    assert outcome.result.event_delivery_failures == len(outcome.log)


async def test_a_sinks_cancelled_error_propagates_and_the_run_is_logged_cancelled():
    sink = FlakySink({2}, asyncio.CancelledError())
    store = MemoryStore()

    with pytest.raises(asyncio.CancelledError):
        await polyloop.run(
            agent(), GOAL, store=store, events=sink, run_id="r", **script(act(), final()).kwargs()
        )

    log = await store.read_log("r")
    # Event 2 (the reply) is emitted after its commit, which also holds the action intent.
    assert kinds(log) == ["run_started", "model_call_intent", "model_replied", "action_intent",
                          "run_finished"]  # fmt: skip
    assert log.finished is not None
    assert log.finished.stop_reason is StopReason.CANCELLED


async def test_events_continue_the_sequence_across_a_resume_and_old_records_are_not_reemitted():
    specs = (act(), act(), final())
    store = MemoryStore()
    before = CrashingSink(crash_after=5)
    await run_to_end(script(*specs), agent(), store=store, events=before)
    after = MemorySink()

    await polyloop.resume("run-1", agent(), store=store, events=after, **script(*specs).kwargs())

    log = await store.read_log("run-1")
    assert [e.sequence for e in before.events] == list(range(6))
    assert [e.sequence for e in after.events] == list(range(6, len(log)))
    assert [e.record for e in after.events] == list(log.records[6:])


async def test_resume_counts_only_its_own_delivery_failures():
    specs = (act(), act(), final())
    store = MemoryStore()
    crashing = FlakySink({0, 1, 2}, RuntimeError("down"), crash_at=4)
    await run_to_end(script(*specs), agent(), store=store, events=crashing)

    result = await polyloop.resume(
        "run-1", agent(), store=store, events=FlakySink({6}, RuntimeError("down")),
        **script(*specs).kwargs(),
    )  # fmt: skip

    assert result.stop_reason is StopReason.AGENT_FINISHED
    assert result.event_delivery_failures == 1
