"""A tool function reports a broken environment by raising ``ToolEnvironmentError`` (issue #11)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import polyloop
from polyloop import Action, ActionStatus, StopReason, Tool, ToolEnvironmentError, ToolRegistry
from polyloop.executors import ToolExecutor
from polyloop.models import ScriptedModel
from polyloop.parsers import JsonToolCallParser
from polyloop.stores import MemoryStore
from tests.unit._doubles import agent

pytestmark = pytest.mark.asyncio


class DatabaseGone(ToolEnvironmentError):
    """A downstream subclass: still an environment error."""


def sync_query(sql: str) -> str:
    raise ToolEnvironmentError(f"the database is unreachable (while running {sql!r})")


async def async_query(sql: str) -> str:
    await asyncio.sleep(0)
    raise DatabaseGone("connection reset by peer")


def bad_query(sql: str) -> str:
    raise ValueError(f"syntax error near {sql!r}")


def silent(sql: str) -> str:
    raise ToolEnvironmentError()


SQL = {"type": "object", "properties": {"sql": {"type": "string"}}, "required": ["sql"]}
REGISTRY = ToolRegistry(
    Tool(name=func.__name__, description="", parameters=SQL, func=func)
    for func in (sync_query, async_query, bad_query, silent)
)


async def outcome_of(name: str, **options: Any) -> Any:
    executor = ToolExecutor(REGISTRY, **options)
    return await executor.execute(Action(text=name, tool_name=name, tool_args={"sql": "SELECT 1"}))


@pytest.mark.parametrize(
    ("name", "observation"),
    [
        ("sync_query", "the database is unreachable (while running 'SELECT 1')"),
        ("async_query", "connection reset by peer"),
        ("silent", "ToolEnvironmentError"),  # no message: at least say what was raised
    ],
)
async def test_a_tool_raising_tool_environment_error_is_an_env_error_with_its_message(
    name, observation
):
    outcome = await outcome_of(name)
    assert outcome.status is ActionStatus.ENV_ERROR
    assert outcome.observation == observation


async def test_any_other_exception_stays_an_executed_observation():
    outcome = await outcome_of("bad_query")
    assert (outcome.status, outcome.observation) == (
        ActionStatus.EXECUTED,
        "ValueError: syntax error near 'SELECT 1'",
    )


async def test_a_long_environment_message_is_truncated_like_any_observation():
    outcome = await outcome_of("sync_query", max_observation_chars=10)
    assert outcome.status is ActionStatus.ENV_ERROR
    assert outcome.observation.startswith("the databa\n[... ")
    assert (
        outcome.observation_truncated_chars
        == len("the database is unreachable (while running 'SELECT 1')") - 10
    )


async def test_a_run_whose_tool_reports_its_environment_gone_stops_env_error():
    call = '{"tool": "async_query", "arguments": {"sql": "SELECT 1"}}'
    store = MemoryStore()
    result = await polyloop.run(
        agent(tools=REGISTRY), "count the rows", model=ScriptedModel([call, call]),
        parser=JsonToolCallParser(), executor=ToolExecutor(REGISTRY), store=store,
    )  # fmt: skip
    assert result.stop_reason is StopReason.ENV_ERROR
    assert [step.action_status for step in result.steps] == [ActionStatus.ENV_ERROR]
    logged = (await store.read_log(result.run_id)).steps[-1]
    assert logged.executor_observation == "connection reset by peer"
    assert logged.step.observation_is_synthetic is True
