"""Records to and from canonical JSON: the encoder behind ``to_json()`` and the type-checked
decoder behind :func:`polyloop.types.record_from_json`.

Kept apart from the value types so ``types.py`` reads as the data it defines. This module
imports :mod:`polyloop.types`; ``types`` reaches back here only inside its two functions.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import Any

from polyloop._utf8_json import utf8_json
from polyloop.errors import SchemaVersionError
from polyloop.types import (
    MAX_NESTING,
    RECORD_TYPES,
    Action,
    ActionIntent,
    ActionStatus,
    ModelCallIntent,
    ModelReplied,
    ModelReply,
    Record,
    RunFinished,
    RunStarted,
    StepCompleted,
    StepRecord,
    StopReason,
    canonical_json,
    usage_problem,
)

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


def record_to_json(record: Record) -> str:
    """See ``Record.to_json()`` (the public name).

    The text is always valid UTF-8: a lone surrogate is written as its JSON escape
    (:func:`polyloop._utf8_json.utf8_json`), so every store that keeps this text as it is
    round-trips every string Python and JSON accept.

    Every record but ``RunStarted`` holds user data whose depth its own type already bounds
    (``Action.tool_args``, ``ModelReply.usage``): it is encoded in one pass of the C encoder,
    the hot path of every commit. ``RunStarted`` carries the agent's parameters — tool schemas
    of any depth — through the walk that counts levels and refuses more than ``MAX_NESTING``.
    """
    if isinstance(record, RunStarted):
        body = _jsonable(record)
        assert isinstance(body, dict)
        return utf8_json(canonical_json({"kind": record.kind, **body}))
    fields = _plain(record)
    assert isinstance(fields, dict)
    try:
        return utf8_json(_ENCODER.encode({"kind": record.kind, **fields}))
    except RecursionError:
        raise ValueError(f"{record.kind} holds data nested too deeply or circular") from None


class _Decoder:
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


def _is_str(v: Any) -> bool:
    return isinstance(v, str)


def _is_opt_str(v: Any) -> bool:
    return v is None or isinstance(v, str)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_bool(v: Any) -> bool:
    return isinstance(v, bool)


def _is_dict(v: Any) -> bool:
    return isinstance(v, dict)


def _check_version(where: str, version: object) -> str:
    if not isinstance(version, str) or not version:
        raise SchemaVersionError(f"{where}: schema_version must be a non-empty str")
    major = version.split(".", 1)[0]
    if major != _SUPPORTED_MAJOR:
        raise SchemaVersionError(
            f"{where}: unknown schema major version {version!r} "
            f"(this polyloop reads {_SUPPORTED_MAJOR}.x)"
        )
    return version


def _decode_reply(data: object) -> ModelReply:
    d = _Decoder("model reply", data)
    usage = d.get("usage", _is_dict, "an object", default={})
    problem = usage_problem(usage)
    if problem is not None:
        raise ValueError(f"malformed model reply: usage {problem}")
    return ModelReply(
        text=d.get("text", _is_str, "a str"),
        reasoning=d.get("reasoning", _is_str, "a str", default=""),
        call_id=d.get("call_id", _is_opt_str, "a str or null", default=None),
        usage=usage,
    )


def _decode_action(data: object) -> Action:
    d = _Decoder("action", data)
    return Action(
        text=d.get("text", _is_str, "a str"),
        tool_name=d.get("tool_name", _is_opt_str, "a str or null", default=None),
        tool_args=d.get(
            "tool_args", lambda v: v is None or _is_dict(v), "an object or null", default=None
        ),
    )


def _decode_status(value: Any) -> ActionStatus | None:
    if value is None:
        return None
    try:
        return ActionStatus(value)
    except ValueError:
        raise ValueError(f"malformed step record: unknown action_status {value!r}") from None


def _decode_step(data: object) -> StepRecord:
    d = _Decoder("step record", data)
    version = _check_version("step record", d.get("schema_version", _is_str, "a str"))
    kwargs: dict[str, Any] = {}
    for name in (
        "step_index",
        "response_chars",
        "reasoning_chars",
        "observation_truncated_chars",
        "prompt_chars",
        "step_wall_ms",
    ):
        kwargs[name] = d.get(name, _is_int, "an int")
    for name in ("raw_output", "observation"):
        kwargs[name] = d.get(name, _is_str, "a str")
    for name in ("action", "parse_error", "llm_call_id"):
        kwargs[name] = d.get(name, _is_opt_str, "a str or null")
    for name in ("tool_name", "tool_args_json"):
        kwargs[name] = d.get(name, _is_opt_str, "a str or null", default=None)
    for name in ("parse_ok", "observation_is_synthetic"):
        kwargs[name] = d.get(name, _is_bool, "a bool")
    kwargs["env_reported_completion"] = d.get(
        "env_reported_completion", _is_bool, "a bool", default=False
    )
    kwargs["action_status"] = _decode_status(d.data.get("action_status"))
    return StepRecord(schema_version=version, **kwargs)


def _decode_record(kind: str, d: _Decoder, version: str) -> Record:
    if kind == "run_started":
        return RunStarted(
            run_id=d.get("run_id", _is_str, "a str"),
            goal=d.get("goal", _is_str, "a str"),
            parameters=d.get("parameters", _is_dict, "an object"),
            parameters_hash=d.get("parameters_hash", _is_str, "a str"),
            started_at=d.get("started_at", _is_str, "a str"),
            schema_version=version,
        )
    if kind == "model_call_intent":
        return ModelCallIntent(
            step_index=d.get("step_index", _is_int, "an int"),
            prompt_chars=d.get("prompt_chars", _is_int, "an int"),
            schema_version=version,
        )
    if kind == "model_replied":
        return ModelReplied(
            step_index=d.get("step_index", _is_int, "an int"),
            reply=_decode_reply(d.get("reply", _is_dict, "an object")),
            schema_version=version,
        )
    if kind == "action_intent":
        return ActionIntent(
            step_index=d.get("step_index", _is_int, "an int"),
            action=_decode_action(d.get("action", _is_dict, "an object")),
            schema_version=version,
        )
    if kind == "step_completed":
        return StepCompleted(
            step=_decode_step(d.get("step", _is_dict, "an object")),
            executor_observation=d.get(
                "executor_observation", _is_opt_str, "a str or null", default=None
            ),
            model_error=d.get("model_error", _is_opt_str, "a str or null", default=None),
            schema_version=version,
        )
    stop = d.get("stop_reason", _is_str, "a str")
    try:
        stop_reason = StopReason(stop)
    except ValueError:
        raise ValueError(f"malformed run_finished record: unknown stop_reason {stop!r}") from None
    return RunFinished(
        stop_reason=stop_reason,
        final_answer=d.get("final_answer", _is_opt_str, "a str or null"),
        executed_actions=d.get("executed_actions", _is_int, "an int"),
        finished_at=d.get("finished_at", _is_str, "a str"),
        schema_version=version,
    )


_KINDS = {cls.kind for cls in RECORD_TYPES}


def decode_record(text: str | bytes) -> Record:
    """See :func:`polyloop.types.record_from_json` (the public name)."""
    try:
        data = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"malformed record: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError("malformed record: expected a JSON object")
    kind = data.get("kind")
    if not isinstance(kind, str):  # checked first: a list or an object cannot be looked up
        raise ValueError(f"malformed record: field 'kind' must be a str, got {type(kind).__name__}")
    if kind not in _KINDS:
        raise SchemaVersionError(f"unknown record kind {kind!r}")
    d = _Decoder(f"{kind} record", data)
    version = _check_version(f"{kind} record", d.get("schema_version", _is_str, "a str"))
    return _decode_record(kind, d, version)
