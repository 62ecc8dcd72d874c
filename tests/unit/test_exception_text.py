"""``exception_text``: safe for any exception an implementation or a model-written tool raises."""

from __future__ import annotations

import importlib

import pytest

from polyloop import Action, ActionStatus, Tool, ToolRegistry
from polyloop._base._exception_text import exception_message, exception_text
from polyloop.executors import ToolExecutor


class RaisingStr(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no")


class NotAStr(Exception):
    def __str__(self) -> str:
        return 42  # type: ignore[return-value]


def test_type_and_message() -> None:
    assert exception_text(ValueError("bad value")) == "ValueError: bad value"


def test_an_empty_message_is_just_the_type() -> None:
    assert exception_text(KeyboardInterrupt()) == "KeyboardInterrupt"


@pytest.mark.parametrize("error", [RaisingStr("x"), NotAStr("x")])
def test_a_message_that_cannot_be_rendered_still_names_the_type(error: Exception) -> None:
    text = exception_text(error)
    assert text.startswith(f"{type(error).__name__}: <")


def test_a_huge_message_is_cut_and_says_how_much() -> None:
    text = exception_text(ValueError("x" * 1_000_000), limit=100)
    assert len(text) < 140
    assert text.endswith(f"… [{len('ValueError: ') + 1_000_000 - 100} more characters]")


def test_control_characters_are_escaped_tab_and_newline_kept() -> None:
    text = exception_text(ValueError("a\x1b[31mb\x00c\td\ne\x7f\x85"))
    assert text == "ValueError: a\\x1b[31mb\\x00c\td\ne\\x7f\\x85"


def test_an_exception_group_is_shown_by_its_first_leaf() -> None:
    group = ExceptionGroup("outer", [ExceptionGroup("inner", [OSError("gone")]), ValueError()])
    assert exception_text(group) == "OSError: gone"


def test_lone_surrogates_pass_through_as_text() -> None:
    assert exception_text(ValueError("\ud800")) == "ValueError: \ud800"


def test_no_limit_never_cuts_and_still_escapes() -> None:
    text = exception_text(ValueError("x" * 10_000 + "\x1b"), limit=None)
    assert text == "ValueError: " + "x" * 10_000 + "\\x1b"


def test_the_message_alone_follows_the_same_rules() -> None:
    assert exception_message(ValueError("bad\x07")) == "bad\\x07"
    assert exception_message(ValueError()) == ""
    assert exception_message(RaisingStr()) == "<the exception's message could not be rendered>"
    assert exception_message(ValueError("y" * 50), limit=10) == "y" * 10 + "… [40 more characters]"
    group = ExceptionGroup("outer", [KeyError("inner")])
    assert exception_message(group) == "'inner'"


class HugeAndControl(ValueError):
    def __str__(self) -> str:
        return "\x1b[31m" + "z" * 5_000


class RaisingValueError(ValueError):
    def __str__(self) -> str:
        raise RuntimeError("no")


@pytest.mark.asyncio
async def test_a_tool_whose_exception_cannot_be_rendered_is_still_executed() -> None:
    def fail() -> None:
        raise RaisingStr

    executor = ToolExecutor(ToolRegistry([Tool(name="fail", description="", func=fail)]))
    outcome = await executor.execute(Action(text="", tool_name="fail", tool_args={}))
    assert outcome.status is ActionStatus.EXECUTED
    assert outcome.observation == "RaisingStr: <the exception's message could not be rendered>"


@pytest.mark.asyncio
async def test_a_tool_error_is_escaped_and_cut_by_the_observation_cap_alone() -> None:
    def fail() -> None:
        raise HugeAndControl

    registry = ToolRegistry([Tool(name="fail", description="", func=fail)])
    outcome = await ToolExecutor(registry, max_observation_chars=100).execute(
        Action(text="", tool_name="fail", tool_args={})
    )
    assert outcome.status is ActionStatus.EXECUTED
    assert outcome.observation.startswith("HugeAndControl: \\x1b[31mzzz")
    assert outcome.observation_truncated_chars == len("HugeAndControl: \\x1b[31m") + 5_000 - 100


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("error", "observation"),
    [
        (RaisingValueError(), "error: RaisingValueError: <the exception's message could not be "),
        (ZeroDivisionError("division by zero"), "error: ZeroDivisionError: division by zero"),
        (HugeAndControl(), "error: HugeAndControl: \\x1b[31mzzz"),
    ],
)
async def test_the_demo_calculator_shows_any_error_as_an_executed_observation(
    monkeypatch: pytest.MonkeyPatch, error: Exception, observation: str
) -> None:
    demo = importlib.import_module("polyloop.cli._demo")  # polyloop.cli._demo is a function

    def evaluate(expression: str) -> float:
        raise error

    monkeypatch.setattr(demo, "evaluate", evaluate)
    outcome = await demo.CalculatorExecutor().execute(
        Action(text="", tool_name="calc", tool_args={"input": "1/0"})
    )
    assert outcome.status is ActionStatus.EXECUTED
    assert outcome.observation.startswith(observation)
    assert len(outcome.observation) < 2_100
