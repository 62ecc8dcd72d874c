"""A tag's ``samples=`` reaches a suite whose samples fixture is optional (``run_store`` →
``store_samples``): the crash promises are judged, and without samples say what turns them on."""

from __future__ import annotations

from tests.plugin._sandbox import Project

DURABILITY = "run_store.prefix_durability"

STORES = """\
import pytest_asyncio

from polyloop.testing import StoreSamples
from tests.kit.broken_stores import ForgetsToCommit, SqliteLogStore


@pytest_polyloop.seam("run_store", samples="committing_samples")
@pytest_asyncio.fixture
async def committing_store(tmp_path):
    store = SqliteLogStore(tmp_path)
    yield store
    await store.aclose()


@pytest.fixture
def committing_samples():
    return StoreSamples(factory="tests.kit.broken_stores:SqliteLogStore")


@pytest_polyloop.seam("run_store", samples="forgetful_samples")
@pytest_asyncio.fixture
async def forgetful_store(tmp_path):
    store = ForgetsToCommit(tmp_path)
    yield store
    await store.aclose()


@pytest.fixture
def forgetful_samples():
    return StoreSamples(factory="tests.kit.broken_stores:ForgetsToCommit")


@pytest_polyloop.seam("run_store")
@pytest_asyncio.fixture
async def unsampled_store(tmp_path):
    store = SqliteLogStore(tmp_path)
    yield store
    await store.aclose()
"""


def test_a_tags_store_samples_turn_prefix_durability_into_a_verdict(project: Project) -> None:
    project.conftest("tests", STORES)
    run = project.run("-k", "prefix_durability")
    assert run.outcome("committing_store", DURABILITY) == "held", run.output
    assert run.outcome("forgetful_store", DURABILITY) == "violated", run.output
    unsampled = run.promise("unsampled_store", DURABILITY)
    assert unsampled["outcome"] == "unverifiable", run.output
    turn_on = unsampled["verify_yourself"]
    assert "`store_samples`" in turn_on
    assert "StoreSamples(factory='package.module:callable')" in turn_on
