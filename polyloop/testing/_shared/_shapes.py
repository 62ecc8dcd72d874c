"""Exact type checks of what a seam returns, field by field.

Constructors validate only a few fields, and a broken implementation can bypass even those (a
duck-typed object, ``object.__setattr__`` on a frozen instance). The library stores and compares
what a seam returns, so a wrong type — ``"executed"`` instead of ``ActionStatus.EXECUTED``,
``1`` instead of ``True``, ``None`` instead of ``0`` — would surface far from its cause. Every
promise therefore checks the returned value's type and every field's type through these helpers.
Each returns a list of problems (empty when the value is well-formed) so one message names all.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Mapping
from typing import Any

from polyloop._base._shown import shown
from polyloop.types import (
    Action,
    ActionOutcome,
    ActionStatus,
    FinalAnswer,
    InvalidDecision,
    ModelReply,
    RunLog,
    usage_problem,
)

_MISSING = object()


#: How long a value or an exception quoted in a failure message may be.
SHORT = 160


def short(value: object, limit: int = SHORT) -> str:
    """``repr`` cut to ``limit`` characters, so a huge input does not flood a failure message."""
    return shown(value, limit)


def assert_correctable(text: str, what: str) -> None:
    """A text the model is meant to correct itself from (an invalid reply's feedback, a failing
    action's observation) is never blank; ``what`` says whose text it is."""
    assert text.strip() != "", (
        f"{what} is blank ({short(text)}): the model would get nothing to correct itself from"
    )


def _is_str(v: object) -> bool:
    return isinstance(v, str)


def _is_opt_str(v: object) -> bool:
    return v is None or isinstance(v, str)


def _is_bool(v: object) -> bool:
    return type(v) is bool


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _check_fields(
    where: str,
    value: object,
    expected: type,
    checks: Mapping[str, tuple[Callable[[Any], bool], str]],
) -> list[str]:
    if not isinstance(value, expected):
        return [
            f"{where} must be a polyloop {expected.__name__}, got {type(value).__name__}: "
            f"{short(value)}"
        ]
    problems = []
    for name, (check, wanted) in checks.items():
        field_value = getattr(value, name, _MISSING)
        if field_value is _MISSING:
            problems.append(
                f"{where}.{name} is missing (the object was built around the constructor)"
            )
        elif not check(field_value):
            problems.append(
                f"{where}.{name} must be {wanted}, got {type(field_value).__name__}: "
                f"{short(field_value)}"
            )
    return problems


def action_outcome_problems(value: object, where: str = "outcome") -> list[str]:
    """``ActionOutcome`` with an ``ActionStatus`` member, a str and two real bools, an int ≥ 0."""
    return _check_fields(
        where,
        value,
        ActionOutcome,
        {
            "status": (lambda v: isinstance(v, ActionStatus), "an ActionStatus member"),
            "observation": (_is_str, "a str"),
            "observation_is_synthetic": (_is_bool, "a bool"),
            "env_reported_completion": (_is_bool, "a bool"),
            "observation_truncated_chars": (_is_int, "an int"),
        },
    )


def _is_usage(v: object) -> bool:
    return usage_problem(v) is None


def _is_opt_name(v: object) -> bool:
    return v is None or (_is_str(v) and v != "")


def model_reply_problems(value: object, where: str = "reply") -> list[str]:
    """``ModelReply``: str text and reasoning, ``call_id`` None or non-empty, str→number usage;
    ``model`` and ``finish_reason``, when the reply has them, None or non-empty."""
    problems = _check_fields(
        where,
        value,
        ModelReply,
        {
            "text": (_is_str, "a str"),
            "reasoning": (_is_str, "a str"),
            "call_id": (_is_opt_name, "None or a non-empty str"),
            "usage": (_is_usage, "a mapping of str to int or finite float"),
        },
    )
    if not isinstance(value, ModelReply):
        return problems
    for name in ("model", "finish_reason"):  # newer fields: checked only when present
        field_value = getattr(value, name, _MISSING)
        if field_value is not _MISSING and not _is_opt_name(field_value):
            problems.append(
                f"{where}.{name} must be None or a non-empty str, got "
                f"{type(field_value).__name__}: {short(field_value)}"
            )
    return problems


def _is_tool_args(v: object) -> bool:
    return v is None or (isinstance(v, Mapping) and all(_is_str(k) for k in v))


def parsed_reply_problems(value: object, where: str = "decision") -> list[str]:
    """Exactly one of ``Action``, ``FinalAnswer``, ``InvalidDecision``, fields well-typed."""
    if isinstance(value, Action):
        return _check_fields(
            where,
            value,
            Action,
            {
                "text": (_is_str, "a str"),
                "tool_name": (_is_opt_str, "None or a str"),
                "tool_args": (_is_tool_args, "None or a mapping with str keys"),
            },
        )
    if isinstance(value, FinalAnswer):
        return _check_fields(where, value, FinalAnswer, {"text": (_is_str, "a str")})
    if isinstance(value, InvalidDecision):
        return _check_fields(where, value, InvalidDecision, {"feedback": (_is_str, "a str")})
    return [
        f"{where} must be one of Action, FinalAnswer, InvalidDecision, got "
        f"{type(value).__name__}: {short(value)}"
    ]


def run_log_problems(value: object, where: str = "read_log(...)") -> list[str]:
    """A ``RunLog`` whose ``records`` is a tuple."""
    if not isinstance(value, RunLog):
        return [
            f"{where} must return a polyloop RunLog, got {type(value).__name__}: {short(value)}"
        ]
    records = getattr(value, "records", _MISSING)
    if not isinstance(records, tuple):
        return [f"{where}.records must be a tuple, got {type(records).__name__}"]
    return []


def typed(value: object) -> str:
    """A value as a mismatch names it: its exact type, then its ``repr`` (``int 42``)."""
    return f"{type(value).__name__} {short(value)}"


def _text_difference(expected: str, actual: str) -> str:
    """Where two texts first differ, code point by code point (``é`` is one code point or two)."""
    index = next(
        (i for i, (e, a) in enumerate(zip(expected, actual, strict=False)) if e != a),
        min(len(expected), len(actual)),
    )

    def point(text: str) -> str:
        return f"U+{ord(text[index]):04X}" if index < len(text) else "the end"

    return f" (first difference at code point {index}: {point(expected)} vs {point(actual)})"


def _keys(mapping: Mapping[Any, Any]) -> list[tuple[str, object]]:
    return [(type(key).__name__, key) for key in mapping]


def _mapping_mismatch(
    expected: Mapping[Any, Any], actual: Mapping[Any, Any], where: str
) -> str | None:
    """Keys compared by type and value (``{1: x}`` is not ``{True: x}``), then each value."""
    want, got = _keys(expected), _keys(actual)
    if sorted(want, key=repr) != sorted(got, key=repr):
        return (
            f"{where}: expected keys [{', '.join(typed(k) for k in expected)}], "
            f"got keys [{', '.join(typed(k) for k in actual)}]"
        )
    for key in expected:
        found = mismatch(expected[key], actual[key], f"{where}[{key!r}]")
        if found:
            return found
    return None


def mismatch(expected: object, actual: object, where: str) -> str | None:
    """The first place where ``actual`` differs from ``expected`` in value *or exact type*.

    Equality alone is not enough: ``StopReason.X == "x"``, ``True == 1`` and ``42 == 42.0``
    hold, so a store that hands back a plain string, an int or a float would pass an ``==``
    check and break a caller's ``is``/``match`` or its JSON. Walks dataclasses, mappings (keys
    by type and value) and sequences (in order); texts compare code point by code point. The
    message names the field and both values with their types.
    """
    if type(expected) is not type(actual):
        return f"{where}: expected {typed(expected)}, got {typed(actual)}"
    if dataclasses.is_dataclass(expected) and not isinstance(expected, type):
        for f in dataclasses.fields(expected):
            got = getattr(actual, f.name, _MISSING)
            if got is _MISSING:
                return f"{where}.{f.name}: missing"
            found = mismatch(getattr(expected, f.name), got, f"{where}.{f.name}")
            if found:
                return found
        return None
    if isinstance(expected, Mapping):
        assert isinstance(actual, Mapping)
        return _mapping_mismatch(expected, actual, where)
    if isinstance(expected, list | tuple):
        assert isinstance(actual, list | tuple)
        if len(expected) != len(actual):
            return f"{where}: expected {len(expected)} items, got {len(actual)}"
        for index, (e, a) in enumerate(zip(expected, actual, strict=True)):
            found = mismatch(e, a, f"{where}[{index}]")
            if found:
                return found
        return None
    if isinstance(expected, enum.Enum):
        return None if expected is actual else f"{where}: expected {expected!r}, got {actual!r}"
    if expected != actual and not (expected != expected and actual != actual):  # NaN == NaN here
        said = f"{where}: expected {typed(expected)}, got {typed(actual)}"
        if isinstance(expected, str) and isinstance(actual, str):
            said += _text_difference(expected, actual)
        return said
    return None


#: How long a text inside a drawn value may be where a falsifying example prints it.
_BRIEF_TEXT = 200


def brief(value: object) -> str:
    """``repr`` of a record, an event or a container of them with every long text cut (saying
    how long it was): the falsifying example of a property over 1 MiB texts stays readable."""
    if isinstance(value, str):
        return shown(value, _BRIEF_TEXT)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = ", ".join(
            f"{f.name}={brief(getattr(value, f.name, None))}" for f in dataclasses.fields(value)
        )
        return f"{type(value).__name__}({fields})"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{brief(k)}: {brief(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        inner = ", ".join(brief(item) for item in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner}{',' * (len(value) == 1)})"
    return repr(value)


class Drawn(tuple):  # type: ignore[type-arg]
    """A drawn tuple of records or events that Hypothesis prints with :func:`brief`: whole, it
    printed megabytes and made Hypothesis warn ("Generating overly large repr") on a failure."""

    __slots__ = ()

    def __repr__(self) -> str:
        return brief(tuple(self))
