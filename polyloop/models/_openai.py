"""OpenAIChatModel: any OpenAI-compatible chat-completions endpoint (extra ``polyloop[openai]``)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from polyloop._base._timeout import checked_timeout_s
from polyloop.ports import ModelDescription, RequestParameter
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


# The chat-completions options that are GenAI request parameters, by their convention name.
_REQUEST_PARAMETERS = {
    "temperature": "temperature",
    "top_p": "top_p",
    "max_tokens": "max_tokens",
    "max_completion_tokens": "max_tokens",
    "frequency_penalty": "frequency_penalty",
    "presence_penalty": "presence_penalty",
    "seed": "seed",
    "n": "choice.count",
    "stop": "stop_sequences",
}
_DEFAULT_BASE_URL = "https://api.openai.com/v1"


def _request_parameter(value: object) -> RequestParameter | None:
    """An option's value as a request parameter; ``stop`` may be one string or several."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return value
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return tuple(value)
    return None


def _request_parameters(options: Mapping[str, Any]) -> dict[str, RequestParameter]:
    parameters: dict[str, RequestParameter] = {}
    for option, name in _REQUEST_PARAMETERS.items():
        value = _request_parameter(options.get(option))
        if value is not None:
            parameters[name] = (
                (value,) if name == "stop_sequences" and isinstance(value, str) else value
            )
    return parameters


def _server(base_url: str | None) -> tuple[str | None, int | None]:
    """Host and port of the endpoint (the ``openai`` client's default when none is given)."""
    try:
        parts = urlsplit(base_url or _DEFAULT_BASE_URL)
        port = parts.port or {"https": 443, "http": 80}.get(parts.scheme)
    except ValueError:
        return None, None
    return parts.hostname or None, port


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
    closes it. ``messages`` is never mutated. The reply's ``model`` and ``finish_reason`` are
    the response's (the first choice's finish reason); ``describe()`` says what is requested
    (provider ``openai``, the model, the request parameters among ``options``, the server), for
    an instrumentation such as OpenTelemetry's.
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
        choice = response.choices[0]
        message = choice.message
        reasoning = getattr(message, "reasoning_content", None) or getattr(
            message, "reasoning", None
        )
        return ModelReply(
            text=message.content or "",
            reasoning=reasoning if isinstance(reasoning, str) else "",
            call_id=response.id or None,
            usage=_numeric_usage(response.usage),
            model=_name_or_none(getattr(response, "model", None)),
            finish_reason=_name_or_none(getattr(choice, "finish_reason", None)),
        )

    def describe(self) -> ModelDescription:
        """What this client requests (``polyloop.ports.DescribedModelClient``)."""
        address, port = _server(self.base_url)
        return ModelDescription(
            provider="openai",
            model=self.model,
            parameters=_request_parameters(self.options),
            server_address=address,
            server_port=port,
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


def _name_or_none(value: object) -> str | None:
    """A response's model or finish reason: a non-empty str, or ``None`` for anything else."""
    return value if isinstance(value, str) and value else None
