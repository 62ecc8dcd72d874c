"""MCPExecutor keeps every ActionExecutor promise of the contract kit, against a real MCP server
(``tests/integration/mcp_server.py``) over stdio and over streamable HTTP on loopback.

Each executor is opened once per module by a pytest-asyncio fixture and closed by that
fixture's teardown: in another task than the one that opened it, and in another event loop than
the promises use — the task-ownership trap an adapter over the SDK falls into.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from polyloop import Action
from polyloop.executors import MCPExecutor
from polyloop.testing import ActionExecutorContract, ActionSamples
from tests.conftest import mcp_stdio_command, require_mcp

require_mcp()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stdio_executor() -> AsyncIterator[MCPExecutor]:
    command, *args = mcp_stdio_command()
    async with MCPExecutor.stdio(command, args) as executor:
        yield executor


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def http_executor(mcp_http_url: str) -> AsyncIterator[MCPExecutor]:
    async with MCPExecutor.http(mcp_http_url) as executor:
        yield executor


class _LookupSamples:
    @pytest.fixture
    def action_samples(self) -> ActionSamples:
        return ActionSamples(
            executes_cleanly=Action(text="lookup pi", tool_name="lookup", tool_args={"key": "pi"}),
            # the tool runs and reports an error (isError): executed, the model can correct it
            executes_but_errors=Action(
                text="lookup tau", tool_name="lookup", tool_args={"key": "tau"}
            ),
        )


class TestMCPExecutorOverStdioContract(_LookupSamples, ActionExecutorContract):
    @pytest.fixture
    def action_executor(self, stdio_executor: MCPExecutor) -> MCPExecutor:
        return stdio_executor


class TestMCPExecutorOverHttpContract(_LookupSamples, ActionExecutorContract):
    @pytest.fixture
    def action_executor(self, http_executor: MCPExecutor) -> MCPExecutor:
        return http_executor
