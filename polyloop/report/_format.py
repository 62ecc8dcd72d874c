"""The report format: its schema tags, outcomes, glyphs and errors, and the reader.

:func:`load_report` reads and checks a file against the shipped ``report.schema.json`` (or
``report-1.schema.json`` for ``polyloop-conformance/1``); every other module of the report
package builds on the names defined here and none of them is imported back.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, Literal, get_args

from polyloop._base._shown import shown

SCHEMA = "polyloop-conformance/2"
# Every schema tag the readers accept (``polyloop report``, ``report diff``, baselines): /1 has
# no setup_error and no interrupted, read as absent.
READABLE_SCHEMAS = frozenset({"polyloop-conformance/1", SCHEMA})
# /1 files are checked against the schema they were written with, shipped beside the current one.
_SCHEMA_FILES = {SCHEMA: "report.schema.json", "polyloop-conformance/1": "report-1.schema.json"}
Outcome = Literal[
    "held",
    "violated",
    "setup_error",
    "unverifiable",
    "not_applicable",
    "waived",
    "stale_waiver",
    "overridden",
    "pending",
]
OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)  # the report's order, written once above
Key = tuple[str, str]  # (implementation id, promise id)

#: How a violated promise's detail says it shares another promise's cause (a knock-on): the kit
#: starts it ``same cause as <promise id>:`` (pytest may put ``Failed:`` before it).
_SAME_CAUSE = re.compile(r"(?:Failed: )?same cause as ([A-Za-z_][A-Za-z0-9_]*\.[A-Za-z0-9_]+):")
#: The ``counts`` key of the violated promises that follow another's cause (absent when none).
FOLLOWS = "follows"


def mark_knock_ons(promises: Sequence[MutableMapping[str, Any]]) -> None:
    """Set ``follows`` on each violated promise of one implementation whose detail starts
    ``same cause as <id>:`` when ``<id>`` is violated there too and follows nothing itself:
    one cause counts once (:func:`count_outcomes`). A pointer to a promise that is not violated
    (or to itself) is not a knock-on: that promise stays a cause of its own, never hidden."""
    by_id = {promise["id"]: promise for promise in promises}
    pointers: dict[str, str] = {}
    for promise in promises:
        promise.pop(FOLLOWS, None)
        found = _SAME_CAUSE.match(str(promise.get("detail") or ""))
        if promise["outcome"] == "violated" and found is not None:
            pointers[promise["id"]] = found.group(1)
    for promise_id, cause in pointers.items():
        target = by_id.get(cause) if cause != promise_id and cause not in pointers else None
        if target is not None and target["outcome"] == "violated":
            by_id[promise_id][FOLLOWS] = cause


def count_outcomes(promises: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """An implementation's ``counts``: each outcome once per promise, but a violated promise
    that follows another's cause under ``follows`` (present only then), not ``violated``; a
    setup error once however many promises it folds."""
    counts: dict[str, int] = dict.fromkeys(OUTCOMES, 0)
    for promise in promises:
        key = FOLLOWS if promise.get(FOLLOWS) else promise["outcome"]
        counts[key] = counts.get(key, 0) + 1
    counts["setup_error"] = min(counts["setup_error"], 1)
    return counts


_NULLABLE_TEXTS = ("why", "verify_yourself", "detail", "waiver_reason")  # of a promise
_VERDICT_TEXT = {
    "conformant": "conformant",
    "setup_error": "SETUP ERROR (an implementation could not be built: its promises did not run)",
    "violations": "VIOLATIONS",
    "incomplete": "INCOMPLETE (promises missing, none held, overridden without a waiver, or a "
    "fixture teardown failed)",
    "no_implementations": "NO IMPLEMENTATIONS FOUND",
}


# The matrix views' glyph of each outcome (a cell reads without colour).
GLYPHS: dict[str, str] = {
    "held": "✓",
    "violated": "✗",
    "unverifiable": "~",
    "not_applicable": "–",
    "waived": "W",
    "overridden": "O",
    "stale_waiver": "S",
    "pending": "P",
    "setup_error": "E",
}


class ReportError(Exception):
    """A file is not a readable report (see :data:`READABLE_SCHEMAS`); the message names the
    file and is one line."""


class MergeError(ValueError):
    """Reports that cannot be merged (one line, naming what differs)."""


def schema(version: str = SCHEMA) -> dict[str, Any]:
    """The JSON Schema of a report version (the current one unless ``version`` names an older
    one of :data:`READABLE_SCHEMAS`), shipped beside this module."""
    name = _SCHEMA_FILES.get(version)
    if name is None:
        raise ValueError(f"no schema for {version!r}; known: {', '.join(_SCHEMA_FILES)}")
    text = resources.files("polyloop.report").joinpath(name).read_text("utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def load_report(path: str | Path) -> dict[str, Any]:
    """Read and check a JSON report; raise :class:`ReportError` naming the file otherwise.

    Never anything else: a file nested too deeply for the parser, or holding text that cannot
    be printed (an escaped lone surrogate), is a :class:`ReportError` too.
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise ReportError(f"{path}: cannot read the report: {error.strerror or error}") from error
    except RecursionError:
        raise ReportError(f"{path}: not a report (JSON nested too deeply)") from None
    except ValueError as error:
        raise ReportError(f"{path}: not JSON: {_one_line(str(error))}") from error
    tag = data.get("schema") if isinstance(data, dict) else None
    if not isinstance(data, dict) or not isinstance(tag, str) or tag not in READABLE_SCHEMAS:
        found = tag if isinstance(data, dict) else type(data).__name__
        newer = _is_newer(found)
        raise ReportError(
            f"{path}: not a {SCHEMA} report (schema: {_shown(found)})"
            + (": a newer polyloop wrote it; upgrade polyloop to read it" if newer else "")
        )
    problem = _unprintable(data) or _structure_problem(data)
    if problem is not None:
        raise ReportError(f"{path}: {problem}")
    return data


def _is_newer(tag: object) -> bool:
    """``polyloop-conformance/N`` with N above this polyloop's version of the format."""
    prefix, _, current = SCHEMA.rpartition("/")
    if not isinstance(tag, str) or not tag.startswith(prefix + "/"):
        return False
    number = tag[len(prefix) + 1 :]
    # ASCII digits only: "²".isdigit() is true and int() refuses it; int("٣") reads 3.
    return number.isascii() and number.isdigit() and len(number) < 6 and int(number) > int(current)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _shown(value: object) -> str:
    """``repr`` of a value read from a file, short and printable whatever it holds."""
    if not isinstance(value, str | int | float | bool | type(None)):
        return type(value).__name__
    return shown(value, 80)


def _unprintable(data: object) -> str | None:
    """Where the report holds a string that cannot be written as UTF-8 (a lone surrogate, which
    JSON can escape as ``\\ud800``), or ``None``. Walked without recursion: ``json`` already
    refused what is nested too deeply for it, but this must not depend on that."""
    stack = [data]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                return f"malformed report (a string holds an unpaired surrogate: {_shown(value)})"
    return None


Check = tuple[str, Callable[[object], bool], str]  # field, test, what it must be


def _text(value: object) -> bool:
    return isinstance(value, str)


def _text_or_null(value: object) -> bool:
    return value is None or isinstance(value, str)


def _texts(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(part, str) for part in value)


def _number(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _object(value: object) -> bool:
    return isinstance(value, dict)


def _setup_error(value: object) -> bool:
    return value is None or (
        isinstance(value, dict)
        and all(isinstance(value.get(part), str) for part in ("type", "message", "location"))
    )


def _count_of_reruns(value: object) -> bool:
    return _number(value) and isinstance(value, int) and value >= 1


# What the readers rely on, checked in this order: first the keys diffs and baselines use,
# then what the renderers print (so a baseline is refused for its keys before anything else).
_KEYS: tuple[Check, ...] = (("id", _text, "a string"),)
_RENDERED: tuple[Check, ...] = (
    ("seam", _text, "a string"),
    ("collected", _number, "a number"),
    ("catalogue", _number, "a number"),
    ("counts", _object, "an object"),
    ("source", _text, "a string"),
    ("missing", _texts, "a list of strings"),
    ("teardown_errors", _texts, "a list of strings"),
    ("setup_error", _setup_error, "null or an object with 'type', 'message' and 'location'"),
)
_PROMISE_RENDERED: tuple[Check, ...] = (
    ("nodeid", _text, "a string"),
    ("promise", _text, "a string"),
    *((name, _text_or_null, "a string or null") for name in _NULLABLE_TEXTS),
    ("reruns", _count_of_reruns, "a whole number of at least 1"),
    (FOLLOWS, _text, "a string"),
)
_OPTIONAL = frozenset(
    {"source", "missing", "teardown_errors", "setup_error", "reruns", FOLLOWS, *_NULLABLE_TEXTS}
)


def _field_problem(entry: Mapping[str, Any], checks: tuple[Check, ...]) -> str | None:
    for name, test, kind in checks:
        if not (name not in entry and name in _OPTIONAL) and not test(entry.get(name)):
            return f"{name!r} must be {kind}"
    return None


def _promise_problem(promise: object, rendered: bool) -> str | None:
    if not isinstance(promise, dict):
        return "not an object"
    problem = _field_problem(promise, _PROMISE_RENDERED if rendered else _KEYS)
    if problem is None and not rendered and promise.get("outcome") not in OUTCOMES:
        problem = f"'outcome' must be one of {', '.join(OUTCOMES)}"
    return problem


def _structure_problem(data: Mapping[str, Any]) -> str | None:
    """What is wrong with a report's structure (one line), or ``None``."""
    implementations = data.get("implementations")
    if not isinstance(implementations, list) or not all(
        isinstance(item, dict) and isinstance(item.get("promises"), list)
        for item in implementations
    ):
        return "'implementations' must be a list of objects with 'promises'"
    for rendered in (False, True):
        for index, item in enumerate(implementations):
            problem = _field_problem(item, _RENDERED if rendered else _KEYS)
            if problem is not None:
                return f"implementations[{index}]: {problem}"
            for number, promise in enumerate(item["promises"]):
                problem = _promise_problem(promise, rendered)
                if problem is not None:
                    return f"implementations[{index}].promises[{number}]: {problem}"
    problem = _left_out_problem(data.get("left_out", []))
    if problem is not None:
        return problem
    if data.get("verdict") not in _VERDICT_TEXT:
        return f"'verdict' must be one of {', '.join(_VERDICT_TEXT)}"
    if not isinstance(data.get("interrupted", False), bool):
        return "'interrupted' must be true or false"
    return None


_LEFT_OUT: tuple[Check, ...] = (
    ("implementation", lambda value: isinstance(value, str) and bool(value), "a non-empty string"),
    ("seam", _text_or_null, "a string or null"),
    ("extra", _text_or_null, "a string or null"),
    ("hint", lambda value: isinstance(value, str) and bool(value), "a non-empty string"),
    ("ids", _texts, "a list of strings"),
)
_LEFT_OUT_OPTIONAL = frozenset({"seam", "extra", "ids"})


def _left_out_problem(left_out: object) -> str | None:
    """What is wrong with a report's ``left_out`` list (absent: an older report), or ``None``."""
    if not isinstance(left_out, list):
        return "'left_out' must be a list of objects"
    for index, entry in enumerate(left_out):
        if not isinstance(entry, dict):
            return f"left_out[{index}]: not an object"
        for name, test, kind in _LEFT_OUT:
            if not (name not in entry and name in _LEFT_OUT_OPTIONAL) and not test(entry.get(name)):
                return f"left_out[{index}]: {name!r} must be {kind}"
    return None


def outcomes_by_key(report: Mapping[str, Any]) -> dict[Key, str]:
    """``(implementation id, promise id) → outcome`` of every promise in ``report``."""
    return {
        (item["id"], promise["id"]): promise["outcome"]
        for item in report.get("implementations", [])
        for promise in item["promises"]
    }
