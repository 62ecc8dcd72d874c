"""A model's odd value never leaves a run stuck for good (issue #32 §8).

A parser over Python's ``json`` reads ``NaN``, ``Infinity``, a number too large to be finite
and arguments nested past :data:`polyloop.MAX_NESTING`; ``polyloop.Action`` refuses each. A
parser that builds its action with :func:`polyloop.action_or_feedback` turns the refusal into an
``InvalidDecision`` the model is told about; a parser that does not raises, by the documented
rule, from ``run()`` and from every ``resume()`` — and ``end_on_parser_error=True`` ends such a
run on purpose, ``parser_error``, the exception recorded in its last step and shown by
``polyloop show``.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

import polyloop
from polyloop import (
    MAX_NESTING,
    Action,
    FinalAnswer,
    InvalidDecision,
    ModelReply,
    ParsedReply,
    StopReason,
    action_or_feedback,
)
from polyloop.cli import main
from polyloop.models import ScriptedModel
from polyloop.parsers import JsonToolCallParser
from polyloop.stores import MemoryStore, SQLiteStore
from tests.unit._doubles import ScriptedExecutor, agent, kinds


def nested(levels: int) -> str:
    """Arguments that are ``levels`` objects deep (the arguments object is the first)."""
    return '{"v": ' * levels + "1" + "}" * levels


# Each kind of value the types refuse, as the model writes it: (the arguments' JSON, what the
# feedback says).
ODD = {
    "nan": ('{"x": NaN}', "not finite"),
    "infinity": ('{"x": Infinity}', "not finite"),
    "minus-infinity": ('{"x": [1, -Infinity]}', "not finite"),
    "too-large": ('{"x": 1e400}', "not finite"),
    "nested-101": (nested(MAX_NESTING + 1), f"nested deeper than {MAX_NESTING} levels"),
    "nested-600": (nested(600), f"nested deeper than {MAX_NESTING} levels"),
}
FINAL = '{"final_answer": "done"}'


def call(arguments: str) -> str:
    return '{"tool": "t", "arguments": ' + arguments + "}"


class NaiveParser:
    """Hands what ``json`` read straight to ``Action``: the types' ValueError propagates."""

    def parse(self, reply: ModelReply) -> ParsedReply:
        obj = json.loads(reply.text)
        if "final_answer" in obj:
            return FinalAnswer(text=obj["final_answer"])
        return Action(text=reply.text, tool_name=obj["tool"], tool_args=obj["arguments"])


class HelpedParser:
    """The same parser, building its action with the documented helper."""

    def parse(self, reply: ModelReply) -> ParsedReply:
        obj = json.loads(reply.text)
        if "final_answer" in obj:
            return FinalAnswer(text=obj["final_answer"])
        return action_or_feedback(reply.text, tool_name=obj["tool"], tool_args=obj["arguments"])


def seams(parser: Any, arguments: str) -> dict[str, Any]:
    return {
        "model": ScriptedModel([call(arguments), FINAL]),
        "parser": parser,
        "executor": ScriptedExecutor({}),
    }


@pytest.mark.parametrize("kind", sorted(ODD))
def test_the_helper_turns_each_refused_value_into_feedback_and_the_types_say_so(
    kind: str,
) -> None:
    arguments, told = ODD[kind]
    args = json.loads(arguments)
    with pytest.raises(ValueError, match=r"polyloop\.action_or_feedback") as refused:
        Action(text="t", tool_name="t", tool_args=args)
    assert "tool_args" in str(refused.value)
    decision = action_or_feedback("t", tool_name="t", tool_args=args)
    assert isinstance(decision, InvalidDecision)
    assert told in decision.feedback
    assert polyloop.parsers.action_or_feedback is action_or_feedback
    bundled = JsonToolCallParser().parse(ModelReply(text=call(arguments)))
    assert isinstance(bundled, InvalidDecision)
    assert told in bundled.feedback or "is not allowed in JSON" in bundled.feedback
    assert action_or_feedback("t", tool_name="t", tool_args={"x": 1.5}) == Action(
        text="t", tool_name="t", tool_args={"x": 1.5}
    )


@pytest.mark.asyncio
@pytest.mark.parametrize("parser", [HelpedParser(), JsonToolCallParser()], ids=["own", "bundled"])
@pytest.mark.parametrize("kind", sorted(ODD))
async def test_a_parser_using_the_helper_tells_the_model_and_the_run_goes_on(
    kind: str, parser: Any
) -> None:
    arguments, told = ODD[kind]
    result = await polyloop.run(agent(), "g", **seams(parser, arguments))
    assert result.stop_reason is StopReason.AGENT_FINISHED
    first = result.steps[0]
    assert not first.parse_ok
    said = first.parse_error or ""
    assert told in said or "is not allowed in JSON" in said  # the bundled parser's own words


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", sorted(ODD))
async def test_a_run_stuck_on_a_raising_parser_is_resumed_with_the_helper_or_ended_on_purpose(
    kind: str,
) -> None:
    arguments, told = ODD[kind]
    store = MemoryStore()
    with pytest.raises(ValueError, match="action_or_feedback"):
        await polyloop.run(agent(), "g", store=store, run_id="r", **seams(NaiveParser(), arguments))
    assert kinds(await store.read_log("r"))[-1] == "model_replied"
    with pytest.raises(ValueError, match="action_or_feedback"):  # every resume raises again
        await polyloop.resume("r", agent(), store=store, **seams(NaiveParser(), arguments))

    # A parser fixed to use the helper resumes it: the model is told, and finishes.
    fixed = MemoryStore()
    for record in (await store.read_log("r")).records:
        await fixed.append("r", record, sequence=len((await fixed.read_log("r")).records))
    resumed = await polyloop.resume("r", agent(), store=fixed, **seams(HelpedParser(), arguments))
    assert resumed.stop_reason is StopReason.AGENT_FINISHED
    assert resumed.steps[0].parse_error is not None
    assert told in resumed.steps[0].parse_error

    # Or the run is ended on purpose, the exception in its log.
    ended = await polyloop.resume(
        "r", agent(), store=store, end_on_parser_error=True, **seams(NaiveParser(), arguments)
    )
    assert ended.stop_reason is StopReason.PARSER_ERROR
    log = await store.read_log("r")
    assert kinds(log)[-2:] == ["step_completed", "run_finished"]
    assert log.finished is not None
    assert log.finished.stop_reason is StopReason.PARSER_ERROR
    why = log.steps[-1].step.parse_error or ""
    assert why.startswith("the decision parser raised ValueError: Action.tool_args")
    again = await polyloop.resume("r", agent(), store=store, **seams(NaiveParser(), arguments))
    assert again.stop_reason is StopReason.PARSER_ERROR  # finished: nothing is parsed again


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", sorted(ODD))
async def test_run_may_end_on_a_raising_parser_at_once(kind: str) -> None:
    arguments, _ = ODD[kind]
    store = MemoryStore()
    result = await polyloop.run(
        agent(), "g", store=store, end_on_parser_error=True, **seams(NaiveParser(), arguments)
    )
    assert result.stop_reason is StopReason.PARSER_ERROR
    assert len(result.steps) == 1
    assert not result.steps[0].parse_ok
    assert "ValueError" in (result.steps[0].parse_error or "")
    assert kinds(await store.read_log(result.run_id))[-1] == "run_finished"


@pytest.mark.asyncio
async def test_without_the_option_a_parsers_exception_still_propagates() -> None:
    class Broken(Exception):
        pass

    class Raising:
        def parse(self, reply: ModelReply) -> ParsedReply:
            raise Broken("no")

    with pytest.raises(Broken):
        await polyloop.run(agent(), "g", **seams(Raising(), "{}"))


def test_polyloop_show_says_the_run_was_ended_for_its_parser(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "runs.db"

    async def stuck_then_ended() -> None:
        async with SQLiteStore(path) as store:
            with pytest.raises(ValueError, match="action_or_feedback"):
                await polyloop.run(
                    agent(), "g", store=store, run_id="r", **seams(NaiveParser(), ODD["nan"][0])
                )
            await polyloop.resume(
                "r", agent(), store=store, end_on_parser_error=True, **seams(NaiveParser(), "{}")
            )

    asyncio.run(stuck_then_ended())
    assert main(["show", "--store", str(path), "r"]) == 0
    out = capsys.readouterr().out
    assert "stop: parser_error (0 executed actions)" in out
    assert "ended on purpose: the decision parser raised ValueError: Action.tool_args" in out
