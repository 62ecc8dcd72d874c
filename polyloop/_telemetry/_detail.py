"""What an executor's structured ``detail`` tells a trace: the ``error.type`` of a refused or
failed action, and the reason as ``polyloop.`` span attributes.

Standard library only (the OpenTelemetry modules import it); one reason to change: which facts
of ``ActionOutcome.detail`` a span shows, and which of them count as content.

The kinds, the tool name, the JSON-RPC code, the names of the available tools and the path and
schema rule of each violated argument are always recorded: they name things, never the values
the model passed. The messages (a schema validator's ``'x' is not of type 'integer'``, a
server's ``-32602`` text) and the whole detail as JSON can quote argument values, so they are
content, recorded only when content is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from polyloop.types import canonical_json

__all__ = ["DetailAttribute", "clean", "detail_attributes", "detail_error_type"]

#: An attribute value as OpenTelemetry takes it (``opentelemetry.util.types.AttributeValue``).
DetailAttribute = str | bool | int | float | Sequence[str]

_LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_NAME_CHARS: Final = 200  # a name, a kind, a path or a message is cut here
_LISTED: Final = 200  # at most this many names in one list attribute
_REASONS: Final = ("refusal", "error")


def clean(text: str) -> str:
    """``text`` as an exporter can encode it: a lone surrogate (not UTF-8) becomes U+FFFD."""
    return _LONE_SURROGATE.sub("\ufffd", text) if _LONE_SURROGATE.search(text) else text


def _name(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    value = clean(value)
    return value if len(value) <= _NAME_CHARS else value[:_NAME_CHARS] + "…"


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _names(values: object) -> list[str] | None:
    if not isinstance(values, list):
        return None
    return [_name(v) or "" for v in values[:_LISTED]]


def _reason(detail: Mapping[str, Any] | None) -> tuple[str, Mapping[str, Any]] | None:
    """``("refusal", {...})`` or ``("error", {...})``: the first reason ``detail`` holds."""
    if not isinstance(detail, Mapping):
        return None
    for key in _REASONS:
        reason = detail.get(key)
        if isinstance(reason, Mapping) and isinstance(reason.get("kind"), str):
            return key, reason
    return None


def detail_error_type(detail: Mapping[str, Any] | None) -> str | None:
    """The kind of refusal or error ``detail`` reports (``"invalid_arguments"``,
    ``"authentication"``, …), for ``error.type``; ``None`` when it reports none."""
    found = _reason(detail)
    if found is None:
        return None
    kind = _name(found[1]["kind"])
    return kind or None


def detail_attributes(
    detail: Mapping[str, Any] | None, *, content_chars: int | None
) -> dict[str, DetailAttribute]:
    """``detail``'s reason as span attributes: ``polyloop.refusal.*`` or ``polyloop.error.*``,
    ``polyloop.tools_changed.*`` and ``polyloop.progress.notifications``.

    With ``content_chars`` (content is recorded), also the messages, and the whole detail as
    canonical JSON in ``polyloop.executor_detail``, cut to ``content_chars`` characters
    (``polyloop.executor_detail_truncated_chars`` says how many were cut).
    """
    if not isinstance(detail, Mapping) or not detail:
        return {}
    attributes: dict[str, DetailAttribute] = {}
    found = _reason(detail)
    if found is not None:
        attributes.update(_reason_attributes(*found, content=content_chars is not None))
    changed = detail.get("tools_changed")
    if isinstance(changed, Mapping):
        for change in ("added", "removed", "changed"):
            names = _names(changed.get(change))
            if names:
                attributes[f"polyloop.tools_changed.{change}"] = names
    progress = detail.get("progress")
    if isinstance(progress, Mapping) and _int(progress.get("notifications")) is not None:
        attributes["polyloop.progress.notifications"] = progress["notifications"]
    if content_chars is not None:
        try:
            text = clean(canonical_json(dict(detail)))
        except (TypeError, ValueError):  # not plain JSON: ActionOutcome refuses that already
            text = None
        if text is not None:
            attributes["polyloop.executor_detail"] = text[:content_chars]
            if len(text) > content_chars:
                attributes["polyloop.executor_detail_truncated_chars"] = len(text) - content_chars
    return attributes


def _reason_attributes(
    key: str, reason: Mapping[str, Any], *, content: bool
) -> dict[str, DetailAttribute]:
    prefix = f"polyloop.{key}"
    attributes: dict[str, DetailAttribute] = {}
    for field in ("kind", "tool"):
        value = _name(reason.get(field))
        if value is not None:
            attributes[f"{prefix}.{field}"] = value
    for field in ("code", "status"):  # JSON-RPC code, HTTP status
        number = _int(reason.get(field))
        if number is not None:
            attributes[f"{prefix}.{field}"] = number
    timeout = reason.get("timeout_s")
    if isinstance(timeout, int | float) and not isinstance(timeout, bool):
        attributes[f"{prefix}.timeout_s"] = float(timeout)
    available = _names(reason.get("available"))
    if available is not None:
        attributes[f"{prefix}.available"] = available
    violations = reason.get("violations")
    if isinstance(violations, list):
        rows = [v for v in violations[:_LISTED] if isinstance(v, Mapping)]
        attributes[f"{prefix}.violations.path"] = [_name(v.get("path")) or "" for v in rows]
        attributes[f"{prefix}.violations.rule"] = [_name(v.get("rule")) or "" for v in rows]
        if content:
            attributes[f"{prefix}.violations.message"] = [
                _name(v.get("message")) or "" for v in rows
            ]
    if content:
        for field in ("message", "challenge"):
            value = _name(reason.get(field))
            if value is not None:
                attributes[f"{prefix}.{field}"] = value
    return attributes
