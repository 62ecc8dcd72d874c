"""polyloop — a small, dependency-free agent-loop runtime.

One *run* takes a goal and repeats steps (prompt, model, parse, act, record, decide to stop).
Every side effect goes through one of five seams (:mod:`polyloop.ports`) and is preceded by a
durable intent record, so a crashed run resumes without silently repeating an action.
"""

from __future__ import annotations

from polyloop._loop import resume, run
from polyloop._run_id import validate_run_id
from polyloop._run_index import Percentiles, RunQuery, RunStats, RunSummary
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
)
from polyloop.tools import Tool, ToolEnvironmentError, ToolRegistry
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
    canonical_json,
    parameters_hash,
    record_from_json,
)

__all__ = [
    "MAX_NESTING",
    "SCHEMA_VERSION",
    "Action",
    "ActionIntent",
    "ActionOutcome",
    "ActionStatus",
    "AgentDefinition",
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
    "Record",
    "RunAlreadyExists",
    "RunAlreadyFinished",
    "RunConflict",
    "RunFinished",
    "RunLog",
    "RunNotFound",
    "RunQuery",
    "RunResult",
    "RunStarted",
    "RunStats",
    "RunSummary",
    "SchemaVersionError",
    "StepCompleted",
    "StepRecord",
    "StopReason",
    "StoreCorrupted",
    "SyntheticObservations",
    "Tool",
    "ToolEnvironmentError",
    "ToolRegistry",
    "__version__",
    "canonical_json",
    "parameters_hash",
    "record_from_json",
    "resume",
    "run",
    "validate_run_id",
]
