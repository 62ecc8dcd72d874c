"""SQLiteStore keeps every RunStore promise of the contract kit."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from polyloop.stores import SQLiteStore
from polyloop.testing import RunStoreContract


class TestSQLiteStoreContract(RunStoreContract):
    @pytest_asyncio.fixture
    async def run_store(  # type: ignore[override]  # pytest types a fixture as an object
        self, tmp_path: Path
    ) -> AsyncIterator[SQLiteStore]:
        async with SQLiteStore(tmp_path / "runs.db") as store:
            yield store
