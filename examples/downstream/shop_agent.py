"""A downstream project's own seams: a model, a parser, an executor and an event sink of its
own, and polyloop's SQLite store opened its way. Nothing here comes from the polyloop checkout:
the project installs polyloop (a wheel) and imports it like any other package."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from polyloop import (
    Action,
    ActionOutcome,
    ActionStatus,
    Event,
    FinalAnswer,
    InvalidDecision,
    Message,
    ModelReply,
    ParsedReply,
)
from polyloop.stores import SQLiteStore

PRICES = {"apple": 3, "pear": 4}


class CannedModel:
    """Answers from a fixed list, chosen by how many assistant turns the history holds (so a
    resumed run gets the same reply). Past the end it raises, as a client out of retries would.
    """

    def __init__(self, replies: Sequence[str]) -> None:
        self.replies = list(replies)

    async def complete(self, messages: Sequence[Message]) -> ModelReply:
        await asyncio.sleep(0)  # a remote model is always a suspension point away
        turn = sum(1 for message in messages if message.role == "assistant")
        if turn >= len(self.replies):
            raise RuntimeError(f"no reply scripted for turn {turn}")
        return ModelReply(text=self.replies[turn], call_id=f"canned-{turn}")


class PriceParser:
    """``price <item>`` is an action, ``answer <text>`` a final answer."""

    feedback = "Reply with `price <item>` or `answer <text>`."

    def parse(self, reply: ModelReply) -> ParsedReply:
        verb, _, rest = reply.text.strip().partition(" ")
        if verb == "answer" and rest.strip():
            return FinalAnswer(text=rest.strip())
        if verb == "price" and rest.strip():
            return Action(text=reply.text, tool_name="price", tool_args={"item": rest.strip()})
        return InvalidDecision(feedback=self.feedback)


class PriceExecutor:
    """Looks prices up. An unknown item is the lookup's own error (the model can correct it);
    any tool but ``price`` is refused without running."""

    async def execute(self, action: Action) -> ActionOutcome:
        if action.tool_name != "price":
            return ActionOutcome(
                status=ActionStatus.NOT_EXECUTED, observation=f"no tool {action.tool_name!r}"
            )
        await asyncio.sleep(0)
        item = str((action.tool_args or {}).get("item", ""))
        if item not in PRICES:
            return ActionOutcome(status=ActionStatus.EXECUTED, observation=f"error: no {item!r}")
        return ActionOutcome(status=ActionStatus.EXECUTED, observation=f"{PRICES[item]} EUR")


class CollectingSink:
    """Keeps every event it is given, in order."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    async def emit(self, event: Event) -> None:
        self.events.append(event)


def open_store(directory: Path) -> SQLiteStore:
    """The project's store: polyloop's SQLite store over ``runs.db`` in ``directory``."""
    return SQLiteStore(directory / "runs.db")
