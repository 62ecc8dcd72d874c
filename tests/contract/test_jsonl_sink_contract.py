"""JsonlSink keeps every EventSink promise of the contract kit; its delivery is read back from
the file, one event per line, as a consumer of the file reads it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from polyloop.events import JsonlSink
from polyloop.testing import EventSinkContract, EventSinkSamples
from polyloop.types import Event, record_from_json


async def read_back(sink: JsonlSink) -> list[Event]:
    if not sink.path.exists():
        return []
    events = []
    # "\n" only: a line may hold U+2028 or U+0085, where str.splitlines() would also cut.
    for line in sink.path.read_bytes().decode("utf-8").split("\n")[:-1]:
        data = json.loads(line)
        record = record_from_json(json.dumps(data["record"]))
        events.append(Event(run_id=data["run_id"], sequence=data["sequence"], record=record))
    return events


class TestJsonlSinkContract(EventSinkContract):
    @pytest_asyncio.fixture
    async def event_sink(  # type: ignore[override]  # pytest types a fixture as an object
        self, tmp_path: Path
    ) -> AsyncIterator[JsonlSink]:
        async with JsonlSink(tmp_path / "events.jsonl") as sink:
            yield sink

    @pytest.fixture
    def sink_samples(self) -> EventSinkSamples:
        return EventSinkSamples(read_back=read_back)
