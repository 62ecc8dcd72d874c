"""The five seams: everything with a side effect goes through one of these Protocols.

Seam names (the strings the plugin and the contract kit use): ``model_client``,
``decision_parser``, ``action_executor``, ``event_sink``, ``run_store``.

This module also re-exports the value types the Protocols take and return, so an implementer
needs one import.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from polyloop._run_index import RunQuery, RunStats, RunSummary
from polyloop.errors import (
    RunAlreadyExists,
    RunAlreadyFinished,
    RunConflict,
)
from polyloop.types import (
    Action,
    ActionOutcome,
    ActionStatus,
    Event,
    FinalAnswer,
    InvalidDecision,
    Message,
    ModelReply,
    ParsedReply,
    Record,
    RunLog,
)

__all__ = [
    "SEAM_NAMES",
    "Action",
    "ActionExecutor",
    "ActionOutcome",
    "ActionStatus",
    "BatchRunStore",
    "DecisionParser",
    "Event",
    "EventSink",
    "FinalAnswer",
    "IndexedRunStore",
    "InlineCommitRunStore",
    "InvalidDecision",
    "Message",
    "ModelClient",
    "ModelReply",
    "ParsedReply",
    "Record",
    "RunAlreadyExists",
    "RunAlreadyFinished",
    "RunConflict",
    "RunLog",
    "RunQuery",
    "RunStats",
    "RunStore",
    "RunSummary",
]

SEAM_NAMES: tuple[str, ...] = (
    "model_client",
    "decision_parser",
    "action_executor",
    "event_sink",
    "run_store",
)


@runtime_checkable
class ModelClient(Protocol):
    """Calls a model. An unrecoverable failure is an exception (the library records
    ``llm_error``); retries are the client's business. ``call_id`` is never ``""``.
    ``CancelledError`` must pass through. Must not mutate ``messages``."""

    async def complete(self, messages: Sequence[Message]) -> ModelReply: ...


@runtime_checkable
class DecisionParser(Protocol):
    """Turns a reply into one of three decisions. Pure, deterministic and total: it returns a
    ``ParsedReply`` for *any* input (unparseable → ``InvalidDecision`` with feedback), because a
    resume re-parses a logged reply. An exception it raises anyway is not caught."""

    def parse(self, reply: ModelReply) -> ParsedReply: ...


@runtime_checkable
class ActionExecutor(Protocol):
    """Executes one action. ``executed`` whatever the action's own result; ``not_executed`` if
    it never entered execution; ``env_error`` if the environment is broken — a return value,
    not an exception. ``CancelledError`` must pass through."""

    async def execute(self, action: Action) -> ActionOutcome: ...


@runtime_checkable
class EventSink(Protocol):
    """Receives one event per appended record. A delivery failure (exception) never interrupts
    the run: the library counts it. ``CancelledError`` passes through."""

    async def emit(self, event: Event) -> None: ...


@runtime_checkable
class RunStore(Protocol):
    """The intent log.

    ``append`` is atomic and durable when it returns. ``sequence`` is the index the record will
    take: if the log's length differs, raise ``RunConflict`` and write nothing. A
    ``RunStarted`` for a run with a log raises ``RunAlreadyExists``; any record after
    ``RunFinished`` raises ``RunAlreadyFinished`` (precedence: exists, finished, conflict).
    ``read_log`` of an unknown run returns ``RunLog.empty()``. Runs are isolated.
    """

    async def append(self, run_id: str, record: Record, *, sequence: int) -> None: ...

    async def read_log(self, run_id: str) -> RunLog: ...

    async def run_ids(self) -> list[str]: ...


@runtime_checkable
class BatchRunStore(RunStore, Protocol):
    """A run store that can also append several records in one atomic, durable commit.

    Optional: the loop uses ``append_many`` when a store has it (one commit per durability
    point, SPEC §4) and otherwise appends the same records one by one. ``records`` take
    ``sequence``, ``sequence + 1``, …; the rules of ``append`` apply to each in order, as if
    appended one by one, and any violation is the batch's error with *nothing* written —
    all or nothing, including the ``RunConflict`` fence.
    """

    async def append_many(
        self, run_id: str, records: Sequence[Record], *, sequence: int
    ) -> None: ...


@runtime_checkable
class InlineCommitRunStore(BatchRunStore, Protocol):
    """A batch store that can also commit a batch without awaiting (optional).

    ``commit_now`` takes the arguments of ``append_many`` and either commits the batch *now* —
    all or nothing, fenced and durable when it returns, exactly as ``append_many`` would — and
    returns ``True``, or declines and returns ``False`` having done nothing at all (the loop then
    awaits ``append_many`` with the same batch). A batch that breaks an append rule raises that
    rule's error with nothing written, as ``append_many`` does. It never awaits: it may block
    the calling thread for the commit's own I/O (an fsync), so it should decline whenever it
    would have to *wait* — for a lock, a connection, a slow disk.

    The loop looks for it once per run. Committing in the run's own task saves a task, a shield
    and their event-loop turns per commit (docs/design/0003). Rule: ``commit_now`` is used only
    when the class that defines it is the class that defines ``append_many`` or a subclass of
    it, so a subclass that overrides ``append_many`` alone is never bypassed by an inherited
    ``commit_now`` (it is awaited instead).
    """

    def commit_now(self, run_id: str, records: Sequence[Record], *, sequence: int) -> bool: ...


@runtime_checkable
class IndexedRunStore(RunStore, Protocol):
    """A run store that keeps a run index: one :class:`RunSummary` row per run (optional).

    The row is updated in the same transaction as the records it summarises, so it never
    disagrees with the log — not even after a crash or a refused batch (the kit's promise
    ``run_store.index_agrees_with_log``). ``polyloop runs``, ``stats`` and ``export`` use it
    when a store has it and otherwise read every log.

    ``query_runs`` returns the rows ``query`` selects, oldest first (``started_at``, then run
    id), the newest ``query.limit`` of them when a limit is set. ``run_stats`` returns the
    statistics of the rows ``query`` selects (its ``limit`` ignored). Both never read a log.
    """

    async def query_runs(self, query: RunQuery) -> list[RunSummary]: ...

    async def run_stats(self, query: RunQuery) -> RunStats: ...
