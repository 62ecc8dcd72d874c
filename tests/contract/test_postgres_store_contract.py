"""PostgresStore keeps every RunStore promise of the contract kit (on a fresh database), the
crash promises included."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from polyloop.stores import PostgresStore
from polyloop.testing import RunStoreContract, StoreSamples
from tests.contract.store_factories import POSTGRES_DSN_VARIABLE

pytestmark = [pytest.mark.postgres]


class TestPostgresStoreContract(RunStoreContract):
    @pytest_asyncio.fixture
    async def run_store(  # type: ignore[override]  # pytest types a fixture as an object
        self, postgres_database_dsn: str
    ) -> AsyncIterator[PostgresStore]:
        async with PostgresStore(postgres_database_dsn) as store:
            yield store

    @pytest.fixture
    def store_samples(
        self, postgres_database_dsn: str, monkeypatch: pytest.MonkeyPatch
    ) -> StoreSamples:
        # The writer processes inherit the environment: this is how they find the database.
        monkeypatch.setenv(POSTGRES_DSN_VARIABLE, postgres_database_dsn)
        return StoreSamples(factory="tests.contract.store_factories:open_postgres_store")
