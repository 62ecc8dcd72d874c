"""The event-sink suite.

A sink receives one event per appended log record: dashboards, trace exporters, log shippers.
Its failures must never cost a run, so what is checked here is that it accepts everything the
loop can emit, under concurrency, and lets cancellation through — and, where the implementer
hands over a way to read its delivery back (:class:`~polyloop.testing.EventSinkSamples`), that
each event arrives exactly once and intact.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Sequence

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from polyloop._base._exception_text import exception_text
from polyloop.ports import EventSink
from polyloop.testing._event_sink._span_delivery import count_problems, span_delivery_problems
from polyloop.testing._shared._base import (
    ContractBase,
    bounded_settings,
    missing_fixture,
    require_samples,
    require_seam,
    unverifiable_promise,
)
from polyloop.testing._shared._cancel import assert_cancellation_propagates
from polyloop.testing._shared._draw_texts import FIELD_TEXTS, counts, run_ids
from polyloop.testing._shared._draw_values import (
    action_intent_records,
    big_records,
    events,
    model_call_intent_records,
    model_replied_records,
    run_finished_records,
    run_started_records,
    step_completed_records,
)
from polyloop.testing._shared._raised import raised_by_the_implementation
from polyloop.testing._shared._sample_records import started
from polyloop.testing._shared._samples import EventSinkSamples
from polyloop.testing._shared._shapes import SHORT, Drawn, mismatch, short
from polyloop.testing._shared._skips import kept_by_polyloop, not_applicable, unverifiable
from polyloop.types import (
    Action,
    ActionIntent,
    Event,
    ModelCallIntent,
    ModelReplied,
    ModelReply,
    Record,
    RunStarted,
    StepCompleted,
    StepRecord,
    parameters_hash,
)

__all__ = ["EventSinkContract"]

_CONCURRENT_EMITS = 50


def _one_of_each_kind() -> st.SearchStrategy[tuple[Event, ...]]:
    """Six events, one per record kind, for one run id with sequence numbers 0..5 (and others);
    one example in eight adds a seventh whose record carries up to 1 MiB of text."""
    kinds = (
        run_started_records(),
        model_call_intent_records(),
        model_replied_records(),
        action_intent_records(),
        step_completed_records(),
        run_finished_records(),
    )
    one_big = big_records().map(lambda r: (r,))  # built once: never inside the flatmap
    big = st.integers(min_value=0, max_value=7).flatmap(
        lambda n: one_big if n == 0 else st.just(())
    )
    return st.builds(
        lambda run_id, base, records: Drawn(
            Event(run_id=run_id, sequence=base + index, record=record)
            for index, record in enumerate(records)
        ),
        run_ids(),
        st.one_of(st.just(0), counts().map(lambda n: min(n, 2**63 - 8))),
        st.builds(lambda six, extra: (*six, *extra), st.tuples(*kinds), big),
    )


# --------------------------------------------------------------------------- delivery

#: How many runs the delivery probe spreads its events over, and how long it waits for the
#: emits and for ``read_back``.
_DELIVERY_RUNS = 4
_DELIVERY_TIMEOUT_S = 60.0
#: The fixed big event's text: well past 64 KiB, every kind of character a field may hold.
_BIG_TEXT = "\u00b7".join(FIELD_TEXTS) + "\u00b7"  # "·": never a surrogate pair
_BIG_TEXT = _BIG_TEXT * (300 * 1024 // len(_BIG_TEXT.encode("utf-8", "surrogatepass")))


def _fixed_records() -> list[Record]:
    """Records every delivery example emits: each hand-picked field text in a reply, tool
    arguments and an observation, a start whose goal and parameters hold them, one big step."""
    texts = FIELD_TEXTS
    parameters = {"system_prompt": texts[0], "tools": list(texts)}
    records: list[Record] = [
        RunStarted(
            run_id="-",
            goal=texts[3],
            parameters=parameters,
            parameters_hash=parameters_hash(parameters),
            started_at="2026-01-01T00:00:00.000Z",
        )
    ]
    for index, text in enumerate(texts):
        records.append(ModelReplied(step_index=index, reply=ModelReply(text=text, call_id=text)))
        records.append(
            ActionIntent(
                step_index=index, action=Action(text=text, tool_name=text, tool_args={text: text})
            )
        )
    step = StepRecord(
        step_index=len(texts),
        raw_output=_BIG_TEXT,
        response_chars=len(_BIG_TEXT),
        reasoning_chars=0,
        action=None,
        parse_ok=True,
        parse_error=None,
        observation=_BIG_TEXT,
        observation_is_synthetic=False,
        observation_truncated_chars=0,
        prompt_chars=1,
        llm_call_id=None,
        step_wall_ms=1,
    )
    records.append(StepCompleted(step=step, executor_observation=None, model_error=None))
    return records


_FIXED = _fixed_records()


def _with_run_id(record: Record, run_id: str) -> Record:
    if isinstance(record, RunStarted):
        return RunStarted(
            run_id=run_id,
            goal=record.goal,
            parameters=record.parameters,
            parameters_hash=record.parameters_hash,
            started_at=record.started_at,
        )
    return record


#: The explicit example of ``accepts_every_event_kind``: every hand-picked field text and the
#: 300 KiB step, met on every run (the drawn examples reach them only sometimes).
_FIXED_EVENTS = Drawn(
    Event(run_id="fixed", sequence=n, record=_with_run_id(record, "fixed"))
    for n, record in enumerate(_FIXED)
)
# Drawn: a falsifying example prints each record with its long texts cut, not megabytes.
_DRAWN = st.lists(events().map(lambda event: event.record), max_size=8).map(Drawn)


def _delivery_batch(drawn: Sequence[Record]) -> tuple[Event, ...]:
    """The fixed and drawn records spread over fresh run ids, sequences counting per run."""
    prefix = uuid.uuid4().hex
    counters = [0] * _DELIVERY_RUNS
    events: list[Event] = []
    for index, record in enumerate((*_FIXED, *drawn)):
        run = index % _DELIVERY_RUNS
        run_id = f"{prefix}-{run}"
        events.append(
            Event(run_id=run_id, sequence=counters[run], record=_with_run_id(record, run_id))
        )
        counters[run] += 1
    return tuple(events)


_READ_BACK_LINE = (
    "return polyloop.testing.EventSinkSamples(read_back=<async function(sink) -> list of Event>) "
    "— the events as your sink delivered them, read back from where they arrive — from the "
    "`sink_samples` fixture of your EventSinkContract subclass, or from a fixture named by "
    "@pytest_polyloop.seam('event_sink', samples='<fixture>') or by the ini line "
    "'event_sink:<sink fixture>:<samples fixture>' in polyloop_seams, and the kit "
    "checks this"
)
_DELIVERY_PROMISE = "under concurrent emits each event is delivered exactly once and intact"


def _read_back_or_skip(samples: object) -> EventSinkSamples:
    if samples is None:
        unverifiable(
            promise=_DELIVERY_PROMISE,
            why="the suite cannot see what your sink delivered without a way to read it back",
            verify_yourself=(
                f"{_READ_BACK_LINE}; or emit many events at once (asyncio.gather) and compare "
                "what arrives with what was emitted, one for one"
            ),
        )
    checked = require_samples(samples, EventSinkSamples, "sink_samples")
    if checked.delivers_nothing:
        not_applicable(
            promise=_DELIVERY_PROMISE,
            why="EventSinkSamples(delivers_nothing=True) declares that the sink discards every "
            "event by design",
            verify_yourself="use a sink that delivers events where they must arrive",
        )
    return checked


def _delivery_problems(emitted: Sequence[Event], delivered: Sequence[Event]) -> list[str]:
    """What differs between the events emitted and the ones delivered (the probe's runs only)."""
    expected = {(e.run_id, e.sequence): e for e in emitted}
    counts = Counter((e.run_id, e.sequence) for e in delivered)
    problems = count_problems(
        expected,
        counts,
        lost="were never delivered",
        twice="were delivered more than once",
        unknown="delivered events were never emitted",
    )
    seen: set[tuple[str, int]] = set()
    changed = 0
    first: str | None = None
    for event in delivered:
        key = (event.run_id, event.sequence)
        if key not in expected or key in seen:
            continue
        seen.add(key)
        # The whole event, type by type: a sequence ``1.0`` or ``True`` finds the key of ``1``.
        found = mismatch(expected[key], event, f"run {key[0]} sequence {key[1]}")
        if found is not None:
            changed += 1
            first = first or found
    if first is not None:
        problems.append(f"{changed} events were delivered changed; first: {first}")
    return problems


async def _emit(sink: EventSink, event: Event) -> None:
    try:
        result: object = await sink.emit(event)  # type: ignore[func-returns-value]
    except Exception:
        raise
    except BaseException as error:  # a SystemExit: name the event, not just "SystemExit: 2"
        if not raised_by_the_implementation(error):
            raise
        detail = (
            f"emit() of the event of run {event.run_id!r} at sequence {event.sequence} "
            f"({type(event.record).__name__}) raised {exception_text(error, limit=SHORT)}"
        )
        pytest.fail(detail, pytrace=False)
    assert result is None, f"emit() must return None, returned {short(result)}"


class EventSinkContract(ContractBase):
    """Inherit this and override ``event_sink``. Events are the library's own, so no samples are
    needed — except to check delivery: override ``sink_samples`` to return
    :class:`~polyloop.testing.EventSinkSamples` with a ``read_back`` that gives the events as your
    sink delivered them."""

    seam = "event_sink"
    samples_fixture = None
    optional_samples_fixture = "sink_samples"

    @pytest.fixture
    def sink_samples(self) -> EventSinkSamples | None:
        """Optional: ``EventSinkSamples(read_back=...)`` turns ``delivers_each_event_exactly_once``
        on. Override this fixture; the default ``None`` leaves it unverifiable."""
        return None

    @pytest.fixture
    def event_sink(self) -> EventSink:
        """Your event sink. Override this fixture and return an instance."""
        missing_fixture(
            "EventSinkContract",
            "event_sink",
            "an instance of your sink (any object with `async emit(event: Event) -> None`)",
        )

    @bounded_settings(max_examples=20)
    @example(events=_FIXED_EVENTS)
    @given(events=_one_of_each_kind())
    async def test_accepts_every_event_kind(
        self, event_sink: EventSink, events: tuple[Event, ...]
    ) -> None:
        """``emit`` accepts an event of every record kind, with any content, and returns ``None``.

        The library counts a failed delivery and goes on, so a sink that chokes on one kind (a
        ``StepCompleted`` whose ``tool_args_json`` is ``None``, a reply with an emoji, sequence
        0) does not break runs — it silently drops exactly the events someone will look for.
        Each example emits all six kinds; every text field may hold lone surrogates, CJK,
        emoji, combining marks and control characters, and some examples add an event of up to
        1 MiB. One fixed example emits every hand-picked field text and a 300 KiB step.
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
                record=started(run_id, f"goal {index}", parameters={})
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
            f"{exception_text(failures[0], limit=SHORT)}"
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

    @bounded_settings(max_examples=3)
    @given(drawn=_DRAWN)
    async def test_delivers_each_event_exactly_once(
        self, event_sink: EventSink, sink_samples: object, drawn: list[Record]
    ) -> None:
        """Under concurrent emits each event is delivered exactly once and intact.

        Not raising is not delivering. A batching shipper that swaps its buffer without a lock
        across an ``await`` loses the events emitted meanwhile; one that re-sends its last batch
        on flush delivers them twice; one that cuts long messages or encodes with
        ``errors="replace"`` delivers a different event than the run recorded — and each of them
        returns ``None`` from every ``emit``. Checked when ``sink_samples`` gives a ``read_back``
        (or, for a sink whose far end is spans, a ``read_back_spans``: then each event must be
        carried by exactly one exported span, with the fields the span keeps unchanged):
        each example emits, all at once over four runs, events with every hand-picked field text
        (lone surrogates, CJK, emoji, combining marks, control characters), a 300 KiB step and
        drawn events of every kind (some up to 1 MiB), then reads the delivery back: every event
        is there once, equal to what was emitted, field for field and type for type.
        """
        checked = _read_back_or_skip(sink_samples)
        require_seam(event_sink, "event_sink", "emit", "async emit(event) -> None")
        events = _delivery_batch(drawn)
        async with asyncio.timeout(_DELIVERY_TIMEOUT_S):
            results = await asyncio.gather(
                *(_emit(event_sink, event) for event in events), return_exceptions=True
            )
        failures = [r for r in results if isinstance(r, BaseException)]
        assert not failures, (
            f"{len(failures)} of {len(events)} concurrent emits raised (not delivered); first: "
            f"{exception_text(failures[0], limit=SHORT)}"
        )
        if checked.read_back_spans is not None:
            async with asyncio.timeout(_DELIVERY_TIMEOUT_S):
                spans: object = await checked.read_back_spans(event_sink)
            assert isinstance(spans, Sequence), (
                f"sink_samples.read_back_spans must return a list of spans, got {short(spans)}"
            )
            problems = span_delivery_problems(events, spans)
            assert not problems, (
                f"{len(events)} events emitted at once, read back as spans through "
                "sink_samples.read_back_spans:\n" + "\n".join(problems)
            )
            return
        assert checked.read_back is not None
        async with asyncio.timeout(_DELIVERY_TIMEOUT_S):
            got: object = await checked.read_back(event_sink)
        wrong = f"sink_samples.read_back must return a list of polyloop Event, got {short(got)}"
        assert isinstance(got, Sequence), wrong
        assert all(isinstance(e, Event) for e in got), wrong
        mine = {e.run_id for e in events}
        problems = _delivery_problems(events, [e for e in got if e.run_id in mine])
        assert not problems, (
            f"{len(events)} events emitted at once, read back through sink_samples.read_back:\n"
            + "\n".join(problems)
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
