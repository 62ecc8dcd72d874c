"""Public value types: decisions, outcomes, budgets, step records, the six log records.

Everything here is a frozen, slotted, keyword-only dataclass or a ``StrEnum``. Field names are
the public contract: adding a field with a default is compatible; renaming or removing one is a
new major ``schema_version``. Records that hold mappings (``ModelReply.usage``,
``RunStarted.parameters``, ``Action.tool_args``) are not hashable.

Only four constructors validate (raising ``ValueError`` naming the field): ``ModelReply``
(``call_id=""``, ``usage`` not mapping str to an int or a finite float), ``Budget`` (a limit
< 1), ``Action`` (``tool_args`` not JSON-serialisable) and ``ActionOutcome`` (``detail`` not a
JSON object). Everything else is plain data; the contract kit checks types at the seams.
"""

from __future__ import annotations

import enum
import hashlib
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Literal, TypeAlias

from polyloop._base._canonical_json import canonical_json
from polyloop._base._codec import (
    MAX_NESTING,
    Fields,
    check_version,
    decode_record,
    is_bool,
    is_dict,
    is_int,
    is_opt_str,
    is_str,
    record_to_json,
)
from polyloop._base._utf8_json import utf8_json
from polyloop.tools import ToolRegistry

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
    "InvalidDecision",
    "Message",
    "ModelCallIntent",
    "ModelReplied",
    "ModelReply",
    "ParsedReply",
    "Record",
    "RunFinished",
    "RunLog",
    "RunResult",
    "RunStarted",
    "StepCompleted",
    "StepRecord",
    "StopReason",
    "SyntheticObservations",
    "action_or_feedback",
    "canonical_json",
    "parameters_hash",
    "record_from_json",
]

# 1.1: RunStarted gained the optional batch, task_id, labels and trace_parent, ModelReply the
# optional model and finish_reason, StepCompleted the optional executor_detail (1.0 logs read
# with their defaults; a reader ignores fields a later minor added).
SCHEMA_VERSION = "1.1"


def nested_deeper_than(value: object, limit: int) -> bool:
    """Whether ``value`` holds mappings and lists more than ``limit`` levels deep (no recursion)."""
    pending: list[tuple[object, int]] = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, Mapping):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth == limit:
            return True
        pending.extend((child, depth + 1) for child in children)
    return False


def is_usage_number(value: object) -> bool:
    """A usage value: an int or a finite float (a token count, a cost); never a bool."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))


def usage_problem(usage: object) -> str | None:
    """What is wrong with a ``ModelReply.usage`` value, or ``None``."""
    if not isinstance(usage, Mapping):
        return f"must be a mapping of str to number, got {type(usage).__name__}"
    for key, value in usage.items():
        if not isinstance(key, str):
            return f"keys must be str, got {type(key).__name__}"
        if not is_usage_number(value):
            return f"[{key!r}] must be an int or a finite float, got {value!r}"
    return None


def parameters_hash(parameters: Mapping[str, Any]) -> str:
    """``"sha256:" + sha256(canonical_json(parameters))``, a lone surrogate hashed as its JSON
    escape (the text a record stores)."""
    digest = hashlib.sha256(utf8_json(canonical_json(dict(parameters))).encode("utf-8")).hexdigest()
    return f"sha256:{digest}"


class StopReason(enum.StrEnum):
    """Why a run stopped. Downstream SQL matches these strings: they never change.

    The enum only grows: an exhaustive ``match`` over it must keep a default branch.
    ``CANCELLED`` never appears on a result returned by ``run()`` (cancellation re-raises
    ``CancelledError``); it appears in the log's ``RunFinished`` and in a result that
    ``resume()`` rebuilds from that log. ``TIME_LIMIT``: a batch run (``run_many``) was driven
    longer than its per-run time limit. ``PARSER_ERROR``: the decision parser raised and the
    caller asked to end the run rather than raise (``end_on_parser_error=True``); the last step
    records the exception.
    """

    TASK_COMPLETED = "task_completed"
    STEP_BUDGET = "step_budget"
    PARSE_FAILED_REPEATEDLY = "parse_failed_repeatedly"
    CONTEXT_OVERFLOW = "context_overflow"
    ENV_ERROR = "env_error"
    LLM_ERROR = "llm_error"
    AGENT_FINISHED = "agent_finished"
    ACTION_BUDGET = "action_budget"
    CANCELLED = "cancelled"
    RESUME_STATE_UNKNOWN = "resume_state_unknown"
    TIME_LIMIT = "time_limit"
    PARSER_ERROR = "parser_error"


class ActionStatus(enum.StrEnum):
    """What happened to an action.

    ``executed``: it ran, whatever its result (an error is a normal observation).
    ``not_executed``: it never entered execution (unknown tool, invalid arguments, refused).
    ``env_error``: the environment itself is broken; the run stops ``env_error``.
    """

    EXECUTED = "executed"
    NOT_EXECUTED = "not_executed"
    ENV_ERROR = "env_error"


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    """One chat message. The history holds only these three roles."""

    role: Literal["system", "user", "assistant"]
    content: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelReply:
    """What the model returned. ``call_id`` joins a step to billing: ``None`` or non-empty.

    ``call_id`` is the provider's response id. ``model`` is the model that answered (which may
    name a snapshot of the one requested) and ``finish_reason`` why it stopped generating
    (``"stop"``, ``"length"``, ``"tool_calls"``, … as the provider says it): each ``None`` when
    the client does not know, never ``""``.
    """

    text: str
    reasoning: str = ""
    call_id: str | None = None
    usage: Mapping[str, int | float] = field(default_factory=dict)
    model: str | None = None
    finish_reason: str | None = None

    def __post_init__(self) -> None:
        problem = usage_problem(self.usage)
        if problem is not None:
            raise ValueError(f"ModelReply.usage {problem}")
        if self.call_id == "":
            raise ValueError(
                "ModelReply.call_id must be None or a non-empty str, never '' "
                "(an empty string looks like a valid join key and silently matches nothing)"
            )
        for name in ("model", "finish_reason"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise ValueError(
                    f"ModelReply.{name} must be None or a non-empty str, got {value!r}"
                )


@dataclass(frozen=True, slots=True, kw_only=True)
class Action:
    """A decision to act. ``text`` is how the action appears in the trajectory.

    ``tool_args`` is passed through the canonical JSON encoding at construction, so it is
    always plain JSON data (a tuple comes back as a list); anything not JSON-serialisable
    (``NaN``, ``Infinity``), nested deeper than :data:`MAX_NESTING` or not a mapping is a
    ``ValueError`` naming ``tool_args``. A decision parser builds its actions with
    :func:`action_or_feedback`, which turns such a value into an ``InvalidDecision``.
    """

    text: str
    tool_name: str | None = None
    tool_args: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.tool_args is None:
            return
        if not isinstance(self.tool_args, Mapping):
            raise _refused(
                f"Action.tool_args must be a mapping or None, got {type(self.tool_args).__name__}",
                "The arguments must be a JSON object of named arguments.",
            )
        if nested_deeper_than(self.tool_args, MAX_NESTING):
            raise _refused(
                f"Action.tool_args is nested deeper than {MAX_NESTING} levels",
                f"The arguments are nested deeper than {MAX_NESTING} levels; flatten them.",
            )
        try:
            normalised = json.loads(canonical_json(dict(self.tool_args)))
        except (TypeError, ValueError) as exc:
            if "Out of range float" in str(exc):  # NaN, Infinity, or 1e400 read as inf
                told = (
                    "A number in the arguments is not finite (NaN, Infinity, or out of range); "
                    "use a finite number, or a string."
                )
            else:
                told = f"The arguments cannot be written as JSON: {exc}."
            raise _refused(f"Action.tool_args must be JSON-serialisable: {exc}", told) from None
        object.__setattr__(self, "tool_args", normalised)


_PARSER_HINT = (
    "; a decision parser turns a model's value that Action refuses into an InvalidDecision the "
    "model is told about with polyloop.action_or_feedback"
)


def _refused(message: str, feedback: str) -> ValueError:
    """A value :class:`Action` refuses: a ``ValueError`` whose message is for the developer;
    ``feedback`` is for the model (what :func:`action_or_feedback` puts in its
    :class:`InvalidDecision`)."""
    error = ValueError(message + _PARSER_HINT)
    error._polyloop_feedback = feedback  # type: ignore[attr-defined]
    return error


@dataclass(frozen=True, slots=True, kw_only=True)
class FinalAnswer:
    """A decision to stop with an answer (stop reason ``agent_finished``)."""

    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class InvalidDecision:
    """The reply could not be parsed; ``feedback`` is fed back to the model."""

    feedback: str


ParsedReply: TypeAlias = Action | FinalAnswer | InvalidDecision


def action_or_feedback(
    text: str, *, tool_name: str | None = None, tool_args: Mapping[str, Any] | None = None
) -> Action | InvalidDecision:
    """The ``Action`` a decision parser decided on — or, when the library's types refuse its
    values, an ``InvalidDecision`` whose feedback tells the model what to change.

    The one way for a parser to turn a model's odd value into a step instead of an exception:
    ``NaN`` or ``Infinity`` (Python's ``json`` reads them), a number too large to be finite,
    arguments nested deeper than :data:`MAX_NESTING` levels, arguments that are not a mapping
    or not JSON. A parser's own exception still propagates from ``run()`` and ``resume()``;
    this keeps a model's value from becoming one. The feedback is a sentence the model can act
    on ("A number in the arguments is not finite …; use a finite number, or a string.");
    append your parser's format reminder to it if you like.
    """
    try:
        return Action(text=text, tool_name=tool_name, tool_args=tool_args)
    except ValueError as refused:
        feedback = getattr(refused, "_polyloop_feedback", None)
        if feedback is None:  # not a value of the model's (never expected): the parser's bug
            raise
        return InvalidDecision(feedback=str(feedback))


@dataclass(frozen=True, slots=True, kw_only=True)
class ActionOutcome:
    """What an executor returns for one action.

    ``detail`` is optional structured audit data about the action — why it was refused, what
    the environment reported on the way — as a JSON object (``None``: nothing to add). It never
    reaches the model: the loop keeps it in ``StepCompleted.executor_detail`` and it travels
    with that record's event. It is copied as plain JSON when the outcome is built; a value
    that is not a JSON object with string keys, or nests deeper than ``MAX_NESTING``, is a
    ``ValueError``.
    """

    status: ActionStatus
    observation: str
    observation_is_synthetic: bool = False
    env_reported_completion: bool = False
    observation_truncated_chars: int = 0
    detail: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.detail is not None:
            object.__setattr__(
                self, "detail", plain_json_object(self.detail, "ActionOutcome.detail")
            )


def plain_json_object(value: object, name: str) -> dict[str, Any]:
    """``value`` as a fresh plain JSON object, or a ``ValueError`` naming ``name``."""
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise ValueError(f"{name} must be a mapping with str keys, got {type(value).__name__}")
    if nested_deeper_than(value, MAX_NESTING):
        raise ValueError(f"{name} is nested deeper than {MAX_NESTING} levels")
    try:
        copied: dict[str, Any] = json.loads(canonical_json(dict(value)))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be JSON-serialisable: {exc}") from None
    return copied


@dataclass(frozen=True, slots=True, kw_only=True)
class Budget:
    """Four independent limits, each ≥ 1, each with its own stop reason.

    ``max_steps`` counts every recorded step (``step_budget``); ``max_executed_actions`` counts
    only ``executed`` actions (``action_budget``) — they are separate because one user counts
    attempts and another counts effective work; merging them would rewrite one's semantics.
    """

    max_steps: int
    max_executed_actions: int
    max_consecutive_parse_failures: int
    max_prompt_chars: int

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"Budget.{f.name} must be an int, got {type(value).__name__}")
            if value < 1:
                raise ValueError(f"Budget.{f.name} must be >= 1, got {value}")


@dataclass(frozen=True, slots=True, kw_only=True)
class SyntheticObservations:
    """What the *library* puts in the history when an action was not executed / env broke.

    The executor's own text is not used there: what the model sees must be part of the
    parameter snapshot, so two runs of one configuration show the model the same thing.
    """

    not_executed: str
    env_error: str


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentDefinition:
    """Everything that decides what the model sees and when the run stops, plus replay policy."""

    system_prompt: str
    budget: Budget
    synthetic_observations: SyntheticObservations
    tools: ToolRegistry | None = None
    replay_interrupted_actions: bool = False

    def parameters(self) -> dict[str, Any]:
        """The snapshot hashed into ``RunStarted.parameters_hash``.

        Replay flags and tool functions are deliberately absent: they may change between a
        crash and a resume without changing what the model sees or when the run stops.
        """
        return {
            "system_prompt": self.system_prompt,
            "synthetic_observations": {
                "not_executed": self.synthetic_observations.not_executed,
                "env_error": self.synthetic_observations.env_error,
            },
            "budget": {
                "max_steps": self.budget.max_steps,
                "max_executed_actions": self.budget.max_executed_actions,
                "max_consecutive_parse_failures": self.budget.max_consecutive_parse_failures,
                "max_prompt_chars": self.budget.max_prompt_chars,
            },
            "tools": self.tools.specs() if self.tools is not None else [],
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class StepRecord:
    """One step of a run. See the table in the reference docs for what each path records."""

    step_index: int
    raw_output: str
    response_chars: int
    reasoning_chars: int
    action: str | None
    parse_ok: bool
    parse_error: str | None
    observation: str
    observation_is_synthetic: bool
    observation_truncated_chars: int
    prompt_chars: int
    llm_call_id: str | None
    step_wall_ms: int
    tool_name: str | None = None
    tool_args_json: str | None = None
    action_status: ActionStatus | None = None
    env_reported_completion: bool = False
    schema_version: str = SCHEMA_VERSION


@dataclass(frozen=True, slots=True, kw_only=True)
class RunResult:
    """The outcome of ``run()`` / ``resume()``.

    ``final_answer`` is set only for ``agent_finished``. ``event_delivery_failures`` counts the
    current call only.
    """

    run_id: str
    stop_reason: StopReason
    steps: tuple[StepRecord, ...]
    final_answer: str | None
    executed_actions: int
    event_delivery_failures: int


# --------------------------------------------------------------------------- records


class _JsonRecord:
    """What the six records share: a ``kind`` and their one JSON encoding."""

    __slots__ = ()
    kind: ClassVar[str]

    def to_json(self) -> str:
        """This record as canonical JSON; :func:`record_from_json` is its exact inverse.

        The text is always valid UTF-8: a lone surrogate (``"\\ud800"``) is written as its JSON
        escape, everything else as canonical JSON writes it, so a store that keeps this text as
        it is round-trips every string Python and JSON accept. (A high surrogate directly followed
        by a low one is a UTF-16 pair, which JSON reads back as the one character it spells.)"""
        return record_to_json(self, self.kind, walk=isinstance(self, RunStarted))


@dataclass(frozen=True, slots=True, kw_only=True)
class RunStarted(_JsonRecord):
    """Record 0 of every log."""

    kind: ClassVar[str] = "run_started"
    run_id: str
    goal: str
    parameters: dict[str, Any]
    parameters_hash: str
    started_at: str
    # Where the run came from, set by the batch runner (polyloop.run_many); None for a run()
    # started by hand. Not part of the parameters: the same agent runs every task of a batch.
    batch: str | None = None
    task_id: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    # The W3C traceparent of the run's span when it was started under tracing: a resume, in
    # another process or on another machine, links its spans to it.
    trace_parent: str | None = None
    schema_version: str = SCHEMA_VERSION


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelCallIntent(_JsonRecord):
    """Written before the model is called."""

    kind: ClassVar[str] = "model_call_intent"
    step_index: int
    prompt_chars: int
    schema_version: str = SCHEMA_VERSION


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelReplied(_JsonRecord):
    """Written after the model replied, before the reply is parsed."""

    kind: ClassVar[str] = "model_replied"
    step_index: int
    reply: ModelReply
    schema_version: str = SCHEMA_VERSION


@dataclass(frozen=True, slots=True, kw_only=True)
class ActionIntent(_JsonRecord):
    """Written before an action is executed."""

    kind: ClassVar[str] = "action_intent"
    step_index: int
    action: Action
    schema_version: str = SCHEMA_VERSION


@dataclass(frozen=True, slots=True, kw_only=True)
class StepCompleted(_JsonRecord):
    """A finished step. ``executor_observation`` keeps the executor's text when the library
    replaced it with a synthetic one; ``executor_detail`` is the executor's structured audit data
    (``ActionOutcome.detail``), kept whatever the status; ``model_error`` is
    ``"ExcType: message"`` for ``llm_error``.
    """

    kind: ClassVar[str] = "step_completed"
    step: StepRecord
    executor_observation: str | None = None
    model_error: str | None = None
    executor_detail: dict[str, Any] | None = None
    schema_version: str = SCHEMA_VERSION


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFinished(_JsonRecord):
    """The last record of a finished run."""

    kind: ClassVar[str] = "run_finished"
    stop_reason: StopReason
    final_answer: str | None
    executed_actions: int
    finished_at: str
    schema_version: str = SCHEMA_VERSION


Record: TypeAlias = (
    RunStarted | ModelCallIntent | ModelReplied | ActionIntent | StepCompleted | RunFinished
)

RECORD_TYPES: tuple[type[Record], ...] = (
    RunStarted,
    ModelCallIntent,
    ModelReplied,
    ActionIntent,
    StepCompleted,
    RunFinished,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """One event per appended log record; ``sequence`` is the record's index in the log."""

    run_id: str
    sequence: int
    record: Record


@dataclass(frozen=True, slots=True)
class RunLog:
    """A run's records in append order; a record's sequence number is its index."""

    records: tuple[Record, ...] = ()

    @classmethod
    def empty(cls) -> RunLog:
        return cls(())

    def __len__(self) -> int:
        return len(self.records)

    @property
    def started(self) -> RunStarted | None:
        first = self.records[0] if self.records else None
        return first if isinstance(first, RunStarted) else None

    @property
    def finished(self) -> RunFinished | None:
        last = self.records[-1] if self.records else None
        return last if isinstance(last, RunFinished) else None

    @property
    def intents(self) -> tuple[ModelCallIntent | ActionIntent, ...]:
        return tuple(r for r in self.records if isinstance(r, ModelCallIntent | ActionIntent))

    @property
    def replies(self) -> tuple[ModelReplied, ...]:
        return tuple(r for r in self.records if isinstance(r, ModelReplied))

    @property
    def steps(self) -> tuple[StepCompleted, ...]:
        return tuple(r for r in self.records if isinstance(r, StepCompleted))


# --------------------------------------------------------------------------- decoding


def _read_reply(data: object) -> ModelReply:
    d = Fields("model reply", data)
    usage = d.get("usage", is_dict, "an object", default={})
    problem = usage_problem(usage)
    if problem is not None:
        raise ValueError(f"malformed model reply: usage {problem}")
    return ModelReply(
        text=d.get("text", is_str, "a str"),
        reasoning=d.get("reasoning", is_str, "a str", default=""),
        call_id=d.get("call_id", is_opt_str, "a str or null", default=None),
        usage=usage,
        model=d.get("model", _is_opt_name, "a non-empty str or null", default=None),
        finish_reason=d.get("finish_reason", _is_opt_name, "a non-empty str or null", default=None),
    )


def _is_opt_name(value: object) -> bool:
    return value is None or (isinstance(value, str) and value != "")


def _read_action(data: object) -> Action:
    d = Fields("action", data)
    return Action(
        text=d.get("text", is_str, "a str"),
        tool_name=d.get("tool_name", is_opt_str, "a str or null", default=None),
        tool_args=d.get(
            "tool_args", lambda v: v is None or is_dict(v), "an object or null", default=None
        ),
    )


def _read_status(value: Any) -> ActionStatus | None:
    if value is None:
        return None
    try:
        return ActionStatus(value)
    except ValueError:
        raise ValueError(f"malformed step record: unknown action_status {value!r}") from None


def _read_step(data: object) -> StepRecord:
    d = Fields("step record", data)
    version = check_version("step record", d.get("schema_version", is_str, "a str"))
    kwargs: dict[str, Any] = {}
    for name in (
        "step_index",
        "response_chars",
        "reasoning_chars",
        "observation_truncated_chars",
        "prompt_chars",
        "step_wall_ms",
    ):
        kwargs[name] = d.get(name, is_int, "an int")
    for name in ("raw_output", "observation"):
        kwargs[name] = d.get(name, is_str, "a str")
    for name in ("action", "parse_error", "llm_call_id"):
        kwargs[name] = d.get(name, is_opt_str, "a str or null")
    for name in ("tool_name", "tool_args_json"):
        kwargs[name] = d.get(name, is_opt_str, "a str or null", default=None)
    for name in ("parse_ok", "observation_is_synthetic"):
        kwargs[name] = d.get(name, is_bool, "a bool")
    kwargs["env_reported_completion"] = d.get(
        "env_reported_completion", is_bool, "a bool", default=False
    )
    kwargs["action_status"] = _read_status(d.data.get("action_status"))
    return StepRecord(schema_version=version, **kwargs)


def _read_run_started(d: Fields, version: str) -> RunStarted:
    return RunStarted(
        run_id=d.get("run_id", is_str, "a str"),
        goal=d.get("goal", is_str, "a str"),
        parameters=d.get("parameters", is_dict, "an object"),
        parameters_hash=d.get("parameters_hash", is_str, "a str"),
        started_at=d.get("started_at", is_str, "a str"),
        batch=d.get("batch", is_opt_str, "a str or null", default=None),
        task_id=d.get("task_id", is_opt_str, "a str or null", default=None),
        labels=d.get("labels", _is_labels, "an object of strings", default={}),
        trace_parent=d.get("trace_parent", is_opt_str, "a str or null", default=None),
        schema_version=version,
    )


def _is_labels(value: object) -> bool:
    return isinstance(value, dict) and all(isinstance(v, str) for v in value.values())


def _read_model_call_intent(d: Fields, version: str) -> ModelCallIntent:
    return ModelCallIntent(
        step_index=d.get("step_index", is_int, "an int"),
        prompt_chars=d.get("prompt_chars", is_int, "an int"),
        schema_version=version,
    )


def _read_model_replied(d: Fields, version: str) -> ModelReplied:
    return ModelReplied(
        step_index=d.get("step_index", is_int, "an int"),
        reply=_read_reply(d.get("reply", is_dict, "an object")),
        schema_version=version,
    )


def _read_action_intent(d: Fields, version: str) -> ActionIntent:
    return ActionIntent(
        step_index=d.get("step_index", is_int, "an int"),
        action=_read_action(d.get("action", is_dict, "an object")),
        schema_version=version,
    )


def _read_step_completed(d: Fields, version: str) -> StepCompleted:
    return StepCompleted(
        step=_read_step(d.get("step", is_dict, "an object")),
        executor_observation=d.get(
            "executor_observation", is_opt_str, "a str or null", default=None
        ),
        model_error=d.get("model_error", is_opt_str, "a str or null", default=None),
        executor_detail=d.get("executor_detail", _is_opt_dict, "an object or null", default=None),
        schema_version=version,
    )


def _is_opt_dict(v: Any) -> bool:
    return v is None or isinstance(v, dict)


def _read_run_finished(d: Fields, version: str) -> RunFinished:
    stop = d.get("stop_reason", is_str, "a str")
    try:
        stop_reason = StopReason(stop)
    except ValueError:
        raise ValueError(f"malformed run_finished record: unknown stop_reason {stop!r}") from None
    return RunFinished(
        stop_reason=stop_reason,
        final_answer=d.get("final_answer", is_opt_str, "a str or null"),
        executed_actions=d.get("executed_actions", is_int, "an int"),
        finished_at=d.get("finished_at", is_str, "a str"),
        schema_version=version,
    )


# What record_from_json builds for each kind (the codec checks the JSON, the kind and the version).
_READERS: dict[str, Callable[[Fields, str], Record]] = {
    "run_started": _read_run_started,
    "model_call_intent": _read_model_call_intent,
    "model_replied": _read_model_replied,
    "action_intent": _read_action_intent,
    "step_completed": _read_step_completed,
    "run_finished": _read_run_finished,
}


def record_from_json(text: str | bytes) -> Record:
    """Decode one record written by ``record.to_json()``; the exact inverse for known versions.

    An unknown ``kind`` or an unknown major ``schema_version`` raises ``SchemaVersionError``
    naming it; any other malformation raises ``ValueError`` naming the field. Unknown fields of a
    known major version (added by a later minor) are ignored.
    """
    return decode_record(text, _READERS)
