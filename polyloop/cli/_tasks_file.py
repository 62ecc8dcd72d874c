"""A batch's tasks file: JSON Lines, one task a line, ``{"id": …, "goal": …, "labels": {…}}``.

Every problem is one :class:`BadTasks` naming the file and the line (``tasks.jsonl:17: …``), found
before anything runs. Lines holding only whitespace are skipped (a trailing blank line, a
separator); every other line must be one JSON object with exactly the keys ``id`` (a non-empty
string), ``goal`` (a string) and optionally ``labels`` (an object of strings to strings). A key
given twice in one object is refused rather than silently taking the last value, and so is a
task id given on two lines.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from polyloop._base._shown import shown
from polyloop._batch import Task

__all__ = ["BadTasks", "NumberedTask", "read_tasks"]

_KEYS = ("id", "goal", "labels")


class BadTasks(Exception):
    """The tasks file cannot be used: one line, naming the file and, where there is one, the
    line."""


@dataclass(frozen=True, slots=True)
class NumberedTask:
    """A task and the line of the file it was read from (1-based)."""

    line: int
    task: Task


def read_tasks(path: Path) -> list[NumberedTask]:
    """The tasks of ``path``, in file order; :class:`BadTasks` for the first problem."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise BadTasks(f"{path}: no such file") from None
    except IsADirectoryError:
        raise BadTasks(f"{path}: a directory, not a tasks file") from None
    except OSError as exc:
        raise BadTasks(f"{path}: cannot be read ({exc.strerror or exc})") from None
    tasks: list[NumberedTask] = []
    first: dict[str, int] = {}
    for number, line in enumerate(_lines(path, raw), start=1):
        if not line.strip():
            continue
        task = _task(path, number, line)
        if task.id in first:
            raise BadTasks(
                f"{path}:{number}: duplicate task id {shown(task.id, 40)} (first on line "
                f"{first[task.id]})"
            )
        first[task.id] = number
        tasks.append(NumberedTask(number, task))
    if not tasks:
        raise BadTasks(f"{path}: no tasks (one JSON object a line: id, goal, optional labels)")
    return tasks


def _lines(path: Path, raw: bytes) -> list[str]:
    """The file's lines as text; a line that is not UTF-8 is named."""
    lines = raw.split(b"\n")
    text = []
    for number, line in enumerate(lines, start=1):
        try:
            text.append(line.decode("utf-8-sig" if number == 1 else "utf-8"))
        except UnicodeDecodeError as exc:
            raise BadTasks(f"{path}:{number}: not UTF-8 text (byte {exc.start + 1})") from None
    return text


def _task(path: Path, number: int, line: str) -> Task:
    where = f"{path}:{number}"
    try:
        value = json.loads(line, object_pairs_hook=_no_duplicate_keys)
    except _DuplicateKey as exc:
        raise BadTasks(f"{where}: key {shown(exc.args[0], 40)} given twice") from None
    except (json.JSONDecodeError, RecursionError) as exc:
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
        raise BadTasks(f"{where}: not JSON ({reason})") from None
    if not isinstance(value, dict):
        raise BadTasks(f"{where}: not a JSON object (got {_json_type(value)}); a task is "
                       '{"id": ..., "goal": ..., "labels": {...}}')  # fmt: skip
    unknown = [key for key in value if key not in _KEYS]
    if unknown:
        raise BadTasks(
            f"{where}: unknown key {shown(unknown[0], 40)} (a task has id, goal and optional "
            "labels)"
        )
    for key in ("id", "goal"):
        if key not in value:
            raise BadTasks(f'{where}: no "{key}"')
    return _built(where, value)


def _built(where: str, value: dict[str, Any]) -> Task:
    task_id, goal, labels = value["id"], value["goal"], value.get("labels", {})
    if not isinstance(task_id, str) or not task_id:
        raise BadTasks(f'{where}: "id" must be a non-empty string, got {_shown_json(task_id)}')
    if not isinstance(goal, str):
        raise BadTasks(f'{where}: "goal" must be a string, got {_shown_json(goal)}')
    if not isinstance(labels, dict):
        raise BadTasks(f'{where}: "labels" must be an object, got {_shown_json(labels)}')
    for key, label in labels.items():
        if not isinstance(label, str):
            raise BadTasks(
                f'{where}: "labels" must map strings to strings; {shown(key, 40)} is '
                f"{_shown_json(label)}"
            )
    return Task(task_id, goal, labels)


class _DuplicateKey(ValueError):
    pass


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKey(key)
        result[key] = value
    return result


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _shown_json(value: object) -> str:
    """A JSON value in a message: its type, and the value itself when it is short."""
    if isinstance(value, dict | list):
        return _json_type(value)
    return f"{_json_type(value)} ({shown(value, 40)})" if value is not None else "null"
