"""A tool call's progress notifications as events of the span current when the call began
(``execute_tool {tool}``, when ``OpenTelemetryInstrumentation`` runs the loop).

Standard library only at import: OpenTelemetry is imported on the first call, and when it is
not installed there is nothing to record. Recording never fails the call: an OpenTelemetry
error is a warning, once per call.

One span event ``polyloop.tool.progress`` per notification, with ``polyloop.progress.value``,
``polyloop.progress.total`` (when the server sent one) and ``polyloop.progress.sequence`` (1 for
the call's first notification). The server's ``polyloop.progress.message`` can quote the call's
arguments, so it is content: recorded only when the instrumentation records content (it says so
in the context, under :data:`CAPTURE_CONTENT_KEY`), or, under a span of someone else's, when
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``.
"""

from __future__ import annotations

import functools
import logging
import os
from types import ModuleType
from typing import Any, Final

from polyloop._base._exception_text import exception_text
from polyloop._telemetry._detail import clean

__all__ = ["CAPTURE_CONTENT_KEY", "PROGRESS_EVENT", "ProgressEvents", "progress_events"]

#: The context value ``OpenTelemetryInstrumentation`` sets beside each span it makes current:
#: whether message content is recorded.
CAPTURE_CONTENT_KEY: Final = "polyloop.capture_content"
PROGRESS_EVENT: Final = "polyloop.tool.progress"
_CONTENT_ENV: Final = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
_MESSAGE_CHARS: Final = 500
_log = logging.getLogger("polyloop.otel")


@functools.cache
def _opentelemetry() -> tuple[ModuleType, ModuleType] | None:
    """``(opentelemetry.context, opentelemetry.trace)``, or ``None`` when not installed."""
    try:
        from opentelemetry import context, trace
    except ImportError:
        return None
    return context, trace


class ProgressEvents:
    """Adds one ``polyloop.tool.progress`` event per notification to ``span`` (thread-safe as
    the span is: the SDK's spans lock)."""

    def __init__(self, span: Any, *, content: bool) -> None:
        self.span = span
        self.content = content
        self.sequence = 0
        self.warned = False

    def add(self, value: float | None, total: float | None, message: str | None) -> None:
        self.sequence += 1
        attributes: dict[str, str | int | float] = {"polyloop.progress.sequence": self.sequence}
        if value is not None:
            attributes["polyloop.progress.value"] = value
        if total is not None:
            attributes["polyloop.progress.total"] = total
        if self.content and message is not None:
            attributes["polyloop.progress.message"] = clean(message[:_MESSAGE_CHARS])
        try:
            self.span.add_event(PROGRESS_EVENT, attributes)
        except Exception as exc:  # telemetry never fails the call
            if not self.warned:
                self.warned = True
                _log.warning(
                    "OpenTelemetry failed recording a tool's progress (%s); the call goes "
                    "on, and this is not logged again for this call",
                    exception_text(exc),
                )


def progress_events() -> ProgressEvents | None:
    """The events of the span current here, or ``None`` (OpenTelemetry not installed, no span
    that records, or OpenTelemetry failing). Call it where the call begins: the context is
    the caller's."""
    modules = _opentelemetry()
    if modules is None:
        return None
    context, trace = modules
    try:
        span = trace.get_current_span()
        if not span.is_recording():
            return None
        said = context.get_value(CAPTURE_CONTENT_KEY)
    except Exception as exc:
        _log.warning("OpenTelemetry failed reading the current span (%s)", exception_text(exc))
        return None
    if not isinstance(said, bool):  # a span of the caller's own, not the instrumentation's
        said = os.environ.get(_CONTENT_ENV, "").strip().lower() == "true"
    return ProgressEvents(span, content=said)
