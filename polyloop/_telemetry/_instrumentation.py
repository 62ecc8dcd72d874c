"""OpenTelemetryInstrumentation: each run as a GenAI trace, with metrics (extra ``polyloop[otel]``).

It implements :class:`polyloop.ports.Instrumentation`: the loop calls it around the run and
around each model, parser and executor call, so every span is current while its work runs and
the spans a seam makes itself (an instrumented HTTP client, a database driver) nest under it.
Names and attributes follow the OpenTelemetry GenAI semantic conventions v1.41.0.

OpenTelemetry is imported here, and this module only by ``polyloop.instrumentation.__getattr__``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import Final, Literal, Self

from polyloop._base._exception_text import exception_text
from polyloop._telemetry._detail import clean as _clean
from polyloop._telemetry._detail import detail_attributes, detail_error_type
from polyloop._telemetry._progress import CAPTURE_CONTENT_KEY
from polyloop._telemetry._sink import ERROR_STOPS, budget_attributes, usage_attributes
from polyloop._version import __version__
from polyloop.ports import ModelClient, ModelDescription
from polyloop.types import (
    Action,
    ActionOutcome,
    ActionStatus,
    FinalAnswer,
    InvalidDecision,
    Message,
    ModelReply,
    RunResult,
    RunStarted,
    StopReason,
    canonical_json,
)

try:
    from opentelemetry import context as otel_context
    from opentelemetry import metrics, trace
    from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode
    from opentelemetry.util.types import AttributeValue
except ImportError:  # checked in OpenTelemetryInstrumentation.__init__ (the hint names the extra)
    _OTEL_INSTALLED = False
else:
    _OTEL_INSTALLED = True

__all__ = ["SEMCONV_VERSION", "OpenTelemetryInstrumentation"]

SEMCONV_VERSION: Final = "1.41.0"
#: ``gen_ai.provider.name`` when the model client does not say (no ``describe()``): the
#: conventions require the attribute, and polyloop cannot know who answers a custom client.
UNKNOWN_PROVIDER: Final = "unknown"
CONTENT_ENV: Final = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
_INSTALL_HINT: Final = (
    "OpenTelemetryInstrumentation needs OpenTelemetry: pip install 'polyloop[otel]' "
    "(opentelemetry-api and opentelemetry-sdk)"
)
_SCHEMA_URL: Final = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"
_log = logging.getLogger("polyloop.otel")
# The bucket boundaries the conventions advise for the two GenAI client histograms.
_TOKEN_BUCKETS: Final = tuple(float(4**n) for n in range(14))
_DURATION_BUCKETS: Final = tuple(0.01 * 2**n for n in range(14))
_TRACEPARENT: Final = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
_LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def _content_from_env() -> bool:
    return os.environ.get(CONTENT_ENV, "").strip().lower() == "true"


def _traceparent(span: Span) -> str | None:
    """The W3C ``traceparent`` of ``span``, or ``None`` when it is not a real span."""
    context = span.get_span_context()
    if not context.is_valid:
        return None
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


def _link_to(trace_parent: str | None) -> list[Link]:
    """A link to the span a ``traceparent`` names (none when it is missing or malformed)."""
    match = _TRACEPARENT.fullmatch(trace_parent or "")
    if match is None:
        return []
    trace_id, span_id, flags = (int(group, 16) for group in match.groups())
    if trace_id == 0 or span_id == 0:
        return []
    origin = trace.SpanContext(
        trace_id, span_id, is_remote=True, trace_flags=trace.TraceFlags(flags)
    )
    return [Link(origin, {"polyloop.link": "resumed_from"})]


def _error_type(exc: BaseException) -> str:
    return type(exc).__qualname__


class _Content:
    """Message content as the conventions' JSON attributes, each within ``limit`` characters."""

    def __init__(self, limit: int) -> None:
        self.limit = limit

    def cut(self, texts: Sequence[str]) -> tuple[list[str], int]:
        """``texts`` within the limit, the newest (last) kept whole first; and what was cut."""
        budget, kept, cut = self.limit, [""] * len(texts), 0
        for position in range(len(texts) - 1, -1, -1):
            text = texts[position]
            kept[position] = _clean(text[:budget])
            budget -= len(kept[position])
            cut += len(text) - len(kept[position])
        return kept, cut

    def messages(self, messages: Sequence[tuple[str, str]]) -> tuple[str, int]:
        texts, cut = self.cut([text for _, text in messages])
        return json.dumps(
            [
                {"role": role, "parts": [{"type": "text", "content": text}]}
                for (role, _), text in zip(messages, texts, strict=True)
            ],
            ensure_ascii=False,
        ), cut

    def reply(self, reply: ModelReply) -> tuple[str, int]:
        (reasoning, text), cut = self.cut([reply.reasoning, reply.text])
        parts = [{"type": "reasoning", "content": reasoning}] if reply.reasoning else []
        parts.append({"type": "text", "content": text})
        message = {"role": "assistant", "parts": parts, "finish_reason": reply.finish_reason or ""}
        return json.dumps([message], ensure_ascii=False), cut

    def text(self, text: str) -> tuple[str, int]:
        (kept,), cut = self.cut([text])
        return kept, cut


class OpenTelemetryInstrumentation:
    """Runs as OpenTelemetry traces and metrics: ``run(..., instrumentation=...)``.

    ``agent_name`` names the agent in span names and ``gen_ai.agent.name`` (it is not part of
    the agent's parameters, so naming it changes no run's parameters hash). ``tracer_provider``
    and ``meter_provider`` default to the global ones. Message content (the goal, system
    prompt, prompts, replies, tool arguments and observations) is recorded only with
    ``capture_content=True`` — or, when it is ``None``, with the environment variable
    ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`` — each attribute cut to
    ``max_content_chars``. Telemetry never fails a run: an OpenTelemetry call that raises (a
    span processor, a meter) is logged as a warning, once per kind of failure per run.
    """

    def __init__(
        self,
        *,
        agent_name: str | None = None,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        capture_content: bool | None = None,
        max_content_chars: int = 16_384,
    ) -> None:
        if not _OTEL_INSTALLED:
            raise ImportError(_INSTALL_HINT)
        _check_options(agent_name, tracer_provider, meter_provider, capture_content)
        if isinstance(max_content_chars, bool) or not isinstance(max_content_chars, int):
            raise TypeError(
                f"max_content_chars must be an int, got {type(max_content_chars).__name__}"
            )
        if max_content_chars < 1:
            raise ValueError(f"max_content_chars must be at least 1, got {max_content_chars}")
        self.agent_name = agent_name
        self.capture_content = _content_from_env() if capture_content is None else capture_content
        self.max_content_chars = max_content_chars
        self._tracer = trace.get_tracer(
            "polyloop", __version__, tracer_provider=tracer_provider, schema_url=_SCHEMA_URL
        )
        meter = metrics.get_meter(
            "polyloop", __version__, meter_provider=meter_provider, schema_url=_SCHEMA_URL
        )
        self._tokens = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Number of input and output tokens used.",
            explicit_bucket_boundaries_advisory=_TOKEN_BUCKETS,
        )
        self._durations = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="GenAI operation duration.",
            explicit_bucket_boundaries_advisory=_DURATION_BUCKETS,
        )
        self._runs = meter.create_counter(
            "polyloop.runs", unit="{run}", description="Runs that returned or raised, by stop."
        )

    @contextmanager
    def run(self, started: RunStarted, *, resumed: bool) -> Iterator[_RunScope]:
        """The run span, current while the run goes on (``polyloop.ports.Instrumentation``)."""
        scope = _RunScope(self, started, resumed)
        token = scope.attach(scope.run_span)
        try:
            yield scope
        except BaseException as exc:
            scope.raised(exc)
            raise
        finally:
            scope.close(token)

    def __repr__(self) -> str:
        return (
            f"OpenTelemetryInstrumentation(agent_name={self.agent_name!r}, "
            f"capture_content={self.capture_content})"
        )


def _check_options(
    agent_name: object, tracer_provider: object, meter_provider: object, capture_content: object
) -> None:
    if agent_name is not None:
        if not isinstance(agent_name, str):
            raise TypeError(f"agent_name must be a str or None, got {type(agent_name).__name__}")
        if not agent_name.strip() or _LONE_SURROGATE.search(agent_name):
            raise ValueError(
                f"agent_name must be a non-blank str without lone surrogates, got {agent_name!r}"
            )
    if tracer_provider is not None and not isinstance(tracer_provider, trace.TracerProvider):
        raise TypeError(
            "tracer_provider must be an opentelemetry.trace.TracerProvider or None, "
            f"got {type(tracer_provider).__name__}"
        )
    if meter_provider is not None and not isinstance(meter_provider, metrics.MeterProvider):
        raise TypeError(
            "meter_provider must be an opentelemetry.metrics.MeterProvider or None, "
            f"got {type(meter_provider).__name__}"
        )
    if capture_content is not None and not isinstance(capture_content, bool):
        raise TypeError(
            f"capture_content must be a bool or None, got {type(capture_content).__name__}"
        )


class _Shield:
    """``with scope.shield("what"):`` — an exception OpenTelemetry raises is a warning, once per
    kind of failure per run, never an error of the run."""

    __slots__ = ("scope", "what")

    def __init__(self, scope: _RunScope, what: str) -> None:
        self.scope, self.what = scope, what

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        if not isinstance(exc, Exception):
            return False
        self.scope.warn_once(self.what, exc)
        return True


class _RunScope:
    """One run as the instrumentation sees it (``polyloop.ports.RunInstrumentation``)."""

    def __init__(self, owner: OpenTelemetryInstrumentation, started: RunStarted, resumed: bool):
        self.owner = owner
        self.run_id = started.run_id
        self.content = _Content(owner.max_content_chars) if owner.capture_content else None
        self.warned: set[tuple[str, str]] = set()
        self.tools = _registered(started.parameters)
        self.provider_known = False
        self.stop: str | None = None
        self.error_type: str | None = None
        self.run_span: Span = trace.INVALID_SPAN
        with self.shield("starting the run span"):
            self.run_span = owner._tracer.start_span(
                f"invoke_agent {owner.agent_name}" if owner.agent_name else "invoke_agent",
                kind=SpanKind.INTERNAL,
                attributes=self._run_attributes(started, resumed),
                links=_link_to(started.trace_parent) if resumed else None,
            )

    # ------------------------------------------------------------------ the run

    @property
    def trace_parent(self) -> str | None:
        return _traceparent(self.run_span)

    def _run_attributes(self, started: RunStarted, resumed: bool) -> dict[str, AttributeValue]:
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.provider.name": UNKNOWN_PROVIDER,
            "gen_ai.conversation.id": self.run_id,
            "polyloop.run_id": self.run_id,
            "polyloop.parameters_hash": started.parameters_hash,
            "polyloop.resumed": resumed,
            **budget_attributes(started.parameters),
        }
        if self.owner.agent_name:
            attributes["gen_ai.agent.name"] = self.owner.agent_name
        for name in ("batch", "task_id"):
            value = getattr(started, name, None)
            if isinstance(value, str):
                attributes[f"polyloop.{name}"] = _clean(value)
        if self.content is not None:
            attributes.update(self._run_content(started))
        return attributes

    def _run_content(self, started: RunStarted) -> dict[str, AttributeValue]:
        assert self.content is not None
        goal, goal_cut = self.content.messages([("user", started.goal)])
        attributes: dict[str, AttributeValue] = {"gen_ai.input.messages": goal}
        prompt = started.parameters.get("system_prompt")
        cut = goal_cut
        if isinstance(prompt, str):
            kept, prompt_cut = self.content.text(prompt)
            attributes["gen_ai.system_instructions"] = json.dumps(
                [{"type": "text", "content": kept}], ensure_ascii=False
            )
            cut += prompt_cut
        if cut:
            attributes["polyloop.content_truncated_chars"] = cut
        return attributes

    def finished(self, result: RunResult) -> None:
        self.stop = result.stop_reason.value
        with self.shield("annotating the run span"):
            span = self.run_span
            span.set_attribute("polyloop.stop_reason", self.stop)
            span.set_attribute("polyloop.executed_actions", result.executed_actions)
            span.set_attribute("polyloop.steps", len(result.steps))
            if result.stop_reason in ERROR_STOPS:
                self.error_type = self.stop
                span.set_attribute("error.type", self.stop)
                span.set_status(Status(StatusCode.ERROR, f"the run stopped {self.stop}"))
            if self.content is not None and result.final_answer is not None:
                answer, cut = self.content.messages([("assistant", result.final_answer)])
                span.set_attribute("gen_ai.output.messages", answer)
                if cut:
                    span.set_attribute("polyloop.final_answer_truncated_chars", cut)

    def raised(self, exc: BaseException) -> None:
        """The run left by an exception (cancellation included)."""
        self.error_type = _error_type(exc)
        if self.stop is None and isinstance(exc, asyncio.CancelledError):
            self.stop = StopReason.CANCELLED.value
        with self.shield("annotating the run span"):
            _fail(self.run_span, exc)

    def close(self, token: object) -> None:
        with self.shield("ending the run span"):
            if self.stop is not None:
                self.run_span.set_attribute("polyloop.stop_reason", self.stop)
            self.run_span.end()
        self.detach(token)
        attributes: dict[str, AttributeValue] = {}
        if self.stop is not None:
            attributes["polyloop.stop_reason"] = self.stop
        if self.error_type is not None and self.stop != self.error_type:
            attributes["error.type"] = self.error_type
        if self.owner.agent_name:
            attributes["gen_ai.agent.name"] = self.owner.agent_name
        with self.shield("counting the run"):
            self.owner._runs.add(1, attributes)

    # ------------------------------------------------------------------ steps and seam calls

    def note_provider(self, request: dict[str, AttributeValue]) -> None:
        """The run span's ``gen_ai.provider.name`` (and request model): the first described
        model call's, else the fallback it was started with."""
        if self.provider_known or "gen_ai.provider.name" not in request:
            return
        self.provider_known = request["gen_ai.provider.name"] != UNKNOWN_PROVIDER
        with self.shield("annotating the run span"):
            for name in ("gen_ai.provider.name", "gen_ai.request.model"):
                if name in request:
                    self.run_span.set_attribute(name, request[name])

    def child(
        self, parent: Span, name: str, attributes: dict[str, AttributeValue], kind: SpanKind
    ) -> Span:
        with self.shield(f"starting {_a(name)} span"):
            return self.owner._tracer.start_span(
                name,
                context=trace.set_span_in_context(parent),
                kind=kind,
                attributes=attributes,
            )
        return trace.INVALID_SPAN

    def model_call(
        self, step_index: int, messages: Sequence[Message], model: ModelClient
    ) -> _ChatCall:
        return _ChatCall(self, step_index, messages, _described(self, model))

    def parse(self, step_index: int, reply: ModelReply) -> _ParseCall:
        return _ParseCall(self, step_index)

    def execute(self, step_index: int, action: Action) -> _ToolCall:
        return _ToolCall(self, step_index, action)

    # ------------------------------------------------------------------ context and failures

    def attach(self, span: Span) -> object:
        """Make ``span`` current, saying beside it whether content is recorded (what a seam
        adds to it, such as a tool's progress events, follows the same switch)."""
        with self.shield("making a span current"):
            context = trace.set_span_in_context(span)
            context = otel_context.set_value(CAPTURE_CONTENT_KEY, self.content is not None, context)
            return otel_context.attach(context)
        return None

    def detach(self, token: object) -> None:
        if token is not None:
            with self.shield("restoring the current span"):
                otel_context.detach(token)  # type: ignore[arg-type]

    def shield(self, what: str) -> _Shield:
        return _Shield(self, what)

    def warn_once(self, what: str, exc: Exception) -> None:
        kind = (what, type(exc).__qualname__)
        if kind in self.warned:
            return
        self.warned.add(kind)
        _log.warning(
            "run %s: OpenTelemetry failed %s (%s); the run goes on, and this failure is "
            "not logged again for this run",
            self.run_id,
            what,
            exception_text(exc),
        )


def _registered(parameters: dict[str, object]) -> frozenset[str]:
    """The names of the agent's registered tools, from its parameters (none: no registry)."""
    tools = parameters.get("tools")
    if not isinstance(tools, list):
        return frozenset()
    return frozenset(
        spec["name"]
        for spec in tools
        if isinstance(spec, dict) and isinstance(spec.get("name"), str)
    )


def _a(name: str) -> str:
    """``"a chat"``, ``"an execute_tool"``: a span's kind (its name's first word) in a message."""
    kind = name.split(" ", 1)[0]
    return f"an {kind}" if kind[:1] in "aeiou" else f"a {kind}"


def _fail(span: Span, exc: BaseException) -> None:
    span.set_attribute("error.type", _error_type(exc))
    span.set_status(Status(StatusCode.ERROR, _clean(exception_text(exc))))


def _described(scope: _RunScope, model: ModelClient) -> ModelDescription | None:
    """The model client's own description of what it calls, if it offers one."""
    describe = getattr(model, "describe", None)
    if not callable(describe):
        return None
    with scope.shield("reading the model client's describe()"):
        description = describe()
        if isinstance(description, ModelDescription):
            return description
        raise TypeError(f"describe() returned {type(description).__name__}, not ModelDescription")
    return None


def _request_attributes(description: ModelDescription | None) -> dict[str, AttributeValue]:
    if description is None:
        return {"gen_ai.provider.name": UNKNOWN_PROVIDER}
    attributes: dict[str, AttributeValue] = {
        "gen_ai.provider.name": _clean(description.provider),
        "gen_ai.request.model": _clean(description.model),
    }
    for name, value in description.parameters.items():
        attributes[f"gen_ai.request.{name}"] = (
            [_clean(v) for v in value] if isinstance(value, tuple) else value
        )
    if description.server_address is not None:
        attributes["server.address"] = _clean(description.server_address)
        if description.server_port is not None:
            attributes["server.port"] = description.server_port
    return attributes


class _SeamCall:
    """A span current while one seam call runs; its ``__exit__`` sees the seam's exception."""

    span: Span

    def __init__(self, scope: _RunScope) -> None:
        self.scope = scope
        self.token: object = None

    def __enter__(self) -> Self:
        self.token = self.scope.attach(self.span)
        return self

    def returned(self, value: object) -> None:
        """What the seam returned (each kind of call notes what it needs)."""

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Literal[False]:
        try:
            if exc is not None:
                with self.scope.shield("recording a seam's failure"):
                    self.failed(exc)
            self.ended(exc)
        finally:
            self.scope.detach(self.token)
        return False  # the seam's exception, if any, propagates

    def failed(self, exc: BaseException) -> None:
        _fail(self.span, exc)
        self.span.record_exception(exc)

    def ended(self, exc: BaseException | None) -> None:
        with self.scope.shield(f"ending {_a(self.span_kind)} span"):
            self.span.end()

    span_kind = "seam"


class _ChatCall(_SeamCall):
    """``chat {model}``: one model call."""

    span_kind = "chat"

    def __init__(
        self,
        scope: _RunScope,
        step_index: int,
        messages: Sequence[Message],
        description: ModelDescription | None,
    ) -> None:
        super().__init__(scope)
        self.description = description
        self.request = _request_attributes(description)
        self.response_model: str | None = None
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.conversation.id": scope.run_id,
            **self.request,
            "polyloop.step_index": step_index,
            "polyloop.messages": len(messages),
        }
        if scope.content is not None:
            text, cut = scope.content.messages([(m.role, m.content) for m in messages])
            attributes["gen_ai.input.messages"] = text
            if cut:
                attributes["polyloop.content_truncated_chars"] = cut
        name = f"chat {description.model}" if description is not None else "chat"
        self.span = scope.child(scope.run_span, _clean(name), attributes, SpanKind.CLIENT)
        scope.note_provider(self.request)
        self.started = time.perf_counter()

    def returned(self, value: object) -> None:
        if not isinstance(value, ModelReply):  # the loop raises TypeError right after
            return
        with self.scope.shield("annotating a chat span"):
            self._annotate(value)
        with self.scope.shield("recording token usage"):
            self._count_tokens(value)

    def _annotate(self, reply: ModelReply) -> None:
        span = self.span
        if reply.model is not None:
            self.response_model = _clean(reply.model)
            span.set_attribute("gen_ai.response.model", self.response_model)
            if self.description is None:
                span.update_name(f"chat {self.response_model}")
        if reply.call_id is not None:
            span.set_attribute("gen_ai.response.id", _clean(reply.call_id))
        if reply.finish_reason is not None:
            span.set_attribute("gen_ai.response.finish_reasons", [_clean(reply.finish_reason)])
        span.set_attributes(usage_attributes(reply.usage))
        span.set_attribute("polyloop.response_chars", len(reply.text))
        span.set_attribute("polyloop.reasoning_chars", len(reply.reasoning))
        if self.scope.content is not None:
            text, cut = self.scope.content.reply(reply)
            span.set_attribute("gen_ai.output.messages", text)
            if cut:
                span.set_attribute("polyloop.output_truncated_chars", cut)

    def _metric_attributes(self) -> dict[str, AttributeValue]:
        attributes: dict[str, AttributeValue] = {"gen_ai.operation.name": "chat"}
        for name in ("gen_ai.provider.name", "gen_ai.request.model", "server.address"):
            if name in self.request:
                attributes[name] = self.request[name]
        if "server.port" in self.request:
            attributes["server.port"] = self.request["server.port"]
        if self.response_model is not None:
            attributes["gen_ai.response.model"] = self.response_model
        return attributes

    def _count_tokens(self, reply: ModelReply) -> None:
        counts = usage_attributes(reply.usage)
        for token_type in ("input", "output"):
            count = counts.get(f"gen_ai.usage.{token_type}_tokens")
            if isinstance(count, int):
                self.scope.owner._tokens.record(
                    count, {**self._metric_attributes(), "gen_ai.token.type": token_type}
                )

    def ended(self, exc: BaseException | None) -> None:
        attributes = self._metric_attributes()
        if exc is not None:
            attributes["error.type"] = _error_type(exc)
        with self.scope.shield("recording an operation's duration"):
            self.scope.owner._durations.record(time.perf_counter() - self.started, attributes)
        super().ended(exc)


class _ParseCall(_SeamCall):
    """The parser runs with the run's span current; its decision is a ``polyloop.step`` event
    on the run span (a step is no span of its own: docs/design/0004)."""

    span_kind = "invoke_agent"

    def __init__(self, scope: _RunScope, step_index: int) -> None:
        super().__init__(scope)
        self.span = scope.run_span
        self.step_index = step_index

    def returned(self, value: object) -> None:
        decision = {Action: "action", FinalAnswer: "final_answer", InvalidDecision: "invalid"}
        with self.scope.shield("adding a step event"):
            self.span.add_event(
                "polyloop.step",
                {
                    "polyloop.step_index": self.step_index,
                    "polyloop.decision": decision.get(type(value), "unknown"),
                },
            )

    def failed(self, exc: BaseException) -> None:
        return None  # the parser's exception leaves the run: the run span records it

    def ended(self, exc: BaseException | None) -> None:
        return None  # the run goes on: its span ends with the run


class _ToolCall(_SeamCall):
    """``execute_tool {tool}``: one action."""

    span_kind = "execute_tool"

    def __init__(self, scope: _RunScope, step_index: int, action: Action) -> None:
        super().__init__(scope)
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.conversation.id": scope.run_id,
            "polyloop.step_index": step_index,
        }
        name = "execute_tool"
        if action.tool_name:
            attributes["gen_ai.tool.name"] = _clean(action.tool_name)
            registered = action.tool_name in scope.tools
            attributes["polyloop.tool_registered"] = registered
            if registered:  # a name the model made up never becomes a span name
                name = f"execute_tool {action.tool_name}"
        if scope.content is not None:
            attributes.update(self._arguments(scope.content, action))
        self.span = scope.child(scope.run_span, _clean(name), attributes, SpanKind.INTERNAL)

    @staticmethod
    def _arguments(content: _Content, action: Action) -> dict[str, AttributeValue]:
        arguments = canonical_json(dict(action.tool_args)) if action.tool_args is not None else ""
        (text, kept_arguments), cut = content.cut([action.text, arguments])
        attributes: dict[str, AttributeValue] = {"polyloop.action": text}
        if action.tool_args is not None:
            attributes["gen_ai.tool.call.arguments"] = kept_arguments
        if cut:
            attributes["polyloop.content_truncated_chars"] = cut
        return attributes

    def returned(self, value: object) -> None:
        if not isinstance(value, ActionOutcome) or not isinstance(value.status, ActionStatus):
            return  # the loop raises TypeError right after
        with self.scope.shield("annotating an execute_tool span"):
            self._annotate(value)

    def _annotate(self, outcome: ActionOutcome) -> None:
        span, status = self.span, outcome.status
        span.set_attribute("polyloop.action_status", status.value)
        span.set_attribute(
            "polyloop.env_reported_completion", bool(outcome.env_reported_completion)
        )
        span.set_attribute("polyloop.observation_is_synthetic", outcome.observation_is_synthetic)
        span.set_attribute(
            "polyloop.observation_truncated_chars", outcome.observation_truncated_chars
        )
        content = self.scope.content
        span.set_attributes(
            detail_attributes(
                outcome.detail, content_chars=None if content is None else content.limit
            )
        )
        if status is not ActionStatus.EXECUTED:
            # the executor's reason when it gives one (invalid_arguments, timeout, …), else
            # the status
            kind = detail_error_type(outcome.detail)
            span.set_attribute("error.type", kind or status.value)
            why = f"the action was {status.value}" + (f": {kind}" if kind else "")
            span.set_status(Status(StatusCode.ERROR, why))
        if self.scope.content is not None:
            text, cut = self.scope.content.text(outcome.observation)
            span.set_attribute("gen_ai.tool.call.result", text)
            if cut:
                span.set_attribute("polyloop.result_truncated_chars", cut)
