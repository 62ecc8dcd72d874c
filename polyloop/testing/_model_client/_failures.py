"""``model_client.failure_is_an_exception``: each endpoint failure must come out as an exception.

Every failure of :data:`~polyloop.testing._model_client._misbehaving_http.FAILURES` gets a fresh
client from the implementer's factory, all at once on paths of their own (the promise costs at most
one ``failure_bound_s``, not one per failure); a ``complete()`` that returns, or that is still
running when the bound is over, is a problem. The ``trickle`` body lasts longer than the bound,
so only a client with a deadline for the whole request gives up on it in time.

The calls share one event loop, so the time one client spends without yielding (the ``openai``
SDK loads its SSL certificates synchronously on its first call: up to half a second each on a
loaded machine) would be charged to every other call's bound. Each call's synchronous steps
are timed (:class:`_Steps`); a call still running at its bound is given the time the *other*
calls held the loop during its window, so a call pays only for itself. A client that hangs
because it waits on the others (a lock shared by all instances) is still caught: waiting does
not hold the loop.

Nor is the machine's load charged to the client: on a busy CI host the loop's thread may be
ready to run and not given a CPU (every timer of a client whose time is a sum of steps then
fires late). Where Linux tells that time (``/proc/thread-self/schedstat``: time spent waiting
on a run queue), a call still running at its bound is also given the time the loop's thread
waited for a CPU in its window. A hung client waits in the kernel for an answer, not for a CPU,
so it is not given that time. All that is given is capped at :data:`_GRANT_AT_MOST` bounds.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable, Coroutine, Generator, Iterable, Sequence
from typing import Any

from polyloop._base._exception_text import exception_text
from polyloop.testing._model_client._misbehaving_http import (
    FAILURES,
    SWEPT_FAILURES,
    fail_from_now,
    misbehaving_endpoint,
)
from polyloop.testing._shared._shapes import mismatch, short
from polyloop.types import Message, ModelReply

__all__ = ["close_client", "failure_problems", "golden_problems"]

_ALL = {**FAILURES, **SWEPT_FAILURES}
_SETTLE_ITERATIONS = 100
#: Below this, the others' hold on the loop is scheduling noise, not owed to a call.
_OWED_AT_LEAST_S = 0.01
#: The most a call is given beyond its bound, in bounds: past it, the machine is too loaded to
#: judge and the call is reported still running.
_GRANT_AT_MOST = 3.0
#: Linux: this thread's time on the CPU and time waiting for one (ns), its first two fields.
_SCHEDSTAT = "/proc/thread-self/schedstat"
#: How much longer than the bound the ``trickle`` body takes: it must outlast the bound.
_TRICKLE_PAST_BOUND_S = 1.0
_HINTS = {
    "trickle": (
        " (each byte came well within a per-read timeout: bound the whole request, e.g. with "
        "asyncio.timeout around it)"
    ),
}


class _Busy:
    """How long, in all, the calls of one run held the event loop (their synchronous steps)."""

    def __init__(self) -> None:
        self.seconds = 0.0


def _waited_for_cpu_s() -> float:
    """How long, in all, this thread was ready to run and not running (0 where unknown)."""
    try:
        with open(_SCHEDSTAT, encoding="ascii") as stat:
            return int(stat.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


class _Steps:
    """Awaits ``coroutine`` step by step, timing each step (the time it held the loop) into
    ``own`` and the run's shared :class:`_Busy`. Values, exceptions and a cancellation pass
    through unchanged."""

    def __init__(self, coroutine: Coroutine[Any, Any, Any], busy: _Busy) -> None:
        self.coroutine = coroutine
        self.busy = busy
        self.own = 0.0

    def _step(self, value: Any, error: BaseException | None) -> Any:
        started = time.perf_counter()
        try:
            if error is not None:
                return self.coroutine.throw(error)
            return self.coroutine.send(value)
        finally:
            spent = time.perf_counter() - started
            self.own += spent
            self.busy.seconds += spent

    def __await__(self) -> Generator[Any, Any, Any]:
        value: Any = None
        error: BaseException | None = None
        while True:
            try:
                yielded = self._step(value, error)
            except StopIteration as stop:
                return stop.value
            try:
                value, error = (yield yielded), None
            except GeneratorExit:
                self.coroutine.close()
                raise
            except BaseException as thrown:  # a cancellation, passed on to the call
                value, error = None, thrown


async def _one_failure(
    client: Any, base_url: str, bound_s: float, messages: list[Message], busy: _Busy
) -> str | None:
    failure = base_url.rsplit("/", 2)[-2]
    what = f"against an endpoint that {_ALL[failure]} ({failure})"
    try:
        good = int(failure.split("-")[1]) if failure.startswith("after-") else 0
        for _ in range(good):  # the same client serves good replies first (their shape: elsewhere)
            with contextlib.suppress(Exception):
                async with asyncio.timeout(bound_s):
                    await client.complete(list(messages))
        if good:
            fail_from_now(base_url)
        return await _judged_call(client, what, failure, bound_s, messages, busy)
    finally:
        await close_client(client)


async def _judged_call(
    client: Any, what: str, failure: str, bound_s: float, messages: list[Message], busy: _Busy
) -> str | None:
    steps = _Steps(client.complete(list(messages)), busy)

    async def complete() -> Any:
        return await steps

    others_before, waited_before = busy.seconds, _waited_for_cpu_s()
    call = asyncio.ensure_future(complete())
    try:
        await asyncio.wait({call}, timeout=bound_s)
        granted = 0.0
        while not call.done():  # the others' and the machine's hold in this window: not the call's
            held = busy.seconds - others_before - steps.own + _waited_for_cpu_s() - waited_before
            owed = min(held, _GRANT_AT_MOST * bound_s) - granted
            if owed < _OWED_AT_LEAST_S:
                break
            granted += owed
            await asyncio.wait({call}, timeout=owed)
        await _let_due_timers_finish(call)
        if not call.done():
            hint = _HINTS.get(failure, "")
            given = (
                f" (and {granted:.2f} s given back: other calls or a busy machine held the loop)"
                if granted
                else ""
            )
            return (
                f"{what}: complete() was still running after failure_bound_s={bound_s:g} s"
                f"{given}{hint}"
            )
        if call.exception() is None:
            return f"{what}: complete() returned {short(call.result())} instead of raising"
        return None
    finally:
        if not call.done():
            call.cancel()
            await asyncio.wait({call})


async def _let_due_timers_finish(call: asyncio.Future[Any]) -> None:
    """On a stalled machine the client's own timeout and the bound come due in the same loop
    iteration; the client's, due first, has then started raising but not finished. Give what
    is already under way a few iterations (no more time) before judging the call hung."""
    for _ in range(_SETTLE_ITERATIONS):
        if call.done():
            return
        await asyncio.sleep(0)


async def close_client(client: Any) -> None:
    """Close a client the kit built, if it can be closed (``aclose`` or ``close``)."""
    close = getattr(client, "aclose", None) or getattr(client, "close", None)
    if callable(close):
        result = close()
        if asyncio.iscoroutine(result):
            await result


async def failure_problems(
    factory: Callable[[str], Any],
    bound_s: float,
    messages: list[Message],
    failures: Iterable[str] = tuple(_ALL),
) -> list[str]:
    """One line per endpoint failure that ``complete()`` did not raise on within the bound
    (every failure of the catalogue and every swept one unless ``failures`` names some)."""
    async with misbehaving_endpoint(trickle_s=bound_s + _TRICKLE_PAST_BOUND_S) as root:
        urls = [f"{root}/{failure}/v1" for failure in failures]
        # Every client is built before any bound starts: building one may block the event loop
        # (an SSL context, a connection pool), and no call's bound may pay for the others'.
        clients: list[Any] = []
        try:
            for url in urls:
                clients.append(factory(url))
        except BaseException:
            for client in clients:
                await close_client(client)
            raise
        busy = _Busy()
        results = await asyncio.gather(
            *(
                _one_failure(client, url, bound_s, messages, busy)
                for client, url in zip(clients, urls, strict=True)
            )
        )
    return [problem for problem in results if problem is not None]


_GOLDEN_ROUNDS = 2  # the golden bodies in turn on one client, this many times over


async def _golden_reply(client: Any, messages: list[Message], bound_s: float) -> Any:
    """The reply, or a line saying what ``complete()`` raised (the caller names the place)."""
    try:
        async with asyncio.timeout(bound_s):
            return await client.complete(list(messages))
    except Exception as error:  # reported as this promise's problem, not a crash of the suite
        return f"complete() raised {exception_text(error, limit=200)}"


async def golden_problems(
    factory: Callable[[str], Any],
    bound_s: float,
    messages: list[Message],
    golden: Sequence[tuple[Any, ModelReply]],
) -> list[str]:
    """One line per golden response whose reply differs from the stated one: each on a client
    of its own, then all of them in turn, twice, on one client."""
    bodies = tuple(json.dumps(body).encode() for body, _ in golden)
    problems: list[str] = []
    async with misbehaving_endpoint(golden=bodies) as root:
        plan = [([index], f"{root}/golden-{index}/v1") for index in range(len(golden))]
        plan.append(([*range(len(golden))] * _GOLDEN_ROUNDS, f"{root}/golden-all/v1"))
        for indexes, url in plan:
            client = factory(url)
            try:
                for call, index in enumerate(indexes, start=1):
                    where = f"golden_responses[{index}] (call {call} on this client)"
                    got = await _golden_reply(client, messages, bound_s)
                    found = (
                        got if isinstance(got, str) else mismatch(golden[index][1], got, "reply")
                    )
                    if found is not None:
                        problems.append(f"{where}: {found}")
            finally:
                await close_client(client)
            if problems:
                return problems
    return problems
