"""OpenTelemetrySink keeps every EventSink promise of the contract kit (spans stay in memory).

Its far end is a trace, not events: one span carries several events (a model call opens at its
intent and ends at its reply) and keeps a few fields of each as attributes. So its delivery is
read back as spans (``EventSinkSamples(read_back_spans=...)``): the sink ends the spans it
still holds open, and the in-memory exporter on its provider gives every span it received. The
sink records content (``capture_content=True``) so that the texts the spans keep are compared
with the records too.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from polyloop.events import OpenTelemetrySink
from polyloop.testing import EventSinkContract, EventSinkSamples


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


class TestOpenTelemetrySinkContract(EventSinkContract):
    @pytest.fixture
    def event_sink(self, exporter: InMemorySpanExporter) -> OpenTelemetrySink:
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        return OpenTelemetrySink(provider, capture_content=True)

    @pytest.fixture
    def sink_samples(self, exporter: InMemorySpanExporter) -> EventSinkSamples:
        async def read_back_spans(sink: OpenTelemetrySink) -> Sequence[ReadableSpan]:
            sink.end_open_spans()  # runs the stream left unfinished: their spans end now
            got = exporter.get_finished_spans()
            exporter.clear()  # each read-back gives the spans exported since the last one
            return got

        return EventSinkSamples(read_back_spans=read_back_spans)
