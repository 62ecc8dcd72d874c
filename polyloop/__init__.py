"""polyloop — a small, dependency-free agent-loop runtime.

One *run* takes a goal and repeats steps (prompt, model, parse, act, record, decide to stop).
Every side effect goes through one of five seams (:mod:`polyloop.ports`) and is preceded by a
durable intent record, so a crashed run resumes without silently repeating an action.
"""

from __future__ import annotations

from polyloop._base._run_id import validate_run_id
from polyloop._base._run_index import Percentiles, RunQuery, RunStats, RunSummary
from polyloop._batch import (
    BatchSummary,
    ProcessBackend,
    RunSeams,
    Task,
    TaskOutcome,
    batch_run_id,
    run_many,
)
from polyloop._loop._run import resume, run
from polyloop._version import __version__
from polyloop.errors import (
    IndexNotBuilt,
    InvalidRunId,
    ParametersChanged,
    PolyloopError,
    RunAlreadyExists,
    RunAlreadyFinished,
    RunConflict,
    RunNotFound,
    SchemaVersionError,
    StoreCorrupted,
    TaskRefused,
)
from polyloop.tools import Tool, ToolEnvironmentError, ToolRegistry

# shared shape, kept on purpose: import list
from polyloop.types import (
    MAX_NESTING,
    SCHEMA_VERSION,
    Action,
    ActionIntent,
    ActionOutcome,
    ActionStatus,
    AgentDefinition,
    Budget,
    Event,
    FinalAnswer,
    InvalidDecision,
    Message,
    ModelCallIntent,
    ModelReplied,
    ModelReply,
    ParsedReply,
    Record,
    RunFinished,
    RunLog,
    RunResult,
    RunStarted,
    StepCompleted,
    StepRecord,
    StopReason,
    SyntheticObservations,
    action_or_feedback,
    canonical_json,
    parameters_hash,
    record_from_json,
)

# shared shape, kept on purpose: import list (the names it exports)
__all__ = [
    "MAX_NESTING",
    "SCHEMA_VERSION",
    "Action",
    "ActionIntent",
    "ActionOutcome",
    "ActionStatus",
    "AgentDefinition",
    "BatchSummary",
    "Budget",
    "Event",
    "FinalAnswer",
    "IndexNotBuilt",
    "InvalidDecision",
    "InvalidRunId",
    "Message",
    "ModelCallIntent",
    "ModelReplied",
    "ModelReply",
    "ParametersChanged",
    "ParsedReply",
    "Percentiles",
    "PolyloopError",
    "ProcessBackend",
    "Record",
    "RunAlreadyExists",
    "RunAlreadyFinished",
    "RunConflict",
    "RunFinished",
    "RunLog",
    "RunNotFound",
    "RunQuery",
    "RunResult",
    "RunSeams",
    "RunStarted",
    "RunStats",
    "RunSummary",
    "SchemaVersionError",
    "StepCompleted",
    "StepRecord",
    "StopReason",
    "StoreCorrupted",
    "SyntheticObservations",
    "Task",
    "TaskOutcome",
    "TaskRefused",
    "Tool",
    "ToolEnvironmentError",
    "ToolRegistry",
    "__version__",
    "action_or_feedback",
    "batch_run_id",
    "canonical_json",
    "parameters_hash",
    "record_from_json",
    "resume",
    "run",
    "run_many",
    "validate_run_id",
]
