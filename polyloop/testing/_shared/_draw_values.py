"""Strategies for polyloop's value types, records, events and run logs (public through
:mod:`polyloop.testing.strategies`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any

from hypothesis import strategies as st

from polyloop.testing._shared._boundaries import BOUNDARY_NUMBERS
from polyloop.testing._shared._draw_texts import (
    MAX_INT,
    MAX_LONG_TEXT_BYTES,
    SHORT_TEXT,
    counts,
    long_texts,
    non_empty_texts,
    record_texts,
    run_ids,
    texts,
    timestamps,
)
from polyloop.tools import Tool, ToolRegistry
from polyloop.types import (
    RECORD_TYPES,
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
)

_Texts = Callable[..., st.SearchStrategy[str]]

#: ``BOUNDARY_NUMBERS`` within ``-2**63 … 2**63 - 1`` and finite: the integers and floats (``1``
#: beside ``1.0``) a JSON, SQLite or PostgreSQL store keeps as they are; never a bool, nor
#: ``-0.0`` (PostgreSQL's ``numeric`` has no negative zero).
_FAITHFUL_NUMBERS: tuple[int | float, ...] = tuple(
    n
    for n in BOUNDARY_NUMBERS
    if (type(n) is int and -(2**63) <= n <= MAX_INT)
    or (type(n) is float and n in (0.0, 1.0) and str(n) != "-0.0")
)


def _json_scalars(text: _Texts = texts) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.none(),
        st.booleans(),
        # The boundary catalogue's integers and floats that every store keeps faithfully.
        st.sampled_from(_FAITHFUL_NUMBERS),
        st.integers(min_value=-(2**63), max_value=MAX_INT),
        # Exact binary fractions: one faithful decimal form in every JSON backend.
        st.integers(min_value=-(10**6), max_value=10**6).map(lambda n: n / 8),
        text(),
    )


def _json_values(text: _Texts) -> st.SearchStrategy[Any]:
    return st.recursive(
        _json_scalars(text),
        lambda children: st.one_of(
            st.lists(children, max_size=4),
            st.dictionaries(text(max_size=10), children, max_size=4),
        ),
        max_leaves=8,
    )


def _json_objects(text: _Texts) -> st.SearchStrategy[dict[str, Any]]:
    return st.dictionaries(text(max_size=10), _json_values(text), max_size=4)


def json_values() -> st.SearchStrategy[Any]:
    """JSON data: scalars (incl. nasty text, big ints), nested lists and string-keyed objects."""
    return _json_values(texts)


def json_objects() -> st.SearchStrategy[dict[str, Any]]:
    """A JSON object (string keys), possibly empty."""
    return _json_objects(texts)


def messages() -> st.SearchStrategy[Message]:
    """A chat message with any of the three roles and any content."""
    return st.builds(
        Message, role=st.sampled_from(("system", "user", "assistant")), content=texts()
    )


def usage_numbers() -> st.SearchStrategy[int | float]:
    """What ``ModelReply.usage`` holds: token counts, and finite floats such as a cost."""
    return st.one_of(counts(), st.floats(allow_nan=False, allow_infinity=False))


def _model_replies(text: _Texts, max_text_size: int = SHORT_TEXT) -> st.SearchStrategy[ModelReply]:
    return st.builds(
        ModelReply,
        text=text(max_size=max_text_size),
        reasoning=text(),
        call_id=st.one_of(st.none(), text().filter(bool)),
        usage=st.dictionaries(text(max_size=12), usage_numbers(), max_size=3),
        model=st.one_of(st.none(), text(max_size=40).filter(bool)),
        finish_reason=st.one_of(
            st.none(), st.sampled_from(("stop", "length")), text().filter(bool)
        ),
    )


def model_replies(*, max_text_size: int = SHORT_TEXT) -> st.SearchStrategy[ModelReply]:
    """Any reply: nasty text and reasoning, ``call_id``, ``model`` and ``finish_reason`` ``None``
    or non-empty, counts and costs."""
    return _model_replies(texts, max_text_size)


def _optional(text: _Texts) -> st.SearchStrategy[str | None]:
    return st.one_of(st.none(), st.just(""), text())


def _actions(text: _Texts) -> st.SearchStrategy[Action]:
    return st.builds(
        Action,
        text=text(),
        tool_name=_optional(text),
        tool_args=st.one_of(st.none(), _json_objects(text)),
    )


def actions() -> st.SearchStrategy[Action]:
    """An action: free text, or a tool call with a name and JSON arguments."""
    return _actions(texts)


def final_answers() -> st.SearchStrategy[FinalAnswer]:
    return st.builds(FinalAnswer, text=texts())


def invalid_decisions() -> st.SearchStrategy[InvalidDecision]:
    return st.builds(InvalidDecision, feedback=texts())


def parsed_replies() -> st.SearchStrategy[ParsedReply]:
    """Any of the three decisions."""
    return st.one_of(actions(), final_answers(), invalid_decisions())


def action_outcomes() -> st.SearchStrategy[ActionOutcome]:
    return st.builds(
        ActionOutcome,
        status=st.sampled_from(ActionStatus),
        observation=texts(),
        observation_is_synthetic=st.booleans(),
        env_reported_completion=st.booleans(),
        observation_truncated_chars=counts(),
    )


def budgets() -> st.SearchStrategy[Budget]:
    """Valid budgets: each limit ≥ 1 (1 is the edge that stops a run soonest)."""
    limit = st.one_of(st.just(1), st.integers(min_value=1, max_value=MAX_INT))
    return st.builds(
        Budget,
        max_steps=limit,
        max_executed_actions=limit,
        max_consecutive_parse_failures=limit,
        max_prompt_chars=limit,
    )


def step_records() -> st.SearchStrategy[StepRecord]:
    """Well-typed step records (every field independent: not tied to one path of the loop);
    every text field as :func:`record_texts` draws it."""
    return st.builds(
        StepRecord,
        step_index=counts(),
        raw_output=record_texts(),
        response_chars=counts(),
        reasoning_chars=counts(),
        action=_optional(record_texts),
        parse_ok=st.booleans(),
        parse_error=_optional(record_texts),
        observation=record_texts(),
        observation_is_synthetic=st.booleans(),
        observation_truncated_chars=counts(),
        prompt_chars=counts(),
        llm_call_id=st.one_of(st.none(), record_texts().filter(bool)),
        step_wall_ms=counts(),
        tool_name=_optional(record_texts),
        tool_args_json=st.one_of(st.none(), _json_objects(record_texts).map(canonical_json)),
        action_status=st.one_of(st.none(), st.sampled_from(ActionStatus)),
        env_reported_completion=st.booleans(),
    )


def _stamps() -> st.SearchStrategy[str]:
    # Mostly as the library writes them; a store keeps any str, so sometimes any record text.
    return st.one_of(timestamps(), timestamps(), record_texts())


def run_started_records(run_id: str | None = None) -> st.SearchStrategy[RunStarted]:
    """``RunStarted`` with a JSON parameter snapshot and its real hash (``run_id`` if given);
    every text field (goal, parameters, sometimes ``started_at``, the batch fields and the
    trace parent, each sometimes ``None``) as :func:`record_texts` draws it."""
    return st.builds(
        lambda rid, goal, parameters, started_at, origin: RunStarted(
            run_id=rid,
            goal=goal,
            parameters=parameters,
            parameters_hash=parameters_hash(parameters),
            started_at=started_at,
            **origin,
        ),
        st.just(run_id) if run_id is not None else run_ids(),
        record_texts(),
        _json_objects(record_texts),
        _stamps(),
        st.fixed_dictionaries(
            {},
            optional={
                "batch": _optional(record_texts),
                "task_id": _optional(record_texts),
                "labels": st.dictionaries(record_texts(), record_texts(), max_size=3),
                "trace_parent": _optional(record_texts),
            },
        ),
    )


def model_call_intent_records() -> st.SearchStrategy[ModelCallIntent]:
    return st.builds(ModelCallIntent, step_index=counts(), prompt_chars=counts())


def model_replied_records() -> st.SearchStrategy[ModelReplied]:
    """Every text of the reply as :func:`record_texts` draws it."""
    return st.builds(ModelReplied, step_index=counts(), reply=_model_replies(record_texts))


def action_intent_records() -> st.SearchStrategy[ActionIntent]:
    """Every text of the action (tool arguments' keys and values too) as :func:`record_texts`
    draws it."""
    return st.builds(ActionIntent, step_index=counts(), action=_actions(record_texts))


def step_completed_records() -> st.SearchStrategy[StepCompleted]:
    """Every text field as :func:`record_texts` draws it."""
    return st.builds(
        StepCompleted,
        step=step_records(),
        executor_observation=_optional(record_texts),
        model_error=_optional(record_texts),
        executor_detail=st.one_of(st.none(), _json_objects(record_texts)),
    )


def run_finished_records() -> st.SearchStrategy[RunFinished]:
    """Every text field (the final answer, sometimes ``finished_at``) as :func:`record_texts`
    draws it."""
    return st.builds(
        RunFinished,
        stop_reason=st.sampled_from(StopReason),
        final_answer=_optional(record_texts),
        executed_actions=counts(),
        finished_at=_stamps(),
    )


def _of_kinds(kinds: Iterable[type[Record]]) -> st.SearchStrategy[Record]:
    """One of ``kinds``, in the order given (Hypothesis shrinks towards the first)."""
    builders: dict[type[Record], Callable[[], st.SearchStrategy[Any]]] = {
        RunStarted: run_started_records,
        ModelCallIntent: model_call_intent_records,
        ModelReplied: model_replied_records,
        ActionIntent: action_intent_records,
        StepCompleted: step_completed_records,
        RunFinished: run_finished_records,
    }
    return st.one_of(*(builders[kind]() for kind in kinds))


def records() -> st.SearchStrategy[Record]:
    """Any one of the six record kinds."""
    return _of_kinds(RECORD_TYPES)


def _with_long_text(record: Record, text: str) -> Record:
    """``record`` with its main text (reply, observation, answer, goal, code) replaced by
    ``text``: a big event of that kind."""
    if isinstance(record, ModelReplied):
        return dataclasses.replace(record, reply=dataclasses.replace(record.reply, text=text))
    if isinstance(record, StepCompleted):
        step = dataclasses.replace(record.step, observation=text, raw_output=text[: len(text) // 2])
        return dataclasses.replace(record, step=step)
    if isinstance(record, RunFinished):
        return dataclasses.replace(record, final_answer=text)
    if isinstance(record, ActionIntent):
        action = Action(text=record.action.text, tool_name="run", tool_args={"code": text})
        return dataclasses.replace(record, action=action)
    if isinstance(record, RunStarted):
        return dataclasses.replace(record, goal=text)
    return record


def big_records(*, max_bytes: int = MAX_LONG_TEXT_BYTES) -> st.SearchStrategy[Record]:
    """A record of any kind with text fields but one whose main text is a :func:`long_texts`
    text of up to ``max_bytes`` (default 1 MiB): a tool's whole output, a long final answer."""
    kinds = _of_kinds(kind for kind in RECORD_TYPES if kind is not ModelCallIntent)
    return st.builds(_with_long_text, kinds, long_texts(max_bytes=max_bytes))


def events() -> st.SearchStrategy[Event]:
    """An event: any run id, any sequence (0 included), any record; one in eight carries a
    :func:`big_records` record (up to 1 MiB of text)."""
    big, small = big_records(), records()  # built once: never inside the flatmap
    record = st.integers(min_value=0, max_value=7).flatmap(lambda n: big if n == 0 else small)
    return st.builds(Event, run_id=run_ids(), sequence=counts(), record=record)


def _middle_records() -> st.SearchStrategy[Record]:
    return _of_kinds(kind for kind in RECORD_TYPES if kind not in (RunStarted, RunFinished))


def run_logs(
    run_id: str | None = None, *, max_middle: int = 6
) -> st.SearchStrategy[tuple[Record, ...]]:
    """A log a store must accept in order: ``RunStarted``, then intents/replies/steps, then
    (sometimes) ``RunFinished``. Every middle kind appears in generated logs. ``run_id`` fixes
    the ``RunStarted.run_id``; build the strategy once and ``dataclasses.replace`` it per example
    when each example needs a fresh id (building strategies is slower than drawing from them)."""
    return st.builds(
        lambda start, middle, finish: (start, *middle, *finish),
        run_started_records(run_id),
        st.lists(_middle_records(), max_size=max_middle),
        st.one_of(st.just(()), run_finished_records().map(lambda r: (r,))),
    )


def stop_reasons() -> st.SearchStrategy[StopReason]:
    """Any of the stop reasons."""
    return st.sampled_from(StopReason)


def action_statuses() -> st.SearchStrategy[ActionStatus]:
    """Any of the three action statuses."""
    return st.sampled_from(ActionStatus)


def synthetic_observations() -> st.SearchStrategy[SyntheticObservations]:
    """The library's stand-in observations: any text, ``""`` and control characters included."""
    return st.builds(SyntheticObservations, not_executed=texts(), env_error=texts())


# Argument schemas as the ecosystem writes them (pydantic, MCP servers): each one valid, so a
# Tool built from it is valid with or without the ``schema`` extra's full validator.
_LEAF_SCHEMAS: tuple[dict[str, Any], ...] = (
    {},
    {"type": "string"},
    {"type": "string", "minLength": 1, "maxLength": 64},
    {"type": "integer", "minimum": 0, "maximum": 100},
    {"type": "number", "exclusiveMinimum": 0},
    {"type": "boolean"},
    {"type": "null"},
    {"enum": ["a", "b", 3, None]},
    {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
    {"type": "array", "items": {"type": "integer"}, "maxItems": 3},
    {"$ref": "#/$defs/Colour"},
)


def _tool_parameters() -> st.SearchStrategy[dict[str, Any]]:
    properties = st.dictionaries(texts(max_size=10), st.sampled_from(_LEAF_SCHEMAS), max_size=4)

    def schema(props: dict[str, Any], required: bool) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": props,
            "required": sorted(props) if required else [],
            "$defs": {"Colour": {"enum": ["red", "green"]}},
        }

    return st.builds(schema, properties, st.booleans())


def tools() -> st.SearchStrategy[Tool]:
    """A tool as an agent describes it: any name (never ``""``) and description, and a valid
    JSON schema as pydantic or an MCP server writes one (``$ref``, ``anyOf``, bounds, enums)."""
    return st.builds(
        Tool,
        name=non_empty_texts(max_size=20),
        description=texts(),
        parameters=_tool_parameters(),
        completion_marker=st.booleans(),
        replayable=st.sampled_from((None, True, False)),
    )


def agent_definitions() -> st.SearchStrategy[AgentDefinition]:
    """Valid agents: any prompt, budget and synthetic texts, no tools or uniquely named ones.

    ``parameters()`` of each is canonical-JSON serialisable (the snapshot a run hashes).
    """
    registries = st.lists(tools(), max_size=3, unique_by=lambda tool: tool.name).map(ToolRegistry)
    return st.builds(
        AgentDefinition,
        system_prompt=texts(),
        budget=budgets(),
        synthetic_observations=synthetic_observations(),
        tools=st.one_of(st.none(), registries),
        replay_interrupted_actions=st.booleans(),
    )


def _numbered(steps: list[StepRecord]) -> tuple[StepRecord, ...]:
    return tuple(dataclasses.replace(step, step_index=n) for n, step in enumerate(steps))


def run_results() -> st.SearchStrategy[RunResult]:
    """Results as ``run()`` returns them: steps numbered from 0, ``final_answer`` set only for
    ``agent_finished`` (then any text, ``""`` included), never ``cancelled``, large counts."""
    returned = st.sampled_from([r for r in StopReason if r is not StopReason.CANCELLED])
    return st.builds(
        lambda run_id, reason, steps, answer, executed, failures: RunResult(
            run_id=run_id,
            stop_reason=reason,
            steps=_numbered(steps),
            final_answer=answer if reason is StopReason.AGENT_FINISHED else None,
            executed_actions=executed,
            event_delivery_failures=failures,
        ),
        run_ids(),
        returned,
        st.lists(step_records(), max_size=3),
        texts(),
        counts(),
        counts(),
    )


def run_log_objects(run_id: str | None = None) -> st.SearchStrategy[RunLog]:
    """``RunLog`` values as ``read_log`` returns them: empty, or a log from :func:`run_logs`."""
    return st.one_of(st.just(RunLog.empty()), run_logs(run_id).map(RunLog))
