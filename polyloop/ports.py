"""The five seams: everything with a side effect goes through one of these Protocols.

Seam names (the strings the plugin and the contract kit use): ``model_client``,
``decision_parser``, ``action_executor``, ``event_sink``, ``run_store``.

This module also re-exports the value types the Protocols take and return, so an implementer
needs one import.

Besides the seams, three optional protocols: ``BatchRunStore`` and ``InlineCommitRunStore`` (ways
a store may commit), ``DescribedModelClient`` (a model client that says which provider, model and
request parameters it calls) and ``Instrumentation`` (what ``run(..., instrumentation=...)``
calls around the run and around each model, parser and executor call).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Protocol, TypeVar, runtime_checkable

from polyloop._base._run_index import RunQuery, RunStats, RunSummary
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
    RunResult,
    RunStarted,
)

__all__ = [
    "SEAM_NAMES",
    "Action",
    "ActionExecutor",
    "ActionOutcome",
    "ActionStatus",
    "BatchRunStore",
    "DecisionParser",
    "DescribedModelClient",
    "Event",
    "EventSink",
    "FinalAnswer",
    "IndexedRunStore",
    "InlineCommitRunStore",
    "Instrumentation",
    "InvalidDecision",
    "Message",
    "ModelClient",
    "ModelDescription",
    "ModelReply",
    "ParsedReply",
    "Record",
    "RunAlreadyExists",
    "RunAlreadyFinished",
    "RunConflict",
    "RunInstrumentation",
    "RunLog",
    "RunQuery",
    "RunResult",
    "RunStarted",
    "RunStats",
    "RunStore",
    "RunSummary",
    "SeamCall",
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


# A request parameter's value as a trace attribute takes it: a scalar or a list of strings.
RequestParameter = str | int | float | bool | tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelDescription:
    """What a model client calls, as telemetry names it (OpenTelemetry GenAI conventions).

    ``provider``: the API flavour, e.g. ``"openai"`` (``gen_ai.provider.name``); ``model``: the
    model requested (``gen_ai.request.model``); ``parameters``: the request parameters the client
    sends, keyed by their convention name without the ``gen_ai.request.`` prefix
    (``temperature``, ``max_tokens``, ``top_p``, ``top_k``, ``frequency_penalty``,
    ``presence_penalty``, ``stop_sequences``, ``seed``, ``choice.count``); ``server_address`` and
    ``server_port``: where it sends them, when known. Texts are never ``""``.
    """

    provider: str
    model: str
    parameters: Mapping[str, RequestParameter] = field(default_factory=dict)
    server_address: str | None = None
    server_port: int | None = None

    def __post_init__(self) -> None:
        for name in ("provider", "model"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise ValueError(f"ModelDescription.{name} must be a non-empty str, got {value!r}")
        if self.server_address is not None and (
            not isinstance(self.server_address, str) or not self.server_address
        ):
            raise ValueError("ModelDescription.server_address must be None or a non-empty str")
        port = self.server_port
        if port is not None and (isinstance(port, bool) or not isinstance(port, int)):
            raise ValueError(f"ModelDescription.server_port must be None or an int, got {port!r}")
        if not isinstance(self.parameters, Mapping) or not all(
            isinstance(k, str) and k for k in self.parameters
        ):
            raise ValueError("ModelDescription.parameters must map non-empty str names to values")


@runtime_checkable
class DescribedModelClient(ModelClient, Protocol):
    """A model client that says what it calls (optional).

    ``describe()`` is called once per model call by an instrumentation that wants it (never by
    the loop itself); it must be cheap, must not do I/O and must not raise.
    ``OpenAIChatModel`` offers it.
    """

    def describe(self) -> ModelDescription: ...


_Result_contra = TypeVar("_Result_contra", contravariant=True)


class SeamCall(Protocol[_Result_contra]):
    """One observed seam call: the loop hands it what the seam returned.

    The context manager that yields it sees an exception the seam raised (including
    ``CancelledError``) in its ``__exit__``, and ``returned`` is then never called.
    """

    def returned(self, value: _Result_contra) -> None: ...


class RunInstrumentation(Protocol):
    """One run (one call of ``run()`` or ``resume()``) as an instrumentation observes it.

    ``trace_parent`` is the W3C ``traceparent`` of the run as this instrumentation recorded it,
    or ``None``: ``run()`` stores it in ``RunStarted.trace_parent``, so a resume can link to it.
    Each method returns a context manager the loop enters right before the seam call and leaves
    right after it, in the task that makes the call (so a context variable set on entry, such as
    OpenTelemetry's current span, is what the seam sees). ``finished`` is called once with the
    result when the run returns; when it raises (or is cancelled), the context manager of
    ``Instrumentation.run`` sees the exception instead.
    """

    @property
    def trace_parent(self) -> str | None: ...

    def model_call(
        self, step_index: int, messages: Sequence[Message], model: ModelClient
    ) -> AbstractContextManager[SeamCall[ModelReply]]: ...

    def parse(
        self, step_index: int, reply: ModelReply
    ) -> AbstractContextManager[SeamCall[ParsedReply]]: ...

    def execute(
        self, step_index: int, action: Action
    ) -> AbstractContextManager[SeamCall[ActionOutcome]]: ...

    def finished(self, result: RunResult) -> None: ...


@runtime_checkable
class Instrumentation(Protocol):
    """Observes runs from inside the loop: ``run(..., instrumentation=...)``, same for ``resume``.

    Optional, and unlike an ``EventSink`` (fed after each append) it is called *around* the work:
    ``run`` around the whole run, then the returned ``RunInstrumentation`` around each model,
    parser and executor call. ``started`` is the run's ``RunStarted``: for a new run, the record
    about to be written (its ``trace_parent`` is filled from the instrumentation's afterwards);
    for a resume (``resumed=True``), the record in the log, whose ``trace_parent`` names the
    original run. No instrumentation given: the loop calls nothing and pays one ``is None``
    test per seam call.

    An instrumentation must never fail a run: it must not raise from any of these calls (an
    exception it raises anyway propagates, as a parser's does), and it must let every exception
    it sees in ``__exit__`` propagate (return a false value). It may block the calling task only
    as long as its own bookkeeping takes. ``polyloop.instrumentation.OpenTelemetryInstrumentation``
    implements it.
    """

    def run(
        self, started: RunStarted, *, resumed: bool
    ) -> AbstractContextManager[RunInstrumentation]: ...
