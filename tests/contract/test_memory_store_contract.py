"""MemoryStore keeps every promise of the run-store contract; the crash promises do not apply
to it (it keeps nothing across processes, by design)."""

from __future__ import annotations

import pytest

from polyloop.stores import MemoryStore
from polyloop.testing import RunStoreContract, StoreSamples


class TestMemoryStoreContract(RunStoreContract):
    @pytest.fixture
    def run_store(self) -> MemoryStore:
        return MemoryStore()

    @pytest.fixture
    def store_samples(self) -> StoreSamples:
        return StoreSamples(in_memory=True)
