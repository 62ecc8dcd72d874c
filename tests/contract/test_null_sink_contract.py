"""NullSink keeps every promise of the event-sink contract (cancellation: not applicable)."""

from __future__ import annotations

import pytest

from polyloop.events import NullSink
from polyloop.testing import EventSinkContract


class TestNullSinkContract(EventSinkContract):
    @pytest.fixture
    def event_sink(self) -> NullSink:
        return NullSink()
