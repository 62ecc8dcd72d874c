"""A Jupyter kernel's output messages as the text of one observation, kept under a cap.

Pure functions of message content (no kernel, no I/O), so the rendering is tested without one.
The kernel is the environment, not trusted input: every field is checked, nothing here raises.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

__all__ = ["ObservationBuffer", "mime_summary", "render_message"]

# CSI sequences (colours, cursor moves): IPython colours its tracebacks for a terminal.
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
# MIME types whose values the protocol carries base64-encoded (their size is counted in bytes).
_BINARY_TOPS = ("image/", "audio/", "video/")
_BINARY_TYPES = ("application/pdf", "application/octet-stream")
_DATA_MESSAGES = ("execute_result", "display_data", "update_display_data")


def _is_base64(mime: str) -> bool:
    if mime.endswith(("+xml", "+json")):  # image/svg+xml is text, not base64
        return False
    return mime.startswith(_BINARY_TOPS) or mime in _BINARY_TYPES


def _decoded_size(value: str) -> int:
    """The number of bytes ``value`` (base64, maybe with line breaks) decodes to."""
    compact = "".join(value.split())
    return len(compact) * 3 // 4 - len(compact) + len(compact.rstrip("="))


def mime_summary(mime: str, value: object) -> str:
    """``[image/png output, 12345 bytes]`` or ``[text/html output, 812 chars]``: the observation
    is text, so a rich output is named with its size instead of pasted."""
    if isinstance(value, str) and _is_base64(mime):
        return f"[{mime} output, {_decoded_size(value)} bytes]"
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return f"[{mime} output, {len(text)} chars]"


def _render_data(data: object) -> str:
    """``text/plain`` as it is, then one summary line per other MIME type."""
    if not isinstance(data, Mapping):
        return ""
    lines = [str(data["text/plain"])] if "text/plain" in data else []
    lines += [mime_summary(str(m), value) for m, value in data.items() if m != "text/plain"]
    return "\n".join(lines) + "\n" if lines else ""


def _render_error(content: Mapping[str, object]) -> str:
    traceback = content.get("traceback")
    if isinstance(traceback, list) and traceback:
        return _ANSI.sub("", "\n".join(str(line) for line in traceback)) + "\n"
    return f"{content.get('ename', 'Error')}: {content.get('evalue', '')}\n"


def render_message(msg_type: str, content: object) -> tuple[str, bool] | None:
    """The text an iopub message adds to the observation and whether it starts on a new line
    (every output but a stream does), or ``None`` for a message that shows nothing (status,
    execute_input, clear_output, comms)."""
    if not isinstance(content, Mapping):
        return None
    if msg_type == "stream":
        text = content.get("text")
        return (text if isinstance(text, str) else ""), False
    if msg_type in _DATA_MESSAGES:
        return _render_data(content.get("data")), True
    if msg_type == "error":
        return _render_error(content), True
    return None


class ObservationBuffer:
    """Collects output up to ``limit`` characters (``None``: all) and counts the rest.

    Beyond the limit nothing is stored, only counted, so code printing without end cannot make
    the executor's memory grow.
    """

    def __init__(self, limit: int | None) -> None:
        self._limit = limit
        self._parts: list[str] = []
        self._kept = 0
        self.dropped = 0
        self._at_line_start = True

    def add(self, text: str, *, new_line: bool = False) -> None:
        if new_line and not self._at_line_start:
            text = "\n" + text
        if not text:
            return
        self._at_line_start = text.endswith("\n")
        room = len(text) if self._limit is None else max(0, self._limit - self._kept)
        kept = text[:room]
        self._parts.append(kept)
        self._kept += len(kept)
        self.dropped += len(text) - len(kept)

    def text(self) -> str:
        return "".join(self._parts)
