"""The tool agent's seam implementations, tagged for the conformance plugin.

``pytest --polyloop-conformance examples/tool_agent`` runs polyloop's contract suites against
each tagged fixture below and prints the conformance report. Without the flag this module holds
no tests (the tags do nothing).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from tool_agent import SCRIPT, build_registry

import pytest_polyloop
from polyloop import Action, Message, ModelReply
from polyloop.executors import ToolExecutor
from polyloop.models import ScriptedModel
from polyloop.parsers import JsonToolCallParser
from polyloop.stores import SQLiteStore
from polyloop.testing import ActionSamples, ModelSamples, ParserSamples, StoreSamples


@pytest_polyloop.seam("action_executor", samples="tool_samples")
@pytest.fixture
def tool_executor() -> ToolExecutor:
    return ToolExecutor(build_registry())


@pytest.fixture
def tool_samples() -> ActionSamples:
    return ActionSamples(
        executes_cleanly=Action(
            text="calculator 6 * 7", tool_name="calculator", tool_args={"expression": "6 * 7"}
        ),
        executes_but_errors=Action(
            text="calculator 1 / 0", tool_name="calculator", tool_args={"expression": "1 / 0"}
        ),
        refused=Action(text="shell rm -rf /", tool_name="shell", tool_args={"cmd": "rm -rf /"}),
    )


@pytest_polyloop.seam("decision_parser", samples="json_replies")
@pytest.fixture
def json_parser() -> JsonToolCallParser:
    return JsonToolCallParser()


@pytest.fixture
def json_replies() -> ParserSamples:
    return ParserSamples(
        action_reply=ModelReply(text=SCRIPT[0]),
        invalid_reply=ModelReply(text="The answer is probably 42."),
        final_reply=ModelReply(text='{"final_answer": "42"}'),
    )


@pytest_polyloop.seam("model_client", samples="scripted_conversation")
@pytest.fixture
def scripted_model() -> ScriptedModel:
    return ScriptedModel(SCRIPT)


@pytest.fixture
def scripted_conversation() -> ModelSamples:
    return ModelSamples(
        messages=[
            Message(role="system", content="You solve arithmetic tasks with tools."),
            Message(role="user", content="What is 6 times 7?"),
        ],
        # The scripted model's only failure is running out of replies: it must raise.
        failing_client_factory=lambda base_url: ScriptedModel([]),
        failure_bound_s=1.0,
    )


@pytest_polyloop.seam("run_store", samples="sqlite_store_samples")
@pytest_asyncio.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    async with open_sqlite_store(tmp_path) as store:
        yield store


def open_sqlite_store(directory: Path) -> SQLiteStore:
    """The store over ``runs.db`` in ``directory``: the crash promises reopen it through this."""
    return SQLiteStore(directory / "runs.db")


@pytest.fixture
def sqlite_store_samples() -> StoreSamples:
    return StoreSamples(factory="test_conformance:open_sqlite_store")
