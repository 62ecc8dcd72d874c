"""ToolExecutor keeps every ActionExecutor promise of the contract kit.

Its tool reads constants through a small connection the fixture owns; ``break_environment``
closes that connection, after which the tool raises ``ToolEnvironmentError`` and ``execute``
must return ``env_error``.
"""

from __future__ import annotations

import asyncio

import pytest

from polyloop import Action, Tool, ToolEnvironmentError, ToolRegistry
from polyloop.executors import ToolExecutor
from polyloop.testing import ActionExecutorContract, ActionSamples


class Constants:
    """A connection to a table of constants: usable until closed, as a database handle is."""

    def __init__(self) -> None:
        self.open = True

    async def lookup(self, key: str) -> str:
        await asyncio.sleep(0)  # a real suspension point, so the cancellation promise is checked
        if not self.open:
            raise ToolEnvironmentError("the constants connection is closed")
        return {"pi": "3.14159"}[key]  # an unknown key raises KeyError: an action's own error

    def close(self) -> None:
        self.open = False


class TestToolExecutorContract(ActionExecutorContract):
    @pytest.fixture
    def constants(self) -> Constants:
        return Constants()

    @pytest.fixture
    def action_executor(self, constants: Constants) -> ToolExecutor:
        registry = ToolRegistry(
            [
                Tool(
                    name="lookup",
                    description="look a constant up",
                    parameters={
                        "type": "object",
                        "properties": {"key": {"type": "string"}},
                        "required": ["key"],
                    },
                    func=constants.lookup,
                )
            ]
        )
        return ToolExecutor(registry)

    @pytest.fixture
    def action_samples(self, constants: Constants) -> ActionSamples:
        async def close_the_connection(executor: ToolExecutor) -> None:
            constants.close()

        return ActionSamples(
            executes_cleanly=Action(text="lookup pi", tool_name="lookup", tool_args={"key": "pi"}),
            executes_but_errors=Action(
                text="lookup tau", tool_name="lookup", tool_args={"key": "tau"}
            ),
            refused=Action(text="delete pi", tool_name="delete", tool_args={"key": "pi"}),
            break_environment=close_the_connection,
        )
