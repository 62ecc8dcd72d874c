"""ToolExecutor keeps every ActionExecutor promise of the contract kit."""

from __future__ import annotations

import asyncio

import pytest

from polyloop import Action, Tool, ToolRegistry
from polyloop.executors import ToolExecutor
from polyloop.testing import ActionExecutorContract, ActionSamples


async def lookup(key: str) -> str:
    await asyncio.sleep(0)  # a real suspension point, so the cancellation promise is checked
    return {"pi": "3.14159"}[key]  # an unknown key raises KeyError: an action's own error


class TestToolExecutorContract(ActionExecutorContract):
    @pytest.fixture
    def action_executor(self) -> ToolExecutor:
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
                    func=lookup,
                )
            ]
        )
        return ToolExecutor(registry)

    @pytest.fixture
    def action_samples(self) -> ActionSamples:
        return ActionSamples(
            executes_cleanly=Action(text="lookup pi", tool_name="lookup", tool_args={"key": "pi"}),
            executes_but_errors=Action(
                text="lookup tau", tool_name="lookup", tool_args={"key": "tau"}
            ),
            refused=Action(text="delete pi", tool_name="delete", tool_args={"key": "pi"}),
        )
