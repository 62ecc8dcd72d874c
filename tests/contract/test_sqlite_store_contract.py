"""SQLiteStore keeps every RunStore promise of the contract kit, the crash promises included."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from polyloop.stores import SQLiteStore
from polyloop.testing import RunStoreContract, StoreSamples
from tests.contract.store_factories import open_sqlite_store


class TestSQLiteStoreContract(RunStoreContract):
    @pytest_asyncio.fixture
    async def run_store(  # type: ignore[override]  # pytest types a fixture as an object
        self, tmp_path: Path
    ) -> AsyncIterator[SQLiteStore]:
        async with open_sqlite_store(tmp_path) as store:
            yield store

    @pytest.fixture
    def store_samples(self) -> StoreSamples:
        return StoreSamples(factory="tests.contract.store_factories:open_sqlite_store")
