"""An executor's structured audit data: ``ActionOutcome.detail`` is checked and copied as plain
JSON, the loop keeps it as ``StepCompleted.executor_detail`` (in the log and the event) whatever
the status, the record round-trips with it and reads without it, ``polyloop show`` prints it,
and ``ToolExecutor`` says why it refused as data."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

import polyloop
from polyloop import Action, ActionOutcome, ActionStatus, StepCompleted, Tool, ToolRegistry
from polyloop._base._schema import violations
from polyloop.cli import main
from polyloop.events import MemorySink
from polyloop.executors import ToolExecutor
from polyloop.models import ScriptedModel
from polyloop.parsers import JsonToolCallParser
from polyloop.stores import MemoryStore, open_store
from polyloop.types import record_from_json
from tests.unit._doubles import agent


def outcome(detail: Any) -> ActionOutcome:
    return ActionOutcome(status=ActionStatus.EXECUTED, observation="ok", detail=detail)


# --------------------------------------------------------------------------- ActionOutcome


def test_a_detail_is_copied_as_plain_json() -> None:
    given = {"refusal": {"kind": "x", "path": ("a", 1)}, "n": 1.5}

    made = outcome(given)
    given["refusal"]["kind"] = "changed"  # type: ignore[index]

    assert made.detail == {"refusal": {"kind": "x", "path": ["a", 1]}, "n": 1.5}


@pytest.mark.parametrize(
    ("detail", "message"),
    [
        ([1, 2], "must be a mapping with str keys"),
        ("text", "must be a mapping with str keys"),
        ({1: "x"}, "must be a mapping with str keys"),
        ({"x": math.nan}, "JSON-serialisable"),
        ({"x": object()}, "JSON-serialisable"),
        ({"x": {1, 2}}, "JSON-serialisable"),
    ],
)
def test_a_detail_that_is_not_a_json_object_is_a_value_error(detail: Any, message: str) -> None:
    with pytest.raises(ValueError, match=f"ActionOutcome.detail .*{message}"):
        outcome(detail)


def test_a_detail_nested_too_deeply_is_a_value_error() -> None:
    deep: dict[str, Any] = {}
    for _ in range(200):
        deep = {"x": deep}

    with pytest.raises(ValueError, match="nested deeper than"):
        outcome(deep)


def test_no_detail_and_an_empty_one_are_kept_as_given() -> None:
    assert outcome(None).detail is None
    assert outcome({}).detail == {}


# --------------------------------------------------------------------------- the record


def a_step_completed(detail: dict[str, Any] | None) -> StepCompleted:
    from tests.unit.test_types import _a_step

    return StepCompleted(step=_a_step(), executor_detail=detail)


def test_a_step_completed_round_trips_its_detail_lone_surrogates_included() -> None:
    record = a_step_completed({"refusal": {"tool": "\udc80é", "available": ["a", "b"]}})

    text = record.to_json()

    assert text.encode("utf-8")  # valid UTF-8
    assert record_from_json(text) == record


def test_a_step_completed_written_before_the_field_existed_reads_without_detail() -> None:
    data = json.loads(a_step_completed(None).to_json())
    del data["executor_detail"]

    assert record_from_json(json.dumps(data)).executor_detail is None  # type: ignore[union-attr]


def test_a_detail_that_is_not_an_object_in_a_record_is_refused_naming_it() -> None:
    data = json.loads(a_step_completed(None).to_json())
    data["executor_detail"] = [1]

    with pytest.raises(ValueError, match="'executor_detail' must be an object or null"):
        record_from_json(json.dumps(data))


# --------------------------------------------------------------------------- the loop


class Detailed:
    """An executor that adds detail to every outcome, of every status."""

    def __init__(self, status: ActionStatus) -> None:
        self.status = status

    async def execute(self, action: Action) -> ActionOutcome:
        return ActionOutcome(
            status=self.status, observation="own text", detail={"said": action.tool_name}
        )


@pytest.mark.asyncio
@pytest.mark.parametrize("status", list(ActionStatus))
async def test_the_loop_keeps_the_detail_in_the_log_and_the_event_whatever_the_status(
    status: ActionStatus,
) -> None:
    store, sink = MemoryStore(), MemorySink()
    model = ScriptedModel(['{"tool": "t", "arguments": {}}', '{"final_answer": "done"}'])

    result = await polyloop.run(
        agent(), "g", model=model, parser=JsonToolCallParser(), executor=Detailed(status),
        store=store, events=sink, run_id="r",
    )  # fmt: skip

    logged = (await store.read_log("r")).steps[0]
    emitted = next(e.record for e in sink.events if isinstance(e.record, StepCompleted))
    assert logged.executor_detail == emitted.executor_detail == {"said": "t"}
    assert "said" not in result.steps[0].observation  # never in the history


# --------------------------------------------------------------------------- polyloop show


@pytest.mark.asyncio
async def test_show_prints_each_key_of_the_detail_under_its_step(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    store = open_store(url)
    tools = ToolRegistry([Tool(name="add", description="", parameters=ADD, func=lambda a: a)])
    model = ScriptedModel(['{"tool": "add", "arguments": {"a": "x"}}', '{"final_answer": "no"}'])
    await polyloop.run(
        agent(tools=tools), "g", model=model, parser=JsonToolCallParser(),
        executor=ToolExecutor(tools), store=store, run_id="shown",
    )  # fmt: skip
    await store.aclose()  # type: ignore[attr-defined]

    return_code = await _in_thread(main, ["show", "shown", "--store", url])

    status, printed = return_code
    assert status == 0
    lines = printed.splitlines()
    step = next(i for i, line in enumerate(lines) if "not_executed" in line)
    assert lines[step + 1] == (
        '      refusal: {"kind":"invalid_arguments","tool":"add","violations":[{"message":'
        '"\'x\' is not of type \'integer\'","path":"a","rule":"type"}]}'
    )
    assert len(lines) == step + 4  # the refused step, its detail, the final answer, the stop


async def _in_thread(command: Any, argv: list[str]) -> tuple[int, str]:
    """``main(argv)`` (which runs its own event loop) in a thread, and what it printed."""
    import asyncio
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()) as printed:
        status = await asyncio.to_thread(command, argv)
    return status, printed.getvalue()


# --------------------------------------------------------------------------- ToolExecutor

ADD = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}


@pytest.mark.asyncio
async def test_tool_executor_refusals_say_why_as_data() -> None:
    tools = ToolRegistry(
        [
            Tool(name="add", description="", parameters=ADD, func=lambda a: a),
            Tool(name="bare", description=""),
        ]
    )
    executor = ToolExecutor(tools)

    unknown = await executor.execute(Action(text="x", tool_name="../x"))
    none = await executor.execute(Action(text="x", tool_name=None))
    invalid = await executor.execute(Action(text="x", tool_name="add", tool_args={}))
    no_function = await executor.execute(Action(text="x", tool_name="bare"))
    unbound = await executor.execute(Action(text="x", tool_name="add", tool_args={"a": 1, "b": 2}))

    assert unknown.detail == {
        "refusal": {"kind": "unknown_tool", "tool": "../x", "available": ["add", "bare"]}
    }
    assert none.detail == {
        "refusal": {"kind": "no_tool", "tool": None, "available": ["add", "bare"]}
    }
    assert invalid.detail == {
        "refusal": {
            "kind": "invalid_arguments",
            "tool": "add",
            "violations": [
                {
                    "path": "the arguments",
                    "rule": "required",
                    "message": "'a' is a required property",
                }
            ],
        }
    }
    assert no_function.detail == {"refusal": {"kind": "no_function", "tool": "bare"}}
    assert unbound.detail is not None
    assert unbound.detail["refusal"]["kind"] == "signature_mismatch"


@pytest.mark.asyncio
async def test_a_huge_unknown_name_is_cut_in_the_detail() -> None:
    executor = ToolExecutor(ToolRegistry())

    refused = await executor.execute(Action(text="x", tool_name="n" * 10_000))

    assert refused.detail is not None
    assert len(refused.detail["refusal"]["tool"]) == 201  # 200 characters and "…"
    assert refused.detail["refusal"]["available"] == []


# --------------------------------------------------------------------------- violations


@pytest.mark.parametrize(
    ("schema", "args", "found"),
    [
        (ADD, {"a": "x"}, [("a", "type")]),
        (ADD, {}, [("the arguments", "required")]),
        ({"properties": {"n": {"maximum": 3}}}, {"n": 4}, [("n", "maximum")]),
        ({"properties": {"s": {"minLength": 2}}}, {"s": ""}, [("s", "minLength")]),
        ({"properties": {"e": {"enum": [1]}}}, {"e": 2}, [("e", "enum")]),
        ({"additionalProperties": False}, {"x": 1}, [("the arguments", "additionalProperties")]),
        ({"properties": {"l": {"items": {"type": "string"}}}}, {"l": ["a", 2]}, [("l[1]", "type")]),
    ],
)
def test_each_violation_names_its_location_and_the_keyword_that_failed(
    schema: dict[str, Any], args: dict[str, Any], found: list[tuple[str, str]]
) -> None:
    assert [(where, rule) for where, rule, _ in violations(schema, args)] == found


def test_the_built_in_validator_names_the_same_keywords(monkeypatch: pytest.MonkeyPatch) -> None:
    from polyloop._base import _schema

    monkeypatch.setattr(_schema, "_jsonschema", lambda: None)

    assert [(w, r) for w, r, _ in violations(ADD, {"a": "x"})] == [("a", "type")]
    assert [(w, r) for w, r, _ in violations(ADD, {})] == [("the arguments", "required")]
    assert [(w, r) for w, r, _ in violations({"properties": {"n": {"maximum": 3}}}, {"n": 4})] == [
        ("n", "maximum")
    ]
