"""The shared body of the three cancellation promises (executor, model client, event sink).

A call that swallows ``CancelledError`` usually does so around its *main* await — the request,
the child's answer — after a first await that finishes quickly (a connect, a lock,
``create_subprocess_exec``). Cancelling one tick in lands on that first await and misses the bug,
so every call is probed at several depths: a few event-loop ticks, then fractions of one
uncancelled call's measured duration. Each probe is a fresh call.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from polyloop.testing._shapes import short
from polyloop.testing._skips import not_applicable

# How long a cancelled call may take to unwind (close a connection, kill a child) before the
# suite calls it stuck. Generous: unwinding is allowed to do real I/O.
UNWIND_GRACE_S = 10.0
# Event-loop ticks before the shallow probes cancel: one reaches the first await, two and three
# the await after a quick first one (a connect that needs a tick or two).
PROBE_TICKS = (1, 2, 3)
# Fractions of an uncancelled call before the deep probes cancel: they reach the main await
# after a first one that takes real time (a process start, a TLS handshake).
PROBE_FRACTIONS = (0.25, 0.5, 0.75)
# A deep probe waits at most this long, so a slow call (a real model) keeps the suite bounded.
MAX_PROBE_DEPTH_S = 1.0

StartCall = Callable[[], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class _Depth:
    """How long a probe lets the call run before cancelling it: ``ticks`` or ``seconds``."""

    label: str
    ticks: int = 0
    seconds: float = 0.0

    async def wait(self) -> None:
        for _ in range(self.ticks):
            await asyncio.sleep(0)
        if self.seconds:
            await asyncio.sleep(self.seconds)


async def assert_cancellation_propagates(
    calls: Mapping[str, StartCall], *, promise: str, what: str
) -> None:
    """Cancel each call at several depths and demand ``CancelledError`` every time.

    ``calls`` maps a description (``"execute(action_samples.executes_cleanly)"``) to a function
    that starts a fresh call. Any probe whose task did not end in ``CancelledError`` fails the
    promise, naming the call and the depth. A probe that finds the call already finished
    (``task.cancel()`` returns ``False``) is no evidence either way; only when *every* probe
    of every call found it finished is the promise ``not_applicable`` — the call has no await
    point at which it could swallow a cancellation. That verdict does not depend on speed: a
    call with an await point is always still running one tick in.
    """
    cancelled_in_flight = 0
    for described, start in calls.items():
        for depth in await _depths(start):
            cancelled_in_flight += await _probe(start, depth, described)
    if not cancelled_in_flight:
        not_applicable(
            promise=promise,
            why=(
                f"{what} finished before every cancellation arrived (the first one after one "
                "event-loop tick), so it has no await point at which it could swallow one"
            ),
            verify_yourself=(
                "if your implementation can await (network, subprocess, a lock), write a test "
                "that makes it wait there, cancel the task and assert it raises CancelledError"
            ),
        )


async def _depths(start: StartCall) -> list[_Depth]:
    """The probe depths for one call: ticks first, then fractions of its measured duration."""
    loop = asyncio.get_running_loop()
    began = loop.time()
    with contextlib.suppress(Exception):  # only its duration matters; other promises judge it
        await start()
    measured = loop.time() - began
    shallow = [_Depth(f"{n} event-loop tick{'s' * (n > 1)}", ticks=n) for n in PROBE_TICKS]
    deep = [
        _Depth(
            f"{fraction:.0%} of an uncancelled call ({measured * 1000:.1f} ms)",
            ticks=1,
            seconds=min(measured * fraction, MAX_PROBE_DEPTH_S),
        )
        for fraction in PROBE_FRACTIONS
    ]
    return shallow + deep


async def _probe(start: StartCall, depth: _Depth, described: str) -> bool:
    """One fresh call cancelled after ``depth``. ``False``: it had finished before the cancel."""
    task: asyncio.Future[Any] = asyncio.ensure_future(start())
    await depth.wait()
    if not task.cancel():
        if not task.cancelled():
            task.exception()  # retrieve it, so asyncio does not log "never retrieved"
        return False
    await _demand_cancelled(task, f"{described}, cancelled after {depth.label},")
    return True


async def _demand_cancelled(task: asyncio.Future[Any], what: str) -> None:
    done, _ = await asyncio.wait({task}, timeout=UNWIND_GRACE_S)
    if not done:
        task.cancel()
        pytest.fail(
            f"{what} had not finished {UNWIND_GRACE_S:g} s later: the CancelledError was caught "
            "and the call went on (or hangs)",
            pytrace=False,
        )
    if task.cancelled():
        return
    error = task.exception()
    if error is None:
        pytest.fail(
            f"{what} returned {short(task.result())}: the CancelledError was swallowed",
            pytrace=False,
        )
    pytest.fail(
        f"{what} raised {type(error).__name__}: {short(str(error))} instead of letting "
        "CancelledError through",
        pytrace=False,
    )
