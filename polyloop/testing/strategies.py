"""Public Hypothesis strategies for every polyloop value type, record and event.

Use them in your own tests of an implementation (``from polyloop.testing import strategies as
pst``); the contract suites use the same ones. Every strategy leans towards the values that
break serialisation and comparisons in practice:

* ``0`` next to ``None``, ``""`` next to ``None`` (a store that maps one onto the other loses
  information a resume needs: ``step_index=0`` is the first step, ``call_id=None`` is "no id");
* control characters (``\\x00``, ``\\x1b``, ``\\r``), zero-width and right-to-left marks, astral
  characters (emoji, mathematical letters). :func:`texts` never draws a lone surrogate (a
  parser's or a model's input is text); every text field of a *record or an event* does
  (:func:`record_texts`), since Python strings and JSON carry them and a run records them
  (``bytes.decode(errors="surrogateescape")`` makes one of a stray byte);
* CJK, emoji sequences, combining marks and astral planes in record and event fields, and events
  of up to 1 MiB (:func:`long_texts`: built from drawn pieces, since Hypothesis caps one draw);
* long text and large integers (``2**53 + 1`` is not representable as a double; ``2**63 - 1`` is
  the largest SQL ``BIGINT``).

Integers in records are kept in ``0 … 2**63 - 1`` and floats in JSON data are exact binary
fractions, so every value here has one faithful representation in JSON, SQLite and PostgreSQL.

Reply and text strategies for parsers (what a model can really send, lone surrogates included —
a ``str`` can hold one, and a reply decoded with ``errors="surrogateescape"`` does):

* :func:`wild_texts` — any ``str``: CJK, emoji sequences, combining marks, astral characters,
  control characters, mixed line endings (:data:`LINE_ENDINGS`) and lone surrogates;
* :func:`long_reply_texts` — such text well past 64 KiB (Hypothesis caps one draw, so it is
  built by repeating drawn pieces), and runs of one opener (``[[[…``) nested deeper than any
  recursion;
* :func:`wild_model_replies` — replies with wild text in every string field;
* :func:`replies_around` — variants of replies in *your* format: several calls in one reply,
  words swapped, line endings swapped, nasty text spliced in or around, long padding.

Example, a test of your own parser::

    from hypothesis import given
    from polyloop import ModelReply
    from polyloop.testing import strategies as pst

    SAMPLE = ModelReply(text='CALL add {"a": 1, "b": 2}')

    @given(reply=pst.replies_around(SAMPLE))
    def test_parse_is_total(reply):
        MyParser().parse(reply)  # must return a decision, never raise
"""

from __future__ import annotations

import dataclasses
import functools
import re
import string
from collections.abc import Callable, Iterable
from typing import Any

from hypothesis import strategies as st

from polyloop._base._run_id import MAX_RUN_ID, RUN_ID_FIRST, RUN_ID_REST
from polyloop.tools import Tool, ToolRegistry

# shared shape, kept on purpose: import list
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

__all__ = [
    "FIELD_TEXTS",
    "LINE_ENDINGS",
    "MAX_LONG_TEXT_BYTES",
    "NASTY_TEXTS",
    "action_intent_records",
    "action_outcomes",
    "action_statuses",
    "actions",
    "agent_definitions",
    "big_records",
    "budgets",
    "counts",
    "events",
    "final_answers",
    "invalid_decisions",
    "json_objects",
    "json_values",
    "long_reply_texts",
    "long_texts",
    "messages",
    "model_call_intent_records",
    "model_replied_records",
    "model_replies",
    "non_empty_texts",
    "optional_texts",
    "parsed_replies",
    "record_texts",
    "records",
    "replies_around",
    "run_finished_records",
    "run_ids",
    "run_log_objects",
    "run_logs",
    "run_results",
    "run_started_records",
    "step_completed_records",
    "step_records",
    "stop_reasons",
    "synthetic_observations",
    "texts",
    "timestamps",
    "tools",
    "usage_numbers",
    "wild_model_replies",
    "wild_texts",
]

MAX_INT = 2**63 - 1

#: Hand-picked strings that have broken parsers and stores before. ``texts()`` draws from these
#: often, so a bounded run meets each of them.
NASTY_TEXTS: tuple[str, ...] = (
    "",
    " ",
    "\x00",
    "a\x00b",
    "\r\n\t\x0b\x0c",
    "\x1b[31mred\x1b[0m",
    "\x7f\x80\x9f",
    "\u200b\u200d\ufeff",
    "\u202eevil\u202c",
    "\U0001f600\U0001f9ea",
    "\U0001d518\U0001d52b\U0001d526",
    "\U0010fffd",
    "null",
    "None",
    "0",
    '{"tool": "x", "args": {}}',
    "```\ncode\n```",
    "\\",
    '"',
    "'; DROP TABLE runs; --",
    "x" * 10_000,
)

_characters = st.characters(codec="utf-8")  # all of Unicode except lone surrogates

_SHORT = 40


def texts(*, max_size: int = _SHORT) -> st.SearchStrategy[str]:
    """Any text: the nasty strings above, arbitrary Unicode (incl. control and astral chars)."""
    return st.one_of(
        st.sampled_from(NASTY_TEXTS),
        st.text(_characters, max_size=max_size),
        st.text(st.sampled_from("\x00\x01\x1b\r\n\t\u2028\u0085 a\U0001f600"), max_size=8),
    )


#: Hand-picked strings a record or an event field carries that :data:`NASTY_TEXTS` leaves out:
#: lone surrogates (alone, between letters, after a backslash or a quote, next to an astral
#: character), CJK, emoji sequences, combining marks, astral planes and control characters.
FIELD_TEXTS: tuple[str, ...] = (
    "\ud800",
    "\udfff",
    "\udcff",
    "bad bytes: \udc80\udcfe",
    "a\udbffb\udc00c",
    "\\\ud800",
    '"\udcff"',
    "\U0001f600\udc00",
    "\u4e2d\u6587\u5b57\u7b26 \u65e5\u672c\u8a9e \ud55c\uad6d\uc5b4",
    "e\u0301\u0327 A\u030a \u0915\u094d\u0937",
    "\U0001f469\u200d\U0001f469\u200d\U0001f467 \U0001f1eb\U0001f1f7 \u270c\ufe0f",
    "\U00020000\U0002a6d6\U000e0001",
    "\x00\x01\x1b\x7f\x85\u2028\u2029\r\n\r\x0b",
)

_SURROGATES = st.integers(min_value=0xD800, max_value=0xDFFF).map(chr)
_WIDE_CHARACTERS = st.one_of(
    _characters,
    _SURROGATES,
    st.sampled_from("\u4e2d\u6587\u0301\u0327\u200d\ufe0f\U0001f600\U00020000\x00\x1b\r\n"),
)
# A high surrogate right before a low one is a UTF-16 pair, not two lone surrogates: JSON reads
# the pair's escapes as the one character they spell, so no store could give both back.
_PAIR = re.compile("([\ud800-\udbff])(?=[\udc00-\udfff])")


def _unpaired(text: str) -> str:
    return _PAIR.sub("\\1 ", text)


def record_texts(*, max_size: int = _SHORT) -> st.SearchStrategy[str]:
    """Text as a record's or an event's field may hold: everything :func:`texts` draws, plus
    lone surrogates, CJK, emoji sequences, combining marks, astral characters and control
    characters (:data:`FIELD_TEXTS` and arbitrary mixes). Never a high surrogate directly before
    a low one: that is a UTF-16 pair, which JSON reads back as the character it spells."""
    return _record_texts(max_size)


@functools.cache
def _record_texts(max_size: int) -> st.SearchStrategy[str]:
    # One strategy object per size: record strategies ask for it many times, and Hypothesis
    # validates each new strategy object on its first draw.
    return st.one_of(
        texts(max_size=max_size),
        st.sampled_from(FIELD_TEXTS),
        st.text(_WIDE_CHARACTERS, max_size=max_size).map(_unpaired),
    )


#: The largest text :func:`long_texts` builds by default: 1 MiB of UTF-8.
MAX_LONG_TEXT_BYTES = 1 << 20


def _repeated(pieces: list[str], target: int) -> str:
    piece = _unpaired("".join(pieces)) + "\u00b7"  # a separator: never a UTF-16 pair
    size = len(piece.encode("utf-8", "surrogatepass"))
    if size <= target:
        return piece * (target // size)
    kept, used = [], 0  # a piece longer than the bound: as much of it as fits
    for char in piece:
        used += len(char.encode("utf-8", "surrogatepass"))
        if used > target:
            break
        kept.append(char)
    return "".join(kept)


def long_texts(*, max_bytes: int = MAX_LONG_TEXT_BYTES) -> st.SearchStrategy[str]:
    """Long text of up to ``max_bytes`` UTF-8 bytes (default 1 MiB), well past 64 KiB often:
    drawn pieces (:func:`record_texts`: non-ASCII, lone surrogates, control characters)
    repeated, since Hypothesis caps the size of one draw."""
    sizes = st.one_of(
        st.just(min(64 * 1024 + 1, max_bytes)),  # just past 64 KiB: a common message limit
        st.just(max_bytes),
        st.integers(min_value=1, max_value=max_bytes),
    )
    pieces = st.lists(record_texts(max_size=12).filter(bool), min_size=1, max_size=4)
    return st.builds(_repeated, pieces, sizes)


def non_empty_texts(*, max_size: int = _SHORT) -> st.SearchStrategy[str]:
    """Like :func:`texts` but never ``""``."""
    return texts(max_size=max_size).filter(bool)


def optional_texts(*, max_size: int = _SHORT) -> st.SearchStrategy[str | None]:
    """``None``, ``""`` and any text — the pair a lossy store confuses."""
    return st.one_of(st.none(), st.just(""), texts(max_size=max_size))


def counts() -> st.SearchStrategy[int]:
    """Non-negative ints: 0 and 1 often, large values (2**31, 2**53 + 1, 2**63 - 1) too."""
    return st.one_of(
        st.sampled_from((0, 1, 2**31 - 1, 2**31, 2**53 + 1, MAX_INT)),
        st.integers(min_value=0, max_value=MAX_INT),
    )


def timestamps() -> st.SearchStrategy[str]:
    """UTC ISO-8601 with milliseconds and ``Z``, as the library writes them."""
    from datetime import UTC, datetime

    return st.datetimes(
        min_value=datetime(1970, 1, 1), max_value=datetime(2999, 12, 31), timezones=st.none()
    ).map(lambda d: d.replace(tzinfo=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"))


def run_ids() -> st.SearchStrategy[str]:
    """Valid run ids: ``[A-Za-z0-9][A-Za-z0-9._-]{0,127}``, including the 1- and 128-char edges."""
    return st.builds(
        lambda head, tail: head + tail,
        st.sampled_from(RUN_ID_FIRST),
        st.one_of(
            st.text(st.sampled_from(RUN_ID_REST), max_size=20),
            st.text(st.sampled_from(RUN_ID_REST), min_size=MAX_RUN_ID - 1, max_size=MAX_RUN_ID - 1),
        ),
    )


_Texts = Callable[..., st.SearchStrategy[str]]


def _json_scalars(text: _Texts = texts) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.none(),
        st.booleans(),
        st.sampled_from((0, -1, 2**53 + 1, -(2**63), MAX_INT)),
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


def _model_replies(text: _Texts, max_text_size: int = _SHORT) -> st.SearchStrategy[ModelReply]:
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


def model_replies(*, max_text_size: int = _SHORT) -> st.SearchStrategy[ModelReply]:
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


# --------------------------------------------------------------------------- parser inputs
# What a model really sends a parser: any str (lone surrogates included — a reply decoded with
# errors="surrogateescape" holds them), long, multilingual, with every kind of line ending and
# several tool calls in one reply.

#: Every line ending a reply can mix: Unix, Windows, old Mac, the Unicode line and paragraph
#: separators, NEL, vertical tab, form feed and the file separator (``str.splitlines`` splits on
#: each; ``str.split("\n")`` only on the first two).
LINE_ENDINGS: tuple[str, ...] = (
    "\n",
    "\r\n",
    "\r",
    "\u2028",
    "\u2029",
    "\x85",
    "\x0b",
    "\x0c",
    "\x1c",
)

_WILD_PIECES: tuple[str, ...] = (
    "日本語",  # CJK
    "中文テキスト",
    "한국어",
    "\U0001f600",  # emoji: one, a ZWJ family, a flag, a heart with its variation selector
    "\U0001f468\u200d\U0001f469\u200d\U0001f467",
    "\U0001f1fa\U0001f1f8",
    "\u2764\ufe0f",
    "e\u0301",  # combining marks: on a letter, stacked, alone with nothing to combine with
    "a\u0308\u0323",
    "\u0301",
    "\U0001d518",  # astral: mathematical letter, CJK extension B, plane-16 private use, tag
    "\U00020000",
    "\U0010fffd",
    "\U000e0001",
    "\x00",  # control characters: NUL, bell, an escape sequence, DEL, a C1 control
    "\x07",
    "\x1b[0m",
    "\x7f",
    "\x9b",
    "\ud800",  # lone surrogates: high, low, and a byte as surrogateescape decodes it
    "\udfff",
    "\udc80",
    "\ufeff",  # byte-order mark, zero-width space, right-to-left override
    "\u200b",
    "\u202e",
)

_WILD_PIECE = st.one_of(
    st.sampled_from(_WILD_PIECES),
    st.sampled_from(LINE_ENDINGS),
    st.characters(),  # any code point, lone surrogates included
    st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF),
    st.characters(categories=["Mn", "Me"]),
    st.characters(min_codepoint=0x10000),
    st.characters(categories=["Cc"]),
)

#: Openers a recursive scanner descends into; a long run of one nests deeper than any stack.
_OPENERS: tuple[str, ...] = ("[", "{", "(", '{"a":', '{"a":[', "<a>", "```\n", "\\", '"', "> ")


def wild_texts(*, max_size: int = _SHORT) -> st.SearchStrategy[str]:
    """Any ``str`` a reply can hold: everything :func:`texts` draws, plus text built from up to
    ``max_size`` pieces — CJK, emoji sequences, combining marks, astral characters, control
    characters, mixed :data:`LINE_ENDINGS` and lone surrogates (``"\\ud800"``), which
    ``str.encode("utf-8")`` refuses."""
    return st.one_of(
        texts(max_size=max_size),
        st.lists(_WILD_PIECE, max_size=max_size).map("".join),
    )


def _with_a_surrogate() -> st.SearchStrategy[str]:
    """Wild text that holds at least one lone surrogate (drawn on purpose in every field: left
    to chance, a bounded run rarely puts one in a short field)."""
    return st.builds(
        lambda head, surrogate, tail: head + surrogate + tail,
        wild_texts(max_size=6),
        st.sampled_from(("\ud800", "\udbff", "\udc80", "\udfff")),
        wild_texts(max_size=6),
    )


def _wild_field() -> st.SearchStrategy[str]:
    return st.one_of(wild_texts(), _with_a_surrogate())


def _repeated_joined(pieces: list[str], separator: str, size: int) -> str:
    unit = separator.join(pieces) + separator
    return (unit * (size // len(unit) + 1))[:size]


def long_reply_texts(*, min_size: int = 70_000) -> st.SearchStrategy[str]:
    """Text of ``min_size`` to ``2 * min_size`` characters (by default well past 64 KiB, and
    two to four times that in UTF-8 bytes when it is not ASCII).

    Hypothesis caps how much one draw can generate, so the text is built from a few drawn
    pieces (:func:`wild_texts` or an opener such as ``[`` or ``{"a":``) repeated, joined by a
    drawn line ending or by nothing — which also gives many short lines, and runs of one opener
    nested deeper than Python's recursion limit.
    """
    if min_size < 1:
        raise ValueError("long_reply_texts(min_size=...) must be at least 1")
    piece = st.one_of(wild_texts(max_size=12).filter(bool), st.sampled_from(_OPENERS))
    return st.builds(
        _repeated_joined,
        st.lists(piece, min_size=1, max_size=6),
        st.sampled_from(("", *LINE_ENDINGS)),
        st.integers(min_value=min_size, max_value=2 * min_size),
    )


def wild_model_replies(*, long: bool = True) -> st.SearchStrategy[ModelReply]:
    """Replies with :func:`wild_texts` in every string field: ``text``, ``reasoning``,
    ``call_id`` (``None`` or non-empty) and the ``usage`` keys; with ``long=True`` the text or
    reasoning is sometimes a :func:`long_reply_texts` one."""
    text = st.one_of(_wild_field(), long_reply_texts()) if long else _wild_field()
    return st.builds(
        ModelReply,
        text=text,
        reasoning=text,
        call_id=st.one_of(st.none(), _wild_field().filter(bool)),
        usage=st.dictionaries(_wild_field(), usage_numbers(), max_size=3),
    )


# Built once: a composite that builds strategies on every draw spends its time validating them.
_WILD_FIELD = _wild_field()
_ID_FIELD = _WILD_FIELD.filter(bool)
_LONG_TEXT = long_reply_texts()
_USAGE = st.dictionaries(_WILD_FIELD, usage_numbers(), min_size=1, max_size=2)
_ENDING_RUNS = st.lists(st.sampled_from(LINE_ENDINGS), min_size=1, max_size=4)
_KEEP = st.booleans()

_WORD = re.compile(r"\w+")
_JOINS = st.one_of(st.sampled_from(LINE_ENDINGS), st.sampled_from(("", " ", "\n\n", "\nThen:\n")))
_NEW_WORD = st.one_of(
    st.text(st.sampled_from(string.ascii_letters + "_"), min_size=1, max_size=10),
    st.sampled_from(("naïve", "日本語", "x\U0001f600", "e\u0301", "\U0001d518")),
    wild_texts(max_size=4).filter(bool),
)


def _swap_word(draw: st.DrawFn, text: str) -> str:
    words = list(_WORD.finditer(text))
    if not words:
        return text
    word = words[draw(st.integers(0, len(words) - 1))]
    return text[: word.start()] + draw(_NEW_WORD) + text[word.end() :]


def _with_endings(draw: st.DrawFn, text: str) -> str:
    endings = iter(draw(_ENDING_RUNS) * len(text))
    return re.sub(r"\r\n|\n", lambda _: next(endings), text)


_HOWS = ("as_is", "slice", "splice", "several", "word", "line_endings", "padded")


_LONG_HOWS = st.sampled_from(_HOWS)
_SHORT_HOWS = st.sampled_from(_HOWS[:-1])
_PAD_WHERE = st.integers(0, 2)


@st.composite
def _around(
    draw: st.DrawFn, texts: st.SearchStrategy[int], replies: tuple[ModelReply, ...], long: bool
) -> ModelReply:
    base = replies[draw(texts)]
    text = base.text
    how = draw(_LONG_HOWS if long else _SHORT_HOWS)
    if how == "slice" and text:
        start = draw(st.integers(0, len(text)))
        text = text[start : draw(st.integers(start, len(text)))]
    elif how == "splice":
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(_WILD_FIELD) + text[at:]
    elif how == "several":  # several tool calls in one reply, some with a word changed
        for _ in range(draw(st.integers(1, 3))):
            other = replies[draw(texts)].text
            text = text + draw(_JOINS) + (_swap_word(draw, other) if draw(_KEEP) else other)
    elif how == "word":
        text = _swap_word(draw, text)
    elif how == "line_endings":
        text = _with_endings(draw, text)
    elif how == "padded":
        pad = draw(_LONG_TEXT)
        text = (pad + text, text + pad, pad + text + pad)[draw(_PAD_WHERE)]
    return ModelReply(
        text=text,
        reasoning=base.reasoning if draw(_KEEP) else draw(_WILD_FIELD),
        call_id=(base.call_id if draw(_KEEP) else None) if draw(_KEEP) else draw(_ID_FIELD),
        usage=dict(base.usage) if draw(_KEEP) else draw(_USAGE),
    )


def replies_around(*replies: ModelReply, long: bool = True) -> st.SearchStrategy[ModelReply]:
    """Variants of replies in *your* parser's format — the inputs parsers get wrong.

    One of ``replies`` as it is, a slice of it, :func:`wild_texts` spliced in, several of them
    in one reply (several tool calls, some with a word changed, joined by any line ending), a
    word swapped for another (ASCII or not), its line endings swapped for mixed ones, or (with
    ``long=True``) padded with :func:`long_reply_texts` before, after or both. ``reasoning``,
    ``call_id`` and the ``usage`` keys are kept or replaced by wild text.
    """
    if not replies:
        raise ValueError("replies_around() needs at least one ModelReply")
    for reply in replies:
        if not isinstance(reply, ModelReply):
            raise TypeError(f"replies_around() takes ModelReply values, got {type(reply).__name__}")
    return _around(st.integers(0, len(replies) - 1), tuple(replies), long)
