"""LoggingSink keeps every EventSink promise of the contract kit."""

from __future__ import annotations

import logging

import pytest

from polyloop.events import LoggingSink
from polyloop.testing import EventSinkContract


class TestLoggingSinkContract(EventSinkContract):
    @pytest.fixture
    def event_sink(self) -> LoggingSink:
        return LoggingSink(logging.getLogger("tests.contract.logging_sink"), level=logging.DEBUG)
