"""JupyterExecutor keeps every ActionExecutor promise of the contract kit (a real ipykernel).

Like PythonExecutor it has no refusal path (any text is code to run), declared with
``never_refuses``; its environment is broken by killing the kernel from outside between two
actions: the next ``execute`` must return ``env_error`` (the kernel's state is lost).
"""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from polyloop import Action
from polyloop.executors import JupyterExecutor
from polyloop.testing import ActionExecutorContract, ActionSamples


async def kill_the_kernel(executor: JupyterExecutor) -> None:
    """Start the kernel (with state worth losing), then kill it from outside."""
    await executor.execute(Action(text="started = True"))
    assert executor.pid is not None
    os.kill(executor.pid, signal.SIGKILL)


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
            never_refuses=True,
            break_environment=kill_the_kernel,
        )
