"""Records to and from canonical JSON: the encoder behind ``to_json()`` and the type-checked
field reader behind :func:`polyloop.types.record_from_json`.

One-way: :mod:`polyloop.types` imports this module, never the reverse. The codec knows JSON,
dataclasses, the nesting limit and the schema version rule; which record kinds exist and how
each is built from its fields is said by ``types.py``, which hands its readers to
:func:`decode_record`.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import Any, TypeVar

from polyloop._base._canonical_json import canonical_json
from polyloop._base._utf8_json import utf8_json
from polyloop.errors import SchemaVersionError

__all__ = [
    "MAX_NESTING",
    "Fields",
    "check_version",
    "decode_record",
    "is_bool",
    "is_dict",
    "is_int",
    "is_opt_str",
    "is_str",
    "record_to_json",
]

# How deep tool arguments may nest ({} is one level). One limit for the parser, Action and the
# record encoder, far below where Python's recursion (JSON encoding and decoding) gives out.
MAX_NESTING = 100

_R = TypeVar("_R")

_SUPPORTED_MAJOR = "1"

_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type) -> tuple[str, ...]:
    """A dataclass's field names, computed once per class (``fields()`` is slow on a hot path:
    every append encodes a record)."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in fields(cls))
    return names


# The levels a record puts above user data (record, action or reply, its field): the encoder
# accepts MAX_NESTING levels of user data below them, and refuses more with a ValueError.
_RECORD_LEVELS = 3


# Exact types returned as they are, checked first: most of a record is plain str and int.
_PLAIN_LEAVES = frozenset({str, int, float, bool, type(None)})


def _jsonable(value: object, depth: int = 0) -> object:
    kind = type(value)
    if kind in _PLAIN_LEAVES:
        return value
    if isinstance(value, str | int | float):  # an enum (StopReason is a str), or a subclass
        return value.value if isinstance(value, enum.Enum) else value
    if depth > MAX_NESTING + _RECORD_LEVELS:
        raise ValueError(f"record is nested deeper than {MAX_NESTING} levels")
    if kind in _FIELD_NAMES or hasattr(value, "__dataclass_fields__"):
        return {name: _jsonable(getattr(value, name), depth + 1) for name in _field_names(kind)}
    if isinstance(value, dict | Mapping):  # dict first: the ABC check is slow
        return {str(k): _jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v, depth + 1) for v in value]
    return value


def _plain(value: object) -> object:
    """``json``'s ``default`` hook: a dataclass or a mapping as a dict; the C encoder does the
    rest (strings, numbers, lists, and a ``StrEnum`` as the string it is)."""
    kind = type(value)
    if kind in _FIELD_NAMES or hasattr(value, "__dataclass_fields__"):
        return {name: getattr(value, name) for name in _field_names(kind)}
    if isinstance(value, Mapping):
        return {str(k): v for k, v in value.items()}
    if isinstance(value, enum.Enum):
        return value.value
    raise TypeError(f"{kind.__name__} is not JSON serialisable")


# canonical_json's settings, with the walk over dataclasses done by the C encoder. No circular
# check (a quarter of a record's encoding time): a record's user data cannot hold a cycle when
# it is built (tool_args is a fresh copy, usage holds numbers), and one put in by mutating it
# afterwards still fails, as a RecursionError that record_to_json turns into a ValueError.
_ENCODER = json.JSONEncoder(
    sort_keys=True,
    ensure_ascii=False,
    separators=(",", ":"),
    allow_nan=False,
    default=_plain,
    check_circular=False,
)


def record_to_json(record: object, kind: str, *, walk: bool) -> str:
    """See ``Record.to_json()`` (the public name); ``kind`` is the record's, and ``walk`` asks
    for the walk that counts levels (a record whose own type does not bound its user data).

    The text is always valid UTF-8: a lone surrogate is written as its JSON escape
    (:func:`polyloop._base._utf8_json.utf8_json`), so every store that keeps this text as it is
    round-trips every string Python and JSON accept.

    Every record but ``RunStarted`` holds user data whose depth its own type already bounds
    (``Action.tool_args``, ``ModelReply.usage``): it is encoded in one pass of the C encoder,
    the hot path of every commit. ``RunStarted`` carries the agent's parameters — tool schemas
    of any depth — through the walk that counts levels and refuses more than ``MAX_NESTING``.
    """
    if walk:
        body = _jsonable(record)
        assert isinstance(body, dict)
        return utf8_json(canonical_json({"kind": kind, **body}))
    fields = _plain(record)
    assert isinstance(fields, dict)
    try:
        return utf8_json(_ENCODER.encode({"kind": kind, **fields}))
    except RecursionError:
        raise ValueError(f"{kind} holds data nested too deeply or circular") from None


class Fields:
    """Type-checked decoding of one JSON object into one dataclass (names the bad field)."""

    def __init__(self, where: str, data: object) -> None:
        if not isinstance(data, dict):
            raise ValueError(f"malformed {where}: expected a JSON object")
        self.where = where
        self.data: dict[str, Any] = data

    def get(self, name: str, check: Callable[[Any], bool], expected: str, **default: Any) -> Any:
        if name not in self.data:
            if "default" in default:
                return default["default"]
            raise ValueError(f"malformed {self.where}: missing field {name!r}")
        value = self.data[name]
        if not check(value):
            raise ValueError(
                f"malformed {self.where}: field {name!r} must be {expected}, "
                f"got {type(value).__name__}"
            )
        return value


def is_str(v: Any) -> bool:
    return isinstance(v, str)


def is_opt_str(v: Any) -> bool:
    return v is None or isinstance(v, str)


def is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def is_bool(v: Any) -> bool:
    return isinstance(v, bool)


def is_dict(v: Any) -> bool:
    return isinstance(v, dict)


def check_version(where: str, version: object) -> str:
    if not isinstance(version, str) or not version:
        raise SchemaVersionError(f"{where}: schema_version must be a non-empty str")
    major = version.split(".", 1)[0]
    if major != _SUPPORTED_MAJOR:
        raise SchemaVersionError(
            f"{where}: unknown schema major version {version!r} "
            f"(this polyloop reads {_SUPPORTED_MAJOR}.x)"
        )
    return version


def decode_record(text: str | bytes, readers: Mapping[str, Callable[[Fields, str], _R]]) -> _R:
    """See :func:`polyloop.types.record_from_json` (the public name): ``readers`` maps each
    record kind to what builds it from its checked fields and its schema version."""
    try:
        data = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"malformed record: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError("malformed record: expected a JSON object")
    kind = data.get("kind")
    if not isinstance(kind, str):  # checked first: a list or an object cannot be looked up
        raise ValueError(f"malformed record: field 'kind' must be a str, got {type(kind).__name__}")
    if kind not in readers:
        raise SchemaVersionError(f"unknown record kind {kind!r}")
    d = Fields(f"{kind} record", data)
    version = check_version(f"{kind} record", d.get("schema_version", is_str, "a str"))
    return readers[kind](d, version)
