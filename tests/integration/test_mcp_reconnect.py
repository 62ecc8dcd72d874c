"""MCPExecutor after a lost connection, against a real MCP server over stdio and over streamable
HTTP on loopback: the call that finds the session lost returns ``env_error``, every call while
the server is down returns ``env_error`` within a bounded time, and the first call after the
server is back opens a new session — recorded in the outcome's ``detail``, with the tools listed
again and compared.

The server is taken down and brought back from outside (``mcp_control.py``): over stdio by a
gate the server process cannot pass, over HTTP by killing it and starting it on the same port.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from polyloop import Action, ActionOutcome, ActionStatus
from polyloop.executors import MCPExecutor
from tests.conftest import MCP_SERVER, require_mcp
from tests.integration.mcp_control import Server

require_mcp()

TRANSPORTS = ["stdio", "http"]
#: How long a call may take while the server is down (three quick attempts, backoff 0.05 s).
DOWN_BOUND_S = 20.0


def act(tool: str, **args: Any) -> Action:
    return Action(text=f"{tool} {args}", tool_name=tool, tool_args=args)


@contextlib.asynccontextmanager
async def opened(transport: str, tmp_path: Path, **options: Any) -> AsyncIterator[Any]:
    server = Server(transport, tmp_path / "down")
    await server.up()
    try:
        async with server.executor(reconnect_backoff_s=0.05, **options) as executor:
            yield server, executor
    finally:
        server.stop()


async def timed(executor: MCPExecutor, action: Action) -> tuple[ActionOutcome, float]:
    started = time.monotonic()
    outcome = await asyncio.wait_for(executor.execute(action), 120)
    return outcome, time.monotonic() - started


@pytest.mark.asyncio
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_server_killed_and_restarted_is_reconnected_on_the_next_call(
    transport: str, tmp_path: Path
) -> None:
    async with opened(transport, tmp_path) as (server, executor):
        await server.down(executor)
        lost = await executor.execute(act("lookup", key="pi"))
        await server.up()
        back = await executor.execute(act("lookup", key="pi"))
        after = await executor.execute(act("lookup", key="e"))

    assert lost.status is ActionStatus.ENV_ERROR
    assert lost.detail is not None
    assert "reconnected" not in lost.detail
    assert back.status is ActionStatus.EXECUTED
    assert back.observation == "3.14159"
    assert back.detail is not None
    assert back.detail["reconnected"]["attempts"] == 1
    assert back.detail["reconnected"]["lost"]  # why the old session ended
    assert "tools_changed" not in back.detail  # the same server: the same tools
    assert after == ActionOutcome(status=ActionStatus.EXECUTED, observation="2.71828")


@pytest.mark.asyncio
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_every_call_while_the_server_is_down_is_an_env_error_without_hanging(
    transport: str, tmp_path: Path
) -> None:
    async with opened(transport, tmp_path) as (server, executor):
        await server.down(executor)
        calls = [await timed(executor, act("lookup", key="pi")) for _ in range(4)]
        await server.up()
        back = await executor.execute(act("lookup", key="pi"))

    assert [outcome.status for outcome, _ in calls] == [ActionStatus.ENV_ERROR] * 4
    assert all(seconds < DOWN_BOUND_S for _, seconds in calls), calls
    for outcome, _ in calls[1:]:  # the first found the session lost; the others tried again
        assert outcome.detail is not None
        error = outcome.detail["error"]
        assert error["kind"] == "reconnect_failed"
        assert error["attempts"] == 3
        assert error["lost"]
        assert error["message"]
        assert "3 attempts to reconnect failed" in outcome.observation
    assert back.status is ActionStatus.EXECUTED
    assert back.detail is not None
    assert back.detail["reconnected"]["attempts"] == 1


@pytest.mark.asyncio
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_changed_tool_list_after_reconnecting_is_said_and_applied(
    transport: str, tmp_path: Path
) -> None:
    async with opened(transport, tmp_path) as (server, executor):
        await executor.execute(act("grow", name="shout"))  # only this server process has it
        for _ in range(400):  # the server says its tool list changed; a later call lists again
            if "shout" in executor.registry:
                break
            await executor.execute(act("lookup", key="e"))
            await asyncio.sleep(0.05)
        assert (await executor.execute(act("shout", text="hi"))).observation == "hi"
        assert "shout" in executor.registry
        await server.down(executor)
        await executor.execute(act("lookup", key="pi"))
        await server.up()
        back = await executor.execute(act("lookup", key="pi"))
        gone = await executor.execute(act("shout", text="hi"))

    assert back.status is ActionStatus.EXECUTED
    assert back.detail is not None
    assert back.detail["tools_changed"] == {"added": [], "removed": ["shout"], "changed": []}
    assert "shout" not in executor.registry
    assert gone.status is ActionStatus.NOT_EXECUTED  # the new server does not list it


@pytest.mark.asyncio
async def test_concurrent_calls_after_a_loss_open_one_new_session(tmp_path: Path) -> None:
    async with opened("stdio", tmp_path) as (server, executor):
        await server.down(executor)
        await executor.execute(act("lookup", key="pi"))
        await server.up()
        outcomes = await asyncio.gather(
            *(executor.execute(act("pid")) for _ in range(5)), return_exceptions=True
        )

    assert all(isinstance(o, ActionOutcome) for o in outcomes), outcomes
    good = [o for o in outcomes if isinstance(o, ActionOutcome)]
    assert [o.status for o in good] == [ActionStatus.EXECUTED] * 5
    assert len({o.observation for o in good}) == 1  # one server process served them all
    assert sum(1 for o in good if o.detail and "reconnected" in o.detail) == 1


@pytest.mark.asyncio
async def test_reconnect_attempts_zero_keeps_a_lost_session_dead(tmp_path: Path) -> None:
    async with opened("stdio", tmp_path, reconnect_attempts=0) as (server, executor):
        await server.down(executor)
        await server.up()  # the server could start again; the executor must not try
        outcomes = [await executor.execute(act("lookup", key="pi")) for _ in range(3)]

    assert [o.status for o in outcomes] == [ActionStatus.ENV_ERROR] * 3
    assert outcomes[-1].detail is not None
    assert outcomes[-1].detail["error"]["kind"] == "reconnect_failed"
    assert "reconnecting is off" in outcomes[-1].observation


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"reconnect_attempts": -1}, "reconnect_attempts must be an int in"),
        ({"reconnect_attempts": 101}, "reconnect_attempts must be an int in"),
        ({"reconnect_attempts": True}, "reconnect_attempts must be an int in"),
        ({"reconnect_attempts": 2.0}, "reconnect_attempts must be an int in"),
        ({"reconnect_attempts": "3"}, "reconnect_attempts must be an int in"),
        ({"reconnect_backoff_s": -0.1}, "reconnect_backoff_s must be a number"),
        ({"reconnect_backoff_s": math.nan}, "reconnect_backoff_s must be a number"),
        ({"reconnect_backoff_s": math.inf}, "reconnect_backoff_s must be a number"),
        ({"reconnect_backoff_s": 61}, "reconnect_backoff_s must be a number"),
        ({"reconnect_backoff_s": False}, "reconnect_backoff_s must be a number"),
        ({"reconnect_backoff_s": "0.2"}, "reconnect_backoff_s must be a number"),
    ],
)
def test_reconnect_options_are_checked(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        MCPExecutor.stdio(sys.executable, [str(MCP_SERVER)], **options)


def test_reconnect_options_are_kept_by_combine() -> None:
    one = MCPExecutor.stdio(sys.executable, [str(MCP_SERVER)], reconnect_attempts=7)
    combined = MCPExecutor.combine({"a": one})
    assert combined._members[0].endpoint.reconnect_attempts == 7
