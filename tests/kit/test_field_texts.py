"""The record and event strategies reach what a run can record (issue #21, class 4): lone
surrogates in every text field a record or an event carries, CJK, emoji, combining marks,
astral characters, control characters, and events up to 1 MiB — and every value drawn still
round-trips through the record codec exactly."""

from __future__ import annotations

import dataclasses
import unicodedata
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from polyloop.testing import EventSinkSamples
from polyloop.testing import strategies as pst
from polyloop.types import Event, Record, record_from_json

SURROGATE = range(0xD800, 0xE000)
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _texts(value: object, path: str) -> Iterator[tuple[str, str]]:
    """Every str in a record (fields, nested dataclasses, JSON keys and values) with its path."""
    if isinstance(value, str):
        yield path, value
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield from _texts(getattr(value, f.name), f"{path}.{f.name}")
    elif isinstance(value, dict):
        for key, item in value.items():
            yield f"{path}{{key}}", key
            yield from _texts(item, f"{path}[]")
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _texts(item, f"{path}[]")


def _has_surrogate(text: str) -> bool:
    return any(ord(c) in SURROGATE for c in text)


# Every str field a record carries, as kind.field (nested reply/action/step fields included).
# run_id, parameters_hash and schema_version follow a grammar the store promises never see.
_FIELDS = {
    "run_started": ("goal", "parameters{key}", "parameters[]", "started_at"),
    "model_replied": ("reply.text", "reply.reasoning", "reply.call_id", "reply.usage{key}"),
    "action_intent": (
        "action.text",
        "action.tool_name",
        "action.tool_args{key}",
        "action.tool_args[]",
    ),
    "step_completed": (
        "step.raw_output",
        "step.action",
        "step.parse_error",
        "step.observation",
        "step.llm_call_id",
        "step.tool_name",
        "step.tool_args_json",
        "executor_observation",
        "model_error",
    ),
    "run_finished": ("final_answer", "finished_at"),
}


def _field(path: str) -> str:
    """``path`` up to its first ``{key}`` or ``[]``: the record field a JSON value sits in."""
    cuts = [path.index(m) + len(m) for m in ("{key}", "[]") if m in path]
    return path[: min(cuts)] if cuts else path


def test_lone_surrogates_reach_every_text_field_of_every_record_kind() -> None:
    reached: set[str] = set()

    # Each kind drawn on its own: a field one kind in six carries, optional at that, is not
    # left to the luck of a shared budget.
    for kind in _FIELDS:
        strategy = getattr(pst, f"{kind}_records")()

        @settings(max_examples=250, deadline=None, database=None, derandomize=True)
        @given(record=strategy)
        def collect(record: Record) -> None:
            for path, text in _texts(record, record.kind):
                if _has_surrogate(text):
                    reached.add(_field(path))

        collect()
    wanted = {f"{kind}.{field}" for kind, fields in _FIELDS.items() for field in fields}
    assert wanted - reached == set(), sorted(reached)


def test_the_other_hard_characters_are_reached() -> None:
    seen: set[str] = set()

    @settings(max_examples=200, deadline=None, database=None, derandomize=True)
    @given(text=pst.record_texts())
    def collect(text: str) -> None:
        for c in text:
            if "\u4e00" <= c <= "\u9fff":
                seen.add("CJK")
            if unicodedata.combining(c):
                seen.add("combining mark")
            if ord(c) > 0xFFFF:
                seen.add("astral character")
            if ord(c) < 0x20:
                seen.add("control character")
            if ord(c) in SURROGATE:
                seen.add("lone surrogate")
        if "\u200d" in text:
            seen.add("emoji sequence")

    collect()
    assert seen == {
        "CJK",
        "combining mark",
        "astral character",
        "control character",
        "lone surrogate",
        "emoji sequence",
    }


@FAST
@given(text=pst.record_texts(max_size=200))
def test_a_record_text_never_holds_a_high_surrogate_right_before_a_low_one(text: str) -> None:
    pairs = [
        i
        for i in range(len(text) - 1)
        if "\ud800" <= text[i] <= "\udbff" <= text[i + 1] <= "\udfff"
    ]
    assert not pairs


@FAST
@given(record=st.one_of(pst.records(), pst.big_records()))
def test_every_drawn_record_round_trips_through_the_codec_exactly(record: Record) -> None:
    body = record.to_json()
    body.encode("utf-8")  # valid UTF-8 whatever the record holds
    assert record_from_json(body) == record


def test_big_records_reach_one_mebibyte_and_events_carry_them_sometimes() -> None:
    big: list[int] = []
    events: list[int] = []

    @settings(max_examples=40, deadline=None, database=None, derandomize=True)
    @given(record=pst.big_records(), event=pst.events())
    def collect(record: Record, event: Event) -> None:
        big.append(len(record.to_json().encode("utf-8")))
        events.append(len(event.record.to_json().encode("utf-8")))

    collect()
    assert max(big) > 1000 * 1024  # about 1 MiB of text
    assert any(size > 64 * 1024 for size in events)
    assert sum(size < 64 * 1024 for size in events) > len(events) // 2  # most stay small


@given(data=st.data())
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_long_texts_stay_within_their_bound(data: st.DataObject) -> None:
    bound = data.draw(st.integers(min_value=1, max_value=1 << 20))
    text = data.draw(pst.long_texts(max_bytes=bound))
    assert len(text.encode("utf-8", "surrogatepass")) <= bound


async def _read_back(sink: Any) -> list[Event]:
    return []


def test_event_sink_samples_take_a_read_back_or_a_declaration() -> None:
    assert EventSinkSamples(read_back=_read_back).read_back is _read_back
    assert EventSinkSamples(delivers_nothing=True).read_back is None
    with pytest.raises(ValueError, match="read_back="):
        EventSinkSamples()
    with pytest.raises(ValueError, match="not both"):
        EventSinkSamples(read_back=_read_back, delivers_nothing=True)
    with pytest.raises(TypeError, match="async function"):
        EventSinkSamples(read_back="module:function")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="bool"):
        EventSinkSamples(delivers_nothing=1)  # type: ignore[arg-type]
