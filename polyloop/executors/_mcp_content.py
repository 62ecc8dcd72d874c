"""A tool result as an observation: text as is, structured content as JSON, embedded text
resources inline, and images, audio and binary resources written as files named by their
content hash (or summarised, when there is nowhere to write them).

One reason to change: what a model is told a tool returned.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any

from polyloop.executors._artifact_dir import ArtifactDirectory, extension_for
from polyloop.types import canonical_json

__all__ = ["Rendered", "render"]

_MIME_SHOWN = 100  # a server's MIME type is untrusted text: cut here
_URI_SHOWN = 300


@dataclass(slots=True)
class Rendered:
    """The observation text of one result, and the files written for it (``detail`` rows)."""

    text: str = ""
    artifacts: list[dict[str, Any]] = field(default_factory=list)


def render(result: Any, output_schema: object, artifacts: ArtifactDirectory | None) -> Rendered:
    """``result`` (a ``CallToolResult``) as an observation.

    ``structuredContent``, when the server sent it on a result that is not an error, stands for
    the result's text blocks (which the protocol asks to be its serialisation): a lone
    ``{"result": …}`` the SDK wraps around a tool's plain return value (``output_schema`` says
    so) is shown as that value, anything else as canonical JSON. Blocks of other kinds follow,
    one per line. Images, audio and binary resources are saved in ``artifacts`` when given.
    """
    rendered = Rendered()
    structured = None if result.is_error else result.structured_content
    parts = [] if structured is None else [_structured(structured, output_schema)]
    for block in result.content:
        if structured is not None and getattr(block, "type", None) == "text":
            continue
        parts.append(_block(block, artifacts, rendered.artifacts))
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


def _block(block: Any, directory: ArtifactDirectory | None, saved: list[dict[str, Any]]) -> str:
    """One content block as text: text as is, the rest inlined, saved or summarised."""
    kind = getattr(block, "type", None)
    if kind == "text":
        return str(block.text)
    if kind in ("image", "audio"):
        return _binary(kind, block.mime_type, block.data, directory, saved)
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
        return _binary(what, contents.mime_type, contents.blob, directory, saved)
    return f"[{_line(str(kind or 'unknown'), 40)} content]"


def _mime(mime: object) -> str:
    return _line(mime, _MIME_SHOWN) if isinstance(mime, str) and mime.strip() else "unknown type"


def _line(text: str, limit: int) -> str:
    """A server's label (a URI, a MIME type) on one line, cut to ``limit`` characters."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "…"


def _binary(
    what: str,
    mime: object,
    data: str,
    directory: ArtifactDirectory | None,
    saved: list[dict[str, Any]],
) -> str:
    """``[what: mime, size]``, and the file the bytes were saved in when there is a directory.

    The file is named by :class:`ArtifactDirectory` (the SHA-256 of the bytes, an extension
    from its fixed MIME table: nothing the server says reaches the name). A file that cannot be
    written (disk full, directory not writable) is said so; the tool ran all the same.
    """
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return f"[{what}: {_mime(mime)}, {len(data)} base64 characters, not valid base64]"
    if directory is None:
        return f"[{what}: {_mime(mime)}, {len(raw)} bytes]"
    extension = extension_for(mime if isinstance(mime, str) else "", binary=True)
    try:
        artifact = directory.save(raw, extension)
    except OSError as exc:
        reason = _line(exc.strerror or str(exc), _MIME_SHOWN)
        return f"[{what}: {_mime(mime)}, {len(raw)} bytes, not saved: {reason}]"
    path = directory.path / artifact.name
    saved.append(
        {
            "file": str(path),
            "mime_type": _mime(mime),
            "bytes": artifact.size,
            "sha256": path.stem,
        }
    )
    return f"[{what}: {_mime(mime)}, {len(raw)} bytes, saved as {path}]"
