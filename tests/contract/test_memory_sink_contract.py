"""MemorySink keeps every promise of the event-sink contract (cancellation: not applicable)."""

from __future__ import annotations

import pytest

from polyloop.events import MemorySink
from polyloop.testing import EventSinkContract


class TestMemorySinkContract(EventSinkContract):
    @pytest.fixture
    def event_sink(self) -> MemorySink:
        return MemorySink()
