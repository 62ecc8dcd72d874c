"""The batch runner: many runs of one agent, resumable as a whole (``polyloop.run_many``).

Internal; the public names are re-exported from :mod:`polyloop`. A backend that drives tasks
elsewhere (another process, another machine) builds on :class:`Backend`, :class:`BatchJob`,
:func:`drive_task`, :func:`interrupted` and :func:`shipped` (the job as another process gets it).
"""

from __future__ import annotations

from polyloop._batch._backend import (
    AsyncioBackend,
    Backend,
    BatchJob,
    Report,
    ShippedJob,
    interrupted,
    shipped,
)
from polyloop._batch._drive import Verdict, drive_task, judge
from polyloop._batch._outcome import TaskOutcome, What
from polyloop._batch._processes import ProcessBackend
from polyloop._batch._run_many import Plan, execute, plan, run_many, vet
from polyloop._batch._summary import BatchSummary, Spread
from polyloop._batch._tasks import RunSeams, SeamsFactory, Task, batch_run_id, seams_of

__all__ = [
    "AsyncioBackend",
    "Backend",
    "BatchJob",
    "BatchSummary",
    "Plan",
    "ProcessBackend",
    "Report",
    "RunSeams",
    "SeamsFactory",
    "ShippedJob",
    "Spread",
    "Task",
    "TaskOutcome",
    "Verdict",
    "What",
    "batch_run_id",
    "drive_task",
    "execute",
    "interrupted",
    "judge",
    "plan",
    "run_many",
    "seams_of",
    "shipped",
    "vet",
]
