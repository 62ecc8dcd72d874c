"""Delivery read back as spans (``EventSinkSamples(read_back_spans=...)``) can fail.

``OpenTelemetrySink`` over a correctly configured provider carries every event exactly once
(``tests/contract/test_otel_sink_contract.py`` holds it through the whole suite). Beside it,
the same sink under configurations teams really write, each losing, doubling or changing what
reaches the exporter while every ``emit`` returns ``None``: a span limit that cuts long
attributes, a batch processor whose queue overflows, the processor added twice — and a span
sink that does not say which events its spans carry.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from tests.conftest import require_extra

require_extra("otel")

from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, SpanProcessor, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import (  # noqa: E402
    BatchSpanProcessor,
    SimpleSpanProcessor,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

from polyloop.events import OpenTelemetrySink  # noqa: E402
from polyloop.testing import EventSinkSamples  # noqa: E402
from polyloop.testing._event_sink._span_delivery import span_delivery_problems  # noqa: E402
from polyloop.testing._event_sink._suite import _DRAWN, _delivery_batch  # noqa: E402
from polyloop.types import Event, ModelCallIntent  # noqa: E402


async def delivered(
    *processors: SpanProcessor,
    exporter: InMemorySpanExporter,
    limits: SpanLimits | None = None,
    drawn: Sequence[Any] = (),
) -> list[str]:
    """Emit the probe's batch at once through an ``OpenTelemetrySink`` over ``processors``;
    the problems the kit finds in what ``exporter`` received."""
    provider = TracerProvider(span_limits=limits) if limits else TracerProvider()
    for processor in processors:
        provider.add_span_processor(processor)
    sink = OpenTelemetrySink(provider, capture_content=True)
    events = _delivery_batch(list(drawn))
    await asyncio.gather(*(sink.emit(event) for event in events))
    sink.end_open_spans()
    provider.force_flush()
    return span_delivery_problems(events, exporter.get_finished_spans())


@pytest.mark.asyncio
async def test_the_sink_over_a_simple_processor_carries_every_event_once() -> None:
    exporter = InMemorySpanExporter()
    assert await delivered(SimpleSpanProcessor(exporter), exporter=exporter) == []


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(drawn=_DRAWN)
def test_the_sink_carries_drawn_events_of_every_kind_once(drawn: list[Any]) -> None:
    exporter = InMemorySpanExporter()
    problems = asyncio.run(delivered(SimpleSpanProcessor(exporter), exporter=exporter, drawn=drawn))
    assert problems == []


@pytest.mark.asyncio
async def test_a_span_limit_that_cuts_long_attributes_is_a_changed_delivery() -> None:
    exporter = InMemorySpanExporter()
    limits = SpanLimits(max_span_attribute_length=1_000)
    problems = await delivered(SimpleSpanProcessor(exporter), exporter=exporter, limits=limits)
    assert len(problems) == 1
    assert "events were delivered changed" in problems[0]
    assert "polyloop.step.raw_output" in problems[0] or "polyloop.step.observation" in problems[0]


@pytest.mark.asyncio
async def test_a_batch_processor_whose_queue_overflows_loses_events() -> None:
    exporter = InMemorySpanExporter()
    batch = BatchSpanProcessor(
        exporter, max_queue_size=8, max_export_batch_size=8, schedule_delay_millis=60_000
    )
    problems = await delivered(batch, exporter=exporter)
    batch.shutdown()  # type: ignore[no-untyped-call]
    assert any("are carried by no exported span" in p for p in problems), problems


@pytest.mark.asyncio
async def test_a_processor_added_twice_exports_every_span_twice() -> None:
    exporter = InMemorySpanExporter()
    problems = await delivered(
        SimpleSpanProcessor(exporter), SimpleSpanProcessor(exporter), exporter=exporter
    )
    # one cause, one problem: the same span object twice is not counted again as its events
    assert len(problems) == 1
    assert "spans were exported more than once" in problems[0]


class _Unmarked(OpenTelemetrySink):
    """A span sink that does not name the events its spans carry."""

    def _mark(self, span: Any) -> None:
        pass


@pytest.mark.asyncio
async def test_spans_that_name_no_events_deliver_nothing() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    sink = _Unmarked(provider, capture_content=True)
    events = _delivery_batch([])
    for event in events:
        await sink.emit(event)
    sink.end_open_spans()
    problems = span_delivery_problems(events, exporter.get_finished_spans())
    assert len(problems) == 1
    assert f"{len(events)} of {len(events)} events are carried by no exported span" in problems[0]
    assert "polyloop.event_sequences" in problems[0]


class _Span:
    def __init__(self, name: str, attributes: dict[str, Any], span_id: int = 1) -> None:
        self.name = name
        self.attributes = attributes
        self.context = type("C", (), {"trace_id": 1, "span_id": span_id})()
        self.parent = None


def test_a_span_naming_a_sequence_never_emitted_and_junk_sequences_are_named() -> None:
    event = Event(run_id="r", sequence=0, record=ModelCallIntent(step_index=0, prompt_chars=3))
    spans = [
        _Span("chat", {"polyloop.run_id": "r", "polyloop.event_sequences": (0, 7)}, 1),
        _Span("odd", {"polyloop.run_id": "r", "polyloop.event_sequences": "0"}, 2),
    ]
    problems = span_delivery_problems([event], spans)
    assert any("not a list of event sequences" in p for p in problems), problems
    assert any("run r sequence 7" in p and "never emitted" in p for p in problems), problems


def test_an_attribute_of_another_type_is_a_change() -> None:
    event = Event(run_id="r", sequence=0, record=ModelCallIntent(step_index=2, prompt_chars=3))
    attributes = {
        "polyloop.run_id": "r",
        "polyloop.event_sequences": (0,),
        "polyloop.prompt_chars": "3",  # a string where the record holds an int
    }
    problems = span_delivery_problems([event], [_Span("chat", attributes)])
    assert len(problems) == 1
    assert "polyloop.prompt_chars = str '3', the record holds int 3" in problems[0]


def test_the_run_is_found_on_an_ancestor() -> None:
    event = Event(run_id="r", sequence=0, record=ModelCallIntent(step_index=2, prompt_chars=3))
    run = _Span("invoke_agent", {"polyloop.run_id": "r"}, 1)
    child = _Span("chat", {"polyloop.event_sequences": (0,), "polyloop.prompt_chars": 3}, 2)
    child.parent = run.context
    assert span_delivery_problems([event], [run, child]) == []


async def _spans(sink: object) -> list[ReadableSpan]:
    return []


async def _events(sink: object) -> list[Event]:
    return []


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        (
            {"read_back": _events, "read_back_spans": _spans},
            ValueError,
            r"not both \(read_back and read_back_spans\)",
        ),
        ({"read_back_spans": _spans, "delivers_nothing": True}, ValueError, "give one of"),
        ({"read_back_spans": "spans"}, TypeError, "read_back_spans must be an async function"),
        ({}, ValueError, "read_back_spans=<async function"),
    ],
)
def test_the_span_form_is_checked(options: dict[str, Any], error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        EventSinkSamples(**options)


def test_the_span_form_alone_is_accepted() -> None:
    samples = EventSinkSamples(read_back_spans=_spans)
    assert samples.read_back is None
    assert samples.read_back_spans is _spans


@pytest.mark.asyncio
async def test_end_open_spans_ends_each_open_run_interrupted_and_the_sink_goes_on() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    sink = OpenTelemetrySink(provider)
    events = [e for e in _delivery_batch([]) if e.run_id.endswith("-0")][:3]
    for event in events:
        await sink.emit(event)
    assert exporter.get_finished_spans() == ()  # the run is open: nothing exported yet
    sink.end_open_spans()
    ended = exporter.get_finished_spans()
    assert ended
    assert {span.attributes["error.type"] for span in ended if span.attributes} == {"interrupted"}
    assert span_delivery_problems(events, ended) == []
    sink.end_open_spans()  # nothing open: nothing more
    assert len(exporter.get_finished_spans()) == len(ended)
    later = Event(
        run_id=events[0].run_id, sequence=99, record=ModelCallIntent(step_index=9, prompt_chars=1)
    )
    await sink.emit(later)  # a resumed segment
    assert "open_runs=1" in repr(sink)
