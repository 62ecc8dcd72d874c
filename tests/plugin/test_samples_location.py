"""Samples the kit cannot use are a setup error located at the samples fixture that gave them,
not at the implementation's fixture (issue #32): the fixture to fix is the samples one."""

from __future__ import annotations

from pathlib import Path

from tests.plugin._sandbox import Project

BAD_FACTORY = """\
import pytest_asyncio

from polyloop.testing import StoreSamples
from tests.kit.broken_stores import SqliteLogStore


@pytest_polyloop.seam("run_store")
@pytest_asyncio.fixture
async def my_store(tmp_path):
    store = SqliteLogStore(tmp_path)
    yield store
    await store.aclose()


@pytest.fixture
def store_samples():
    return StoreSamples(factory="nope:missing")
"""

WRONG_TYPE = """\
@pytest.fixture
def wrong_samples():
    return {"executes_cleanly": "print(1)"}


@pytest_polyloop.seam("action_executor", samples="wrong_samples")
@pytest.fixture
def wrong_samples_executor():
    return SandboxExecutor()
"""


def _line_of(path: Path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def _fixture_at(path: Path, definition: str) -> str:
    """Where the report locates a fixture: its first line, the ``@pytest.fixture`` above the
    ``def`` (as an implementation's ``source``)."""
    return f"{path.relative_to(path.parents[1]).as_posix()}:{_line_of(path, definition) - 1}"


def test_a_store_factory_that_cannot_be_imported_is_located_at_the_samples_fixture(
    project: Project,
) -> None:
    conftest = project.conftest("tests", BAD_FACTORY)
    run = project.run("-k", "prefix_durability or returns")
    error = run.implementation("my_store")["setup_error"]
    assert error is not None, run.output
    assert error["type"] == "UnusableSamples"
    assert "nope:missing" in error["message"]
    assert error["location"] == _fixture_at(conftest, "def store_samples")
    section = run.output.split("polyloop conformance", 1)[1]
    assert f"at {_fixture_at(conftest, 'def store_samples')}: fix the fixture" in section


def test_samples_of_the_wrong_type_are_located_at_the_fixture_a_tag_names(
    project: Project,
) -> None:
    conftest = project.conftest("tests", WRONG_TYPE)
    run = project.run()
    error = run.implementation("wrong_samples_executor")["setup_error"]
    assert error["type"] == "UnusableSamples", run.output
    assert error["location"] == _fixture_at(conftest, "def wrong_samples():")


SUBCLASS = """\
import pytest

from polyloop.testing import RunStoreContract, StoreSamples
from tests.kit.broken_stores import SqliteLogStore


class TestMyStore(RunStoreContract):
    @pytest.fixture
    def run_store(self, tmp_path):
        return SqliteLogStore(tmp_path)

    @pytest.fixture
    def store_samples(self):
        return StoreSamples(factory="nope:missing")
"""


def test_a_subclass_samples_method_is_the_location(project: Project) -> None:
    module = project.write("tests/test_my_store.py", SUBCLASS)
    run = project.run("-k", "prefix_durability or returns")
    error = run.implementation("tests/test_my_store.py::TestMyStore")["setup_error"]
    assert error["type"] == "UnusableSamples", run.output
    assert error["location"] == _fixture_at(module, "def store_samples")
