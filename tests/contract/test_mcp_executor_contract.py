"""MCPExecutor keeps every ActionExecutor promise of the contract kit, against a real MCP server
(``tests/integration/mcp_server.py``) over stdio and over streamable HTTP on loopback.

Each executor is opened once per module by a pytest-asyncio fixture and closed by that
fixture's teardown: in another task than the one that opened it, and in another event loop than
the promises use — the task-ownership trap an adapter over the SDK falls into.

The opt-ins: ``refused`` is a call the executor must not send (an unknown tool over stdio,
arguments that break the published schema over HTTP); ``break_environment`` kills the server
process from outside (SIGKILL). That promise gets an executor and a server of its own, so the
kill cannot reach the shared ones the other promises use.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from polyloop import Action, ActionStatus
from polyloop.executors import MCPExecutor
from polyloop.testing import ActionExecutorContract, ActionSamples
from tests.conftest import mcp_http_server, mcp_stdio_command, require_mcp

require_mcp()

#: The promise whose hook kills the server: it must not kill a shared one.
_KILLS_THE_SERVER = "test_failure_is_a_return_value"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stdio_executor() -> AsyncIterator[MCPExecutor]:
    command, *args = mcp_stdio_command()
    async with MCPExecutor.stdio(command, args) as executor:
        yield executor


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def http_executor(mcp_http_url: str) -> AsyncIterator[MCPExecutor]:
    async with MCPExecutor.http(mcp_http_url) as executor:
        yield executor


def _dead(pid: int) -> bool:
    """Whether ``pid`` is gone or a zombie (killed, not yet reaped by its parent)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in "ZX"
    except (FileNotFoundError, ProcessLookupError):
        return True


async def kill_the_server(executor: MCPExecutor) -> None:
    """Ask the server its process id, then kill it from outside and wait until it is dead."""
    outcome = await executor.execute(Action(text="pid", tool_name="pid", tool_args={}))
    assert outcome.status is ActionStatus.EXECUTED, outcome
    pid = int(outcome.observation)
    assert pid != os.getpid()
    os.kill(pid, signal.SIGKILL)
    for _ in range(1000):  # SIGKILL is delivered asynchronously
        if _dead(pid):
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"the MCP server {pid} outlived SIGKILL by 10 s")


def _call(name: str, **args: object) -> Action:
    return Action(text=f"{name} {args}", tool_name=name, tool_args=args)


#: Calls the executor must not send, checked against the published schemas before sending (an
#: extra argument is not among them: the published schemas allow additional properties).
_MORE_REFUSED = (
    _call("lookup"),  # a required argument missing
    _call("lookup", key=3),  # the wrong type
)


def _samples(refused: Action, *more_refused: Action) -> ActionSamples:
    return ActionSamples(
        executes_cleanly=Action(text="lookup pi", tool_name="lookup", tool_args={"key": "pi"}),
        # the tool runs and reports an error (isError): executed, the model can correct it
        executes_but_errors=Action(text="lookup tau", tool_name="lookup", tool_args={"key": "tau"}),
        refused=refused,
        more_refused=(*more_refused, *_MORE_REFUSED),
        break_environment=kill_the_server,
    )


class TestMCPExecutorOverStdioContract(ActionExecutorContract):
    @pytest_asyncio.fixture
    async def action_executor(  # type: ignore[override]  # pytest types a fixture as an object
        self, request: pytest.FixtureRequest, stdio_executor: MCPExecutor
    ) -> AsyncIterator[MCPExecutor]:
        if request.node.originalname != _KILLS_THE_SERVER:
            yield stdio_executor
            return
        command, *args = mcp_stdio_command()
        async with MCPExecutor.stdio(command, args) as executor:
            yield executor

    @pytest.fixture
    def action_samples(self) -> ActionSamples:
        return _samples(_call("delete", key="pi"), _call("add", a=1, b=5000))


class TestMCPExecutorOverHttpContract(ActionExecutorContract):
    @pytest_asyncio.fixture
    async def action_executor(  # type: ignore[override]  # pytest types a fixture as an object
        self, request: pytest.FixtureRequest, http_executor: MCPExecutor
    ) -> AsyncIterator[MCPExecutor]:
        if request.node.originalname != _KILLS_THE_SERVER:
            yield http_executor
            return
        with mcp_http_server() as (url, _):
            async with MCPExecutor.http(url) as executor:
                yield executor

    @pytest.fixture
    def action_samples(self) -> ActionSamples:
        # b lies in [-1000, 1000] in the published schema: the call must not be sent
        return _samples(_call("add", a=1, b=5000), _call("delete", key="pi"))
