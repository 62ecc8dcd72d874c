"""OpenTelemetrySink keeps every EventSink promise of the contract kit (spans stay in memory)."""

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
