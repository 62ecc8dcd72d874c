"""LoggingSink keeps every EventSink promise of the contract kit; its delivery is read back from
a handler on its logger, which gets each event as the log record's ``polyloop_event``."""

from __future__ import annotations

import logging

import pytest

from polyloop.events import LoggingSink
from polyloop.testing import EventSinkContract, EventSinkSamples
from polyloop.types import Event


class _Collector(logging.Handler):
    """What a structured log shipper's handler receives: one log record per event."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


async def read_back(sink: LoggingSink) -> list[Event]:
    (collector,) = (h for h in sink.logger.handlers if isinstance(h, _Collector))
    return [getattr(record, "polyloop_event") for record in collector.records]  # noqa: B009


class TestLoggingSinkContract(EventSinkContract):
    @pytest.fixture
    def event_sink(self) -> LoggingSink:
        logger = logging.getLogger("tests.contract.logging_sink")
        for handler in [h for h in logger.handlers if isinstance(h, _Collector)]:
            logger.removeHandler(handler)  # one collector per test: a fresh delivery
        logger.addHandler(_Collector())
        logger.setLevel(logging.DEBUG)
        return LoggingSink(logger, level=logging.DEBUG)

    @pytest.fixture
    def sink_samples(self) -> EventSinkSamples:
        return EventSinkSamples(read_back=read_back)
