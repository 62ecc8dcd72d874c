"""Every timeout argument of a bundled executor or model follows one rule with one error text:
a finite number of seconds > 0, or ``None`` for no limit (issue 24). Python and Jupyter
executors used to accept ``inf`` where MCP refused it."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

from polyloop._base._timeout import checked_timeout_s, shown_timeout
from tests.conftest import require_extra

BAD = [math.inf, -math.inf, math.nan, 0, 0.0, -1, True, False, "5", [5]]


def _python(**kw: Any) -> object:
    from polyloop.executors import PythonExecutor

    return PythonExecutor(**kw)


def _jupyter(**kw: Any) -> object:
    from polyloop.executors import JupyterExecutor

    return JupyterExecutor(**kw)


def _mcp(**kw: Any) -> object:
    require_extra("mcp")
    from polyloop.executors import MCPExecutor

    return MCPExecutor.http("http://127.0.0.1:9", **kw)


def _openai(**kw: Any) -> object:
    from polyloop.models import OpenAIChatModel

    return OpenAIChatModel("m", api_key="k", **kw)


SITES: list[tuple[Callable[..., object], str]] = [
    (_python, "timeout_s"),
    (_python, "start_timeout_s"),
    (_jupyter, "timeout_s"),
    (_jupyter, "start_timeout_s"),
    (_mcp, "read_timeout_s"),
    (_mcp, "open_timeout_s"),
    (_openai, "timeout_s"),
    (_openai, "deadline_s"),
]


def _expected(name: str, value: object) -> str:
    return f"{name} must be a finite number > 0 or None (no limit), got {value!r}"


@pytest.mark.parametrize("value", BAD, ids=repr)
@pytest.mark.parametrize(("build", "name"), SITES, ids=lambda s: getattr(s, "__name__", s))
def test_every_timeout_argument_refuses_the_same_values_with_the_same_text(
    build: Callable[..., object], name: str, value: object
) -> None:
    with pytest.raises(ValueError, match=f"^{name} must be") as caught:
        build(**{name: value})
    assert str(caught.value) == _expected(name, value)


@pytest.mark.parametrize(("build", "name"), SITES, ids=lambda s: getattr(s, "__name__", s))
def test_every_timeout_argument_takes_none_for_no_limit_and_a_finite_number(
    build: Callable[..., object], name: str
) -> None:
    if build is _jupyter:
        require_extra("jupyter")
    if (build, name) != (_openai, "deadline_s"):  # there None asks for the derived default
        assert getattr(build(**{name: None}), name) is None
    assert getattr(build(**{name: 2}), name) == 2.0


def test_the_rule_itself() -> None:
    assert checked_timeout_s("t", 1) == 1.0
    assert type(checked_timeout_s("t", 1)) is float
    assert checked_timeout_s("t", 1e-9) == 1e-9
    assert checked_timeout_s("t", None) is None
    for value in BAD:
        with pytest.raises(ValueError, match="t must be a finite number > 0 or None"):
            checked_timeout_s("t", value)
    assert (shown_timeout(None), shown_timeout(30.0), shown_timeout(0.25)) == ("none", "30", "0.25")


@pytest.mark.asyncio
async def test_a_python_executor_without_a_time_limit_runs_code() -> None:
    from polyloop.executors import PythonExecutor
    from polyloop.types import Action, ActionStatus

    async with PythonExecutor(timeout_s=None, start_timeout_s=None) as executor:
        outcome = await executor.execute(Action(text="print(6 * 7)"))
        assert repr(executor).startswith("PythonExecutor(timeout_s=none,")
    assert (outcome.status, outcome.observation) == (ActionStatus.EXECUTED, "42\n")
