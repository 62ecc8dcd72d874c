"""A small JSON-schema validator for tool arguments (standard library only).

The core imports nothing outside the standard library, so :class:`ToolExecutor` validates
arguments with this subset instead of the ``jsonschema`` package.

Supported keywords (checked):

* ``type`` — ``"object"``, ``"string"``, ``"integer"``, ``"number"``, ``"boolean"``,
  ``"array"``, ``"null"``, or a list of these (any one matches). ``bool`` is never an
  ``integer`` or a ``number``. *Deviation from JSON Schema:* a float with an integral value
  (``1.0``) is **not** an ``integer`` here — the tool function would receive a ``float``.
* ``properties`` — each present property is validated against its schema.
* ``required`` — every listed property must be present.
* ``additionalProperties`` — ``false`` rejects properties not listed in ``properties``; a
  schema validates them; ``true`` (the default) allows them.
* ``enum`` — the value must equal one of the listed values, compared as JSON text (``1`` does
  not equal ``true``, and ``1`` does not equal ``1.0``).
* ``items`` — a schema every array element must match (the tuple form, a list of schemas, is
  not supported and ignored).

Every other keyword (``minimum``, ``pattern``, ``oneOf``, ``$ref``, ``format``, …) is
**ignored**: a schema using it validates as if the keyword were absent. Validation in the
tool itself is the place for those rules; a value that breaks them reaches the tool, and the
tool's exception becomes an ``executed`` observation the model can correct.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["SUPPORTED_KEYWORDS", "schema_errors"]

SUPPORTED_KEYWORDS = frozenset(
    {"type", "properties", "required", "additionalProperties", "enum", "items"}
)

_TYPE_NAMES = ("object", "string", "integer", "number", "boolean", "array", "null")


def _json_type(value: object) -> str:
    """The JSON type name of a decoded JSON value (as this validator counts it)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "array"
    return type(value).__name__


def _matches_type(value: object, expected: str) -> bool:
    actual = _json_type(value)
    if expected == "number":
        return actual in ("integer", "number")
    return actual == expected


def _json_equal(a: object, b: object) -> bool:
    try:
        return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    except (TypeError, ValueError, RecursionError):
        return False


def _where(path: str) -> str:
    return path or "the arguments"


def schema_errors(value: Any, schema: object, path: str = "") -> list[str]:
    """Every violation of ``schema`` by ``value``, each naming where (empty: valid).

    ``path`` is a dotted/indexed location used in the messages (``"a.b[2]"``).
    """
    errors: list[str] = []
    if not isinstance(schema, Mapping):
        return errors  # a boolean schema or junk: nothing this subset can check
    where = _where(path)

    expected = schema.get("type")
    if isinstance(expected, str):
        expected = [expected]
    if isinstance(expected, list) and expected:
        names = [t for t in expected if isinstance(t, str) and t in _TYPE_NAMES]
        if names and not any(_matches_type(value, t) for t in names):
            errors.append(f"{where}: expected {' or '.join(names)}, got {_json_type(value)}")
            return errors  # the other keywords assume the type held

    enum = schema.get("enum")
    if (
        isinstance(enum, Sequence)
        and not isinstance(enum, str)
        and not any(_json_equal(value, option) for option in enum)
    ):
        allowed = ", ".join(json.dumps(o, ensure_ascii=False) for o in list(enum)[:10])
        errors.append(f"{where}: must be one of {allowed}")

    if isinstance(value, Mapping):
        errors.extend(_object_errors(value, schema, path))
    if isinstance(value, list | tuple):
        items = schema.get("items")
        if isinstance(items, Mapping):
            for index, element in enumerate(value):
                errors.extend(schema_errors(element, items, f"{path}[{index}]"))
    return errors


def _object_errors(value: Mapping[str, Any], schema: Mapping[str, Any], path: str) -> list[str]:
    errors: list[str] = []
    prefix = f"{path}." if path else ""
    required = schema.get("required")
    if isinstance(required, Sequence) and not isinstance(required, str):
        for name in required:
            if isinstance(name, str) and name not in value:
                errors.append(f"{_where(path)}: missing required property {name!r}")
    properties = schema.get("properties")
    known: Mapping[str, Any] = properties if isinstance(properties, Mapping) else {}
    for name, sub in known.items():
        if name in value:
            errors.extend(schema_errors(value[name], sub, f"{prefix}{name}"))
    additional = schema.get("additionalProperties", True)
    extra = sorted(str(name) for name in value if name not in known)
    if additional is False and extra:
        errors.append(f"{_where(path)}: unexpected properties {', '.join(map(repr, extra))}")
    elif isinstance(additional, Mapping):
        for name in extra:
            errors.extend(schema_errors(value[name], additional, f"{prefix}{name}"))
    return errors
