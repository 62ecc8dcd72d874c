"""OpenTelemetrySink: a run as a trace (extra ``polyloop[otel]``).

OpenTelemetry is imported here, and this module only by ``polyloop.events.__getattr__``, so
``import polyloop.events`` stays standard-library only.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime, timedelta
from enum import Enum
from typing import Any, Final

from polyloop._telemetry._detail import detail_attributes, detail_error_type
from polyloop.types import (
    ActionIntent,
    ActionStatus,
    Event,
    ModelCallIntent,
    ModelReplied,
    RunFinished,
    RunStarted,
    StepCompleted,
    StepRecord,
    StopReason,
)

try:
    from opentelemetry import trace
    from opentelemetry.trace import Span, SpanKind, Status, StatusCode
    from opentelemetry.util.types import AttributeValue
except ImportError:  # checked in OpenTelemetrySink.__init__, so the hint names the extra
    _OTEL_INSTALLED = False
else:
    _OTEL_INSTALLED = True

__all__ = ["OpenTelemetrySink"]

_INSTALL_HINT: Final = (
    "OpenTelemetrySink needs OpenTelemetry: pip install 'polyloop[otel]' "
    "(opentelemetry-api and opentelemetry-sdk)"
)
_INSTRUMENTATION: Final = "polyloop"
#: The stops that mark a run's span as failed (the one home of this rule; the instrumentation
#: reads it too).
ERROR_STOPS: Final = frozenset(
    {StopReason.LLM_ERROR, StopReason.ENV_ERROR, StopReason.PARSER_ERROR}
)
_FAILED_ACTIONS: Final = frozenset({ActionStatus.NOT_EXECUTED, ActionStatus.ENV_ERROR})
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_INPUT_TOKEN_KEYS: Final = ("input_tokens", "prompt_tokens")
_OUTPUT_TOKEN_KEYS: Final = ("output_tokens", "completion_tokens")
_DETAIL_CHARS: Final = 16_384  # the executor's detail as JSON, when content is recorded
#: The sequences of the events whose records a span carries (the kit reads delivery from it).
_SEQUENCES: Final = "polyloop.event_sequences"


# Texts from the run (what the model was told, said and saw): recorded only with capture_content.
_CONTENT: Final = frozenset(
    {
        "polyloop.goal",
        "polyloop.final_answer",
        "polyloop.action",
        "polyloop.executor_observation",
        "polyloop.step.raw_output",
        "polyloop.step.observation",
        "polyloop.step.action",
        "polyloop.step.parse_error",
        "polyloop.step.tool_args_json",
    }
)
CONTENT_ENV: Final = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"


def content_from_env() -> bool:
    """Whether the GenAI environment switch asks for message content to be recorded."""
    return os.environ.get(CONTENT_ENV, "").strip().lower() == "true"


def _ns(timestamp: str) -> int | None:
    """A record's ISO-8601 timestamp in nanoseconds since the epoch (``None`` if unusable)."""
    try:
        moment = datetime.fromisoformat(timestamp)
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        micros = (moment - _EPOCH) // timedelta(microseconds=1)
    except (TypeError, ValueError, OverflowError):
        return None
    return micros * 1000 if micros > 0 else None


def _plain(value: object) -> AttributeValue | None:
    """A record field as an attribute value (enums by value); ``None`` and others are left out."""
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, bool | int | float | str):
        return value
    return None


def _step_attributes(completed: StepCompleted) -> dict[str, AttributeValue]:
    """Every step-record field (``None`` left out), plus the two texts beside the record."""
    step = completed.step
    values = {f"polyloop.step.{f.name}": _plain(getattr(step, f.name)) for f in fields(step)}
    values["polyloop.executor_observation"] = completed.executor_observation
    values["polyloop.model_error"] = completed.model_error
    return {k: v for k, v in values.items() if v is not None}


def _outcome_attributes(step: StepRecord) -> dict[str, AttributeValue]:
    outcome: dict[str, AttributeValue] = {
        "polyloop.env_reported_completion": step.env_reported_completion
    }
    if step.action_status is not None:
        outcome["polyloop.action_status"] = step.action_status.value
    return outcome


def _token_count(usage: Mapping[str, int | float], keys: tuple[str, ...]) -> int | None:
    """The first of ``keys`` that ``usage`` counts (providers name the same count differently)."""
    for key in keys:
        value = usage.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def usage_attributes(usage: Mapping[str, int | float]) -> dict[str, AttributeValue]:
    counts = {
        "gen_ai.usage.input_tokens": _token_count(usage, _INPUT_TOKEN_KEYS),
        "gen_ai.usage.output_tokens": _token_count(usage, _OUTPUT_TOKEN_KEYS),
    }
    return {k: v for k, v in counts.items() if v is not None}


def budget_attributes(parameters: object) -> dict[str, AttributeValue]:
    budget = parameters.get("budget") if isinstance(parameters, dict) else None
    if not isinstance(budget, dict):
        return {}
    return {
        f"polyloop.budget.{name}": value
        for name, value in budget.items()
        if isinstance(name, str) and isinstance(value, int) and not isinstance(value, bool)
    }


def _step_failure(completed: StepCompleted, content: bool) -> tuple[str, str] | None:
    """``(description, error.type)`` of a step that failed: the model raised, or the action
    was not executed or met a broken environment (described by the executor's text only when
    content is recorded)."""
    if completed.model_error is not None:
        return completed.model_error, completed.model_error.split(":", 1)[0] or "error"
    status = completed.step.action_status
    if status is None or status not in _FAILED_ACTIONS:
        return None
    described = completed.executor_observation if content else None
    kind = detail_error_type(completed.executor_detail)  # the executor's reason, if it says
    return described or f"action {status.value}", kind or status.value


def _end(span: Span, failure: tuple[str, str] | None) -> None:
    if failure is not None:
        _fail(span, *failure)
    span.end()


def _fail(span: Span, description: str, error_type: str) -> None:
    span.set_attribute("error.type", error_type)
    span.set_status(Status(StatusCode.ERROR, description))


UNKNOWN_PROVIDER = "unknown"  # gen_ai.provider.name: the sink never sees the model client


def _registered(parameters: dict[str, Any]) -> frozenset[str]:
    """The names of the agent's registered tools, from its parameters (none: no registry)."""
    tools = parameters.get("tools")
    if not isinstance(tools, list):
        return frozenset()
    names = (spec.get("name") for spec in tools if isinstance(spec, dict))
    return frozenset(name for name in names if isinstance(name, str))


@dataclass
class _RunSpans:
    """The open spans of one run in this sink: its run span and, per step index, the rest."""

    run_id: str
    run: Span
    started_ns: int
    steps: dict[int, Span] = field(default_factory=dict)
    chats: dict[int, Span] = field(default_factory=dict)
    tools: dict[int, Span] = field(default_factory=dict)
    #: The agent's registered tool names (from ``RunStarted``; none for a resumed segment):
    #: only these name a span.
    registered: frozenset[str] = frozenset()

    def open_children(self) -> list[Span]:
        """Innermost first, so a parent never ends before its child."""
        return [*self.chats.values(), *self.tools.values(), *self.steps.values()]


class OpenTelemetrySink:
    """Turns each run's events into an OpenTelemetry trace, after the fact (see the how-to page).

    ``polyloop.instrumentation.OpenTelemetryInstrumentation`` is the integration to use for
    live runs: it wraps the model and executor calls, so their spans are current while they run.
    This sink only sees events, each after its record was appended: for event streams alone.
    A run span is the child of the span current when its ``RunStarted`` (or, for a resume, its
    first event) is emitted — the caller's, since the loop emits in the run's task — and a root
    when there is none. ``tracer_provider`` defaults to the global one. Texts from the run (the
    goal, replies, actions, observations) are recorded only with ``capture_content=True`` or,
    when it is ``None``, ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``. ``emit``
    only starts, annotates and ends spans: exporting is the span processor's business (use a
    ``BatchSpanProcessor`` so a slow exporter never slows a run). Safe under concurrent emits,
    also from several threads.
    """

    def __init__(
        self,
        tracer_provider: trace.TracerProvider | None = None,
        *,
        capture_content: bool | None = None,
    ) -> None:
        if not _OTEL_INSTALLED:
            raise ImportError(_INSTALL_HINT)
        if capture_content is not None and not isinstance(capture_content, bool):
            raise TypeError(
                f"capture_content must be a bool or None, got {type(capture_content).__name__}"
            )
        self.capture_content = content_from_env() if capture_content is None else capture_content
        if tracer_provider is not None and not isinstance(tracer_provider, trace.TracerProvider):
            raise TypeError(
                "tracer_provider must be an opentelemetry.trace.TracerProvider or None, "
                f"got {type(tracer_provider).__name__}"
            )
        self.tracer_provider = tracer_provider
        self._tracer = trace.get_tracer(_INSTRUMENTATION, tracer_provider=tracer_provider)
        self._runs: dict[str, _RunSpans] = {}
        self._lock = threading.Lock()  # spans and state change together, whatever the thread
        self._sequence = 0  # the event being handled (under the lock)

    async def emit(self, event: Event) -> None:
        with self._lock:
            self._sequence = event.sequence
            self._handle(event)

    def end_open_spans(self) -> None:
        """End the spans of every run still open, marked interrupted (its events stopped before
        ``RunFinished``), so that the span processor exports them — at shutdown, or before
        reading a stream's spans back. A later event of such a run opens a resumed segment."""
        with self._lock:
            for spans in list(self._runs.values()):
                self._close(
                    spans, "interrupted: the sink ended its open spans", error_type="interrupted"
                )
            self._runs.clear()

    def _mark(self, span: Span) -> None:
        """Name on ``span`` the event being handled as one it carries (``_SEQUENCES``)."""
        held = getattr(span, "attributes", None) or {}  # a recording SDK span's, else none
        earlier = list(held.get(_SEQUENCES, ()))
        if not earlier or earlier[-1] != self._sequence:
            span.set_attribute(_SEQUENCES, [*earlier, self._sequence])

    def __repr__(self) -> str:
        return f"OpenTelemetrySink(open_runs={len(self._runs)})"

    # ----------------------------------------------------------------- one handler per record

    def _handle(self, event: Event) -> None:
        record = event.record
        if isinstance(record, RunStarted):
            self._start_run(event.run_id, record)
            return
        spans = self._runs.get(event.run_id) or self._resume_segment(event)
        if isinstance(record, ModelCallIntent):
            self._open_chat(spans, record)
        elif isinstance(record, ModelReplied):
            self._end_chat(spans, record)
        elif isinstance(record, ActionIntent):
            self._open_tool(spans, record)
        elif isinstance(record, StepCompleted):
            self._complete_step(spans, record)
        elif isinstance(record, RunFinished):
            self._finish_run(spans, record)

    def _start_run(self, run_id: str, record: RunStarted) -> None:
        stale = self._runs.pop(run_id, None)
        if stale is not None:  # the same run id started again: close what the first left open
            self._close(stale, "superseded: the run id started again", error_type="superseded")
        attributes: dict[str, AttributeValue] = {
            "polyloop.goal": record.goal,
            "polyloop.parameters_hash": record.parameters_hash,
            **budget_attributes(record.parameters),
        }
        spans = self._open_run(run_id, attributes, _ns(record.started_at))
        spans.registered = _registered(record.parameters)
        self._mark(spans.run)

    def _resume_segment(self, event: Event) -> _RunSpans:
        """The first event of a run this sink has not seen: a resume, maybe in a new process."""
        attributes: dict[str, AttributeValue] = {
            "polyloop.resumed": True,
            "polyloop.resumed_at_sequence": event.sequence,
        }
        return self._open_run(event.run_id, attributes, None)

    def _open_run(
        self, run_id: str, attributes: dict[str, AttributeValue], start_ns: int | None
    ) -> _RunSpans:
        started_ns = start_ns if start_ns is not None else time.time_ns()
        span = self._tracer.start_span(  # under the current span (the caller's), or a root
            "invoke_agent",
            kind=SpanKind.INTERNAL,
            attributes=self._kept(
                {
                    "gen_ai.operation.name": "invoke_agent",
                    "gen_ai.conversation.id": run_id,
                    "polyloop.run_id": run_id,
                    **attributes,
                }
            ),
            start_time=started_ns,
        )
        spans = self._runs[run_id] = _RunSpans(run_id=run_id, run=span, started_ns=started_ns)
        return spans

    def _step(self, spans: _RunSpans, index: int) -> Span:
        if index not in spans.steps:
            spans.steps[index] = self._child(
                spans.run, "step", {"polyloop.step_index": index}, SpanKind.INTERNAL
            )
        return spans.steps[index]

    def _child(
        self, parent: Span, name: str, attributes: dict[str, AttributeValue], kind: SpanKind
    ) -> Span:
        context = trace.set_span_in_context(parent)
        return self._tracer.start_span(
            name, context=context, kind=kind, attributes=self._kept(attributes)
        )

    def _kept(self, attributes: dict[str, AttributeValue]) -> dict[str, AttributeValue]:
        """``attributes`` without the run's texts, unless content is recorded."""
        if self.capture_content:
            return attributes
        return {k: v for k, v in attributes.items() if k not in _CONTENT}

    def _open_chat(self, spans: _RunSpans, record: ModelCallIntent) -> None:
        index = record.step_index
        _interrupt(spans.chats.pop(index, None), "the model call was logged again")
        spans.chats[index] = self._child(
            self._step(spans, index),
            "chat",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": UNKNOWN_PROVIDER,  # the sink never sees the request
                "polyloop.step_index": index,
                "polyloop.prompt_chars": record.prompt_chars,
            },
            SpanKind.CLIENT,
        )
        self._mark(spans.chats[index])

    def _end_chat(self, spans: _RunSpans, record: ModelReplied) -> None:
        chat = spans.chats.pop(record.step_index, None)
        if chat is None:  # a reply without its intent (not in a log the loop writes)
            self._open_chat(spans, ModelCallIntent(step_index=record.step_index, prompt_chars=0))
            chat = spans.chats.pop(record.step_index)
        reply = record.reply
        if reply.call_id is not None:
            chat.set_attribute("gen_ai.response.id", reply.call_id)
        if reply.model is not None:  # the sink never sees the request: the answering model
            chat.update_name(f"chat {reply.model}")
            chat.set_attribute("gen_ai.response.model", reply.model)
        if reply.finish_reason is not None:
            chat.set_attribute("gen_ai.response.finish_reasons", [reply.finish_reason])
        chat.set_attributes(usage_attributes(reply.usage))
        chat.set_attribute("polyloop.response_chars", len(reply.text))
        chat.set_attribute("polyloop.reasoning_chars", len(reply.reasoning))
        self._mark(chat)
        chat.end()

    def _open_tool(self, spans: _RunSpans, record: ActionIntent) -> None:
        index, action = record.step_index, record.action
        _interrupt(spans.tools.pop(index, None), "the action was logged again")
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "execute_tool",
            "polyloop.step_index": index,
            "polyloop.action": action.text,
        }
        name = "execute_tool"
        if action.tool_name:
            attributes["gen_ai.tool.name"] = action.tool_name
            attributes["polyloop.tool_registered"] = action.tool_name in spans.registered
            if action.tool_name in spans.registered:  # a made-up name names no span
                name = f"execute_tool {action.tool_name}"
        spans.tools[index] = self._child(
            self._step(spans, index), name, attributes, SpanKind.INTERNAL
        )
        self._mark(spans.tools[index])

    def _complete_step(self, spans: _RunSpans, completed: StepCompleted) -> None:
        index = completed.step.step_index
        step_span = self._step(spans, index)
        failure = _step_failure(completed, self.capture_content)
        chat = spans.chats.pop(index, None)
        if chat is not None:  # still open when the model raised (llm_error)
            _end(chat, failure if completed.model_error is not None else None)
        tool = spans.tools.pop(index, None)
        if tool is not None:
            tool.set_attributes(_outcome_attributes(completed.step))
            content_chars = _DETAIL_CHARS if self.capture_content else None
            tool.set_attributes(
                detail_attributes(completed.executor_detail, content_chars=content_chars)
            )
            _end(tool, failure)
        del spans.steps[index]
        step_span.set_attributes(self._kept(_step_attributes(completed)))
        self._mark(step_span)
        _end(step_span, failure)

    def _finish_run(self, spans: _RunSpans, record: RunFinished) -> None:
        stop = record.stop_reason
        del self._runs[spans.run_id]
        for child in spans.open_children():
            _interrupt(child, f"the run stopped ({stop.value}) before this step completed")
        spans.run.set_attribute("polyloop.stop_reason", stop.value)
        spans.run.set_attribute("polyloop.executed_actions", record.executed_actions)
        if record.final_answer is not None and self.capture_content:
            spans.run.set_attribute("polyloop.final_answer", record.final_answer)
        if stop in ERROR_STOPS:
            _fail(spans.run, f"the run stopped {stop.value}", stop.value)
        self._mark(spans.run)
        finished_ns = _ns(record.finished_at) or time.time_ns()
        spans.run.end(end_time=max(finished_ns, spans.started_ns))

    @staticmethod
    def _close(spans: _RunSpans, description: str, *, error_type: str) -> None:
        for span in [*spans.open_children(), spans.run]:
            _fail(span, description, error_type)
            span.end()


def _interrupt(span: Span | None, why: str) -> None:
    """End a span whose outcome was never logged (the process stopped, or it was retried)."""
    if span is not None:
        _fail(span, f"interrupted: {why}", "interrupted")
        span.end()
