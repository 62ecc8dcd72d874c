"""The probe of ``action_executor.cancelled_action_does_not_leak``.

Cancelling ``execute`` cancels the awaiting task, not necessarily the code it started: an
executor that runs the action in a thread (``asyncio.to_thread``, a thread pool) leaves it
running, and if that code writes into a buffer the executor shares between actions, its output
turns up in the next action's observation — the model then reads, as the result of its new
action, what an action it no longer waits for printed. The probe starts the implementer's
``keeps_printing(marker)`` action (it prints a fresh marker every few milliseconds for seconds),
cancels it mid-way, then runs ``executes_cleanly`` back to back for a while: no observation may
show the marker. Back to back, so a leaked line lands inside one of the calls however the
executor's buffer is reset; the verdict does not hinge on when a line is written.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from polyloop.testing._shared._cancel import UNWIND_GRACE_S
from polyloop.types import ActionOutcome

__all__ = ["CANCEL_AFTER_S", "WATCH_S", "Leak", "cancelled_output_leak", "fresh_marker"]

#: How long the printing action runs before it is cancelled (it must run for seconds).
CANCEL_AFTER_S = 0.3
#: How long the clean action is run back to back after the cancel, at most ``_MAX_CALLS`` times.
WATCH_S = 1.0
_MAX_CALLS = 200


@dataclass(frozen=True)
class Leak:
    """The call after the cancel whose observation showed the marker, and that observation."""

    call: int
    observation: str


def fresh_marker() -> str:
    """A marker no correct observation contains by chance."""
    return f"polyloop-leak-{uuid.uuid4().hex[:12]}"


async def cancelled_output_leak(
    start_printing: Callable[[], Awaitable[ActionOutcome]],
    run_clean: Callable[[], Awaitable[ActionOutcome]],
    marker: str,
) -> Leak | ActionOutcome | None:
    """Cancel the printing action after :data:`CANCEL_AFTER_S`, then watch the clean one.

    Returns the :class:`Leak`, ``None`` when no observation showed the marker, or the printing
    action's own outcome when it returned before it could be cancelled."""
    task = asyncio.ensure_future(start_printing())
    done, _ = await asyncio.wait({task}, timeout=CANCEL_AFTER_S)
    if done:
        return task.result()
    task.cancel()
    # How it unwinds is cancellation_propagates_and_is_not_swallowed's business, not this one's.
    await asyncio.wait({task}, timeout=UNWIND_GRACE_S)
    if task.done() and not task.cancelled():
        with contextlib.suppress(BaseException):
            task.exception()  # retrieved, so asyncio logs nothing
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WATCH_S
    for call in range(1, _MAX_CALLS + 1):
        outcome = await run_clean()
        if marker in outcome.observation:
            return Leak(call, outcome.observation)
        if loop.time() >= deadline:
            break
    return None
