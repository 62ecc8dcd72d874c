"""Cancellation bugs a timed probe finds only on some machines, each beside a correct twin
(weakness class 13, issue 21).

The probes used to cancel after a few event-loop ticks and then after fractions of one call's
measured duration. Where a fraction lands depends on how long each await takes, so the two
slow-start implementations were ``held`` on every run: every timed probe landed in the slow
start, never in the quick await after it that swallows. The handshake one was caught only
because the timed probes' sub-millisecond sleeps happened to let the loop run a few ticks. The
probes now cancel at counted await points, so the verdict is a property of the code.
"""

from __future__ import annotations

import asyncio
from typing import Any

from polyloop import Action, ActionOutcome, ActionStatus, ModelReply


def _outcome(action: Action) -> ActionOutcome:
    if action.text.startswith("fail"):
        return ActionOutcome(status=ActionStatus.EXECUTED, observation="Error: it failed")
    return ActionOutcome(status=ActionStatus.EXECUTED, observation="hello")


class HandshakeExecutor:
    """Correct: a short protocol handshake (four quick round trips), then the action."""

    async def execute(self, action: Action) -> ActionOutcome:
        for _ in range(4):
            await asyncio.sleep(0)
        await asyncio.sleep(0)
        return _outcome(action)


class SwallowsAfterTheHandshake(HandshakeExecutor):
    """Catches the cancellation around the await after the handshake and reports the action as
    run: past the three ticks the probes counted."""

    async def execute(self, action: Action) -> ActionOutcome:
        for _ in range(4):
            await asyncio.sleep(0)
        try:
            await asyncio.sleep(0)
        except asyncio.CancelledError:
            return ActionOutcome(status=ActionStatus.EXECUTED, observation="interrupted")
        return _outcome(action)


class SlowStartExecutor:
    """Correct: a slow start (a container boot), then a quick call."""

    async def execute(self, action: Action) -> ActionOutcome:
        await asyncio.sleep(0.2)
        await asyncio.sleep(0.002)
        return _outcome(action)


class SwallowsAfterASlowStart(SlowStartExecutor):
    """Swallows the cancellation in the quick call after its slow start: every timed probe
    (a fraction of the whole call's duration) landed in the slow start."""

    async def execute(self, action: Action) -> ActionOutcome:
        await asyncio.sleep(0.2)
        try:
            await asyncio.sleep(0.002)
        except asyncio.CancelledError:
            return ActionOutcome(status=ActionStatus.EXECUTED, observation="interrupted")
        return _outcome(action)


class WarmUpModel:
    """Correct: a slow connection warm-up, then the request."""

    async def complete(self, messages: Any) -> ModelReply:
        await asyncio.sleep(0.2)
        await asyncio.sleep(0.002)
        return ModelReply(text="hello", call_id="warm-1")


class SwallowsAfterWarmingUp(WarmUpModel):
    """Returns an empty reply when cancelled during the request that follows its warm-up."""

    async def complete(self, messages: Any) -> ModelReply:
        await asyncio.sleep(0.2)
        try:
            await asyncio.sleep(0.002)
        except asyncio.CancelledError:
            return ModelReply(text="", call_id="warm-1")
        return ModelReply(text="hello", call_id="warm-1")
