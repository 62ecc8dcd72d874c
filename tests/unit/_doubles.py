"""Shared test doubles for the runtime's unit tests (and anyone else who wants them).

Every double is deterministic and keyed on data, never on call counts, so a resumed run in a
fresh store gets exactly what the interrupted one would have got:

* :func:`script` builds a model, parser and executor from a list of step specs
  (:func:`act`, :func:`invalid`, :func:`final`, :func:`model_fails`): step *i*'s reply text is
  ``reply-i``, its action text ``action-i``.
* :class:`RecordingModel` keeps every message list the model received.
* Gates (:class:`GatedModel`, :class:`GatedExecutor`, :class:`GatedStore`) park a seam on an
  :class:`asyncio.Event` the test controls, so a cancellation can be aimed at one ``await``.
* Store wrappers: :class:`FailingStore` (append raises at chosen records), :class:`ReadOnlyStore`
  (an append fails the test), :class:`UntouchableStore` (any call fails the test),
  :class:`GatedStore`.
* :class:`Crash` simulates the process dying: a ``BaseException`` nothing in polyloop catches.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import polyloop
from polyloop import (
    Action,
    ActionOutcome,
    ActionStatus,
    AgentDefinition,
    Budget,
    Event,
    FinalAnswer,
    InvalidDecision,
    Message,
    ModelReply,
    ParsedReply,
    Record,
    RunLog,
    RunResult,
    StepRecord,
    SyntheticObservations,
    ToolRegistry,
)
from polyloop.events import MemorySink
from polyloop.models import ScriptedModel
from polyloop.stores import MemoryStore

SYSTEM_PROMPT = "You are a test agent."
GOAL = "Reach the goal."
NOT_EXECUTED_TEXT = "[the library says: that action was not executed]"
ENV_ERROR_TEXT = "[the library says: the environment is broken]"


class Crash(BaseException):
    """The process dies here. Not an ``Exception``: nothing in the loop may catch it."""


class SeamCalled(BaseException):
    """A seam that must not be called was called (a BaseException so no ``except`` hides it)."""


def agent(
    *,
    max_steps: int = 20,
    max_executed_actions: int = 20,
    max_consecutive_parse_failures: int = 5,
    max_prompt_chars: int = 1_000_000,
    tools: ToolRegistry | None = None,
    replay: bool = False,
    system_prompt: str = SYSTEM_PROMPT,
) -> AgentDefinition:
    """An agent whose budgets default to "never the reason a test stops"."""
    return AgentDefinition(
        system_prompt=system_prompt,
        budget=Budget(
            max_steps=max_steps,
            max_executed_actions=max_executed_actions,
            max_consecutive_parse_failures=max_consecutive_parse_failures,
            max_prompt_chars=max_prompt_chars,
        ),
        synthetic_observations=SyntheticObservations(
            not_executed=NOT_EXECUTED_TEXT, env_error=ENV_ERROR_TEXT
        ),
        tools=tools,
        replay_interrupted_actions=replay,
    )


# --------------------------------------------------------------------------- step specs


@dataclass(frozen=True, slots=True, kw_only=True)
class StepSpec:
    """What one scripted step does. Build with :func:`act`, :func:`invalid`, :func:`final`,
    :func:`model_fails`."""

    kind: str  # "act" | "invalid" | "final" | "model_fails"
    reply_text: str | None = None
    reasoning: str = ""
    call_id: str | None = "default"
    feedback: str = "that was not a decision"
    answer: str = "the answer"
    status: ActionStatus = ActionStatus.EXECUTED
    observation: str | None = None
    completion: bool = False
    truncated: int = 0
    executor_says_synthetic: bool = False
    tool_name: str | None = None
    tool_args: Mapping[str, Any] | None = None
    error: BaseException | None = None


def act(
    status: ActionStatus = ActionStatus.EXECUTED,
    *,
    observation: str | None = None,
    completion: bool = False,
    tool_name: str | None = None,
    tool_args: Mapping[str, Any] | None = None,
    truncated: int = 0,
    reply_text: str | None = None,
    reasoning: str = "",
    error: BaseException | None = None,
) -> StepSpec:
    """The reply parses to ``Action(text="action-i")``; the executor answers ``status``
    (or raises ``error``)."""
    return StepSpec(
        kind="act",
        status=status,
        observation=observation,
        completion=completion,
        tool_name=tool_name,
        tool_args=tool_args,
        truncated=truncated,
        reply_text=reply_text,
        reasoning=reasoning,
        error=error,
    )


def invalid(
    feedback: str = "that was not a decision",
    *,
    reply_text: str | None = None,
    reasoning: str = "",
    call_id: str | None = "default",
) -> StepSpec:
    """The reply parses to ``InvalidDecision(feedback)``."""
    return StepSpec(
        kind="invalid",
        feedback=feedback,
        reply_text=reply_text,
        reasoning=reasoning,
        call_id=call_id,
    )


def final(
    answer: str = "the answer",
    *,
    reply_text: str | None = None,
    reasoning: str = "",
    call_id: str | None = "default",
) -> StepSpec:
    """The reply parses to ``FinalAnswer(answer)``. ``call_id=None`` replies without one."""
    return StepSpec(
        kind="final", answer=answer, reply_text=reply_text, reasoning=reasoning, call_id=call_id
    )


def model_fails(error: BaseException | None = None) -> StepSpec:
    """The model raises ``error`` (default ``RuntimeError("model down")``) instead of replying."""
    return StepSpec(kind="model_fails", error=error or RuntimeError("model down"))


def reply_text(index: int, spec: StepSpec) -> str:
    return spec.reply_text if spec.reply_text is not None else f"reply-{index}"


def action_text(index: int) -> str:
    return f"action-{index}"


def executor_text(index: int) -> str:
    return f"observed-{index}"


# --------------------------------------------------------------------------- seams


class RecordingModel:
    """Wraps a model and keeps a copy of every message list it was called with."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.received: list[list[Message]] = []

    async def complete(self, messages: Sequence[Message]) -> ModelReply:
        self.received.append(list(messages))
        reply: ModelReply = await self.inner.complete(messages)
        return reply


class ScriptedParser:
    """Decides by reply text; a text it does not know is an ``InvalidDecision``.

    A ``BaseException`` (instance) in ``decisions`` is raised; ``returns`` overrides everything
    (to return something that is not a decision). ``calls`` counts ``parse`` calls.
    """

    def __init__(self, decisions: Mapping[str, ParsedReply | BaseException]) -> None:
        self.decisions = dict(decisions)
        self.calls = 0

    def parse(self, reply: ModelReply) -> ParsedReply:
        self.calls += 1
        decision = self.decisions.get(reply.text)
        if decision is None:
            return InvalidDecision(feedback=f"cannot parse {reply.text!r}")
        if isinstance(decision, BaseException):
            raise decision
        return decision


class ScriptedExecutor:
    """Answers by action text; an unknown action executes with observation ``ran <text>``.

    A ``BaseException`` in ``outcomes`` is raised. ``received`` lists every executed action.
    """

    def __init__(self, outcomes: Mapping[str, ActionOutcome | BaseException]) -> None:
        self.outcomes = dict(outcomes)
        self.received: list[Action] = []

    async def execute(self, action: Action) -> ActionOutcome:
        self.received.append(action)
        await asyncio.sleep(0)  # a real suspension point, as any environment has
        outcome = self.outcomes.get(action.text)
        if outcome is None:
            return ActionOutcome(status=ActionStatus.EXECUTED, observation=f"ran {action.text}")
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


@dataclass
class Seams:
    """A model, parser and executor that play one script."""

    model: RecordingModel
    parser: ScriptedParser
    executor: ScriptedExecutor
    specs: tuple[StepSpec, ...] = ()

    def kwargs(self) -> dict[str, Any]:
        return {"model": self.model, "parser": self.parser, "executor": self.executor}


def script(*specs: StepSpec) -> Seams:
    """Seams that play ``specs``: step *i* gets reply ``reply-i``, action ``action-i`` and (unless
    given) executor observation ``observed-i``. Past the script the model raises ``IndexError``."""
    replies: list[ModelReply | BaseException] = []
    decisions: dict[str, ParsedReply | BaseException] = {}
    outcomes: dict[str, ActionOutcome | BaseException] = {}
    for index, spec in enumerate(specs):
        if spec.kind == "model_fails":
            assert spec.error is not None
            replies.append(spec.error)
            continue
        text = reply_text(index, spec)
        call_id = f"call-{index}" if spec.call_id == "default" else spec.call_id
        replies.append(ModelReply(text=text, reasoning=spec.reasoning, call_id=call_id))
        if spec.kind == "invalid":
            decisions[text] = InvalidDecision(feedback=spec.feedback)
        elif spec.kind == "final":
            decisions[text] = FinalAnswer(text=spec.answer)
        else:
            decisions[text] = Action(
                text=action_text(index), tool_name=spec.tool_name, tool_args=spec.tool_args
            )
            outcomes[action_text(index)] = spec.error or ActionOutcome(
                status=spec.status,
                observation=spec.observation
                if spec.observation is not None
                else executor_text(index),
                env_reported_completion=spec.completion,
                observation_truncated_chars=spec.truncated,
                observation_is_synthetic=spec.executor_says_synthetic,
            )
    return Seams(
        model=RecordingModel(ScriptedModel(replies)),
        parser=ScriptedParser(decisions),
        executor=ScriptedExecutor(outcomes),
        specs=tuple(specs),
    )


class ForbiddenModel:
    """A model that fails the test if called."""

    async def complete(self, messages: Sequence[Message]) -> ModelReply:
        raise SeamCalled("the model was called")


class ForbiddenParser:
    """A parser that fails the test if called."""

    def parse(self, reply: ModelReply) -> ParsedReply:
        raise SeamCalled("the parser was called")


class ForbiddenExecutor:
    """An executor that fails the test if called."""

    async def execute(self, action: Action) -> ActionOutcome:
        raise SeamCalled("the executor was called")


class ForbiddenSink:
    """An event sink that fails the test if called."""

    async def emit(self, event: Event) -> None:
        raise SeamCalled("the event sink was called")


def forbidden_seams() -> dict[str, Any]:
    """model/parser/executor keyword arguments that each fail the test if called."""
    return {"model": ForbiddenModel(), "parser": ForbiddenParser(), "executor": ForbiddenExecutor()}


class Gate:
    """``entered`` is set when the gated call arrives; the call then waits for ``release``."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self.finished = False  # the gated call ran to its end (it was not cut in half)

    async def pass_through(self) -> None:
        self.entered.set()
        await self.release.wait()


class GatedModel:
    """Wraps a model; its call number ``at_call`` (0-based) parks on the gate first."""

    def __init__(self, inner: Any, *, at_call: int = 0) -> None:
        self.inner = inner
        self.at_call = at_call
        self.calls = 0
        self.gate = Gate()

    async def complete(self, messages: Sequence[Message]) -> ModelReply:
        call = self.calls
        self.calls += 1
        if call == self.at_call:
            await self.gate.pass_through()
        reply: ModelReply = await self.inner.complete(messages)
        return reply


class GatedExecutor:
    """Wraps an executor; every call parks on the gate first."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.gate = Gate()

    async def execute(self, action: Action) -> ActionOutcome:
        await self.gate.pass_through()
        outcome: ActionOutcome = await self.inner.execute(action)
        return outcome


class StoreWrapper:
    """Delegates to a :class:`MemoryStore`; subclasses intercept."""

    def __init__(self, inner: MemoryStore | None = None) -> None:
        self.inner = inner if inner is not None else MemoryStore()

    async def append(self, run_id: str, record: Record, *, sequence: int) -> None:
        await self.inner.append(run_id, record, sequence=sequence)

    async def read_log(self, run_id: str) -> RunLog:
        return await self.inner.read_log(run_id)

    async def run_ids(self) -> list[str]:
        return await self.inner.run_ids()


class GatedStore(StoreWrapper):
    """The append at ``at_sequence`` parks on the gate, then writes (``gate.finished`` after).

    With ``gate_read_log`` the first ``read_log`` parks instead.
    """

    def __init__(
        self,
        inner: MemoryStore | None = None,
        *,
        at_sequence: int | None = None,
        gate_read_log: bool = False,
    ) -> None:
        super().__init__(inner)
        self.at_sequence = at_sequence
        self.gate_read_log = gate_read_log
        self.gate = Gate()

    async def append(self, run_id: str, record: Record, *, sequence: int) -> None:
        if sequence == self.at_sequence:
            await self.gate.pass_through()
            await self.inner.append(run_id, record, sequence=sequence)
            self.gate.finished = True
            return
        await self.inner.append(run_id, record, sequence=sequence)

    async def read_log(self, run_id: str) -> RunLog:
        if self.gate_read_log:
            self.gate_read_log = False
            await self.gate.pass_through()
        return await self.inner.read_log(run_id)


class FailingStore(StoreWrapper):
    """``append`` raises ``error`` (writing nothing) for records that ``fails`` selects."""

    def __init__(
        self,
        fails: Callable[[int, Record], bool],
        error: BaseException,
        inner: MemoryStore | None = None,
    ) -> None:
        super().__init__(inner)
        self.fails = fails
        self.error = error
        self.attempts: list[tuple[int, Record]] = []

    async def append(self, run_id: str, record: Record, *, sequence: int) -> None:
        self.attempts.append((sequence, record))
        if self.fails(sequence, record):
            raise self.error
        await self.inner.append(run_id, record, sequence=sequence)


class ReadOnlyStore(StoreWrapper):
    """Reads the wrapped store; any append fails the test (proves an operation wrote nothing)."""

    async def append(self, run_id: str, record: Record, *, sequence: int) -> None:
        raise SeamCalled(f"store.append was called with a {record.kind}")


class UntouchableStore:
    """A store whose every method fails the test: proves something happened before any I/O."""

    async def append(self, run_id: str, record: Record, *, sequence: int) -> None:
        raise SeamCalled("store.append was called")

    async def read_log(self, run_id: str) -> RunLog:
        raise SeamCalled("store.read_log was called")

    async def run_ids(self) -> list[str]:
        raise SeamCalled("store.run_ids was called")


class CrashingSink:
    """Keeps events like ``MemorySink``, then raises :class:`Crash` once the event at
    ``crash_after`` was delivered: the process dies right after that record became durable."""

    def __init__(self, crash_after: int) -> None:
        self.crash_after = crash_after
        self.events: list[Event] = []

    async def emit(self, event: Event) -> None:
        self.events.append(event)
        if event.sequence == self.crash_after:
            raise Crash(f"crash after record {event.sequence}")


# --------------------------------------------------------------------------- helpers


def kinds(log: RunLog) -> list[str]:
    """The record kinds of a log, in order."""
    return [record.kind for record in log.records]


def without_wall_time(steps: Sequence[StepRecord]) -> list[StepRecord]:
    """Step records comparable across runs (``step_wall_ms`` is the only clock-dependent field)."""
    return [replace(step, step_wall_ms=0) for step in steps]


def trajectory(result: RunResult) -> tuple[object, ...]:
    """Everything a result says about the run, minus wall time and the per-call failure count."""
    return (
        result.run_id,
        result.stop_reason,
        without_wall_time(result.steps),
        result.final_answer,
        result.executed_actions,
    )


async def copy_prefix(log: RunLog, run_id: str, count: int) -> MemoryStore:
    """A fresh store holding the first ``count`` records of ``log``: a crash after record
    ``count - 1``."""
    store = MemoryStore()
    for sequence, record in enumerate(log.records[:count]):
        await store.append(run_id, record, sequence=sequence)
    return store


@dataclass
class Outcome:
    """What a run left behind: its result (or the exception it raised), its log and events."""

    result: RunResult | None
    error: BaseException | None
    log: RunLog
    events: list[Event] = field(default_factory=list)


async def run_to_end(
    seams: Seams,
    the_agent: AgentDefinition,
    *,
    run_id: str = "run-1",
    store: Any = None,
    events: Any = None,
) -> Outcome:
    """``polyloop.run`` that captures a non-cancellation exception instead of raising it."""
    store = store if store is not None else MemoryStore()
    sink = events if events is not None else MemorySink()
    result: RunResult | None = None
    error: BaseException | None = None
    try:
        result = await polyloop.run(
            the_agent, GOAL, store=store, events=sink, run_id=run_id, **seams.kwargs()
        )
    except (Exception, Crash) as exc:
        error = exc
    log = await store.read_log(run_id)
    return Outcome(result=result, error=error, log=log, events=list(sink.events))
