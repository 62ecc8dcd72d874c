"""Delivery read back as OpenTelemetry spans (``EventSinkSamples(read_back_spans=...)``).

A sink whose far end is a trace does not deliver events one for one: one span carries several
events (a model call opens at its intent and ends at its reply) and keeps a few fields of each
as attributes. So the spans say which events they carry — ``polyloop.event_sequences``, the
sequences of the events whose records the span carries, and ``polyloop.run_id`` on the span or
on an ancestor — and the kit checks, from the spans an exporter received, that every emitted
event is carried by exactly one span, no span arrives twice, and every attribute a span keeps of
an event's record (:data:`ATTRIBUTES`) equals that record's field. OpenTelemetry is not
imported: a span is anything shaped like the SDK's ``ReadableSpan``.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from enum import Enum
from typing import Any

from polyloop.testing._shared._shapes import short, typed
from polyloop.types import (
    ActionIntent,
    Event,
    ModelCallIntent,
    ModelReplied,
    Record,
    RunFinished,
    RunStarted,
    StepCompleted,
    StepRecord,
)

__all__ = ["ATTRIBUTES", "EVENT_SEQUENCES", "RUN_ID", "span_delivery_problems"]

#: The attribute naming the events a span carries (an int array of their sequences).
EVENT_SEQUENCES = "polyloop.event_sequences"
#: The attribute naming the run, on the span or on an ancestor.
RUN_ID = "polyloop.run_id"

_Field = Callable[[Any], object]


def _step_field(name: str) -> _Field:
    return lambda record: getattr(record.step, name)


_STEP: dict[str, _Field] = {
    f"polyloop.step.{f.name}": _step_field(f.name) for f in dataclasses.fields(StepRecord)
}

#: Per record kind, the attributes that hold a field of it: when a span carrying an event has
#: one of them, its value must be the field's (an enum by its value; ``None``: no attribute).
ATTRIBUTES: Mapping[type[Record], Mapping[str, _Field]] = {
    RunStarted: {
        "polyloop.goal": lambda r: r.goal,
        "polyloop.parameters_hash": lambda r: r.parameters_hash,
    },
    ModelCallIntent: {
        "polyloop.step_index": lambda r: r.step_index,
        "polyloop.prompt_chars": lambda r: r.prompt_chars,
    },
    ModelReplied: {
        "polyloop.step_index": lambda r: r.step_index,
        "gen_ai.response.id": lambda r: r.reply.call_id,
        "gen_ai.response.model": lambda r: r.reply.model,
        "polyloop.response_chars": lambda r: len(r.reply.text),
        "polyloop.reasoning_chars": lambda r: len(r.reply.reasoning),
    },
    ActionIntent: {
        "polyloop.step_index": lambda r: r.step_index,
        "polyloop.action": lambda r: r.action.text,
        "gen_ai.tool.name": lambda r: r.action.tool_name,
    },
    StepCompleted: {
        "polyloop.step_index": lambda r: r.step.step_index,
        "polyloop.executor_observation": lambda r: r.executor_observation,
        "polyloop.model_error": lambda r: r.model_error,
        **_STEP,
    },
    RunFinished: {
        "polyloop.stop_reason": lambda r: r.stop_reason,
        "polyloop.executed_actions": lambda r: r.executed_actions,
        "polyloop.final_answer": lambda r: r.final_answer,
    },
}

_Key = tuple[str, int]


def _plain(value: object) -> object:
    """A field as an attribute holds it: an enum by its value; other objects have none."""
    if isinstance(value, Enum):
        return value.value
    return value if isinstance(value, bool | int | float | str) else None


def _ids(span: Any) -> tuple[object, object] | None:
    context = getattr(span, "context", None)
    if context is None:
        return None
    return (getattr(context, "trace_id", None), getattr(context, "span_id", None))


def _attributes(span: Any) -> Mapping[str, Any]:
    attributes = getattr(span, "attributes", None)
    return attributes if isinstance(attributes, Mapping) else {}


def _run_of(span: Any, by_id: Mapping[object, Any]) -> str | None:
    """``polyloop.run_id`` of ``span`` or of its nearest ancestor that has one."""
    seen: set[object] = set()
    while span is not None:
        run = _attributes(span).get(RUN_ID)
        if isinstance(run, str):
            return run
        parent = getattr(span, "parent", None)
        key = None if parent is None else (parent.trace_id, parent.span_id)
        if key is None or key in seen:
            return None
        seen.add(key)
        span = by_id.get(key)
    return None


def _carried(spans: Sequence[Any]) -> tuple[list[tuple[_Key, Any]], list[str]]:
    """Each (run, sequence) a span carries, with the span; and the spans that arrived twice."""
    counts = Counter(_ids(span) for span in spans)
    twice = [ids for ids, n in counts.items() if ids is not None and n > 1]
    problems = []
    if twice:
        problems.append(
            f"{len(twice)} spans were exported more than once (first: trace/span id {twice[0]}, "
            f"{counts[twice[0]]} times)"
        )
    by_id: dict[object, Any] = {_ids(span): span for span in spans}
    carried: list[tuple[_Key, Any]] = []
    for span in {id(span): span for span in spans}.values():
        sequences = _attributes(span).get(EVENT_SEQUENCES)
        if sequences is None:
            continue
        if isinstance(sequences, str | bytes) or not all(
            isinstance(n, int) and not isinstance(n, bool) for n in sequences
        ):
            problems.append(
                f"span {getattr(span, 'name', '?')!r} has {EVENT_SEQUENCES} = "
                f"{short(sequences)}, not a list of event sequences (ints)"
            )
            continue
        run = _run_of(span, by_id)
        for sequence in sequences:
            carried.append(((str(run), sequence), span))
    return carried, problems


def _changed(expected: Mapping[_Key, Event], carried: list[tuple[_Key, Any]]) -> list[str]:
    changed, first = 0, None
    for key, span in carried:
        event = expected.get(key)
        if event is None:
            continue
        attributes = _attributes(span)
        for name, field in ATTRIBUTES.get(type(event.record), {}).items():
            if name not in attributes:
                continue
            want, got = _plain(field(event.record)), attributes[name]
            if got != want or type(got) is not type(want):
                changed += 1
                first = first or (
                    f"run {key[0]} sequence {key[1]} ({event.record.kind}): span "
                    f"{getattr(span, 'name', '?')!r} has {name} = {typed(got)}, the record "
                    f"{'has none' if want is None else f'holds {typed(want)}'}"
                )
                break
    return [] if first is None else [f"{changed} events were delivered changed; first: {first}"]


def count_problems(
    expected: Mapping[tuple[str, int], Event],
    counts: Mapping[tuple[str, int], int],
    *,
    lost: str,
    twice: str,
    unknown: str,
    lost_hint: str = "",
) -> list[str]:
    """Events (by run and sequence) that arrived no time, more than once, or without being
    emitted, in the words of the channel they arrive through (delivered, carried by spans)."""
    problems: list[str] = []
    missing = [key for key in expected if counts.get(key, 0) == 0]
    if missing:
        first = missing[0]
        problems.append(
            f"{len(missing)} of {len(expected)} events {lost} (first: run {first[0]} sequence "
            f"{first[1]}, a {expected[first].record.kind}){lost_hint}"
        )
    repeated = sorted(key for key, n in counts.items() if n > 1)
    if repeated:
        problems.append(
            f"{len(repeated)} events {twice} (first: run {repeated[0][0]} sequence "
            f"{repeated[0][1]}, {counts[repeated[0]]} times)"
        )
    strangers = sorted(key for key in counts if key not in expected)
    if strangers:
        problems.append(
            f"{len(strangers)} {unknown} (first: run {strangers[0][0]} sequence {strangers[0][1]})"
        )
    return problems


def span_delivery_problems(emitted: Sequence[Event], spans: Sequence[Any]) -> list[str]:
    """What differs between the events emitted and what the spans carry (the probe's runs)."""
    expected = {(e.run_id, e.sequence): e for e in emitted}
    carried, problems = _carried(spans)
    mine = [(key, span) for key, span in carried if key[0] in {k[0] for k in expected}]
    counts = Counter(key for key, _ in mine)
    problems += count_problems(
        expected,
        counts,
        lost="are carried by no exported span",
        lost_hint=f"; a span names the events it carries in {EVENT_SEQUENCES}",
        twice="are carried more than once",
        unknown="events carried by spans were never emitted",
    )
    return problems + _changed(expected, mine)
