"""OpenTelemetrySink keeps every EventSink promise of the contract kit (spans stay in memory).

``delivers_each_event_exactly_once`` stays unverifiable: the sink delivers spans, not events —
one span covers several events (a step opens at its intent and ends at its completion) and
carries a few attributes of them, not whole records — so no read-back gives the events back.
"""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from polyloop.events import OpenTelemetrySink
from polyloop.testing import EventSinkContract


class TestOpenTelemetrySinkContract(EventSinkContract):
    @pytest.fixture
    def event_sink(self) -> OpenTelemetrySink:
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
        return OpenTelemetrySink(provider)
