"""The run-store suite.

The store is the intent log a crashed run is resumed from, so everything it hands back must be
exactly what was appended — value and type — and its fences (exclusive start, nothing after the
finish, ``sequence``) are what keep a second process from repeating an action. Every promise
uses fresh run ids (``_run_ids``: 128 characters across the whole grammar, mixed case, ids of
one promise differing only in their last characters — some only in case — each carrying a
``uuid4``) and checks "absent before, present after": the store may already hold other runs (a
shared database).
"""

from __future__ import annotations

import pytest

from polyloop.ports import RunStore
from polyloop.testing._run_store._append_rules import AppendRules
from polyloop.testing._run_store._batch_promises import BatchPromises
from polyloop.testing._run_store._crash_promises import CrashAndPowerLoss
from polyloop.testing._run_store._listing import IndexAndListing
from polyloop.testing._shared._base import (
    ContractBase,
    missing_fixture,
)
from polyloop.testing._shared._samples import StoreSamples

__all__ = ["RunStoreContract"]


class RunStoreContract(
    AppendRules, BatchPromises, IndexAndListing, CrashAndPowerLoss, ContractBase
):
    """Inherit this and override ``run_store`` (return a fresh, open store).

    Records are the library's own, so no samples are needed — except to check the two crash
    promises: a ``store_samples`` fixture (a method here, or beside a tagged fixture), or the
    fixture a tag's ``samples=`` names, returns :class:`~polyloop.testing.StoreSamples` naming a
    factory that reopens your store's data (from another process too). The store may
    be shared with other runs (a real database); every promise works on fresh ``uuid4`` run ids.
    """

    seam = "run_store"
    samples_fixture = None
    optional_samples_fixture = "store_samples"

    @pytest.fixture
    def store_samples(self) -> StoreSamples | None:
        """Optional: ``StoreSamples(factory="package.module:callable")`` turns the two crash
        promises on. Override this fixture (or define one of this name outside the class: it is
        read from there); the default ``None`` leaves them unverifiable."""
        return None

    @pytest.fixture
    def run_store(self) -> RunStore:
        """A fresh store. Override this fixture (an async one may open and close it)."""
        missing_fixture(
            "RunStoreContract",
            "run_store",
            "a fresh, open instance of your store (any object with async append(run_id, "
            "record, *, sequence), read_log(run_id) and run_ids()); use a "
            "@pytest_asyncio.fixture that yields it if it must be opened or closed",
        )
