"""JsonlSink keeps every EventSink promise of the contract kit."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from polyloop.events import JsonlSink
from polyloop.testing import EventSinkContract


class TestJsonlSinkContract(EventSinkContract):
    @pytest_asyncio.fixture
    async def event_sink(  # type: ignore[override]  # pytest types a fixture as an object
        self, tmp_path: Path
    ) -> AsyncIterator[JsonlSink]:
        async with JsonlSink(tmp_path / "events.jsonl") as sink:
            yield sink
