"""OpenAIChatModel: any OpenAI-compatible chat-completions endpoint (extra ``polyloop[openai]``)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from polyloop._timeout import checked_timeout_s
from polyloop.types import Message, ModelReply, is_usage_number

_INSTALL_HINT = "OpenAIChatModel needs the openai client: pip install 'polyloop[openai]'"


def _default_deadline_s(timeout_s: float | None, max_retries: int) -> float | None:
    """The whole-call deadline when none is given: every attempt's ``timeout_s`` plus the
    ``openai`` client's pauses between attempts without ``Retry-After`` (``min(0.5 × 2^n, 8)``
    before the *n*-th retry); ``None`` (no deadline) when ``timeout_s`` is ``None``."""
    if timeout_s is None:
        return None
    pauses = sum(min(0.5 * 2.0**n, 8.0) for n in range(max(max_retries, 0)))
    return (max(max_retries, 0) + 1) * timeout_s + pauses


def _numeric_usage(usage: object) -> dict[str, int | float]:
    """The numbers of a usage object — token counts and a ``cost`` when the endpoint sends one
    (nested details are flattened with a dot; anything else is dropped)."""
    if usage is None:
        return {}
    raw = usage.model_dump() if hasattr(usage, "model_dump") else dict(vars(usage))
    flat: dict[str, int | float] = {}
    for key, value in raw.items():
        if is_usage_number(value):
            flat[key] = value
        elif isinstance(value, Mapping):
            for sub, inner in value.items():
                if is_usage_number(inner):
                    flat[f"{key}.{sub}"] = inner
    return flat


class OpenAIChatModel:
    """Calls ``chat.completions.create`` on an OpenAI-compatible endpoint.

    Retries are the client's business (``max_retries``); an error left after them is raised, and
    the run records ``llm_error``. ``timeout_s`` is the ``openai`` client's, per operation (each
    wait for the next bytes); ``deadline_s`` bounds the whole call, retries and the pauses
    between them included, so a server that trickles its answer a byte at a time (passing every
    per-read timeout) cannot hold the run — by default ``(max_retries + 1) × timeout_s`` plus
    the pauses. ``call_id`` is the response id (``None`` when the endpoint sends none or an empty
    one — never ``""``). ``reasoning`` is taken from a ``reasoning_content`` or ``reasoning``
    field when the endpoint sends one. The client is created lazily, per event loop, so one
    model object can serve successive ``asyncio.run`` calls; ``aclose()`` (or ``async with``)
    closes it. ``messages`` is never mutated.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        max_retries: int = 2,
        timeout_s: float | None = 60.0,
        deadline_s: float | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise ValueError("OpenAIChatModel.model must be a non-empty str")
        timeout_s = checked_timeout_s("timeout_s", timeout_s)
        deadline_s = checked_timeout_s("deadline_s", deadline_s)
        try:
            import openai  # noqa: F401  (checked here so a missing extra fails at construction)
        except ImportError:
            raise ImportError(_INSTALL_HINT) from None
        self.model = model
        self.base_url = base_url
        self.api_key = api_key
        self.max_retries = max_retries
        self.timeout_s = timeout_s
        self.deadline_s = (
            _default_deadline_s(timeout_s, max_retries) if deadline_s is None else deadline_s
        )
        self.options = dict(options or {})
        self._client: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _client_for_this_loop(self) -> Any:
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            from openai import AsyncOpenAI

            # A client of an earlier loop cannot be closed from this one: it is dropped.
            self._client = AsyncOpenAI(
                base_url=self.base_url,
                api_key=self.api_key,
                max_retries=self.max_retries,
                timeout=self.timeout_s,
            )
            self._loop = loop
        return self._client

    async def complete(self, messages: Sequence[Message]) -> ModelReply:
        client = self._client_for_this_loop()
        deadline = asyncio.timeout(self.deadline_s)
        try:
            async with deadline:
                response = await client.chat.completions.create(
                    model=self.model,
                    messages=[{"role": m.role, "content": m.content} for m in messages],
                    **self.options,
                )
        except TimeoutError:
            if not deadline.expired():
                raise
            raise TimeoutError(
                f"{self.model}: no reply within deadline_s={self.deadline_s:g} s "
                "(every attempt and the pauses between them)"
            ) from None
        if not response.choices:
            raise RuntimeError(f"{self.model}: the endpoint returned no choices")
        message = response.choices[0].message
        reasoning = getattr(message, "reasoning_content", None) or getattr(
            message, "reasoning", None
        )
        return ModelReply(
            text=message.content or "",
            reasoning=reasoning if isinstance(reasoning, str) else "",
            call_id=response.id or None,
            usage=_numeric_usage(response.usage),
        )

    async def aclose(self) -> None:
        """Close the client of the running event loop. The model may be used again (it makes a
        new client); a client left from an earlier, finished loop is dropped, not closed."""
        client, loop = self._client, self._loop
        self._client, self._loop = None, None
        if client is not None and loop is asyncio.get_running_loop():
            await client.close()

    async def __aenter__(self) -> OpenAIChatModel:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"OpenAIChatModel({self.model!r}, base_url={self.base_url!r})"
