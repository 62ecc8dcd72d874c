"""Every error polyloop raises on purpose is a :class:`PolyloopError`.

Callers can catch the base class to tell "polyloop refused" apart from a bug in a seam
implementation (which propagates untouched, with its own type).
"""

from __future__ import annotations

__all__ = [
    "IndexNotBuilt",
    "InvalidRunId",
    "ParametersChanged",
    "PolyloopError",
    "RunAlreadyExists",
    "RunAlreadyFinished",
    "RunConflict",
    "RunNotFound",
    "SchemaVersionError",
    "StoreCorrupted",
    "TaskRefused",
]


class PolyloopError(Exception):
    """Base class of every error polyloop raises deliberately."""


class RunAlreadyExists(PolyloopError):
    """A ``RunStarted`` was appended (or ``run()`` was called) for a run id that has a log."""


class RunNotFound(PolyloopError):
    """``resume()`` was asked for a run id whose log is empty."""


class RunAlreadyFinished(PolyloopError):
    """A record was appended after the run's ``RunFinished``."""


class RunConflict(PolyloopError):
    """``append`` was given a ``sequence`` that is not the log's current length.

    This is the fence between two processes driving the same run: the loser gets this error
    and writes nothing, so a never-replay action cannot run twice.
    """


class ParametersChanged(PolyloopError):
    """``resume()`` was given an agent whose ``parameters()`` hash differs from the log's."""


class SchemaVersionError(PolyloopError):
    """A record has an unknown ``kind`` or an unknown major ``schema_version``."""


class StoreCorrupted(PolyloopError):
    """The store's backing data is not a polyloop log (or is damaged); names the location."""


class IndexNotBuilt(PolyloopError):
    """The store's run index is not built yet: the store was written by a polyloop without the
    index and has been opened without migrating it (a read-only command). Read the logs, or
    open it for writing (``polyloop migrate``) to build the index."""


class InvalidRunId(PolyloopError, ValueError):
    """A run id does not match ``[A-Za-z0-9][A-Za-z0-9._-]{0,127}``; raised before any I/O."""


class TaskRefused(PolyloopError, ValueError):
    """``run_many`` refused a task before starting anything: its run id would be invalid, its
    id is a duplicate, or the store holds a run for it that is not this task's (another goal,
    other labels, another batch, or an unfinished run of another agent).

    ``index`` is the task's position in the list given (0-based), ``task_id`` its id (``None``
    when it had none), ``reason`` the message without the task's position; ``others`` how many
    more tasks were refused for the same check.
    """

    def __init__(self, index: int, task_id: str | None, reason: str, *, others: int = 0) -> None:
        self.index = index
        self.task_id = task_id
        self.reason = reason
        self.others = others
        plural = "" if others == 1 else "s"
        more = f" ({others} more task{plural} refused likewise)" if others else ""
        super().__init__(f"task {index + 1}: {reason}{more}")
