"""run() and resume(): the steps of a run, in the order the stopping rules read them.

Every side effect is preceded by a durable intent record; every appended record is then
emitted as an event. Three concerns live in their own modules: committing records (strategies,
the cancellation protocol: :mod:`polyloop._loop._commit`), delivering events (best effort, failures
counted: :mod:`polyloop._loop._delivery`) and the stop decisions (:mod:`polyloop._loop._stopping`).

Cancellation can arrive at every ``await`` below: reading the log, each commit, each emit, the
model call and the action. Wherever it arrives, ``CancelledError`` is re-raised; before that, if
the run was started and not yet finished, one ``RunFinished(cancelled)`` is appended. A commit
in flight is never cut in half (:mod:`polyloop._loop._commit`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from polyloop._base._exception_text import exception_text
from polyloop._base._run_id import new_run_id, validate_run_id
from polyloop._loop import _history, _stopping
from polyloop._loop._commit import Committer
from polyloop._loop._delivery import Delivery
from polyloop.errors import ParametersChanged, RunAlreadyExists, RunNotFound, StoreCorrupted
from polyloop.events import NullSink
from polyloop.ports import (
    ActionExecutor,
    DecisionParser,
    EventSink,
    Instrumentation,
    ModelClient,
    RunInstrumentation,
    RunStore,
)
from polyloop.stores import MemoryStore
from polyloop.types import (
    Action,
    ActionIntent,
    ActionOutcome,
    ActionStatus,
    AgentDefinition,
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
    canonical_json,
    parameters_hash,
)

_log = logging.getLogger("polyloop")


def utc_timestamp() -> str:
    """UTC ISO-8601 with milliseconds and ``Z``."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# What a step records of a model that raised: no text, no reasoning, no call id (SPEC §2).
_NOTHING_SAID = ModelReply(text="")


def _observed(outcome: ActionOutcome | None, synthetic: str | None) -> tuple[str, bool, int]:
    """A step's observation, whether it is synthetic, and how many characters were cut."""
    if outcome is None:
        return "", False, 0
    if synthetic is not None:  # the library's text replaces the executor's, uncut
        return synthetic, True, 0
    truncated = outcome.observation_truncated_chars
    return outcome.observation, outcome.observation_is_synthetic, truncated


def _action_fields(action: Action | None) -> dict[str, Any]:
    """A step record's fields that describe its action (all ``None`` without one)."""
    if action is None:
        return {"action": None, "tool_name": None, "tool_args_json": None}
    args = action.tool_args
    return {
        "action": action.text,
        "tool_name": action.tool_name,
        "tool_args_json": canonical_json(dict(args)) if args is not None else None,
    }


@dataclass(frozen=True, slots=True)
class Driving:
    """How a caller inside the library drives a run (``run_many``); never public.

    ``interruptible``: a cancellation *interrupts* the run — what is held is committed, no
    ``RunFinished`` is written, the run stays resumable — instead of finishing it ``cancelled``
    (that stop reason stays for a deliberate cancel of ``run()``). ``time_limit_s``: the wall
    time this call may drive the run; past it the run finishes ``time_limit`` at whatever
    ``await`` it was in (a commit in flight lands first).
    """

    interruptible: bool = False
    time_limit_s: float | None = None
    #: Set: start no new model call and no new action; the run stops, unfinished, at the next
    #: one (an action or a model call in flight finishes first and is recorded): :class:`Drained`.
    draining: asyncio.Event | None = None


_DELIBERATE = Driving()


class Drained(Exception):
    """The run stopped before a new model call or action because its batch is draining: what
    was done is committed, no ``RunFinished`` is written, nothing is in doubt (the log ends
    before an intent, or at a model's reply a resume parses again)."""


@dataclass(frozen=True, slots=True)
class _Seams:
    """The five seams one call of run() or resume() drives."""

    model: ModelClient
    parser: DecisionParser
    executor: ActionExecutor
    store: RunStore
    events: EventSink


class _Driver:
    """One call of run() or resume(): the run's state, its commits, its events, its steps."""

    def __init__(
        self,
        run_id: str,
        agent: AgentDefinition,
        goal: str,
        seams: _Seams,
        how: Driving | None = None,
    ) -> None:
        self.run_id = run_id
        self.how = _DELIBERATE if how is None else how
        self.agent = agent
        self.seams = seams
        self.commits = Committer(run_id, seams.store)
        self.delivery = Delivery(run_id, seams.events)
        self.steps: list[StepRecord] = []
        self.history: list[Message] = _history.opening(agent, goal)
        # A running total, so B costs the same at step 8000 as at step 1 (never a re-sum).
        self.history_chars = _history.prompt_chars(self.history)
        self.counters = _stopping.Counters()
        self.final_answer: str | None = None
        self.finishing: RunFinished | None = None  # the finish being (or already) committed
        # step_wall_ms: time spent in this step's model, parser and executor — not in the
        # store or the sink (SPEC §2), so a slow sink cannot make a step look slow.
        self.seam_seconds = 0.0
        # The run's instrumentation, if any: each seam call tests it once (nothing else is paid).
        self.probe: RunInstrumentation | None = None
        # end_on_parser_error: a parser's exception ends the run `parser_error` (recorded in a
        # step) instead of propagating; the caller chose it (run()/resume() argument).
        self.end_on_parser_error = False

    # ------------------------------------------------------------------ records and events

    def defer(self, record: Record) -> None:
        """Hold a record no side effect waits for; it rides in the next commit."""
        self.commits.defer(record)

    async def append(self, record: Record, *, cancelling: bool = False) -> None:
        """Commit the held records and ``record`` durably as one batch, then emit their events.

        The one protocol of every durable point: never cut in half by cancellation, all or
        nothing. ``cancelling``: we are on the cancellation path already, so a failed commit is
        logged and nothing is raised — the ``CancelledError`` being handled must propagate.
        """
        commit = await self.commits.commit(record)
        delivery = self.delivery
        events = delivery.events(commit.sequence, commit.written)
        if commit.cancelled or cancelling:
            if commit.error is not None:  # the CancelledError propagates; the failure is logged
                _log.error(
                    "run %s: a commit failed while the run was being cancelled; the log ends "
                    "before it",
                    self.run_id,
                    exc_info=commit.error,
                )
            for event in events:  # the records are in the log, so their events are owed
                await delivery.emit_best_effort(event)
            if cancelling:
                return
            raise asyncio.CancelledError
        for event in events:  # a store without append_many may have written part of it
            await delivery.emit(event)
        if commit.error is not None:  # from the store: it propagates and nothing more is written
            raise commit.error
        if commit.inline:  # store, model and executor may all answer without suspending: a run
            await asyncio.sleep(0)  # still lets the rest of the event loop in once a commit

    async def flush(self) -> None:
        """Commit the held records, if any (an exception is leaving ``run()``)."""
        last = self.commits.take_held()
        if last is not None:
            await self.append(last)

    async def leave_unfinished(self) -> None:
        """The interruption path: commit what is held (a completed step was not interrupted)
        and write no ``RunFinished``, so the run stays resumable."""
        last = self.commits.take_held()
        if last is not None and not self.commits.finished:
            await self.append(last, cancelling=True)

    def check_drain(self) -> None:
        """Raise :class:`Drained` if the run's batch is draining (before a new side effect)."""
        draining = self.how.draining
        if draining is not None and draining.is_set():
            raise Drained(f"run {self.run_id}: drained before a new model call or action")

    async def leave_drained(self) -> None:
        """The drain's path: commit what is held if the run is in the log already; a new run
        that never reached its first model call leaves nothing (its ``RunStarted`` is held)."""
        if not self.commits.started:
            self.commits.pending.clear()
            return
        await self.flush()

    async def finish_cancelled(self) -> None:
        """The cancellation path: one RunFinished(cancelled) if the run is started, unfinished.

        Held records (a completed step) ride along: a completed step was not interrupted.
        """
        commits = self.commits
        if not (commits.started or commits.pending) or commits.finished:
            return
        await self.append(self.finished_record(StopReason.CANCELLED, None), cancelling=True)

    # ------------------------------------------------------------------ the iteration

    async def iterate(self) -> RunResult:
        """A–H until a stop. Each stop is decided in :mod:`polyloop._loop._stopping`."""
        budget = self.agent.budget
        while True:
            stop = _stopping.admit(budget, self.counters)  # A
            if stop is not None:
                return await self.finish(stop)
            messages = list(self.history)
            prompt_chars = self.history_chars
            stop = _stopping.fits(budget, prompt_chars)  # B
            if stop is not None:
                return await self.finish(stop)
            self.check_drain()
            stop = await self.call_model(messages, prompt_chars)  # C, then D–G
            if stop is not None:
                return await self.finish(stop)

    async def call_model(self, messages: list[Message], prompt_chars: int) -> StopReason | None:
        """C — intent, model call; a failure is recorded as a step and stops ``llm_error``."""
        step_index = len(self.steps)
        self.seam_seconds = 0.0
        await self.append(ModelCallIntent(step_index=step_index, prompt_chars=prompt_chars))
        started = time.monotonic()
        probe = self.probe
        try:
            if probe is None:
                reply = await self.seams.model.complete(messages)
            else:
                reply = await self.observed_model_call(probe, step_index, messages)
        except Exception as exc:  # CancelledError is not an Exception: it propagates
            self.seam_seconds += time.monotonic() - started
            step = self._step(None, prompt_chars)
            return await self.record(step, model_error=exception_text(exc))
        if not isinstance(reply, ModelReply):
            raise TypeError(
                f"ModelClient.complete must return a ModelReply, got {type(reply).__name__}"
            )
        self.seam_seconds += time.monotonic() - started
        self.defer(ModelReplied(step_index=step_index, reply=reply))  # rides with the intent
        return await self.decide(reply, prompt_chars)

    async def observed_model_call(
        self, probe: RunInstrumentation, step_index: int, messages: list[Message]
    ) -> ModelReply:
        with probe.model_call(step_index, messages, self.seams.model) as call:
            reply = await self.seams.model.complete(messages)
            call.returned(reply)
        return reply

    async def decide(self, reply: ModelReply, prompt_chars: int) -> StopReason | None:
        """D, E, F — parse, then record an invalid decision or a final answer, or act."""
        started = time.monotonic()
        try:
            decision = self.parse(reply)
        except Exception as exc:
            if not self.end_on_parser_error:
                raise
            self.seam_seconds += time.monotonic() - started
            return await self.end_for_parser(reply, prompt_chars, exc)
        self.seam_seconds += time.monotonic() - started
        if isinstance(decision, InvalidDecision):
            return await self.record(self._step(reply, prompt_chars, error=decision))
        if isinstance(decision, FinalAnswer):
            self.final_answer = decision.text
            return await self.record(self._step(reply, prompt_chars))
        if isinstance(decision, Action):
            self.check_drain()  # the reply is held: it is committed, and a resume parses it again
            await self.append(ActionIntent(step_index=len(self.steps), action=decision))
            return await self.act(reply, decision, prompt_chars)
        raise TypeError(
            "DecisionParser.parse must return Action, FinalAnswer or InvalidDecision, "
            f"got {type(decision).__name__}"
        )

    def parse(self, reply: ModelReply) -> ParsedReply:
        probe = self.probe
        if probe is None:
            return self.seams.parser.parse(reply)
        with probe.parse(len(self.steps), reply) as call:
            decision = self.seams.parser.parse(reply)
            call.returned(decision)
            return decision

    async def end_for_parser(
        self, reply: ModelReply, prompt_chars: int, exc: Exception
    ) -> StopReason:
        """The parser raised and the caller chose to end the run: the step records the
        exception as its parse error, and the run stops ``parser_error`` (one commit)."""
        told = InvalidDecision(
            feedback=f"the decision parser raised {exception_text(exc)} "
            "(the run was ended with end_on_parser_error)"
        )
        await self.record(self._step(reply, prompt_chars, error=told))
        return StopReason.PARSER_ERROR

    async def act(self, reply: ModelReply, action: Action, prompt_chars: int) -> StopReason | None:
        """F — execute (the intent is already logged) and record the step unconditionally."""
        started = time.monotonic()
        probe = self.probe
        if probe is None:
            outcome = await self.seams.executor.execute(action)
        else:
            with probe.execute(len(self.steps), action) as call:
                outcome = await self.seams.executor.execute(action)
                call.returned(outcome)
        self.seam_seconds += time.monotonic() - started
        if not isinstance(outcome, ActionOutcome) or not isinstance(outcome.status, ActionStatus):
            raise TypeError(
                "ActionExecutor.execute must return an ActionOutcome with an ActionStatus, "
                f"got {type(outcome).__name__}"
            )
        synthetic = self.agent.synthetic_observations
        replaced = {
            ActionStatus.NOT_EXECUTED: synthetic.not_executed,
            ActionStatus.ENV_ERROR: synthetic.env_error,
        }.get(outcome.status)
        step = self._step(reply, prompt_chars, action=action, outcome=outcome, synthetic=replaced)
        # The executor's own text is kept for audit only when the library replaced it.
        return await self.record(
            step,
            executor_observation=outcome.observation if replaced is not None else None,
            executor_detail=None if outcome.detail is None else dict(outcome.detail),
        )

    def _step(
        self,
        reply: ModelReply | None,
        prompt_chars: int,
        *,
        error: InvalidDecision | None = None,
        action: Action | None = None,
        outcome: ActionOutcome | None = None,
        synthetic: str | None = None,
    ) -> StepRecord:
        """Every row of the table in SPEC §2, one path per argument.

        No ``reply``: the model raised (``llm_error``). Else ``error``: an invalid decision;
        ``outcome``: an action, whose observation is ``synthetic`` when the library replaced it;
        none of them: a final answer.
        """
        observation, is_synthetic, truncated = _observed(outcome, synthetic)
        said = _NOTHING_SAID if reply is None else reply
        return StepRecord(
            step_index=len(self.steps),
            raw_output=said.text,
            response_chars=len(said.text),
            reasoning_chars=len(said.reasoning),
            parse_ok=reply is not None and error is None,
            parse_error=error.feedback if error is not None else None,
            observation=observation,
            observation_is_synthetic=is_synthetic,
            observation_truncated_chars=truncated,
            prompt_chars=prompt_chars,
            llm_call_id=said.call_id,
            step_wall_ms=int(self.seam_seconds * 1000),
            action_status=outcome.status if outcome is not None else None,
            env_reported_completion=bool(outcome.env_reported_completion) if outcome else False,
            **_action_fields(action),
        )

    async def record(
        self,
        step: StepRecord,
        *,
        executor_observation: str | None = None,
        executor_detail: dict[str, Any] | None = None,
        model_error: str | None = None,
    ) -> StopReason | None:
        """Hold the step for the next commit, then let the stopping order settle it."""
        completed = StepCompleted(
            step=step,
            executor_observation=executor_observation,
            executor_detail=executor_detail,
            model_error=model_error,
        )
        self.defer(completed)  # rides with the next model intent or the finish
        return self.absorb(completed)

    def absorb(self, completed: StepCompleted) -> StopReason | None:
        """Fold a logged step into the state (live, or replaying a log on resume)."""
        self.steps.append(completed.step)
        told = _history.step_messages(completed)
        self.history.extend(told)
        self.history_chars += _history.prompt_chars(told)
        self.counters, stop = _stopping.settle(
            self.agent,
            self.counters,
            completed.step,
            model_failed=completed.model_error is not None,
        )
        return stop

    async def finish(self, stop: StopReason) -> RunResult:
        final_answer = self.final_answer if stop is StopReason.AGENT_FINISHED else None
        self.finishing = self.finished_record(stop, final_answer)
        await self.append(self.finishing)
        return self.result(stop, final_answer)

    def finished_record(self, stop: StopReason, final_answer: str | None) -> RunFinished:
        return RunFinished(
            stop_reason=stop,
            final_answer=final_answer,
            executed_actions=self.counters.executed_actions,
            finished_at=utc_timestamp(),
        )

    def result(self, stop: StopReason, final_answer: str | None) -> RunResult:
        return RunResult(
            run_id=self.run_id,
            stop_reason=stop,
            steps=tuple(self.steps),
            final_answer=final_answer,
            executed_actions=self.counters.executed_actions,
            event_delivery_failures=self.delivery.failures,
        )

    async def guarded(self, body: Coroutine[Any, Any, RunResult]) -> RunResult:
        """Run ``body``; on cancellation write the cancelled finish (or, interrupted, nothing),
        then re-raise; past the time limit finish ``time_limit``; on an exception commit what
        is held, then re-raise."""
        limit = asyncio.timeout(self.how.time_limit_s)  # None: no limit
        try:
            async with limit:
                return await body
        except Drained:
            await self.leave_drained()
            raise
        except asyncio.CancelledError:
            if self.how.interruptible:  # run_many's Ctrl-C: the next invocation resumes it
                await self.leave_unfinished()
            else:
                await self.finish_cancelled()
            raise
        except TimeoutError:
            if not limit.expired():  # a seam's own TimeoutError: an exception like any other
                await self.flush_logged()
                raise
            return await self.finish_timed_out()
        except Exception:
            await self.flush_logged()
            raise

    async def finish_timed_out(self) -> RunResult:
        """The time limit cut the run at an ``await``: finish ``time_limit`` (or, if the cut
        came while the finish itself was committing, return what it wrote)."""
        if self.commits.finished and self.finishing is not None:
            return self.result(self.finishing.stop_reason, self.finishing.final_answer)
        return await self.finish(StopReason.TIME_LIMIT)

    async def flush_logged(self) -> None:
        # The executor or parser raised: the log still ends at the last record before the
        # failure (SPEC §4), so what is held is committed; the original error propagates.
        try:
            await self.flush()
        except Exception:  # logged, never in place of the error already propagating
            _log.error(
                "run %s: committing the records held when an exception left the run "
                "failed; the log ends before them",
                self.run_id,
                exc_info=True,
            )


# Each seam and the methods the loop calls on it; checked before any I/O.
_SEAM_METHODS = {
    "model": ("complete",),
    "parser": ("parse",),
    "executor": ("execute",),
    "store": ("append", "read_log"),
    "events": ("emit",),
    "instrumentation": ("run",),
}


def _check_seams(*, defaults: tuple[str, ...] = ("events",), **seams: object) -> None:
    """A missing or wrong seam is a ``TypeError`` naming it, before anything is written.

    The seams named in ``defaults`` may be ``None`` (the caller supplies the default).
    """
    for name, seam in seams.items():
        if seam is None and name in defaults:
            continue
        for method in _SEAM_METHODS[name]:
            if not callable(getattr(seam, method, None)):
                raise TypeError(
                    f"{name} must have a callable {method}() (got {type(seam).__name__})"
                )


def _check_goal(goal: object) -> str:
    if not isinstance(goal, str):
        raise TypeError(f"goal must be a str, got {type(goal).__name__}")
    return goal


def _set_up(agent: object, given: tuple[Any, ...], *, store_optional: bool) -> _Seams:
    """The checks and defaults run() and resume() share: the agent, then each seam, before
    any I/O. ``given`` is (model, parser, executor, store, events); ``store_optional``:
    ``store=None`` means a fresh in-memory store (run() only)."""
    if not isinstance(agent, AgentDefinition):
        raise TypeError(f"agent must be an AgentDefinition, got {type(agent).__name__}")
    model, parser, executor, store, events = given
    _check_seams(
        defaults=("store", "events") if store_optional else ("events",),
        model=model,
        parser=parser,
        executor=executor,
        store=store,
        events=events,
    )
    store = MemoryStore() if store is None else store
    return _Seams(model, parser, executor, store, NullSink() if events is None else events)


async def run(
    agent: AgentDefinition,
    goal: str,
    *,
    model: ModelClient,
    parser: DecisionParser,
    executor: ActionExecutor,
    store: RunStore | None = None,
    events: EventSink | None = None,
    run_id: str | None = None,
    instrumentation: Instrumentation | None = None,
    end_on_parser_error: bool = False,
) -> RunResult:
    """Start a new run and drive it to a stop.

    ``store=None`` uses a fresh in-memory store; ``run_id=None`` makes ``uuid4().hex``. A run id
    that already has a log raises ``RunAlreadyExists`` before any other seam is called.
    ``CancelledError`` is re-raised (after the log got ``RunFinished(cancelled)``), so
    ``cancelled`` never appears on a returned result. Exceptions from the executor or parser
    propagate untouched — unless ``end_on_parser_error``: then a parser's exception is recorded
    as the step's parse error and the run stops ``parser_error`` (a parser should give the
    model's odd values back as feedback with :func:`polyloop.action_or_feedback`; this ends,
    on purpose, a run whose parser cannot). ``instrumentation``
    (:class:`polyloop.ports.Instrumentation`) is called around the run and each model, parser
    and executor call; its ``trace_parent`` is stored in ``RunStarted``.
    """
    return await start(
        agent,
        goal,
        model=model,
        parser=parser,
        executor=executor,
        store=store,
        events=events,
        run_id=run_id,
        instrumentation=instrumentation,
        end_on_parser_error=end_on_parser_error,
    )


async def start(
    agent: AgentDefinition,
    goal: str,
    *,
    model: ModelClient,
    parser: DecisionParser,
    executor: ActionExecutor,
    store: RunStore | None,
    events: EventSink | None,
    run_id: str | None,
    batch: str | None = None,
    task_id: str | None = None,
    labels: Mapping[str, str] | None = None,
    how: Driving | None = None,
    instrumentation: Instrumentation | None = None,
    end_on_parser_error: bool = False,
    known_new: bool = False,
) -> RunResult:
    """:func:`run`, plus what only the library sets: ``RunStarted``'s batch fields, how the
    run is driven (:class:`Driving`), and ``known_new``: the caller just read the run's log
    empty, so it is not read again (the fence refuses a run started since, before any seam)."""
    run_id = new_run_id() if run_id is None else validate_run_id(run_id)
    goal = _check_goal(goal)
    seams = _set_up(agent, (model, parser, executor, store, events), store_optional=True)
    _check_seams(defaults=("instrumentation",), instrumentation=instrumentation)
    if not known_new:
        await _check_new(run_id, seams.store)
    driver = _Driver(run_id, agent, goal, seams, how)
    driver.end_on_parser_error = bool(end_on_parser_error)
    started = _started_record(
        run_id, goal, agent, batch=batch, task_id=task_id, labels=dict(labels or {})
    )

    async def body(opening: RunStarted) -> RunResult:
        driver.defer(opening)  # rides with the first model intent (or the finish)
        return await driver.iterate()

    if instrumentation is None:
        return await driver.guarded(body(started))
    return await _instrumented(driver, instrumentation, started, body, resumed=False)


async def _instrumented(
    driver: _Driver,
    instrumentation: Instrumentation,
    started: RunStarted,
    body: Callable[[RunStarted], Coroutine[Any, Any, RunResult]],
    *,
    resumed: bool,
) -> RunResult:
    """Drive ``body`` inside the instrumentation's run scope; a new run's ``RunStarted`` carries
    the scope's trace context (a resume keeps the one in its log)."""
    drained: Drained | None = None
    with instrumentation.run(started, resumed=resumed) as probe:
        driver.probe = probe
        opening = started if resumed else replace(started, trace_parent=probe.trace_parent)
        try:
            result = await driver.guarded(body(opening))
        except Drained as stopped:  # no error: the run stopped on purpose, unfinished
            drained = stopped
        else:
            probe.finished(result)
    if drained is not None:
        raise drained
    return result


async def _check_new(run_id: str, store: RunStore) -> None:
    existing = await store.read_log(run_id)
    if existing.records:
        count = len(existing)
        raise RunAlreadyExists(
            f"run {run_id!r} already has a log ({count} record{'' if count == 1 else 's'})"
        )


def _started_record(
    run_id: str,
    goal: str,
    agent: AgentDefinition,
    *,
    batch: str | None,
    task_id: str | None,
    labels: dict[str, str],
) -> RunStarted:
    parameters = agent.parameters()
    return RunStarted(
        run_id=run_id,
        goal=goal,
        parameters=parameters,
        parameters_hash=parameters_hash(parameters),
        started_at=utc_timestamp(),
        batch=batch,
        task_id=task_id,
        labels=labels,
    )


def _rebuilt(run_id: str, log: RunLog, finished: RunFinished) -> RunResult:
    return RunResult(
        run_id=run_id,
        stop_reason=finished.stop_reason,
        steps=tuple(c.step for c in log.steps),
        final_answer=finished.final_answer,
        executed_actions=finished.executed_actions,
        event_delivery_failures=0,
    )


async def resume(
    run_id: str,
    agent: AgentDefinition,
    *,
    model: ModelClient,
    parser: DecisionParser,
    executor: ActionExecutor,
    store: RunStore,
    events: EventSink | None = None,
    instrumentation: Instrumentation | None = None,
    end_on_parser_error: bool = False,
) -> RunResult:
    """Continue an interrupted run from its log, or rebuild the result of a finished one.

    Checked in order: unknown run → ``RunNotFound``; no ``RunStarted`` → ``StoreCorrupted``;
    finished → the result rebuilt from the log (no seam called); a different
    ``agent.parameters()`` hash → ``ParametersChanged``. Then it continues from the last record:
    a model intent calls the model again; a logged reply is parsed again (no second model call);
    an action intent is replayed only if allowed, else the run ends ``resume_state_unknown``; a
    logged step is re-decided without calling any seam. ``instrumentation`` as for ``run()``
    (not called for a finished run): it gets the logged ``RunStarted``, to link to the original.
    ``end_on_parser_error`` as for ``run()``: the way to end, on purpose, a run whose logged
    reply makes the parser raise on every resume (the step records the exception; the run
    stops ``parser_error``).
    """
    return await proceed(
        run_id,
        agent,
        model=model,
        parser=parser,
        executor=executor,
        store=store,
        events=events,
        instrumentation=instrumentation,
        end_on_parser_error=end_on_parser_error,
    )


async def proceed(
    run_id: str,
    agent: AgentDefinition,
    *,
    model: ModelClient,
    parser: DecisionParser,
    executor: ActionExecutor,
    store: RunStore,
    events: EventSink | None,
    how: Driving | None = None,
    instrumentation: Instrumentation | None = None,
    end_on_parser_error: bool = False,
) -> RunResult:
    """:func:`resume`, driven as ``how`` says (:class:`Driving`)."""
    validate_run_id(run_id)
    seams = _set_up(agent, (model, parser, executor, store, events), store_optional=False)
    _check_seams(defaults=("instrumentation",), instrumentation=instrumentation)
    log = await seams.store.read_log(run_id)
    started = _started_of(run_id, log, seams.store)
    if log.finished is not None:
        return _rebuilt(run_id, log, log.finished)
    _check_parameters(run_id, agent, started)
    driver = _Driver(run_id, agent, started.goal, seams, how)
    driver.end_on_parser_error = bool(end_on_parser_error)
    driver.commits.continue_at(len(log.records))
    stop = _replayed(driver, log)
    if instrumentation is None:
        return await driver.guarded(_continue(driver, log, stop))
    return await _instrumented(
        driver, instrumentation, started, lambda _: _continue(driver, log, stop), resumed=True
    )


def _started_of(run_id: str, log: RunLog, store: RunStore) -> RunStarted:
    """The log's ``RunStarted``: ``RunNotFound`` for no log, ``StoreCorrupted`` for none."""
    if not log.records:
        raise RunNotFound(f"run {run_id!r} has no log in {store!r}")
    started = log.started
    if started is None:
        raise StoreCorrupted(f"run {run_id!r}: the log does not start with RunStarted")
    return started


def _check_parameters(run_id: str, agent: AgentDefinition, started: RunStarted) -> None:
    expected = parameters_hash(agent.parameters())
    if expected != started.parameters_hash:
        raise ParametersChanged(
            f"run {run_id!r} was started with parameters {started.parameters_hash}, "
            f"this agent has {expected}: what the model sees or when the run stops changed"
        )


def _replayed(driver: _Driver, log: RunLog) -> StopReason | None:
    """Fold the logged steps into ``driver``, deciding as it goes; the last step's stop."""
    stop: StopReason | None = None
    for position, completed in enumerate(log.steps):
        if stop is not None:
            raise StoreCorrupted(
                f"run {driver.run_id!r}: step {position - 1} stopped the run but more steps follow"
            )
        stop = driver.absorb(completed)
    return stop


async def _continue(driver: _Driver, log: RunLog, stop: StopReason | None) -> RunResult:
    """Pick up after the last logged record (SPEC §4, resume)."""
    last = log.records[-1]
    if isinstance(last, StepCompleted):
        if stop is StopReason.AGENT_FINISHED:
            driver.final_answer = _reparse_final_answer(driver, log)
        if stop is not None:
            return await driver.finish(stop)
        return await driver.iterate()
    if isinstance(last, RunStarted | ModelCallIntent):
        return await driver.iterate()  # A and B pass again: same counters, same history
    prompt_chars = driver.history_chars
    reply = _logged_reply(driver.run_id, log)
    if isinstance(last, ModelReplied):
        stop = await driver.decide(reply, prompt_chars)
    elif isinstance(last, ActionIntent):
        agent = driver.agent
        action = last.action
        allowed = (
            agent.tools.replay_allowed(action.tool_name, agent.replay_interrupted_actions)
            if agent.tools is not None
            else agent.replay_interrupted_actions
        )
        if not allowed:
            return await driver.finish(StopReason.RESUME_STATE_UNKNOWN)
        driver.check_drain()
        await driver.append(ActionIntent(step_index=last.step_index, action=action))
        stop = await driver.act(reply, action, prompt_chars)
    if stop is not None:
        return await driver.finish(stop)
    return await driver.iterate()


def _logged_reply(run_id: str, log: RunLog) -> ModelReply:
    """The reply the log's last record acts on: the step's ``ModelReplied``, which must exist."""
    last = log.records[-1]
    step_index = getattr(last, "step_index", None)
    if not log.replies or log.replies[-1].step_index != step_index:
        raise StoreCorrupted(
            f"run {run_id!r}, sequence {len(log.records) - 1}: {last.kind} for step "
            f"{step_index} has no model_replied record before it"
        )
    return log.replies[-1].reply


def _reparse_final_answer(driver: _Driver, log: RunLog) -> str | None:
    """A final answer's text is not in the step record: parse its logged reply again."""
    decision = driver.seams.parser.parse(log.replies[-1].reply)
    return decision.text if isinstance(decision, FinalAnswer) else None
