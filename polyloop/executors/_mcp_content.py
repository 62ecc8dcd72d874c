"""A tool result as an observation: text as is, structured content as JSON, embedded text
resources inline, and images, audio and binary resources written as files named by their
content hash (or summarised, when there is nowhere to write them).

One reason to change: what a model is told a tool returned.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import mimetypes
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from polyloop.types import canonical_json

__all__ = ["Rendered", "render"]

_MIME_SHOWN = 100  # a server's MIME type is untrusted text: cut here
_URI_SHOWN = 300
# MIME types MCP servers send that the mimetypes tables lack (the SDK's Audio says audio/wav)
_EXTENSIONS = {"audio/wav": ".wav", "audio/mp3": ".mp3", "image/jpg": ".jpg"}


@dataclass(slots=True)
class Rendered:
    """The observation text of one result, and the files written for it (``detail`` rows)."""

    text: str = ""
    artifacts: list[dict[str, Any]] = field(default_factory=list)


def render(result: Any, output_schema: object, artifacts_dir: Path | None) -> Rendered:
    """``result`` (a ``CallToolResult``) as an observation.

    ``structuredContent``, when the server sent it on a result that is not an error, stands for
    the result's text blocks (which the protocol asks to be its serialisation): a lone
    ``{"result": …}`` the SDK wraps around a tool's plain return value (``output_schema`` says
    so) is shown as that value, anything else as canonical JSON. Blocks of other kinds follow,
    one per line.
    """
    rendered = Rendered()
    structured = None if result.is_error else result.structured_content
    parts = [] if structured is None else [_structured(structured, output_schema)]
    for block in result.content:
        if structured is not None and getattr(block, "type", None) == "text":
            continue
        parts.append(_block(block, artifacts_dir, rendered.artifacts))
    rendered.text = "\n".join(parts)
    return rendered


def _structured(value: object, output_schema: object) -> str:
    if _wraps_a_result(output_schema) and isinstance(value, dict) and value.keys() == {"result"}:
        value = value["result"]
    if isinstance(value, str):
        return value
    try:
        return canonical_json(value)
    except (TypeError, ValueError, RecursionError):
        return repr(value)


def _wraps_a_result(schema: object) -> bool:
    """Whether ``schema`` is the SDK's wrapper around a plain return value."""
    if not isinstance(schema, dict):
        return False
    properties = schema.get("properties")
    return isinstance(properties, dict) and properties.keys() == {"result"}


def _block(block: Any, artifacts_dir: Path | None, artifacts: list[dict[str, Any]]) -> str:
    """One content block as text: text as is, the rest inlined, saved or summarised."""
    kind = getattr(block, "type", None)
    if kind == "text":
        return str(block.text)
    if kind in ("image", "audio"):
        return _binary(kind, block.mime_type, block.data, artifacts_dir, artifacts)
    if kind == "resource_link":
        mime = _mime(block.mime_type)
        return f"[resource link: {_line(str(block.uri), _URI_SHOWN)}, {mime}]"
    if kind == "resource":
        contents = block.resource
        uri = _line(str(contents.uri), _URI_SHOWN)
        text = getattr(contents, "text", None)
        if isinstance(text, str):
            return f"[resource {uri}: {_mime(contents.mime_type)}, {len(text)} characters]\n{text}"
        what = f"resource {uri}"
        return _binary(what, contents.mime_type, contents.blob, artifacts_dir, artifacts)
    return f"[{_line(str(kind or 'unknown'), 40)} content]"


def _mime(mime: object) -> str:
    return _line(mime, _MIME_SHOWN) if isinstance(mime, str) and mime.strip() else "unknown type"


def _line(text: str, limit: int) -> str:
    """A server's label (a URI, a MIME type) on one line, cut to ``limit`` characters."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "…"


def _binary(
    what: str, mime: object, data: str, artifacts_dir: Path | None, artifacts: list[dict[str, Any]]
) -> str:
    """``[what: mime, size]``, and the file the bytes were saved in when there is a directory."""
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return f"[{what}: {_mime(mime)}, {len(data)} base64 characters, not valid base64]"
    if artifacts_dir is None:
        return f"[{what}: {_mime(mime)}, {len(raw)} bytes]"
    path = _save(raw, mime, artifacts_dir)
    artifacts.append(
        {
            "file": str(path),
            "mime_type": _mime(mime),
            "bytes": len(raw),
            "sha256": path.stem,
        }
    )
    return f"[{what}: {_mime(mime)}, {len(raw)} bytes, saved as {path}]"


def _save(raw: bytes, mime: object, directory: Path) -> Path:
    """Write ``raw`` as ``<sha256><extension>`` in ``directory`` (once: the name is the content).

    The extension comes from the MIME type through :mod:`mimetypes` and a few names it lacks
    (``.bin`` when none fits), so nothing the server says reaches the file name. The file
    appears whole or not at all: it is written beside and renamed.
    """
    extension = None
    if isinstance(mime, str):
        extension = _EXTENSIONS.get(mime.lower()) or mimetypes.guess_extension(mime)
    path = directory / (hashlib.sha256(raw).hexdigest() + (extension or ".bin"))
    if path.exists():
        return path
    directory.mkdir(parents=True, exist_ok=True)
    handle, partial = tempfile.mkstemp(dir=directory, prefix=".partial-")
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(raw)
        os.replace(partial, path)
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise
    return path
