"""ToolExecutor keeps every ActionExecutor promise of the contract kit.

Its tools read constants through a small connection the fixture owns; ``break_environment``
closes that connection, after which the tools raise ``ToolEnvironmentError`` and ``execute``
must return ``env_error`` until ``restore_environment`` opens it again. The failing samples
raise ``KeyError``, ``TypeError``, ``ValueError`` and ``AttributeError`` in the tools' own code
(all ``executed``); the refused ones name no such tool or break the published schema (all
``not_executed``); ``echo`` runs through the executor's observation cap; ``ticker`` is the long
action the cancelled-action probe cancels mid-way.
"""

from __future__ import annotations

import asyncio
from typing import Any

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

    async def describe(self, key: str, digits: int) -> str:
        value: Any = await self.lookup(key)
        if digits < 0:
            raise ValueError(f"digits must be >= 0, got {digits}")
        if digits > 5:
            return str(value + digits)  # the tool's own bug: str + int, a TypeError
        return f"{key} = {value[: digits + 2]}"

    async def unit(self, key: str) -> str:
        value: Any = await self.lookup(key)
        return str(value.unit)  # the tool's own bug: a str has no unit, an AttributeError

    async def echo(self, text: str) -> str:
        await self.lookup("pi")
        return text

    async def ticker(self, marker: str) -> str:
        """Prints ``marker`` every 10 ms for 3 s (the cancelled-action probe's long action)."""
        for _ in range(300):
            print(marker)
            await asyncio.sleep(0.01)
        return marker

    def close(self) -> None:
        self.open = False

    def reopen(self) -> None:
        self.open = True


#: The observation cap of the executor under test (the echo sample runs past it).
CAP = 500


def _tool(name: str, func: object, **properties: object) -> Tool:
    return Tool(
        name=name,
        description=f"{name} a constant",
        parameters={
            "type": "object",
            "properties": properties,
            "required": list(properties),
            "additionalProperties": False,
        },
        func=func,  # type: ignore[arg-type]
    )


class TestToolExecutorContract(ActionExecutorContract):
    @pytest.fixture
    def constants(self) -> Constants:
        return Constants()

    @pytest.fixture
    def action_executor(self, constants: Constants) -> ToolExecutor:
        key = {"type": "string"}
        registry = ToolRegistry(
            [
                _tool("lookup", constants.lookup, key=key),
                _tool("describe", constants.describe, key=key, digits={"type": "integer"}),
                _tool("unit", constants.unit, key=key),
                _tool("echo", constants.echo, text={"type": "string"}),
                _tool("ticker", constants.ticker, marker={"type": "string"}),
            ]
        )
        return ToolExecutor(registry, max_observation_chars=CAP)

    @pytest.fixture
    def action_samples(self, constants: Constants) -> ActionSamples:
        async def close_the_connection(executor: ToolExecutor) -> None:
            constants.close()

        async def reopen_the_connection(executor: ToolExecutor) -> None:
            constants.reopen()

        def call(name: str, **args: object) -> Action:
            return Action(text=f"{name} {args}", tool_name=name, tool_args=args)

        return ActionSamples(
            executes_cleanly=call("lookup", key="pi"),
            executes_but_errors=call("lookup", key="tau"),  # KeyError
            more_executes_but_errors=(
                call("describe", key="pi", digits=9),  # TypeError in the tool's code
                call("describe", key="pi", digits=-1),  # ValueError
                call("unit", key="pi"),  # AttributeError
            ),
            refused=call("delete", key="pi"),
            more_refused=(
                call("lookup"),  # a required argument missing
                call("lookup", key="pi", digits=2),  # an argument the tool does not take
                call("describe", key="pi", digits="two"),  # the wrong type
            ),
            break_environment=close_the_connection,
            restore_environment=reopen_the_connection,
            echo=lambda text: call("echo", text=text),
            truncates_at=CAP,
            keeps_printing=lambda marker: call("ticker", marker=marker),
        )
