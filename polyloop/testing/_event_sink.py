"""The event-sink suite.

A sink receives one event per appended log record: dashboards, trace exporters, log shippers.
Its failures must never cost a run, so what is checked here is that it accepts everything the
loop can emit, under concurrency, and lets cancellation through.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from polyloop.ports import EventSink
from polyloop.testing import strategies as pst
from polyloop.testing._base import (
    ContractBase,
    bounded_settings,
    missing_fixture,
    require_seam,
    unverifiable_promise,
)
from polyloop.testing._cancel import assert_cancellation_propagates
from polyloop.testing._shapes import short
from polyloop.testing._skips import kept_by_polyloop
from polyloop.types import Event, ModelCallIntent, RunStarted

__all__ = ["EventSinkContract"]

_CONCURRENT_EMITS = 50


def _one_of_each_kind() -> st.SearchStrategy[tuple[Event, ...]]:
    """Six events, one per record kind, for one run id with sequence numbers 0..5 (and others)."""
    kinds = (
        pst.run_started_records(),
        pst.model_call_intent_records(),
        pst.model_replied_records(),
        pst.action_intent_records(),
        pst.step_completed_records(),
        pst.run_finished_records(),
    )
    return st.builds(
        lambda run_id, base, records: tuple(
            Event(run_id=run_id, sequence=base + index, record=record)
            for index, record in enumerate(records)
        ),
        pst.run_ids(),
        st.one_of(st.just(0), pst.counts().map(lambda n: min(n, 2**63 - 7))),
        st.tuples(*kinds),
    )


async def _emit(sink: EventSink, event: Event) -> None:
    result: object = await sink.emit(event)  # type: ignore[func-returns-value]
    assert result is None, f"emit() must return None, returned {short(result)}"


class EventSinkContract(ContractBase):
    """Inherit this and override ``event_sink``. No samples: events are the library's own."""

    seam = "event_sink"
    samples_fixture = None

    @pytest.fixture
    def event_sink(self) -> EventSink:
        """Your event sink. Override this fixture and return an instance."""
        missing_fixture(
            "EventSinkContract",
            "event_sink",
            "an instance of your sink (any object with `async emit(event: Event) -> None`)",
        )

    @bounded_settings(max_examples=20)
    @given(events=_one_of_each_kind())
    async def test_accepts_every_event_kind(
        self, event_sink: EventSink, events: tuple[Event, ...]
    ) -> None:
        """``emit`` accepts an event of every record kind, with any content, and returns ``None``.

        The library counts a failed delivery and goes on, so a sink that chokes on one kind (a
        ``StepCompleted`` whose ``tool_args_json`` is ``None``, a reply with an emoji, sequence
        0) does not break runs — it silently drops exactly the events someone will look for.
        Each example emits all six kinds.
        """
        require_seam(event_sink, "event_sink", "emit", "async emit(event) -> None")
        for event in events:
            await _emit(event_sink, event)

    async def test_concurrent_emits_are_safe(self, event_sink: EventSink) -> None:
        """Many ``emit`` calls in flight at once all complete without error.

        Several runs share one sink in a harness that runs rollouts concurrently. A sink that
        keeps one connection or buffer without guarding it interleaves writes and fails (or
        corrupts its output) only under load, never in a one-run test.
        """
        require_seam(event_sink, "event_sink", "emit", "async emit(event) -> None")
        run_ids = [uuid.uuid4().hex for _ in range(5)]
        events = [
            Event(
                run_id=run_id,
                sequence=index,
                record=RunStarted(
                    run_id=run_id,
                    goal=f"goal {index}",
                    parameters={},
                    parameters_hash="sha256:" + "0" * 64,
                    started_at="2026-01-01T00:00:00.000Z",
                )
                if index == 0
                else ModelCallIntent(step_index=index, prompt_chars=index * 10),
            )
            for run_id in run_ids
            for index in range(_CONCURRENT_EMITS // len(run_ids))
        ]
        results = await asyncio.gather(
            *(_emit(event_sink, event) for event in events), return_exceptions=True
        )
        failures = [r for r in results if isinstance(r, BaseException)]
        assert not failures, (
            f"{len(failures)} of {len(events)} concurrent emits failed; first: "
            f"{type(failures[0]).__name__}: {short(str(failures[0]))}"
        )

    async def test_cancellation_propagates(self, event_sink: EventSink) -> None:
        """Cancelling a running ``emit`` raises ``CancelledError`` out of it.

        When a run is cancelled, the loop emits its last event best-effort and re-raises. A sink
        that swallows the cancellation (a broad ``except`` around a network send) keeps the
        cancelled run's task alive. The call is cancelled at several depths (a few ticks, then
        fractions of an uncancelled call), since the catch usually sits around the send, after a
        quick connect. ``not_applicable`` when every probe found the call already finished: it
        had no await point at which to swallow anything.
        """
        require_seam(event_sink, "event_sink", "emit", "async emit(event) -> None")
        run_id = uuid.uuid4().hex
        event = Event(
            run_id=run_id, sequence=1, record=ModelCallIntent(step_index=0, prompt_chars=1)
        )
        await assert_cancellation_propagates(
            {"emit(event)": lambda: event_sink.emit(event)},
            promise="a cancelled emit() lets CancelledError through",
            what="emit(event)",
        )

    @unverifiable_promise
    async def test_delivery_failure_is_isolated_by_the_library(self, event_sink: EventSink) -> None:
        """A delivery failure never interrupts the run; the library counts it.

        Observability must not decide whether work happens. The loop catches every exception
        from ``emit`` (not ``CancelledError``) and adds one to
        ``RunResult.event_delivery_failures``; a sink is free to raise.
        """
        kept_by_polyloop(
            promise=(
                "an exception from emit() never interrupts a run; the library counts it in "
                "RunResult.event_delivery_failures"
            ),
            why="the isolation is done by the loop around emit(), not by the sink",
            guarded_by=("docs/reference/runtime.md#events",),
        )
