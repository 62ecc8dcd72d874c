"""MemoryStore keeps every promise of the run-store contract."""

from __future__ import annotations

import pytest

from polyloop.stores import MemoryStore
from polyloop.testing import RunStoreContract


class TestMemoryStoreContract(RunStoreContract):
    @pytest.fixture
    def run_store(self) -> MemoryStore:
        return MemoryStore()
