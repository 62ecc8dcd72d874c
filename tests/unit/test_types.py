"""The public value types (SPEC §2): constructor validation, the exact enum spellings, the
parameter snapshot, and the lossless JSON form of every record kind."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polyloop import (
    Action,
    ActionIntent,
    ActionStatus,
    Budget,
    ModelCallIntent,
    ModelReplied,
    ModelReply,
    Record,
    RunFinished,
    RunLog,
    RunStarted,
    SchemaVersionError,
    StepCompleted,
    StepRecord,
    StopReason,
    Tool,
    ToolRegistry,
    canonical_json,
    parameters_hash,
    record_from_json,
)
from polyloop.testing._shared._base import in_ci
from tests.unit._doubles import agent

BOUNDED = settings(max_examples=200, deadline=None, derandomize=in_ci())

# --------------------------------------------------------------------------- validation


def test_a_model_reply_with_an_empty_call_id_is_rejected_naming_call_id():
    with pytest.raises(ValueError, match="call_id"):
        ModelReply(text="hi", call_id="")


@pytest.mark.parametrize(
    "field", ["max_steps", "max_executed_actions", "max_consecutive_parse_failures",
              "max_prompt_chars"],
)  # fmt: skip
@pytest.mark.parametrize("bad", [0, -1, True, False, 1.0, "3", None], ids=repr)
def test_a_budget_limit_that_is_not_an_int_of_at_least_one_is_rejected_naming_it(field, bad):
    limits: dict[str, Any] = {
        "max_steps": 1,
        "max_executed_actions": 1,
        "max_consecutive_parse_failures": 1,
        "max_prompt_chars": 1,
    }
    limits[field] = bad

    with pytest.raises(ValueError, match=f"Budget.{field}"):
        Budget(**limits)


@pytest.mark.parametrize(
    "tool_args",
    [{"x": object()}, {"x": float("nan")}, {"x": float("inf")}, {"x": {1, 2}}, {("k",): 1},
     {1: "a", "b": 2}, ["not", "a", "mapping"]],
    ids=["object", "nan", "inf", "set", "tuple-key", "mixed-keys", "list"],
)  # fmt: skip
def test_action_args_that_are_not_json_serialisable_are_rejected_naming_tool_args(tool_args):
    with pytest.raises(ValueError, match="tool_args"):
        Action(text="call", tool_name="t", tool_args=tool_args)


def test_action_args_pass_through_canonical_json_so_a_tuple_comes_back_as_a_list():
    action = Action(text="call", tool_name="t", tool_args={"xs": (1, 2), "nested": {"t": ()}})

    assert action.tool_args == {"xs": [1, 2], "nested": {"t": []}}


# --------------------------------------------------------------------------- enums


def test_stop_reason_has_exactly_the_twelve_values_spelled_exactly():
    assert [reason.value for reason in StopReason] == [
        "task_completed",
        "step_budget",
        "parse_failed_repeatedly",
        "context_overflow",
        "env_error",
        "llm_error",
        "agent_finished",
        "action_budget",
        "cancelled",
        "resume_state_unknown",
        "time_limit",
        "parser_error",
    ]
    assert all(reason.name == reason.value.upper() for reason in StopReason)
    assert all(reason == reason.value for reason in StopReason)  # StrEnum: SQL sees the string


def test_action_status_has_exactly_three_values():
    assert [status.value for status in ActionStatus] == ["executed", "not_executed", "env_error"]
    assert all(status.name == status.value.upper() for status in ActionStatus)


def test_stop_reason_documents_that_it_only_grows_and_cancelled_never_reaches_run():
    doc = StopReason.__doc__ or ""

    assert "only grows" in doc
    assert "default branch" in doc
    assert "CANCELLED" in doc
    assert "run()" in doc


# --------------------------------------------------------------------------- parameters


def test_agent_parameters_snapshot_what_the_model_sees_and_when_the_run_stops():
    def lookup(query: str) -> str:
        return query

    tools = ToolRegistry(
        [
            Tool(name="zeta", description="last", parameters={"type": "object"}, func=lookup,
                 replayable=True),
            Tool(name="alpha", description="first", completion_marker=True, replayable=False),
        ]
    )  # fmt: skip

    parameters = agent(tools=tools, replay=True, max_steps=7).parameters()

    assert parameters == {
        "system_prompt": "You are a test agent.",
        "synthetic_observations": {
            "not_executed": "[the library says: that action was not executed]",
            "env_error": "[the library says: the environment is broken]",
        },
        "budget": {
            "max_steps": 7,
            "max_executed_actions": 20,
            "max_consecutive_parse_failures": 5,
            "max_prompt_chars": 1_000_000,
        },
        "tools": [
            {"name": "alpha", "description": "first", "parameters": {},
             "completion_marker": True},
            {"name": "zeta", "description": "last", "parameters": {"type": "object"},
             "completion_marker": False},
        ],
    }  # fmt: skip


def test_replay_flags_and_tool_functions_do_not_change_the_parameters_hash():
    one = ToolRegistry([Tool(name="t", description="d", func=len, replayable=True)])
    other = ToolRegistry([Tool(name="t", description="d", func=str, replayable=False)])

    a = agent(tools=one, replay=False).parameters()
    b = agent(tools=other, replay=True).parameters()

    assert parameters_hash(a) == parameters_hash(b)


def test_what_the_model_sees_changes_the_parameters_hash():
    base = parameters_hash(agent().parameters())

    changed = {
        parameters_hash(agent(system_prompt="other").parameters()),
        parameters_hash(agent(max_prompt_chars=99).parameters()),
        parameters_hash(agent(tools=ToolRegistry([Tool(name="t", description="d")])).parameters()),
    }

    assert base not in changed
    assert len(changed) == 3


def test_parameters_hash_is_sha256_of_the_canonical_json():
    parameters = agent().parameters()
    expected = hashlib.sha256(
        json.dumps(
            parameters, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False
        ).encode()
    ).hexdigest()

    assert parameters_hash(parameters) == f"sha256:{expected}"


def test_parameters_is_a_method_not_a_field():
    assert "parameters" not in {f for f in type(agent()).__dataclass_fields__}


# --------------------------------------------------------------------------- JSON round trip

texts = st.text(max_size=30) | st.text(min_size=2000, max_size=3000, alphabet='ab✓🦀\n"\\')
opt_texts = st.none() | texts
counts = st.integers(min_value=0, max_value=2**80)
json_scalars = (
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.text(max_size=10)
    | st.floats(allow_nan=False, allow_infinity=False)
)  # fmt: skip
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=10,
)  # fmt: skip
json_objects = st.dictionaries(st.text(max_size=8), json_values, max_size=4)

model_replies = st.builds(
    ModelReply,
    text=texts,
    reasoning=texts,
    call_id=st.none() | st.text(min_size=1, max_size=20),
    usage=st.dictionaries(st.text(max_size=10), st.integers(0, 2**64), max_size=3),
)
actions = st.builds(Action, text=texts, tool_name=opt_texts, tool_args=st.none() | json_objects)
step_records = st.builds(
    StepRecord,
    step_index=counts,
    raw_output=texts,
    response_chars=counts,
    reasoning_chars=counts,
    action=opt_texts,
    parse_ok=st.booleans(),
    parse_error=opt_texts,
    observation=texts,
    observation_is_synthetic=st.booleans(),
    observation_truncated_chars=counts,
    prompt_chars=counts,
    llm_call_id=st.none() | st.text(min_size=1, max_size=20),
    step_wall_ms=counts,
    tool_name=opt_texts,
    tool_args_json=opt_texts,
    action_status=st.none() | st.sampled_from(ActionStatus),
    env_reported_completion=st.booleans(),
)
records: st.SearchStrategy[Record] = st.one_of(
    st.builds(RunStarted, run_id=texts, goal=texts, parameters=json_objects,
              parameters_hash=texts, started_at=texts),
    st.builds(ModelCallIntent, step_index=counts, prompt_chars=counts),
    st.builds(ModelReplied, step_index=counts, reply=model_replies),
    st.builds(ActionIntent, step_index=counts, action=actions),
    st.builds(StepCompleted, step=step_records, executor_observation=opt_texts,
              model_error=opt_texts),
    st.builds(RunFinished, stop_reason=st.sampled_from(StopReason), final_answer=opt_texts,
              executed_actions=counts, finished_at=texts),
)  # fmt: skip


@BOUNDED
@given(records)
def test_every_record_kind_round_trips_through_json_losslessly(record):
    text = record.to_json()

    decoded = record_from_json(text)

    assert type(decoded) is type(record)
    assert decoded == record
    assert decoded.to_json() == text


@pytest.mark.parametrize(
    "record",
    [
        ModelCallIntent(step_index=0, prompt_chars=0),
        StepCompleted(
            step=StepRecord(
                step_index=0, raw_output="", response_chars=0, reasoning_chars=0, action="",
                parse_ok=True, parse_error="", observation="", observation_is_synthetic=False,
                observation_truncated_chars=0, prompt_chars=0, llm_call_id=None, step_wall_ms=0,
                tool_name="", tool_args_json=None,
            ),
            executor_observation="",
            model_error=None,
        ),
        ModelReplied(step_index=0, reply=ModelReply(text="", call_id=None)),
        RunFinished(stop_reason=StopReason.CANCELLED, final_answer="", executed_actions=0,
                    finished_at=""),
    ],
    ids=lambda r: r.kind,
)  # fmt: skip
def test_step_zero_and_the_empty_string_stay_distinct_from_none(record):
    assert record_from_json(record.to_json()) == record


def test_a_record_serialises_as_canonical_json_with_kind_and_schema_version_first_class():
    text = ModelCallIntent(step_index=3, prompt_chars=41).to_json()

    assert (
        text
        == '{"kind":"model_call_intent","prompt_chars":41,"schema_version":"1.1","step_index":3}'
    )


def test_canonical_json_is_sorted_compact_unicode_and_refuses_nan():
    assert canonical_json({"b": 1, "a": "ü"}) == '{"a":"ü","b":1}'
    with pytest.raises(ValueError, match="JSON compliant"):
        canonical_json({"x": float("nan")})


# --------------------------------------------------------------------------- JSON errors


def test_an_unknown_record_kind_raises_schema_version_error_naming_it():
    with pytest.raises(SchemaVersionError, match="model_exploded"):
        record_from_json('{"kind":"model_exploded","schema_version":"1.1"}')


@pytest.mark.parametrize("version", ["2.0", "0.9", "10.1"])
def test_an_unknown_major_version_raises_schema_version_error_naming_it(version):
    text = ModelCallIntent(step_index=1, prompt_chars=2).to_json().replace('"1.1"', f'"{version}"')

    with pytest.raises(SchemaVersionError, match=version.replace(".", r"\.")):
        record_from_json(text)


def test_an_unknown_major_version_inside_a_step_record_raises_schema_version_error():
    data = json.loads(StepCompleted(step=_a_step()).to_json())
    data["step"]["schema_version"] = "2.0"

    with pytest.raises(SchemaVersionError, match=r"2\.0"):
        record_from_json(json.dumps(data))


def test_a_later_minor_version_with_an_extra_field_is_read():
    data = json.loads(ModelCallIntent(step_index=1, prompt_chars=2).to_json())
    data.update(schema_version="1.4", added_in_1_4="ignored")

    decoded = record_from_json(json.dumps(data))

    assert decoded == ModelCallIntent(step_index=1, prompt_chars=2, schema_version="1.4")


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ('{"kind":"model_call_intent","schema_version":"1.1","prompt_chars":1}', "step_index"),
        ('{"kind":"model_call_intent","schema_version":"1.1","step_index":"1","prompt_chars":1}',
         "step_index"),
        ('{"kind":"model_call_intent","schema_version":"1.1","step_index":true,"prompt_chars":1}',
         "step_index"),
        ('{"kind":"model_replied","schema_version":"1.1","step_index":1,"reply":{"text":1}}',
         "text"),
        ('{"kind":"model_replied","schema_version":"1.1","step_index":1,'
         '"reply":{"text":"x","call_id":""}}', "call_id"),
        ('{"kind":"run_finished","schema_version":"1.1","stop_reason":"exploded",'
         '"final_answer":null,"executed_actions":0,"finished_at":"t"}', "stop_reason"),
        ("[1, 2]", "object"),
        ("not json", "JSON"),
        ('{"kind":[],"schema_version":"1.1"}', "kind"),
        ('{"kind":{"a":1},"schema_version":"1.1"}', "kind"),
        ('{"schema_version":"1.1","step_index":1,"prompt_chars":1}', "kind"),
    ],
)  # fmt: skip
def test_malformed_json_raises_value_error_naming_the_problem(text, named):
    with pytest.raises((ValueError, SchemaVersionError), match=named) as raised:
        record_from_json(text)

    assert raised.type is not TypeError


@BOUNDED
@given(record=records, data=st.data())
def test_a_field_replaced_by_a_json_value_of_another_type_is_a_value_error_or_still_decodes(
    record, data
):
    body = json.loads(record.to_json())
    name = data.draw(st.sampled_from(sorted(set(body) - {"kind", "schema_version"})))
    body[name] = data.draw(json_values.filter(lambda v: type(v) is not type(body[name])))
    text = json.dumps(body)

    try:
        decoded = record_from_json(text)
    except ValueError as exc:  # never a TypeError, KeyError or AttributeError
        message = str(exc)
    else:  # a nullable field given null: still the same kind of record
        message = ""
        assert decoded.kind == record.kind
    assert message == "" or name in message or "malformed" in message


def _a_step() -> StepRecord:
    return StepRecord(
        step_index=0, raw_output="r", response_chars=1, reasoning_chars=0, action=None,
        parse_ok=False, parse_error="f", observation="", observation_is_synthetic=False,
        observation_truncated_chars=0, prompt_chars=3, llm_call_id="c", step_wall_ms=1,
    )  # fmt: skip


# --------------------------------------------------------------------------- RunLog


def test_run_log_views_select_each_kind_in_append_order():
    started = RunStarted(run_id="r", goal="g", parameters={}, parameters_hash="h", started_at="t")
    intent = ModelCallIntent(step_index=0, prompt_chars=2)
    replied = ModelReplied(step_index=0, reply=ModelReply(text="x"))
    act_intent = ActionIntent(step_index=0, action=Action(text="a"))
    step = StepCompleted(step=_a_step())
    finished = RunFinished(stop_reason=StopReason.STEP_BUDGET, final_answer=None,
                           executed_actions=0, finished_at="t")  # fmt: skip

    log = RunLog((started, intent, replied, act_intent, step, finished))

    assert (log.started, log.finished, len(log)) == (started, finished, 6)
    assert log.intents == (intent, act_intent)
    assert log.replies == (replied,)
    assert log.steps == (step,)
    assert RunLog.empty().records == ()
    assert (RunLog.empty().started, RunLog.empty().finished) == (None, None)
