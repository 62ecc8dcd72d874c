"""A Jupyter kernel's output messages as the text of one observation, kept under a cap.

Pure functions of message content, and the cell's output list (no kernel, no I/O), so the
rendering is tested without one. The kernel runs code the model wrote: every field is checked,
nothing here raises on what a message holds.

The output list follows nbclient (what a notebook shows when the cell is done): an
``update_display_data`` — or a new display with the same ``display_id`` — replaces the outputs
shown under that id where they stand; ``clear_output`` empties the list, at once or, with
``wait=True``, just before the next output arrives.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from polyloop._base._shown import shown
from polyloop._base._utf8_json import utf8_json, utf8_text
from polyloop.executors._artifact_dir import SavedArtifact, extension_for

__all__ = [
    "DATA_MESSAGES",
    "CellOutputs",
    "RichOutput",
    "display_id_of",
    "render_data",
    "render_message",
    "rich_output_line",
    "rich_outputs",
]

# CSI sequences (colours, cursor moves): IPython colours its tracebacks for a terminal.
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
# type/subtype with RFC 6838's restricted names: anything else is not taken for a MIME type.
_MIME_TYPE = re.compile(r"[A-Za-z0-9][\w.+-]{0,126}/[A-Za-z0-9][\w.+-]{0,126}", re.ASCII)
# MIME types whose values the protocol carries base64-encoded.
_BINARY_TOPS = ("image/", "audio/", "video/")
_BINARY_TYPES = ("application/pdf", "application/octet-stream")
DATA_MESSAGES = ("execute_result", "display_data", "update_display_data")


def _is_base64(mime: str) -> bool:
    if mime.endswith(("+xml", "+json")):  # image/svg+xml is text, not base64
        return False
    return mime.startswith(_BINARY_TOPS) or mime in _BINARY_TYPES


def _is_json(mime: str) -> bool:
    return mime == "application/json" or mime.endswith("+json")


class _Malformed(Exception):
    """A MIME bundle's value that cannot be what its type says (the message: why)."""


@dataclass(frozen=True)
class RichOutput:
    """One non-``text/plain`` entry of a MIME bundle: its bytes as a file would hold them, or
    ``None`` and the reason they cannot be had (bad base64, a list where text belongs, …)."""

    mime: str
    content: bytes | None
    extension: str = ""
    problem: str = ""


def _content(mime: str, value: object) -> bytes:
    """The bytes ``value`` stands for: base64 decoded, JSON serialised, or text as UTF-8."""
    if _is_base64(mime):
        if not isinstance(value, str):
            raise _Malformed(f"a {type(value).__name__}, not base64 text")
        try:  # line breaks are allowed (some kernels wrap base64 at 76 columns), nothing else
            return base64.b64decode("".join(value.split()), validate=True)
        except (binascii.Error, ValueError):  # ValueError: a character outside ASCII
            raise _Malformed("not valid base64") from None
    if _is_json(mime):  # a JSON type's value is the JSON itself, not text holding it
        try:
            text = json.dumps(value, ensure_ascii=False, indent=2)
        except (TypeError, ValueError, RecursionError):
            raise _Malformed("not JSON") from None
        return utf8_json(text).encode("utf-8")
    if not isinstance(value, str):
        raise _Malformed(f"a {type(value).__name__}, not text")
    return utf8_text(value).encode("utf-8")  # a lone surrogate is written as its \\udXXX escape


def _rich_output(mime: object, value: object) -> RichOutput:
    if not isinstance(mime, str) or not _MIME_TYPE.fullmatch(mime):
        return RichOutput(shown(mime, 60), None, problem="not a MIME type")
    try:
        content = _content(mime, value)
    except _Malformed as exc:
        return RichOutput(mime, None, problem=str(exc))
    return RichOutput(mime, content, extension_for(mime, binary=_is_base64(mime)))


def rich_outputs(data: object) -> list[RichOutput]:
    """Every entry of the MIME bundle ``data`` but ``text/plain``, in the kernel's order."""
    if not isinstance(data, Mapping):
        return []
    return [_rich_output(mime, value) for mime, value in data.items() if mime != "text/plain"]


def rich_output_line(
    output: RichOutput, *, saved: SavedArtifact | None = None, not_saved: str = ""
) -> str:
    """What the observation says of one rich output: ``[image/png output, 12345 bytes, saved as
    <sha256>.png]``, or why it was not saved."""
    if output.content is None:
        return f"[{output.mime} output, not saved: {output.problem}]"
    if saved is not None:
        return f"[{output.mime} output, {saved.size} bytes, saved as {saved.name}]"
    return f"[{output.mime} output, {len(output.content)} bytes, not saved: {not_saved}]"


def render_data(data: object, lines: list[str]) -> str:
    """A display or result: its ``text/plain`` as it is, then ``lines`` (one per rich output)."""
    plain = data.get("text/plain") if isinstance(data, Mapping) else None
    shown_lines = ([] if plain is None else [str(plain)]) + lines
    return "\n".join(shown_lines) + "\n" if shown_lines else ""


def display_id_of(content: Mapping[str, object]) -> str | None:
    """The ``transient.display_id`` of a display message, when it is a string."""
    transient = content.get("transient")
    display_id = transient.get("display_id") if isinstance(transient, Mapping) else None
    return display_id if isinstance(display_id, str) else None


def _render_error(content: Mapping[str, object]) -> str:
    traceback = content.get("traceback")
    if isinstance(traceback, list) and traceback:
        return _ANSI.sub("", "\n".join(str(line) for line in traceback)) + "\n"
    return f"{content.get('ename', 'Error')}: {content.get('evalue', '')}\n"


def render_message(msg_type: str, content: object) -> tuple[str, bool] | None:
    """The text a ``stream`` or ``error`` message adds to the observation and whether it starts
    on a new line (an error does), or ``None`` for any other message (the displays and results
    are :func:`render_data`'s; status, execute_input, clear_output and comms show nothing)."""
    if not isinstance(content, Mapping):
        return None
    if msg_type == "stream":
        text = content.get("text")
        return (text if isinstance(text, str) else ""), False
    if msg_type == "error":
        return _render_error(content), True
    return None


@dataclass
class _Output:
    """One output of the cell as kept: a display under a ``display_id``, or a run of outputs
    without one (they are never replaced, so consecutive ones are stored as one)."""

    display_id: str | None
    at_line_start: bool  # does the observation end a line after this output
    parts: list[str] = field(default_factory=list)  # appended to, never concatenated
    kept: int = 0
    dropped: int = 0


class CellOutputs:
    """The outputs of one request, up to ``limit`` characters in all (``None``: all), the rest
    counted.

    Beyond the limit nothing is stored, only counted, so code printing without end cannot make
    the executor's memory grow. A replaced display gets the room its old text left and what is
    still free; what does not fit is counted like any output beyond the limit.
    """

    def __init__(self, limit: int | None) -> None:
        self._limit = limit
        self._outputs: list[_Output] = []
        self._kept = 0
        self._clear_pending = False
        self._shown_ids: set[str] = set()  # display ids shown in this request, cleared or not

    @property
    def dropped(self) -> int:
        return sum(output.dropped for output in self._outputs)

    def text(self) -> str:
        return "".join(part for output in self._outputs for part in output.parts)

    def add(self, text: str, *, new_line: bool = False, display_id: str | None = None) -> None:
        """Append an output; ``new_line``: it starts on a line of its own."""
        if self._clear_pending:
            self._clear_now()
        if display_id is not None:
            self._shown_ids.add(display_id)
        at_line_start = self._outputs[-1].at_line_start if self._outputs else True
        last = self._outputs[-1] if self._outputs else None
        if display_id is None and last is not None and last.display_id is None:
            output = last
        else:
            output = _Output(display_id, at_line_start)
            self._outputs.append(output)
        if new_line and not at_line_start and text:
            text = "\n" + text
        self._store(output, text)

    def has_shown(self, display_id: str) -> bool:
        """Whether a display under ``display_id`` was added in this request (even if cleared
        since): an update of any other is of an earlier request's display."""
        return display_id in self._shown_ids

    def update(self, display_id: str, text: str) -> None:
        """Replace the text of every output shown under ``display_id`` (none: nothing happens;
        a pending ``clear_output(wait=True)`` still waits for the next output)."""
        for index, output in enumerate(self._outputs):
            if output.display_id != display_id:
                continue
            before = self._outputs[index - 1].at_line_start if index else True
            self._kept -= output.kept
            output.parts, output.kept, output.dropped = [], 0, 0
            output.at_line_start = before
            self._store(output, text if before or not text else "\n" + text)

    def clear(self, *, wait: bool) -> None:
        """``clear_output``: forget the outputs now, or (``wait``) when the next one comes."""
        if wait:
            self._clear_pending = True
        else:
            self._clear_now()

    def _clear_now(self) -> None:
        self._outputs.clear()
        self._kept = 0
        self._clear_pending = False

    def _store(self, output: _Output, text: str) -> None:
        room = len(text) if self._limit is None else max(0, self._limit - self._kept)
        kept = text[:room]
        if kept:
            output.parts.append(kept)
        output.kept += len(kept)
        output.dropped += len(text) - len(kept)
        self._kept += len(kept)
        if text:
            output.at_line_start = text.endswith("\n")
