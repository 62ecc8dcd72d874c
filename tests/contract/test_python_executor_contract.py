"""PythonExecutor keeps every ActionExecutor promise of the contract kit (real child processes).

It has no refusal path (any text is code to run), which it declares with ``never_refuses``; its
environment is broken by killing the session from outside between two actions: the next
``execute`` must return ``env_error`` (the session's state is lost), not start afresh quietly.
"""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from polyloop import Action
from polyloop.executors import PythonExecutor
from polyloop.testing import ActionExecutorContract, ActionSamples


async def kill_the_session(executor: PythonExecutor) -> None:
    """Start the session (with state worth losing), then kill it from outside."""
    await executor.execute(Action(text="started = True"))
    assert executor.pid is not None
    os.kill(executor.pid, signal.SIGKILL)


class TestPythonExecutorContract(ActionExecutorContract):
    @pytest_asyncio.fixture
    async def action_executor(  # type: ignore[override]  # pytest types a fixture as an object
        self, tmp_path: Path
    ) -> AsyncIterator[PythonExecutor]:
        workdir = tmp_path / "session"
        workdir.mkdir()
        async with PythonExecutor(timeout_s=10, cwd=workdir) as executor:
            yield executor

    @pytest.fixture
    def action_samples(self) -> ActionSamples:
        return ActionSamples(
            executes_cleanly=Action(text="total = sum(range(10))\nprint(total)"),
            executes_but_errors=Action(text="1 / 0"),
            never_refuses=True,
            break_environment=kill_the_session,
        )
