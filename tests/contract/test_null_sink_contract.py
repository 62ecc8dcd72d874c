"""NullSink keeps every promise of the event-sink contract (cancellation: not applicable); it
discards every event by design, which its samples declare, so delivery is not applicable."""

from __future__ import annotations

import pytest

from polyloop.events import NullSink
from polyloop.testing import EventSinkContract, EventSinkSamples


class TestNullSinkContract(EventSinkContract):
    @pytest.fixture
    def event_sink(self) -> NullSink:
        return NullSink()

    @pytest.fixture
    def sink_samples(self) -> EventSinkSamples:
        return EventSinkSamples(delivers_nothing=True)
