"""``model_client.failure_is_an_exception``: each endpoint failure must come out as an exception.

Every failure of :data:`~polyloop.testing._misbehaving_http.FAILURES` gets a fresh client from
the implementer's factory, all at once on paths of their own (the promise costs at most one
``failure_bound_s``, not one per failure); a ``complete()`` that returns, or that is still
running when the bound is over, is a problem. The ``trickle`` body lasts longer than the bound,
so only a client with a deadline for the whole request gives up on it in time.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from polyloop.testing._misbehaving_http import (
    FAILURES,
    SWEPT_FAILURES,
    fail_from_now,
    misbehaving_endpoint,
)
from polyloop.testing._shapes import mismatch, short
from polyloop.types import Message, ModelReply

__all__ = ["failure_problems", "golden_problems"]

_ALL = {**FAILURES, **SWEPT_FAILURES}
_SETTLE_ITERATIONS = 100
#: How much longer than the bound the ``trickle`` body takes: it must outlast the bound.
_TRICKLE_PAST_BOUND_S = 1.0
_HINTS = {
    "trickle": (
        " (each byte came well within a per-read timeout: bound the whole request, e.g. with "
        "asyncio.timeout around it)"
    ),
}


async def _one_failure(
    client: Any, base_url: str, bound_s: float, messages: list[Message]
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
        return await _judged_call(client, what, failure, bound_s, messages)
    finally:
        await _close(client)


async def _judged_call(
    client: Any, what: str, failure: str, bound_s: float, messages: list[Message]
) -> str | None:
    call = asyncio.ensure_future(client.complete(list(messages)))
    try:
        await asyncio.wait({call}, timeout=bound_s)
        await _let_due_timers_finish(call)
        if not call.done():
            hint = _HINTS.get(failure, "")
            return f"{what}: complete() was still running after failure_bound_s={bound_s:g} s{hint}"
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


async def _close(client: Any) -> None:
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
                await _close(client)
            raise
        results = await asyncio.gather(
            *(
                _one_failure(client, url, bound_s, messages)
                for client, url in zip(clients, urls, strict=True)
            )
        )
    return [problem for problem in results if problem is not None]


_GOLDEN_ROUNDS = 2  # the golden bodies in turn on one client, this many times over


async def _golden_reply(client: Any, messages: list[Message], bound_s: float, where: str) -> Any:
    try:
        async with asyncio.timeout(bound_s):
            return await client.complete(list(messages))
    except Exception as error:  # reported as this promise's problem, not a crash of the suite
        return f"{where}: complete() raised {type(error).__name__}: {short(str(error), 200)}"


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
                    got = await _golden_reply(client, messages, bound_s, where)
                    found = (
                        got if isinstance(got, str) else mismatch(golden[index][1], got, "reply")
                    )
                    if found is not None:
                        problems.append(f"{where}: {found}")
            finally:
                await _close(client)
            if problems:
                return problems
    return problems
