"""JupyterExecutor keeps every ActionExecutor promise of the contract kit (a real ipykernel)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from polyloop import Action
from polyloop.executors import JupyterExecutor
from polyloop.testing import ActionExecutorContract, ActionSamples


class TestJupyterExecutorContract(ActionExecutorContract):
    @pytest_asyncio.fixture
    async def action_executor(  # type: ignore[override]  # pytest types a fixture as an object
        self,
    ) -> AsyncIterator[JupyterExecutor]:
        async with JupyterExecutor("python3", timeout_s=10) as executor:
            yield executor

    @pytest.fixture
    def action_samples(self) -> ActionSamples:
        return ActionSamples(
            executes_cleanly=Action(text="total = sum(range(10))\nprint(total)"),
            executes_but_errors=Action(text="1 / 0"),
        )
