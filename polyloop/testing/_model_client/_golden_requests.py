"""``model_client.sends_golden_requests``: each stated call sends the request stated for it.

What a client *sends* is behaviour its users depend on as much as what it reads: a parameter
dropped or renamed (``temperature``, ``max_tokens``, ``stop``, ``seed``), a message's role or
content under the wrong key, a number sent as another type — the endpoint still answers, every
reply is well formed, and the run is not the one the user configured. The kit serves each
:class:`~polyloop.testing.GoldenRequest` on a path of its own of the loopback endpoint, reads
back the first request that arrived there (a retry sends it again), and compares it with the
stated body as a pattern: stated keys only, each value type for type.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from polyloop._base._exception_text import exception_text
from polyloop.testing._model_client._failures import close_client
from polyloop.testing._model_client._misbehaving_http import misbehaving_endpoint, received
from polyloop.testing._shared._samples import GoldenRequest
from polyloop.testing._shared._shapes import short

__all__ = ["pattern_mismatch", "request_problems"]


def _typed(value: object) -> str:
    return f"{type(value).__name__} {short(value, 120)}"


def pattern_mismatch(expected: object, got: object, where: str) -> str | None:
    """Where ``got`` differs from the pattern ``expected``, or ``None``: a mapping states only
    its own keys, a list is compared element for element and must be as long, anything else
    must be of the same type and equal (``42``, ``42.0`` and ``True`` all differ)."""
    if isinstance(expected, Mapping):
        if not isinstance(got, Mapping):
            return f"{where}: expected an object, got {_typed(got)}"
        for key, value in expected.items():
            if key not in got:
                return f"{where}.{key}: missing (expected {_typed(value)}); it sent {sorted(got)}"
            found = pattern_mismatch(value, got[key], f"{where}.{key}")
            if found is not None:
                return found
        return None
    if isinstance(expected, list | tuple):
        if not isinstance(got, list):
            return f"{where}: expected a list of {len(expected)}, got {_typed(got)}"
        if len(got) != len(expected):
            return f"{where}: expected {len(expected)} items, got {len(got)}: {short(got, 200)}"
        for index, (want, have) in enumerate(zip(expected, got, strict=True)):
            found = pattern_mismatch(want, have, f"{where}[{index}]")
            if found is not None:
                return found
        return None
    if type(got) is not type(expected) or got != expected:
        return f"{where}: expected {_typed(expected)}, got {_typed(got)}"
    return None


async def _call(client: Any, request: GoldenRequest, bound_s: float) -> str | None:
    try:
        async with asyncio.timeout(bound_s):
            await client.complete(list(request.messages))
    except Exception as error:  # this promise's problem, not a crash of the suite
        return f"complete() raised {exception_text(error, limit=200)}"
    return None


def _arrived(root: str, path: str) -> tuple[object, str | None]:
    bodies = [body for where, body in received(root) if where == path]
    if not bodies:
        return None, "no request arrived"
    try:
        return json.loads(bodies[0]), None
    except ValueError:
        return None, f"the request body is not JSON: {short(bodies[0], 200)}"


async def request_problems(
    default_factory: Callable[[str], Any] | None,
    bound_s: float,
    requests: Sequence[GoldenRequest],
) -> list[str]:
    """One line per golden request whose call sent something else than the stated body."""
    problems: list[str] = []
    async with misbehaving_endpoint() as root:
        for index, request in enumerate(requests):
            where = f"golden_requests[{index}]"
            factory = request.client_factory or default_factory
            assert factory is not None  # ModelSamples refuses a request without a factory
            client = factory(f"{root}/request-{index}/v1")
            try:
                failed = await _call(client, request, bound_s)
            finally:
                await close_client(client)
            body, missing = _arrived(root, f"request-{index}")
            found = missing or pattern_mismatch(request.body, body, "body")
            if found is not None:
                problems.append(f"{where}: {found}" + (f" ({failed})" if failed else ""))
    return problems
