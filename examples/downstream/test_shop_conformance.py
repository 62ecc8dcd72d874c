"""The shop agent's five seams, tagged for polyloop's conformance plugin.

``pytest --polyloop-conformance`` (run in this directory, with polyloop installed) checks each
tagged fixture against polyloop's contract suites and prints the verdict.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from shop_agent import (
    CannedModel,
    CollectingSink,
    PriceExecutor,
    PriceParser,
    open_store,
)

import pytest_polyloop
from polyloop import Action, Message, ModelReply
from polyloop.stores import SQLiteStore
from polyloop.testing import ActionSamples, ModelSamples, ParserSamples, StoreSamples


@pytest_polyloop.seam("model_client", samples="shop_conversation")
@pytest.fixture
def canned_model() -> CannedModel:
    return CannedModel(["price apple", "answer 3 EUR"])


@pytest.fixture
def shop_conversation() -> ModelSamples:
    return ModelSamples(messages=[Message(role="user", content="What does an apple cost?")])


@pytest_polyloop.seam("decision_parser", samples="shop_replies")
@pytest.fixture
def price_parser() -> PriceParser:
    return PriceParser()


@pytest.fixture
def shop_replies() -> ParserSamples:
    return ParserSamples(
        action_reply=ModelReply(text="price apple"),
        invalid_reply=ModelReply(text="apples are nice"),
        final_reply=ModelReply(text="answer 3 EUR"),
    )


@pytest_polyloop.seam("action_executor", samples="shop_actions")
@pytest.fixture
def price_executor() -> PriceExecutor:
    return PriceExecutor()


@pytest.fixture
def shop_actions() -> ActionSamples:
    return ActionSamples(
        executes_cleanly=Action(text="price apple", tool_name="price", tool_args={"item": "apple"}),
        executes_but_errors=Action(
            text="price kiwi", tool_name="price", tool_args={"item": "kiwi"}
        ),
        refused=Action(text="delete apple", tool_name="delete", tool_args={"item": "apple"}),
    )


@pytest_polyloop.seam("event_sink")
@pytest.fixture
def collecting_sink() -> CollectingSink:
    return CollectingSink()


@pytest_polyloop.seam("run_store", samples="shop_store_samples")
@pytest_asyncio.fixture
async def shop_store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    async with open_store(tmp_path) as store:
        yield store


@pytest.fixture
def shop_store_samples() -> StoreSamples:
    # Imported by name in a child process that the crash promises kill mid-append.
    return StoreSamples(factory="shop_agent:open_store")
