"""The golden-sample fields validate what they are given, and their probes' building blocks
hold at their edges."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from polyloop import Action, FinalAnswer, InvalidDecision, Message, ModelReply
from polyloop.testing import GOLDEN_VARIATIONS, ModelSamples, ParserSamples
from polyloop.testing._decision_parser._golden import (
    GOLDEN_SIZES,
    Case,
    cases_of,
    fill,
    judge,
    two_decisions,
)
from polyloop.testing._model_client._failures import golden_problems

_BASE: dict[str, Any] = {
    "action_reply": ModelReply(text="a"),
    "invalid_reply": ModelReply(text="b"),
}
_ACTION = Action(text="x", tool_name="t", tool_args={"q": "value"})


def test_golden_takes_pairs_and_stores_replies() -> None:
    samples = ParserSamples(
        **_BASE, golden=[("t value", _ACTION)], golden_variations=["whitespace"]
    )
    assert samples.golden == ((ModelReply(text="t value"), _ACTION),)
    assert samples.golden_variations == frozenset({"whitespace"})


@pytest.mark.parametrize(
    "golden",
    ["a text", {"a": _ACTION}, [("only one",)], [("t", "not a decision")], [(42, _ACTION)], 7],
)
def test_golden_refuses_anything_but_reply_decision_pairs(golden: object) -> None:
    with pytest.raises(TypeError, match=r"ParserSamples\.golden"):
        ParserSamples(**_BASE, golden=golden)  # type: ignore[arg-type]


def test_golden_variations_must_be_known_names_and_need_golden() -> None:
    with pytest.raises(ValueError, match="unknown 'sideways'"):
        ParserSamples(**_BASE, golden=[("t", _ACTION)], golden_variations={"sideways"})
    with pytest.raises(TypeError, match="set of names"):
        ParserSamples(**_BASE, golden=[("t", _ACTION)], golden_variations="whitespace")
    with pytest.raises(ValueError, match="give golden"):
        ParserSamples(**_BASE, golden_variations={"whitespace"})
    assert set(GOLDEN_VARIATIONS) == {"whitespace", "prose_before", "prose_after", "argument_text"}


def test_golden_responses_need_the_factory_and_pairs() -> None:
    messages = [Message(role="user", content="hi")]
    with pytest.raises(ValueError, match="failing_client_factory"):
        ModelSamples(messages=messages, golden_responses=[({"id": "x"}, ModelReply(text="x"))])
    with pytest.raises(TypeError, match=r"golden_responses\[0\]"):
        ModelSamples(
            messages=messages,
            failing_client_factory=lambda url: None,
            failure_bound_s=1.0,
            golden_responses=[("not a body", ModelReply(text="x"))],  # type: ignore[list-item]
        )


@pytest.mark.parametrize("size", GOLDEN_SIZES)
def test_fill_has_the_size_and_starts_and_ends_with_a_letter(size: int) -> None:
    for which in range(3):
        text = fill(size, which)
        assert len(text) == size
        if size:
            assert text[0].isalpha()
            assert text[-1].isalpha()
            assert not set(text) & set('"\\{}[]()<>`\n\r\t')


def test_argument_text_replaces_the_argument_and_the_text_where_it_shows_once() -> None:
    reply = ModelReply(text='call t {"q": "value"}')
    action = Action(text='t {"q": "value"}', tool_name="t", tool_args={"q": "value"})
    cases = cases_of(((reply, action),), frozenset({"argument_text"}), (0, 5))
    replaced = [c for c in cases if "5 characters" in c.label]
    assert replaced
    for case in replaced:
        assert isinstance(case.expected, Action)
        new = case.expected.tool_args["q"] if case.expected.tool_args else None
        assert isinstance(new, str)
        assert len(new) == 5
        assert case.reply.text == f'call t {{"q": "{new}"}}'
        assert case.expected.text == f't {{"q": "{new}"}}'
    empty = [c for c in cases if "0 characters" in c.label]
    assert empty
    assert all(c.first_or_invalid for c in empty)


def test_two_decisions_accept_the_first_or_invalid_and_name_the_second() -> None:
    reply = ModelReply(text="do value")
    action = Action(text="value", tool_name="do", tool_args={"a": "value"})
    case = next(c for c in two_decisions(((reply, action),)) if c.label.startswith("golden"))
    assert judge(lambda r: action, case) is None
    assert judge(lambda r: InvalidDecision(feedback="no"), case) is None
    second = Action(text="a", tool_name="do", tool_args={"a": "a"})  # "value" → fill(1)
    assert case.reply.text == "do value\ndo a"
    problem = judge(lambda r: second, case) or ""
    assert "it is the second decision" in problem, problem
    assert "its text and tool_args are the second's; its tool_name is the same in both" in (
        problem
    ), problem


def test_two_decisions_name_each_field_that_differs_and_how() -> None:
    # Issue 37: an Action whose text is the whole reply, with the first call's tool and
    # arguments, was told it took "the second or a blend".
    reply = ModelReply(text="do value")
    action = Action(text="value", tool_name="do", tool_args={"a": "value"})
    case = next(c for c in two_decisions(((reply, action),)) if c.label.startswith("golden"))
    whole = Action(text=case.reply.text, tool_name="do", tool_args={"a": "value"})
    problem = judge(lambda r: whole, case) or ""
    assert "blend" not in problem, problem
    assert "second" not in problem.split(":", 1)[1], problem
    assert "its text is neither decision's: its tool_args is the first's; its tool_name is " in (
        problem
    ), problem
    assert f"text differs: str {case.reply.text!r} (the whole reply)" in problem, problem
    assert "where the first has str 'value'" in problem, problem
    blend = Action(text="value", tool_name="do", tool_args={"a": case.reply.text[-1:] * 2})
    problem = judge(lambda r: blend, case) or ""
    assert "tool_args differs: dict" in problem, problem
    assert "is neither decision's" in problem, problem
    other = case.reply.text.split("\n")[-1].removeprefix("do ")
    mixed = Action(text="value", tool_name="do", tool_args={"a": other})
    problem = judge(lambda r: mixed, case) or ""
    assert "a blend of the two: its tool_args is the second's; its text is the first's" in (
        problem
    ), problem


def test_judge_matches_invalid_by_branch_and_demands_feedback() -> None:
    case = Case("c", ModelReply(text="x"), InvalidDecision(feedback="stated"))
    assert judge(lambda r: InvalidDecision(feedback="other words"), case) is None
    assert "blank feedback" in (judge(lambda r: InvalidDecision(feedback=" "), case) or "")
    assert "not an InvalidDecision" in (judge(lambda r: FinalAnswer(text="x"), case) or "")


def test_an_escaped_argument_is_not_replaced() -> None:
    reply = ModelReply(text='{"tool": "cd", "dir": "C:\\\\"}')
    action = Action(text="cd", tool_name="cd", tool_args={"dir": "C:\\"})
    cases = cases_of(((reply, action),), frozenset({"argument_text"}), (1, 5))
    assert [c.label for c in cases] == ["golden[0]"]


@pytest.mark.parametrize(
    ("responses", "where"),
    [
        ("a text", r"golden_responses must be a sequence"),
        ({"id": "x"}, r"golden_responses must be a sequence"),
        (7, r"golden_responses must be a sequence"),
        ([({"id": "x"},)], r"golden_responses\[0\] must be a \(dict"),
        ([({"id": "x"}, ModelReply(text="x")), ({"id": "y"}, "y")], r"golden_responses\[1\]"),
    ],
)
def test_golden_responses_refuse_anything_but_body_reply_pairs(
    responses: object, where: str
) -> None:
    with pytest.raises(TypeError, match=r"ModelSamples\." + where):
        ModelSamples(
            messages=[Message(role="user", content="hi")],
            failing_client_factory=lambda url: None,
            failure_bound_s=1.0,
            golden_responses=responses,  # type: ignore[arg-type]
        )


class _RefusesEveryBody:
    """A client that raises on every response it is served."""

    def __init__(self, url: str) -> None:
        self.url = url

    async def complete(self, messages: Sequence[Message]) -> ModelReply:
        raise ValueError("unexpected body")


def test_a_golden_response_the_client_raised_on_names_its_place_once() -> None:
    # Issue 37: "golden_responses[0] (call 1 on this client): golden_responses[0] (call 1 on
    # this client): complete() raised …" — the place was written twice.
    golden = [({"id": "r1", "choices": []}, ModelReply(text="x"))]
    messages = [Message(role="user", content="hi")]
    problems = asyncio.run(golden_problems(_RefusesEveryBody, 5.0, messages, golden))
    assert problems == [
        "golden_responses[0] (call 1 on this client): complete() raised ValueError: unexpected body"
    ]
