"""The shared body of the three cancellation promises (executor, model client, event sink)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

import pytest

from polyloop.testing._shapes import short
from polyloop.testing._skips import not_applicable

# How long a cancelled call may take to unwind (close a connection, kill a child) before the
# suite calls it stuck. Generous: unwinding is allowed to do real I/O.
UNWIND_GRACE_S = 10.0


async def assert_cancellation_propagates(call: Awaitable[Any], *, promise: str, what: str) -> None:
    """Start ``call`` as a task, let it run one tick, cancel it, and demand ``CancelledError``.

    ``task.cancel()`` returning ``False`` after one ``await asyncio.sleep(0)`` means the call
    had already finished: it has no await point where a cancellation could be swallowed, so the
    promise is ``not_applicable`` to it — a verdict that depends on how fast an implementation
    runs would make the promise flaky, and a flaky gate teaches people to ignore red.
    """
    task: asyncio.Future[Any] = asyncio.ensure_future(call)
    await asyncio.sleep(0)
    if not task.cancel():
        if not task.cancelled():
            task.exception()  # retrieve it, so asyncio does not log "never retrieved"
        not_applicable(
            promise=promise,
            why=(
                f"{what} finished within one event-loop tick, before the cancellation arrived, "
                "so it had no await point at which it could swallow one"
            ),
            verify_yourself=(
                "if your implementation can await (network, subprocess, a lock), write a test "
                "that makes it wait there, cancel the task and assert it raises CancelledError"
            ),
        )
    done, _ = await asyncio.wait({task}, timeout=UNWIND_GRACE_S)
    if not done:
        task.cancel()
        pytest.fail(
            f"{what} was cancelled but had not finished {UNWIND_GRACE_S:g} s later: the "
            "CancelledError was caught and the call went on (or hangs)",
            pytrace=False,
        )
    if task.cancelled():
        return
    error = task.exception()
    if error is None:
        pytest.fail(
            f"{what} was cancelled but returned {short(task.result())}: the CancelledError was "
            "swallowed",
            pytrace=False,
        )
    pytest.fail(
        f"{what} was cancelled but raised {type(error).__name__}: {short(str(error))} instead "
        "of letting CancelledError through",
        pytrace=False,
    )
