"""Reference implementations and broken ones, one (or more) per checked promise.

Each broken implementation keeps every promise but the ones it is written to break; the matrix
test (``test_matrix.py``) runs each through its suite and asserts that exactly those fail — and
that the reference implementation keeps every promise. They are imported by the pytester
sandboxes, so they must stay importable as ``tests.kit.broken``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import urllib.parse
from types import SimpleNamespace
from typing import Any

from polyloop.errors import RunAlreadyFinished
from polyloop.events import MemorySink
from polyloop.stores import MemoryStore
from polyloop.stores._rules import check_append, check_record
from polyloop.testing import ActionSamples, ModelSamples, ParserSamples
from polyloop.types import (
    RECORD_TYPES,
    Action,
    ActionOutcome,
    ActionStatus,
    Event,
    FinalAnswer,
    InvalidDecision,
    Message,
    ModelReply,
    Record,
    RunFinished,
    RunLog,
    StepCompleted,
    StepRecord,
    StopReason,
)

# --------------------------------------------------------------------------- action executor
# Action language of these executors: ``Action.text`` is a command; "fail" makes it raise.

ACTION_SAMPLES = ActionSamples(
    executes_cleanly=Action(text="echo hello", tool_name="shell", tool_args={"cmd": "echo"}),
    executes_but_errors=Action(text="fail now", tool_name="shell", tool_args={"cmd": "fail"}),
)


class ReferenceExecutor:
    """Correct: a real await point, an action's own error is an executed observation."""

    async def execute(self, action: Action) -> ActionOutcome:
        await asyncio.sleep(0.001)
        if action.text.startswith("fail"):
            return ActionOutcome(status=ActionStatus.EXECUTED, observation="Error: it failed")
        return ActionOutcome(status=ActionStatus.EXECUTED, observation="hello")


class FastExecutor(ReferenceExecutor):
    """Correct, and returns within one tick: cancellation is not applicable to it."""

    async def execute(self, action: Action) -> ActionOutcome:
        status = ActionStatus.EXECUTED
        return ActionOutcome(status=status, observation="Error" if "fail" in action.text else "ok")


class EnvErrorForActionError(ReferenceExecutor):
    async def execute(self, action: Action) -> ActionOutcome:
        outcome = await super().execute(action)
        if action.text.startswith("fail"):
            return ActionOutcome(status=ActionStatus.ENV_ERROR, observation=outcome.observation)
        return outcome


class EmptyObservationForActionError(ReferenceExecutor):
    async def execute(self, action: Action) -> ActionOutcome:
        outcome = await super().execute(action)
        return dataclasses.replace(outcome, observation="") if "fail" in action.text else outcome


class DuckTypedOutcome(ReferenceExecutor):
    async def execute(self, action: Action) -> Any:
        outcome = await super().execute(action)
        return SimpleNamespace(
            **{f.name: getattr(outcome, f.name) for f in dataclasses.fields(outcome)}
        )


class StatusAsPlainString(ReferenceExecutor):
    async def execute(self, action: Action) -> ActionOutcome:
        outcome = await super().execute(action)
        object.__setattr__(outcome, "status", "executed")
        return outcome


class CompletionSignalIsNone(ReferenceExecutor):
    async def execute(self, action: Action) -> ActionOutcome:
        outcome = await super().execute(action)
        object.__setattr__(outcome, "env_reported_completion", None)
        return outcome


class NegativeTruncation(ReferenceExecutor):
    async def execute(self, action: Action) -> ActionOutcome:
        outcome = await super().execute(action)
        return dataclasses.replace(outcome, observation_truncated_chars=-1)


class StatusDriftsOnRepeat(ReferenceExecutor):
    """Refuses an action it has seen before ("already ran")."""

    def __init__(self) -> None:
        self.seen: set[str] = set()

    async def execute(self, action: Action) -> ActionOutcome:
        outcome = await super().execute(action)
        if action.text in self.seen:
            return ActionOutcome(status=ActionStatus.NOT_EXECUTED, observation="already ran")
        self.seen.add(action.text)
        return outcome


class SwallowsCancellation(ReferenceExecutor):
    async def execute(self, action: Action) -> ActionOutcome:
        try:
            await asyncio.sleep(0.005)
        except asyncio.CancelledError:
            return ActionOutcome(status=ActionStatus.EXECUTED, observation="interrupted")
        return await super().execute(action)


class CancellationBecomesRuntimeError(ReferenceExecutor):
    async def execute(self, action: Action) -> ActionOutcome:
        try:
            await asyncio.sleep(0.005)
        except asyncio.CancelledError:
            raise RuntimeError("session interrupted") from None
        return await super().execute(action)


# --------------------------------------------------------------------------- decision parser
# Format: "ACT <command>" → Action, "FINAL <answer>" → FinalAnswer, anything else → invalid.

PARSER_SAMPLES = ParserSamples(
    action_reply=ModelReply(text="ACT ls -la", call_id="c1"),
    invalid_reply=ModelReply(text="I think I will look around."),
    final_reply=ModelReply(text="FINAL 42"),
)

FEEDBACK = "Start your reply with ACT <command> or FINAL <answer>."


class ReferenceParser:
    def parse(self, reply: ModelReply) -> Action | FinalAnswer | InvalidDecision:
        text = reply.text.strip()
        if text.startswith("ACT ") and text[4:].strip():
            command = text[4:].strip()
            return Action(text=command, tool_name="shell", tool_args={"cmd": command})
        if text.startswith("FINAL "):
            return FinalAnswer(text=text[6:].strip())
        return InvalidDecision(feedback=FEEDBACK)


class RaisesOnControlCharacters(ReferenceParser):
    def parse(self, reply: ModelReply) -> Action | FinalAnswer | InvalidDecision:
        if any(ord(c) < 32 and c not in "\n\t" for c in reply.text):
            raise ValueError("control character in reply")
        return super().parse(reply)


class NondeterministicFeedback(ReferenceParser):
    def __init__(self) -> None:
        self.calls = 0

    def parse(self, reply: ModelReply) -> Action | FinalAnswer | InvalidDecision:
        self.calls += 1
        decision = super().parse(reply)
        if isinstance(decision, InvalidDecision):
            return InvalidDecision(feedback=f"{FEEDBACK} (attempt {self.calls})")
        return decision


# The thought a model may write before its command, read with llama-index's ReAct pattern: the
# optional prefix lets the lazy group start at every position, so a reply holding no command
# (a reply cut at max_tokens) is scanned from each one — quadratic in its length.
_THOUGHT = re.compile(r"(?:\s*Thought: (.*?)|(?:\s*Thought: )?(.*?))\s*(?:ACT|FINAL) ", re.DOTALL)


class ReadsTheThoughtWithARegex(ReferenceParser):
    """Keeps the model's thought for its trace; decides like the reference."""

    def __init__(self) -> None:
        self.thought: str | None = None

    def parse(self, reply: ModelReply) -> Action | FinalAnswer | InvalidDecision:
        found = _THOUGHT.search(reply.text)
        self.thought = (found.group(1) or found.group(2)) if found else None
        return super().parse(reply)


class DuckTypedAction(ReferenceParser):
    def parse(self, reply: ModelReply) -> Any:
        decision = super().parse(reply)
        if isinstance(decision, Action):
            return SimpleNamespace(text=decision.text, tool_name=None, tool_args=None)
        return decision


class BlankFeedback(ReferenceParser):
    def parse(self, reply: ModelReply) -> Action | FinalAnswer | InvalidDecision:
        decision = super().parse(reply)
        return InvalidDecision(feedback="  ") if isinstance(decision, InvalidDecision) else decision


class FeedbackPatchedToNone(ReferenceParser):
    def parse(self, reply: ModelReply) -> Action | FinalAnswer | InvalidDecision:
        decision = super().parse(reply)
        if isinstance(decision, InvalidDecision):
            object.__setattr__(decision, "feedback", None)
        return decision


class RecognisesNothing(ReferenceParser):
    def parse(self, reply: ModelReply) -> Action | FinalAnswer | InvalidDecision:
        return InvalidDecision(feedback=FEEDBACK)


class MissesFinalAnswers(ReferenceParser):
    def parse(self, reply: ModelReply) -> Action | FinalAnswer | InvalidDecision:
        decision = super().parse(reply)
        return InvalidDecision(feedback=FEEDBACK) if isinstance(decision, FinalAnswer) else decision


class UnserialisableToolArgs(ReferenceParser):
    def parse(self, reply: ModelReply) -> Action | FinalAnswer | InvalidDecision:
        decision = super().parse(reply)
        if isinstance(decision, Action):
            object.__setattr__(decision, "tool_args", {"cmd": {"a", "set"}})
        return decision


# --------------------------------------------------------------------------- model client

MODEL_SAMPLES = ModelSamples(
    messages=[
        Message(role="system", content="You are terse."),
        Message(role="user", content="Say hello."),
    ]
)


class ReferenceModel:
    async def complete(self, messages: Any) -> ModelReply:
        await asyncio.sleep(0.001)
        return ModelReply(text=f"hello after {len(messages)} messages", call_id="ref-1")


class AppendsItsReply(ReferenceModel):
    async def complete(self, messages: Any) -> ModelReply:
        reply = await super().complete(messages)
        messages.append(Message(role="assistant", content=reply.text))
        return reply


class DropsTheSystemMessage(ReferenceModel):
    async def complete(self, messages: Any) -> ModelReply:
        if messages and messages[0].role == "system":
            del messages[0]
        return await super().complete(messages)


class EmptyCallId(ReferenceModel):
    async def complete(self, messages: Any) -> ModelReply:
        reply = await super().complete(messages)
        object.__setattr__(reply, "call_id", "")
        return reply


class ReturnsRawText(ReferenceModel):
    async def complete(self, messages: Any) -> Any:
        return (await super().complete(messages)).text


class UsageNotFinite(ReferenceModel):
    async def complete(self, messages: Any) -> ModelReply:
        reply = await super().complete(messages)
        object.__setattr__(reply, "usage", {"cost": float("nan")})  # floats are fine, NaN is not
        return reply


class ModelSwallowsCancellation(ReferenceModel):
    async def complete(self, messages: Any) -> ModelReply:
        try:
            await asyncio.sleep(0.005)
        except asyncio.CancelledError:
            return ModelReply(text="(cancelled)")
        return await super().complete(messages)


# --------------------------------------------------------------------------- event sink


class ReferenceSink(MemorySink):
    """MemorySink with a real await point."""

    async def emit(self, event: Event) -> None:
        await asyncio.sleep(0)
        self.events.append(event)


class ChokesOnMissingToolArgs(ReferenceSink):
    async def emit(self, event: Event) -> None:
        if isinstance(event.record, StepCompleted):
            len(event.record.step.tool_args_json)  # type: ignore[arg-type]
        await super().emit(event)


class AsciiOnlySink(ReferenceSink):
    async def emit(self, event: Event) -> None:
        event.record.to_json().encode("ascii")
        await super().emit(event)


class NotReentrantSink(ReferenceSink):
    """One shared "connection" used without a lock."""

    def __init__(self) -> None:
        super().__init__()
        self.busy = False

    async def emit(self, event: Event) -> None:
        if self.busy:
            raise RuntimeError("connection busy: concurrent use")
        self.busy = True
        try:
            await asyncio.sleep(0)
            self.events.append(event)
        finally:
            self.busy = False


class ReturnsAcknowledgement(ReferenceSink):
    async def emit(self, event: Event) -> Any:
        await super().emit(event)
        return True


class SinkSwallowsCancellation(ReferenceSink):
    async def emit(self, event: Event) -> None:
        try:
            await asyncio.sleep(0.005)
        except asyncio.CancelledError:
            return
        await super().emit(event)


# --------------------------------------------------------------------------- run store


_NESTED: dict[str, type] = {"reply": ModelReply, "action": Action, "step": StepRecord}
_ENUMS: dict[str, type] = {"stop_reason": StopReason, "action_status": ActionStatus}


def _build_unchecked(cls: type, data: dict[str, Any]) -> Any:
    """Rebuild a dataclass around its constructor — as a careless decoder would."""
    instance: Any = object.__new__(cls)
    for f in dataclasses.fields(cls):
        value = data.get(f.name)
        if f.name in _NESTED and isinstance(value, dict):
            value = _build_unchecked(_NESTED[f.name], value)
        elif f.name in _ENUMS and value is not None:
            value = _ENUMS[f.name](value)
        object.__setattr__(instance, f.name, value)
    return instance


_KIND_TO_CLASS = {cls.kind: cls for cls in RECORD_TYPES}


def _lossy(value: Any, lose: tuple[Any, ...]) -> Any:
    if isinstance(value, dict):
        return {k: _lossy(v, lose) for k, v in value.items()}
    if isinstance(value, list):
        return [_lossy(v, lose) for v in value]
    if any(type(value) is type(x) and value == x for x in lose):
        return None
    return value


class JsonStore(MemoryStore):
    """Serialises each record to JSON on the way "to disk" and decodes it without validation."""

    lose: tuple[Any, ...] = ()

    async def read_log(self, run_id: str) -> RunLog:
        log = await super().read_log(run_id)
        rebuilt = []
        for record in log.records:
            data = _lossy(json.loads(record.to_json()), self.lose)
            data.pop("kind")
            rebuilt.append(_build_unchecked(_KIND_TO_CLASS[record.kind], data))
        return RunLog(tuple(rebuilt))


class ZeroBecomesNone(JsonStore):
    lose = (0,)


class EmptyStringBecomesNone(JsonStore):
    lose = ("",)


class StopReasonAsPlainString(MemoryStore):
    async def read_log(self, run_id: str) -> RunLog:
        log = await super().read_log(run_id)
        out = []
        for record in log.records:
            if isinstance(record, RunFinished):
                record = dataclasses.replace(record)
                object.__setattr__(record, "stop_reason", str(record.stop_reason.value))
            out.append(record)
        return RunLog(tuple(out))


class UnknownRunRaises(MemoryStore):
    async def read_log(self, run_id: str) -> RunLog:
        if run_id not in self._logs:
            raise KeyError(run_id)
        return await super().read_log(run_id)


class SortsByStepIndex(MemoryStore):
    async def read_log(self, run_id: str) -> RunLog:
        log = await super().read_log(run_id)
        return RunLog(tuple(sorted(log.records, key=lambda r: getattr(r, "step_index", -1))))


class IgnoresRunId(MemoryStore):
    """Everything goes into one log, whatever the run id."""

    async def append(self, run_id: str, record: Record, *, sequence: int) -> None:
        await super().append("the-one-log", record, sequence=sequence)

    async def read_log(self, run_id: str) -> RunLog:
        return await super().read_log("the-one-log")


class LosesConcurrentAppends(MemoryStore):
    """Copies the whole table, awaits, writes it back: another run's append in between is lost."""

    async def append(self, run_id: str, record: Record, *, sequence: int) -> None:
        snapshot = {key: list(value) for key, value in self._logs.items()}
        scratch = MemoryStore()
        scratch._logs = snapshot
        await scratch.append(run_id, record, sequence=sequence)
        await asyncio.sleep(0)  # e.g. the write to disk
        self._logs = scratch._logs


class IgnoresSequence(MemoryStore):
    async def append(self, run_id: str, record: Record, *, sequence: int) -> None:
        await super().append(run_id, record, sequence=len(self._logs.get(run_id, [])))


class SecondStartReplacesLog(MemoryStore):
    async def append(self, run_id: str, record: Record, *, sequence: int) -> None:
        if record.kind == "run_started":
            self._logs.pop(run_id, None)
            sequence = 0
        await super().append(run_id, record, sequence=sequence)


class AppendsAfterFinish(MemoryStore):
    async def append(self, run_id: str, record: Record, *, sequence: int) -> None:
        log = self._logs.get(run_id, [])
        if log and log[-1][1] == "run_finished" and record.kind != "run_started":
            if sequence != len(log):
                from polyloop.errors import RunConflict

                raise RunConflict("wrong sequence")
            log.append((sequence, record.kind, record.to_json()))
            return
        await super().append(run_id, record, sequence=sequence)


class ConflictBeforeOtherErrors(MemoryStore):
    """Checks the sequence first: the precedence (exists, finished, conflict) is wrong."""

    async def append(self, run_id: str, record: Record, *, sequence: int) -> None:
        from polyloop.errors import RunConflict

        if sequence != len(self._logs.get(run_id, [])):
            raise RunConflict("wrong sequence")
        await super().append(run_id, record, sequence=sequence)


class ListsNoRuns(MemoryStore):
    async def run_ids(self) -> list[str]:
        return []


class RunIdsAsTuple(MemoryStore):
    async def run_ids(self) -> Any:
        return tuple(await super().run_ids())


class ReturnsRecordTuple(MemoryStore):
    async def read_log(self, run_id: str) -> Any:
        return (await super().read_log(run_id)).records


# --------------------------------------------------------------------------- opt-in promises
# Issue #10: implementations for the promises checked only when an opt-in sample is given
# (test_matrix_opt_ins.py). The stores live in tests/kit/broken_stores.py: the crash probe's
# writer processes import them, and this module imports pytest and Hypothesis.


class SessionExecutor(ReferenceExecutor):
    """Correct: refuses any tool but ``shell``; a dead session is returned as ``env_error``."""

    def __init__(self) -> None:
        self.session_alive = True

    async def execute(self, action: Action) -> ActionOutcome:
        if action.tool_name != "shell":
            return ActionOutcome(status=ActionStatus.NOT_EXECUTED, observation="no such tool")
        if not self.session_alive:
            return ActionOutcome(status=ActionStatus.ENV_ERROR, observation="the session is gone")
        return await super().execute(action)


async def kill_session(executor: Any) -> None:
    """The ``break_environment`` hook of the session executors."""
    executor.session_alive = False


class RaisesWhenSessionGone(SessionExecutor):
    async def execute(self, action: Action) -> ActionOutcome:
        if not self.session_alive:
            raise ConnectionError("the session is gone")
        return await super().execute(action)


class RunsRefusedActions(SessionExecutor):
    async def execute(self, action: Action) -> ActionOutcome:
        if action.tool_name != "shell":
            return ActionOutcome(status=ActionStatus.EXECUTED, observation="ran it anyway")
        return await super().execute(action)


OPT_IN_ACTION_SAMPLES = dataclasses.replace(
    ACTION_SAMPLES,
    refused=Action(text="format the disk", tool_name="format_disk", tool_args={}),
    break_environment=kill_session,
)


class HttpModel:
    """Correct: a minimal chat-completions client on asyncio streams. Any HTTP status but 200,
    a body that is not a reply, a broken connection or ``timeout_s`` without an answer raises."""

    timeout_s: float | None = 0.5

    def __init__(self, base_url: str) -> None:
        self.url = urllib.parse.urlsplit(base_url.rstrip("/") + "/chat/completions")

    async def complete(self, messages: Any) -> ModelReply:
        async with asyncio.timeout(self.timeout_s):
            status, body = await self._post({"messages": [m.content for m in messages]})
        return self._reply(status, body)

    def _reply(self, status: int, body: bytes) -> ModelReply:
        if status != 200:
            raise RuntimeError(f"the endpoint answered HTTP {status}")
        return ModelReply(text=json.loads(body)["choices"][0]["message"]["content"])

    async def _post(self, payload: object) -> tuple[int, bytes]:
        status, _, body = await self._post_with_headers(payload)
        return status, body

    async def _post_with_headers(self, payload: object) -> tuple[int, dict[str, str], bytes]:
        """The request, and the response's status, headers (lower-cased names) and body."""
        reader, writer = await asyncio.open_connection(self.url.hostname, self.url.port)
        try:
            data = json.dumps(payload).encode()
            writer.write(
                f"POST {self.url.path} HTTP/1.1\r\nHost: {self.url.netloc}\r\n"
                f"Content-Length: {len(data)}\r\n\r\n".encode()
                + data
            )
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
            fields = dict(line.lower().split(": ", 1) for line in head[1:] if ": " in line)
            body = await reader.readexactly(int(fields.get("content-length", "0")))
            return int(head[0].split()[1]), fields, body
        finally:
            writer.close()


class ErrorTextOn500(HttpModel):
    def _reply(self, status: int, body: bytes) -> ModelReply:
        if status == 500:
            return ModelReply(text="Error: the model endpoint answered 500, please retry")
        return super()._reply(status, body)


class HangsPastItsBound(HttpModel):
    timeout_s = None  # waits for an answer that never comes


def opt_in_model_samples(factory: Any) -> ModelSamples:
    return dataclasses.replace(MODEL_SAMPLES, failing_client_factory=factory, failure_bound_s=2.0)


# ---------------------------------------------------------------- issue #9: deeper probes
# Cancellation swallowed only after a first quick await (a connect, a lock, a subprocess start),
# or only while running the erroring sample; and the two run-store fences the suite missed.


async def _connect() -> None:
    """A first await that finishes quickly: a connect, a lock, ``create_subprocess_exec``."""
    await asyncio.sleep(0)


class SwallowsCancellationAfterConnecting(ReferenceExecutor):
    async def execute(self, action: Action) -> ActionOutcome:
        await _connect()
        try:
            await asyncio.sleep(0.02)
        except asyncio.CancelledError:
            return ActionOutcome(status=ActionStatus.EXECUTED, observation="interrupted")
        return await super().execute(action)


class SwallowsCancellationAfterSlowStart(ReferenceExecutor):
    """Its first await takes real time (a process start), so only a deeper probe reaches the
    swallowing one."""

    async def execute(self, action: Action) -> ActionOutcome:
        for _ in range(3):
            await asyncio.sleep(0.002)
        try:
            await asyncio.sleep(0.05)
        except asyncio.CancelledError:
            return ActionOutcome(status=ActionStatus.EXECUTED, observation="interrupted")
        return await super().execute(action)


class SwallowsCancellationOnlyWhenTheActionFails(ReferenceExecutor):
    async def execute(self, action: Action) -> ActionOutcome:
        if not action.text.startswith("fail"):
            return await super().execute(action)
        try:
            await asyncio.sleep(0.005)
        except asyncio.CancelledError:
            return ActionOutcome(status=ActionStatus.EXECUTED, observation="Error: interrupted")
        return await super().execute(action)


class ModelSwallowsCancellationAfterConnecting(ReferenceModel):
    async def complete(self, messages: Any) -> ModelReply:
        await _connect()
        try:
            await asyncio.sleep(0.02)
        except asyncio.CancelledError:
            return ModelReply(text="(cancelled)")
        return await super().complete(messages)


class SinkSwallowsCancellationAfterConnecting(ReferenceSink):
    async def emit(self, event: Event) -> None:
        await _connect()
        try:
            await asyncio.sleep(0.02)
        except asyncio.CancelledError:
            return
        await super().emit(event)


class SlowExecutor(ReferenceExecutor):
    """Correct and slow (200 ms per call), with state kept across calls: no false alarm."""

    def __init__(self) -> None:
        self.calls = 0
        self.lock = asyncio.Lock()

    async def execute(self, action: Action) -> ActionOutcome:
        async with self.lock:
            self.calls += 1
            await asyncio.sleep(0.2)
            return await super().execute(action)


class SlowModel(ReferenceModel):
    """Correct and slow (200 ms per call)."""

    async def complete(self, messages: Any) -> ModelReply:
        await asyncio.sleep(0.2)
        return await super().complete(messages)


class SlowSink(ReferenceSink):
    """Correct and slow (200 ms per call)."""

    async def emit(self, event: Event) -> None:
        await asyncio.sleep(0.2)
        await super().emit(event)


class FinishedBeforeExists(MemoryStore):
    """Checks "finished" before "exists": a start appended to a finished run is refused as
    ``RunAlreadyFinished``, but SPEC §3 says ``RunAlreadyExists`` comes first."""

    async def append(self, run_id: str, record: Record, *, sequence: int) -> None:
        log = self._logs.get(run_id, [])
        if log and log[-1][1] == RunFinished.kind:
            raise RunAlreadyFinished(f"run {run_id!r} is finished")
        await super().append(run_id, record, sequence=sequence)


class FirstAppendUnfenced(MemoryStore):
    """Fences only a run that has a log: the first append is accepted at any sequence."""

    async def append(self, run_id: str, record: Record, *, sequence: int) -> None:
        if not self._logs.get(run_id):
            sequence = 0
        await super().append(run_id, record, sequence=sequence)


# Stores that keep every rule on one or two runs and break one under interleaving: only the
# state machine (run_store.behaves_like_the_reference_store) sees them.


class FenceKeyedByTruncatedRunId(MemoryStore):
    """Keeps each run's length in an index keyed by the first 32 characters of its id (sized for
    ``uuid4().hex``): runs whose ids share those characters share one fence."""

    def __init__(self) -> None:
        super().__init__()
        self._lengths: dict[str, int] = {}

    async def append(self, run_id: str, record: Record, *, sequence: int) -> None:
        check_record(run_id, record, sequence)
        log = self._logs.get(run_id, [])
        finished = bool(log) and log[-1][1] == RunFinished.kind
        length = self._lengths.get(run_id[:32], 0)
        check_append(run_id, record, sequence=sequence, length=length, finished=finished)
        log.append((sequence, record.kind, record.to_json()))
        self._logs[run_id] = log
        self._lengths[run_id[:32]] = len(log)


class ForgetsAFinishAfterAnotherRunsAppend(MemoryStore):
    """Remembers only the last finished run: another run's append makes it forget the finish."""

    def __init__(self) -> None:
        super().__init__()
        self._finished_run: str | None = None

    async def append(self, run_id: str, record: Record, *, sequence: int) -> None:
        check_record(run_id, record, sequence)
        log = self._logs.get(run_id, [])
        finished = run_id == self._finished_run
        check_append(run_id, record, sequence=sequence, length=len(log), finished=finished)
        log.append((sequence, record.kind, record.to_json()))
        self._logs[run_id] = log
        self._finished_run = run_id if isinstance(record, RunFinished) else None


class ListsOnlyUnfinishedRuns(MemoryStore):
    """Lists runs from an index of active runs: a finished run disappears from run_ids()."""

    async def run_ids(self) -> list[str]:
        return sorted(r for r, log in self._logs.items() if log[-1][1] != RunFinished.kind)


# --------------------------------------------------------------------------- run store batches
# Each overrides only ``append_many`` (``MemoryStore.append`` is a batch of one, so single
# appends go through it too — the breakers call the reference's own method for the records).


class BatchWritesUntilTheBadRecord(MemoryStore):
    """Appends a batch record by record: the records before a refused one stay written."""

    async def append_many(self, run_id: str, records: Any, *, sequence: int) -> None:
        for offset, record in enumerate(records):
            await MemoryStore.append_many(self, run_id, (record,), sequence=sequence + offset)


class BatchFencesOnlyItsLastRecord(MemoryStore):
    """Writes the batch at the log's end, checking ``sequence`` only against the last record."""

    async def append_many(self, run_id: str, records: Any, *, sequence: int) -> None:
        *head, last = records
        length = len(self._logs.get(run_id, []))
        if head:
            await MemoryStore.append_many(self, run_id, head, sequence=length)
        await MemoryStore.append_many(self, run_id, (last,), sequence=sequence + len(head))


class BatchWrittenBackwards(MemoryStore):
    """Atomic and fenced, but stores the batch's records in reverse order."""

    async def append_many(self, run_id: str, records: Any, *, sequence: int) -> None:
        if len(records) == 1:
            await MemoryStore.append_many(self, run_id, records, sequence=sequence)
            return
        await MemoryStore.append_many(self, run_id, records, sequence=sequence)
        log = self._logs[run_id]
        rows = log[sequence:]  # the records reversed, each at the other's sequence
        log[sequence:] = [
            (n, kind, body) for (n, _, _), (_, kind, body) in zip(rows, rows[::-1], strict=True)
        ]


# Issue #21, classes 4 and 7: sinks and stores with their correct twins, in a module of their own.
from tests.kit.broken_delivery import *  # noqa: E402, F403

# Issue #24: stores offering the inline commit, right and wrong, in a module of their own.
from tests.kit.broken_inline import *  # noqa: E402, F403
