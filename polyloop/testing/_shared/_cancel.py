"""The shared body of the three cancellation promises (executor, model client, event sink).

A call that swallows ``CancelledError`` usually does so around its *main* await — the request,
the child's answer — after a first await that finishes quickly (a connect, a lock,
``create_subprocess_exec``). Cancelling one tick in lands on that first await and misses the bug,
so every call is probed at several of its await points.

The probes count await points, not time. One uncancelled call is run through a wrapper that
counts how often the call suspends (each time it hands a future, or a bare yield, to its task);
then each probe is a fresh call whose task cancels itself exactly at its *k*-th suspension. A
probe that waited a fraction of the measured duration instead landed wherever the machine's
speed put it, so the same implementation could be ``held`` on one run and ``not_applicable`` or
``violated`` on the next; counting makes the verdict a function of the code's await points.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Generator, Mapping
from typing import Any

import pytest

from polyloop._base._exception_text import exception_text
from polyloop.testing._shared._shapes import SHORT, short
from polyloop.testing._shared._skips import not_applicable

# How long a cancelled call may take to unwind (close a connection, kill a child) before the
# suite calls it stuck. Generous: unwinding is allowed to do real I/O.
UNWIND_GRACE_S = 10.0
# Every one of the first await points is probed (a swallow usually sits among the first few:
# after a connect, a lock, a process start); beyond them, a few spread up to the last one.
FIRST_AWAIT_POINTS = 6
SPREAD_AWAIT_POINTS = (0.25, 0.5, 0.75, 1.0)

StartCall = Callable[[], Awaitable[Any]]


class _Suspensions:
    """Awaits a call and counts its suspensions; cancels its own task at the ``cancel_at``-th.

    The call's awaits are driven one by one (``send``/``throw``), exactly as the task would
    drive them, so the call behaves as if awaited directly. ``Task.cancel()`` from inside the
    task's own step cancels the future the call is about to wait on: the ``CancelledError``
    arrives at that await point, wherever the machine's speed would have put a timed cancel.
    """

    def __init__(self, call: Awaitable[Any], cancel_at: int | None = None) -> None:
        self._call = call
        self._cancel_at = cancel_at
        self.count = 0
        # Set when the cancel was requested: the probe then judges how the call unwinds.
        self.cancelled_at_point: asyncio.Future[None] | None = None

    def __await__(self) -> Generator[Any, Any, Any]:
        # Named so: the time limit's report follows a local of this name to the hung call.
        awaiting = self._call
        steps = awaiting.__await__()
        value: Any = None
        error: BaseException | None = None
        while True:
            try:
                yielded = steps.send(value) if error is None else steps.throw(error)
            except StopIteration as stop:
                return stop.value
            self.count += 1
            if self.count == self._cancel_at:
                task = asyncio.current_task()
                assert task is not None  # a probe always runs in a task of its own
                task.cancel()
                if self.cancelled_at_point is not None:
                    self.cancelled_at_point.set_result(None)
            try:
                value, error = (yield yielded), None
            except BaseException as raised:  # delivered to the call, as the task would
                value, error = None, raised


async def assert_cancellation_propagates(
    calls: Mapping[str, StartCall], *, promise: str, what: str
) -> None:
    """Cancel each call at several of its await points and demand ``CancelledError`` each time.

    ``calls`` maps a description (``"execute(action_samples.executes_cleanly)"``) to a function
    that starts a fresh call. Any probe whose task did not end in ``CancelledError`` fails the
    promise, naming the call and the await point; so does a call made after the cancelled ones
    that never finishes (it hits the probe's time limit). Only when no call ever suspended — neither
    the counted one nor a probe — is the promise ``not_applicable``: the call has no await
    point at which it could swallow a cancellation. That is a property of the code, not of the
    machine's speed.
    """
    cancelled_in_flight = 0
    for described, start in calls.items():
        total = await _count_await_points(start)
        for point in _await_points_to_probe(total):
            cancelled_in_flight += await _probe(start, point, total, described)
    # The next call after the cancelled ones must still finish: a cancellation that skipped a
    # release (a lock, a pool slot, a session) makes every later call wait forever — the probe's
    # time limit then reports it, naming where that call waits.
    for start in calls.values():
        with contextlib.suppress(Exception):  # its result is other promises' business
            await start()
    if not cancelled_in_flight:
        not_applicable(
            promise=promise,
            why=(
                f"{what} finished without ever suspending (no await point that yields to the "
                "event loop), so there is no point at which it could swallow a cancellation"
            ),
            verify_yourself=(
                "if your implementation can await (network, subprocess, a lock), write a test "
                "that makes it wait there, cancel the task and assert it raises CancelledError"
            ),
        )


async def _count_await_points(start: StartCall) -> int:
    """How often one uncancelled call suspends; its result and errors are other promises'."""
    counter = _Suspensions(start())
    with contextlib.suppress(Exception):  # only its await points matter here
        await counter
    return counter.count


def _await_points_to_probe(total: int) -> list[int]:
    """The first few await points, then a spread up to the last; at least point 1.

    Point 1 is probed even for a call that did not suspend when counted, so one that suspends
    only sometimes is still caught when it does.
    """
    points = set(range(1, min(total, FIRST_AWAIT_POINTS) + 1)) | {1}
    points |= {max(1, round(total * fraction)) for fraction in SPREAD_AWAIT_POINTS}
    return sorted(points)


async def _probe(start: StartCall, point: int, total: int, described: str) -> bool:
    """One fresh call cancelled at await point ``point``. ``False``: it never got that far."""
    probe = _Suspensions(start(), cancel_at=point)
    reached = probe.cancelled_at_point = asyncio.get_running_loop().create_future()

    async def run() -> Any:
        return await probe

    task = asyncio.ensure_future(run())
    # Bounded by the probe's time limit: a call may take long to reach its await point.
    await asyncio.wait({task, reached}, return_when=asyncio.FIRST_COMPLETED)
    if not reached.done():
        reached.cancel()
        await _settle(task)
        return False
    where = f"{described}, cancelled at await point {point} of {total},"
    await _demand_cancelled(task, where)
    return True


async def _settle(task: asyncio.Future[Any]) -> None:
    """A probe that finished before its await point: retrieve its outcome."""
    if not task.cancelled():
        task.exception()  # retrieve it, so asyncio does not log "never retrieved"


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
        f"{what} raised {exception_text(error, limit=SHORT)} instead of letting "
        "CancelledError through",
        pytrace=False,
    )
