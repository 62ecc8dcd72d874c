"""Public value types: decisions, outcomes, budgets, step records, the six log records.

Everything here is a frozen, slotted, keyword-only dataclass or a ``StrEnum``. Field names are
the public contract: adding a field with a default is compatible; renaming or removing one is a
new major ``schema_version``. Records that hold mappings (``ModelReply.usage``,
``RunStarted.parameters``, ``Action.tool_args``) are not hashable.

Only three constructors validate (raising ``ValueError`` naming the field): ``ModelReply``
(``call_id=""``), ``Budget`` (a limit < 1) and ``Action`` (``tool_args`` not
JSON-serialisable). Everything else is plain data; the contract kit checks types at the seams.
"""

from __future__ import annotations

import enum
import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Literal, TypeAlias

from polyloop.errors import SchemaVersionError
from polyloop.tools import ToolRegistry

__all__ = [
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
    "canonical_json",
    "parameters_hash",
    "record_from_json",
]

SCHEMA_VERSION = "1.0"
_SUPPORTED_MAJOR = "1"


def canonical_json(value: object) -> str:
    """The one JSON encoding polyloop uses for records, ``tool_args_json`` and hashes."""
    return json.dumps(
        value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False
    )


def parameters_hash(parameters: Mapping[str, Any]) -> str:
    """``"sha256:" + sha256(canonical_json(parameters))``."""
    digest = hashlib.sha256(canonical_json(dict(parameters)).encode("utf-8")).hexdigest()
    return f"sha256:{digest}"


class StopReason(enum.StrEnum):
    """Why a run stopped. Downstream SQL matches these strings: they never change.

    The enum only grows: an exhaustive ``match`` over it must keep a default branch.
    ``CANCELLED`` never appears on a result returned by ``run()`` (cancellation re-raises
    ``CancelledError``); it appears in the log's ``RunFinished`` and in a result that
    ``resume()`` rebuilds from that log.
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
    """What the model returned. ``call_id`` joins a step to billing: ``None`` or non-empty."""

    text: str
    reasoning: str = ""
    call_id: str | None = None
    usage: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.call_id == "":
            raise ValueError(
                "ModelReply.call_id must be None or a non-empty str, never '' "
                "(an empty string looks like a valid join key and silently matches nothing)"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class Action:
    """A decision to act. ``text`` is how the action appears in the trajectory.

    ``tool_args`` is passed through the canonical JSON encoding at construction, so it is
    always plain JSON data (a tuple comes back as a list); anything not JSON-serialisable is a
    ``ValueError`` naming ``tool_args``.
    """

    text: str
    tool_name: str | None = None
    tool_args: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.tool_args is None:
            return
        if not isinstance(self.tool_args, Mapping):
            raise ValueError(
                f"Action.tool_args must be a mapping or None, got {type(self.tool_args).__name__}"
            )
        try:
            normalised = json.loads(canonical_json(dict(self.tool_args)))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"Action.tool_args must be JSON-serialisable: {exc}") from None
        object.__setattr__(self, "tool_args", normalised)


@dataclass(frozen=True, slots=True, kw_only=True)
class FinalAnswer:
    """A decision to stop with an answer (stop reason ``agent_finished``)."""

    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class InvalidDecision:
    """The reply could not be parsed; ``feedback`` is fed back to the model."""

    feedback: str


ParsedReply: TypeAlias = Action | FinalAnswer | InvalidDecision


@dataclass(frozen=True, slots=True, kw_only=True)
class ActionOutcome:
    """What an executor returns for one action."""

    status: ActionStatus
    observation: str
    observation_is_synthetic: bool = False
    env_reported_completion: bool = False
    observation_truncated_chars: int = 0


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


@dataclass(frozen=True, slots=True, kw_only=True)
class RunStarted:
    """Record 0 of every log."""

    kind: ClassVar[str] = "run_started"
    run_id: str
    goal: str
    parameters: dict[str, Any]
    parameters_hash: str
    started_at: str
    schema_version: str = SCHEMA_VERSION

    def to_json(self) -> str:
        return _record_to_json(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelCallIntent:
    """Written before the model is called."""

    kind: ClassVar[str] = "model_call_intent"
    step_index: int
    prompt_chars: int
    schema_version: str = SCHEMA_VERSION

    def to_json(self) -> str:
        return _record_to_json(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelReplied:
    """Written after the model replied, before the reply is parsed."""

    kind: ClassVar[str] = "model_replied"
    step_index: int
    reply: ModelReply
    schema_version: str = SCHEMA_VERSION

    def to_json(self) -> str:
        return _record_to_json(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class ActionIntent:
    """Written before an action is executed."""

    kind: ClassVar[str] = "action_intent"
    step_index: int
    action: Action
    schema_version: str = SCHEMA_VERSION

    def to_json(self) -> str:
        return _record_to_json(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class StepCompleted:
    """A finished step. ``executor_observation`` keeps the executor's text when the library
    replaced it with a synthetic one; ``model_error`` is ``"ExcType: message"`` for ``llm_error``.
    """

    kind: ClassVar[str] = "step_completed"
    step: StepRecord
    executor_observation: str | None = None
    model_error: str | None = None
    schema_version: str = SCHEMA_VERSION

    def to_json(self) -> str:
        return _record_to_json(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFinished:
    """The last record of a finished run."""

    kind: ClassVar[str] = "run_finished"
    stop_reason: StopReason
    final_answer: str | None
    executed_actions: int
    finished_at: str
    schema_version: str = SCHEMA_VERSION

    def to_json(self) -> str:
        return _record_to_json(self)


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


# --------------------------------------------------------------------------- JSON


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type) -> tuple[str, ...]:
    """A dataclass's field names, computed once per class (``fields()`` is slow on a hot path:
    every append encodes a record)."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in fields(cls))
    return names


def _jsonable(value: object) -> object:
    if isinstance(value, str | int | bool | None):  # the common leaves first; an enum is a str
        return value.value if isinstance(value, enum.Enum) else value
    if hasattr(value, "__dataclass_fields__"):
        return {name: _jsonable(getattr(value, name)) for name in _field_names(type(value))}
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def _record_to_json(record: Record) -> str:
    body = _jsonable(record)
    assert isinstance(body, dict)
    return canonical_json({"kind": record.kind, **body})


class _Decoder:
    """Type-checked decoding of one JSON object into one dataclass (names the bad field)."""

    def __init__(self, where: str, data: object) -> None:
        if not isinstance(data, dict):
            raise ValueError(f"malformed {where}: expected a JSON object")
        self.where = where
        self.data: dict[str, Any] = data

    def get(self, name: str, check: Callable[[Any], bool], expected: str, **default: Any) -> Any:
        if name not in self.data:
            if "default" in default:
                return default["default"]
            raise ValueError(f"malformed {self.where}: missing field {name!r}")
        value = self.data[name]
        if not check(value):
            raise ValueError(
                f"malformed {self.where}: field {name!r} must be {expected}, "
                f"got {type(value).__name__}"
            )
        return value


def _is_str(v: Any) -> bool:
    return isinstance(v, str)


def _is_opt_str(v: Any) -> bool:
    return v is None or isinstance(v, str)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_bool(v: Any) -> bool:
    return isinstance(v, bool)


def _is_dict(v: Any) -> bool:
    return isinstance(v, dict)


def _check_version(where: str, version: object) -> str:
    if not isinstance(version, str) or not version:
        raise SchemaVersionError(f"{where}: schema_version must be a non-empty str")
    major = version.split(".", 1)[0]
    if major != _SUPPORTED_MAJOR:
        raise SchemaVersionError(
            f"{where}: unknown schema major version {version!r} "
            f"(this polyloop reads {_SUPPORTED_MAJOR}.x)"
        )
    return version


def _decode_reply(data: object) -> ModelReply:
    d = _Decoder("model reply", data)
    usage = d.get("usage", _is_dict, "an object", default={})
    if not all(isinstance(k, str) and _is_int(v) for k, v in usage.items()):
        raise ValueError("malformed model reply: usage must map str to int")
    return ModelReply(
        text=d.get("text", _is_str, "a str"),
        reasoning=d.get("reasoning", _is_str, "a str", default=""),
        call_id=d.get("call_id", _is_opt_str, "a str or null", default=None),
        usage=usage,
    )


def _decode_action(data: object) -> Action:
    d = _Decoder("action", data)
    return Action(
        text=d.get("text", _is_str, "a str"),
        tool_name=d.get("tool_name", _is_opt_str, "a str or null", default=None),
        tool_args=d.get(
            "tool_args", lambda v: v is None or _is_dict(v), "an object or null", default=None
        ),
    )


def _decode_status(value: Any) -> ActionStatus | None:
    if value is None:
        return None
    try:
        return ActionStatus(value)
    except ValueError:
        raise ValueError(f"malformed step record: unknown action_status {value!r}") from None


def _decode_step(data: object) -> StepRecord:
    d = _Decoder("step record", data)
    version = _check_version("step record", d.get("schema_version", _is_str, "a str"))
    kwargs: dict[str, Any] = {}
    for name in (
        "step_index",
        "response_chars",
        "reasoning_chars",
        "observation_truncated_chars",
        "prompt_chars",
        "step_wall_ms",
    ):
        kwargs[name] = d.get(name, _is_int, "an int")
    for name in ("raw_output", "observation"):
        kwargs[name] = d.get(name, _is_str, "a str")
    for name in ("action", "parse_error", "llm_call_id"):
        kwargs[name] = d.get(name, _is_opt_str, "a str or null")
    for name in ("tool_name", "tool_args_json"):
        kwargs[name] = d.get(name, _is_opt_str, "a str or null", default=None)
    for name in ("parse_ok", "observation_is_synthetic"):
        kwargs[name] = d.get(name, _is_bool, "a bool")
    kwargs["env_reported_completion"] = d.get(
        "env_reported_completion", _is_bool, "a bool", default=False
    )
    kwargs["action_status"] = _decode_status(d.data.get("action_status"))
    return StepRecord(schema_version=version, **kwargs)


def _decode_record(kind: str, d: _Decoder, version: str) -> Record:
    if kind == "run_started":
        return RunStarted(
            run_id=d.get("run_id", _is_str, "a str"),
            goal=d.get("goal", _is_str, "a str"),
            parameters=d.get("parameters", _is_dict, "an object"),
            parameters_hash=d.get("parameters_hash", _is_str, "a str"),
            started_at=d.get("started_at", _is_str, "a str"),
            schema_version=version,
        )
    if kind == "model_call_intent":
        return ModelCallIntent(
            step_index=d.get("step_index", _is_int, "an int"),
            prompt_chars=d.get("prompt_chars", _is_int, "an int"),
            schema_version=version,
        )
    if kind == "model_replied":
        return ModelReplied(
            step_index=d.get("step_index", _is_int, "an int"),
            reply=_decode_reply(d.get("reply", _is_dict, "an object")),
            schema_version=version,
        )
    if kind == "action_intent":
        return ActionIntent(
            step_index=d.get("step_index", _is_int, "an int"),
            action=_decode_action(d.get("action", _is_dict, "an object")),
            schema_version=version,
        )
    if kind == "step_completed":
        return StepCompleted(
            step=_decode_step(d.get("step", _is_dict, "an object")),
            executor_observation=d.get(
                "executor_observation", _is_opt_str, "a str or null", default=None
            ),
            model_error=d.get("model_error", _is_opt_str, "a str or null", default=None),
            schema_version=version,
        )
    stop = d.get("stop_reason", _is_str, "a str")
    try:
        stop_reason = StopReason(stop)
    except ValueError:
        raise ValueError(f"malformed run_finished record: unknown stop_reason {stop!r}") from None
    return RunFinished(
        stop_reason=stop_reason,
        final_answer=d.get("final_answer", _is_opt_str, "a str or null"),
        executed_actions=d.get("executed_actions", _is_int, "an int"),
        finished_at=d.get("finished_at", _is_str, "a str"),
        schema_version=version,
    )


_KINDS = {cls.kind for cls in RECORD_TYPES}


def record_from_json(text: str | bytes) -> Record:
    """Decode one record written by ``record.to_json()``; the exact inverse for known versions.

    An unknown ``kind`` or an unknown major ``schema_version`` raises ``SchemaVersionError``
    naming it; any other malformation raises ``ValueError`` naming the field. Unknown fields of a
    known major version (added by a later minor) are ignored.
    """
    try:
        data = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"malformed record: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError("malformed record: expected a JSON object")
    kind = data.get("kind")
    if not isinstance(kind, str):  # checked first: a list or an object cannot be looked up
        raise ValueError(f"malformed record: field 'kind' must be a str, got {type(kind).__name__}")
    if kind not in _KINDS:
        raise SchemaVersionError(f"unknown record kind {kind!r}")
    d = _Decoder(f"{kind} record", data)
    version = _check_version(f"{kind} record", d.get("schema_version", _is_str, "a str"))
    return _decode_record(kind, d, version)
