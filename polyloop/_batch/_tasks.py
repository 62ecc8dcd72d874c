"""What a batch is made of: a task, the seams of one run, and the run id a task gets.

One reason to change: the shape of a batch's input. Standard library only; no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from polyloop._base._run_id import validate_run_id
from polyloop._base._shown import shown
from polyloop.errors import InvalidRunId
from polyloop.ports import ActionExecutor, DecisionParser, EventSink, ModelClient

__all__ = ["RunSeams", "SeamsFactory", "Task", "batch_run_id", "seams_of"]


@dataclass(frozen=True, slots=True)
class Task:
    """One rollout of a batch: its id (unique in the batch), its goal and free-form labels.

    ``labels`` are copied into the run's ``RunStarted`` for analysis (``{"split": "dev"}``);
    they are not shown to the model. Raises ``TypeError``/``ValueError`` naming the field for an
    id that is not a non-empty ``str``, a goal that is not a ``str``, labels that are not a
    mapping of ``str`` to ``str``.
    """

    id: str
    goal: str
    labels: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.id, str):
            raise TypeError(f"task id must be a str, got {type(self.id).__name__}")
        if not self.id:
            raise ValueError("task id must not be empty")
        if not isinstance(self.goal, str):
            raise TypeError(
                f"task {shown(self.id, 40)}: goal must be a str, got {type(self.goal).__name__}"
            )
        object.__setattr__(self, "labels", _labels(self.id, self.labels))


def _labels(task_id: str, labels: object) -> dict[str, str]:
    """A copy of ``labels`` as a plain dict, checked to map ``str`` to ``str``."""
    if not isinstance(labels, Mapping):
        raise TypeError(
            f"task {shown(task_id, 40)}: labels must be a mapping of str to str, got "
            f"{type(labels).__name__}"
        )
    for key, value in labels.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(
                f"task {shown(task_id, 40)}: labels must map str to str, got "
                f"{shown(key, 40)}: {shown(value, 40)} "
                f"({type(key).__name__} to {type(value).__name__})"
            )
    return dict(labels)


@dataclass(frozen=True, slots=True)
class RunSeams:
    """The seams of one run of a batch. A mapping with these keys is accepted wherever a
    ``RunSeams`` is (``{"model": ..., "parser": ..., "executor": ...}``)."""

    model: ModelClient
    parser: DecisionParser
    executor: ActionExecutor
    events: EventSink | None = None


#: Called once per run with its task; returns that run's seams (a ``RunSeams`` or a mapping).
SeamsFactory = Callable[[Task], "RunSeams | Mapping[str, Any]"]

_SEAM_KEYS = frozenset(("model", "parser", "executor", "events"))


def seams_of(given: object) -> RunSeams:
    """``given`` as a ``RunSeams``: itself, or built from a mapping with those keys.

    ``TypeError`` for anything else, for a mapping missing ``model``, ``parser`` or
    ``executor``, or one with a key ``RunSeams`` does not have.
    """
    if isinstance(given, RunSeams):
        return given
    if not isinstance(given, Mapping):
        raise TypeError(
            f"the seams factory must return a RunSeams or a mapping with the keys model, "
            f"parser, executor (and optionally events), got {type(given).__name__}"
        )
    unknown = sorted(str(key) for key in given if key not in _SEAM_KEYS)
    missing = [key for key in ("model", "parser", "executor") if key not in given]
    if unknown or missing:
        raise TypeError(
            "the seams factory returned a mapping "
            + (f"without {', '.join(missing)}" if missing else "")
            + (" and " if missing and unknown else "")
            + (f"with unknown keys {', '.join(unknown)}" if unknown else "")
            + " (expected model, parser, executor and optionally events)"
        )
    return RunSeams(
        model=given["model"],
        parser=given["parser"],
        executor=given["executor"],
        events=given.get("events"),
    )


# Between the batch id and the task id in a run id: readable (``batch.task``) and allowed by the
# run-id grammar. Two batches whose ids contain it can map two tasks to one run id
# (``a`` + ``b.c`` and ``a.b`` + ``c``); RunStarted records the batch and the task, so such a
# collision is refused, never mixed (see run_many).
SEPARATOR = "."


def batch_run_id(batch: str, task_id: str) -> str:
    """The run id of task ``task_id`` in batch ``batch``: ``f"{batch}.{task_id}"``.

    Deterministic, so a second invocation finds the runs of the first. Raises
    :class:`~polyloop.InvalidRunId` when the two cannot make a valid run id (a character outside
    ``[A-Za-z0-9._-]``, a batch id not starting with a letter or digit, more than 128
    characters in all), naming the part at fault.
    """
    for name, part in (("batch id", batch), ("task id", task_id)):
        if not isinstance(part, str):
            raise InvalidRunId(f"{name} must be a str, got {type(part).__name__}")
        if not part:
            raise InvalidRunId(f"{name} must not be empty")
    try:
        validate_run_id(batch)
    except InvalidRunId as exc:
        raise InvalidRunId(f"batch id {shown(batch, 40)} cannot start a run id: {exc}") from None
    run_id = f"{batch}{SEPARATOR}{task_id}"
    try:
        return validate_run_id(run_id)
    except InvalidRunId as exc:
        raise InvalidRunId(
            f"task id {shown(task_id, 40)} in batch {shown(batch, 40)} makes no valid run id: {exc}"
        ) from None
