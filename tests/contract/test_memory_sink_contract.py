"""MemorySink keeps every promise of the event-sink contract (cancellation: not applicable);
what it delivered is its ``events`` list."""

from __future__ import annotations

import pytest

from polyloop.events import MemorySink
from polyloop.testing import EventSinkContract, EventSinkSamples
from polyloop.types import Event


async def read_back(sink: MemorySink) -> list[Event]:
    return list(sink.events)


class TestMemorySinkContract(EventSinkContract):
    @pytest.fixture
    def event_sink(self) -> MemorySink:
        return MemorySink()

    @pytest.fixture
    def sink_samples(self) -> EventSinkSamples:
        return EventSinkSamples(read_back=read_back)
