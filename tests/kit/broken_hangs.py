"""Implementations that hang the kit, each beside a correct twin (weakness class 11, issue 21).

Each has a real, ordinary bug that makes some later call never return — a lock or a pool slot
leaked by a cancelled call, a retry loop with no exit. The kit used to wait for such a call
forever, so pytest hung and no report was written; now every probe has a time limit.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from polyloop import Action, ActionOutcome, ActionStatus, FinalAnswer, InvalidDecision, ModelReply

# ------------------------------------------------------------------ a pooled tool session


class OneSessionExecutor:
    """Correct: one tool session, serialised by a lock released however the call ends."""

    def __init__(self) -> None:
        self._session = asyncio.Lock()

    async def execute(self, action: Action) -> ActionOutcome:
        async with self._session:
            return await self._run(action)

    @staticmethod
    async def _run(action: Action) -> ActionOutcome:
        await asyncio.sleep(0.002)
        if action.text.startswith("fail"):
            return ActionOutcome(status=ActionStatus.EXECUTED, observation="Error: it failed")
        return ActionOutcome(status=ActionStatus.EXECUTED, observation="hello")


class LeaksTheSessionWhenCancelled(OneSessionExecutor):
    """Releases the session only when the call returns: a cancelled call keeps it forever, and
    the next call waits for it forever."""

    async def execute(self, action: Action) -> ActionOutcome:
        await self._session.acquire()
        outcome = await self._run(action)
        self._session.release()
        return outcome


# ------------------------------------------------------------------ an HTTP-ish model client


class PooledModel:
    """Correct: a blocking connection pool of one (a thread semaphore, as a sync HTTP library
    keeps), the slot given back however the call ends."""

    def __init__(self) -> None:
        self._pool = threading.Semaphore(1)

    async def complete(self, messages: Any) -> ModelReply:
        self._pool.acquire()  # a sync pool: blocks the event loop while no slot is free
        try:
            await asyncio.sleep(0.002)
            return ModelReply(text=f"hello after {len(messages)} messages", call_id="pooled-1")
        finally:
            self._pool.release()


class LeaksAPoolSlotWhenCancelled(PooledModel):
    """Gives the slot back only on success: after one cancelled call, the next call blocks the
    whole event loop in ``acquire()`` — no await, so no asyncio timeout could ever fire."""

    async def complete(self, messages: Any) -> ModelReply:
        self._pool.acquire()
        await asyncio.sleep(0.002)
        self._pool.release()
        return ModelReply(text=f"hello after {len(messages)} messages", call_id="pooled-1")


# ------------------------------------------------------------------ a retrying parser


class RetryingParser:
    """Correct: "ACT <command>" / "FINAL <answer>", one retry after stripping a code fence."""

    def parse(self, reply: ModelReply) -> Action | FinalAnswer | InvalidDecision:
        text = reply.text
        for _ in range(2):
            parsed = self._once(text)
            if parsed is not None:
                return parsed
            text = text.strip().strip("`").strip()
        return InvalidDecision(feedback="Start your reply with ACT <command> or FINAL <answer>.")

    @staticmethod
    def _once(text: str) -> Action | FinalAnswer | None:
        text = text.strip()
        if text.startswith("ACT ") and text[4:].strip():
            command = text[4:].strip()
            return Action(text=command, tool_name="shell", tool_args={"cmd": command})
        if text.startswith("FINAL "):
            return FinalAnswer(text=text[6:].strip())
        return None


class RetriesUntilItParses(RetryingParser):
    """Strips and retries until the reply parses: a reply that never parses loops forever
    (synchronously: no event-loop timeout can interrupt it)."""

    def parse(self, reply: ModelReply) -> Action | FinalAnswer | InvalidDecision:
        text = reply.text
        while True:
            parsed = self._once(text)
            if parsed is not None:
                return parsed
            text = text.strip().strip("`").strip()
