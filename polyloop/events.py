"""Bundled event sinks: ``NullSink``, ``MemorySink``, ``LoggingSink``, ``JsonlSink`` and
``OpenTelemetrySink``.

``OpenTelemetrySink`` needs the ``otel`` extra; it is imported lazily so that
``import polyloop.events`` stays standard-library only.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from polyloop._base._closing import AsyncClosing
from polyloop._base._utf8_json import utf8_json
from polyloop.types import (
    ActionIntent,
    Event,
    ModelCallIntent,
    ModelReplied,
    Record,
    RunFinished,
    RunStarted,
    StepCompleted,
    canonical_json,
)

if TYPE_CHECKING:
    from polyloop._telemetry._sink import OpenTelemetrySink

__all__ = ["JsonlSink", "LoggingSink", "MemorySink", "NullSink", "OpenTelemetrySink"]


def __getattr__(name: str) -> Any:
    if name == "OpenTelemetrySink":
        from polyloop._telemetry._sink import OpenTelemetrySink

        return OpenTelemetrySink
    raise AttributeError(f"module 'polyloop.events' has no attribute {name!r}")


class NullSink:
    """Discards every event (the default when ``run()`` gets ``events=None``)."""

    async def emit(self, event: Event) -> None:
        return None


class MemorySink:
    """Keeps every event in ``events``, in emission order."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    async def emit(self, event: Event) -> None:
        self.events.append(event)

    def __repr__(self) -> str:
        return f"MemorySink(events={len(self.events)})"


def _summary(record: Record) -> str:
    """A short, single-line description of ``record`` for a log line."""
    if isinstance(record, RunStarted):
        return f"goal={_short(record.goal)}"
    if isinstance(record, ModelCallIntent):
        return f"step={record.step_index} prompt_chars={record.prompt_chars}"
    if isinstance(record, ModelReplied):
        return (
            f"step={record.step_index} call_id={record.reply.call_id} "
            f"response_chars={len(record.reply.text)}"
        )
    if isinstance(record, ActionIntent):
        action = record.action
        what = f"tool={_short(action.tool_name)}" if action.tool_name else _short(action.text)
        return f"step={record.step_index} {what}"
    if isinstance(record, StepCompleted):
        step = record.step
        if step.action_status is not None:
            outcome = f"action_status={step.action_status.value}"
        elif record.model_error is not None:
            outcome = f"model_error={_short(record.model_error)}"
        else:
            outcome = f"parse_ok={step.parse_ok}"
        return f"step={step.step_index} {outcome}"
    if isinstance(record, RunFinished):
        return f"stop_reason={record.stop_reason.value} executed_actions={record.executed_actions}"
    # A duck-typed record outside the union still gets a line rather than an error.
    return type(record).__name__  # type: ignore[unreachable]


def _short(text: str | None, limit: int = 60) -> str:
    """``repr`` of ``text`` cut to ``limit`` characters: one line, control characters escaped."""
    if text is None:
        return "None"
    return repr(text[:limit] + "…" if len(text) > limit else text)


class LoggingSink:
    """Logs one line per event: ``run=<id> seq=<n> <kind> <summary>``.

    ``logger`` defaults to ``logging.getLogger("polyloop.events")``; ``level`` to ``INFO``.
    Texts from the model (goal, action, errors) are ``repr``-quoted and cut to 60 characters,
    so a log line is always one line. The whole event rides along on the log record as its
    ``polyloop_event`` attribute (logging's ``extra``), for a handler or a structured formatter
    that ships it on. Logging's own handler errors are handled by ``logging``
    (``Handler.handleError``), never raised into the run.
    """

    def __init__(self, logger: logging.Logger | None = None, level: int = logging.INFO) -> None:
        self.logger = logger if logger is not None else logging.getLogger("polyloop.events")
        self.level = level

    async def emit(self, event: Event) -> None:
        self.logger.log(
            self.level,
            "run=%s seq=%d %s %s",
            event.run_id,
            event.sequence,
            event.record.kind,
            _summary(event.record),
            extra={"polyloop_event": event},
        )

    def __repr__(self) -> str:
        return f"LoggingSink(logger={self.logger.name!r}, level={logging.getLevelName(self.level)})"


class JsonlSink(AsyncClosing):
    """Appends one canonical JSON line per event to ``path``.

    Each line is ``{"record": <the record as JSON>, "run_id": …, "sequence": …}`` in canonical
    JSON, so ``record_from_json(json.dumps(line["record"]))`` gives the record back. The file is
    opened (append mode, created if missing) on the first emit, not in ``__init__``; ``aclose()``
    closes it and a later emit opens it again. Each line is written with one ``write`` call and
    flushed, with no ``await`` in between, so concurrent emits in one event loop never
    interleave. A lone surrogate in a text (which UTF-8 cannot encode) is written as its JSON
    escape ``\\udXXX``, which reads back as the same string. The write is synchronous: the
    loop waits for the OS ``write`` of one line (no ``fsync``).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._file: BinaryIO | None = None

    async def emit(self, event: Event) -> None:
        line = canonical_json(
            {
                "run_id": event.run_id,
                "sequence": event.sequence,
                "record": json.loads(event.record.to_json()),
            }
        )
        data = (utf8_json(line) + "\n").encode("utf-8")
        if self._file is None:
            self._file = self.path.open("ab")
        self._file.write(data)
        self._file.flush()

    async def aclose(self) -> None:
        file, self._file = self._file, None
        if file is not None:
            file.close()

    def __repr__(self) -> str:
        return f"JsonlSink({str(self.path)!r})"
