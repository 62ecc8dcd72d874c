"""PostgresStore keeps every RunStore promise of the contract kit (on a fresh database)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from polyloop.stores import PostgresStore
from polyloop.testing import RunStoreContract

pytestmark = [pytest.mark.postgres]


class TestPostgresStoreContract(RunStoreContract):
    @pytest_asyncio.fixture
    async def run_store(  # type: ignore[override]  # pytest types a fixture as an object
        self, postgres_database_dsn: str
    ) -> AsyncIterator[PostgresStore]:
        async with PostgresStore(postgres_database_dsn) as store:
            yield store
