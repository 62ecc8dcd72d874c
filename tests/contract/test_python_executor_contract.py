"""PythonExecutor keeps every ActionExecutor promise of the contract kit (real child processes).

It has no refusal path (any text is code to run), which it declares with ``never_refuses``; its
environment is broken by killing the session from outside between two actions and moving its
working directory away: the next ``execute`` must return ``env_error`` (the session's state is
lost), not start afresh quietly, and so must every one after it while no new session can start
there. ``restore_environment`` moves the directory back: the next action gets a new session.
The failing samples raise different exception types; ``echo`` prints through the cap.
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

#: The observation cap of the executor under test (the echo sample prints past it).
CAP = 1000


def _away(workdir: str) -> str:
    return workdir + ".away"


async def kill_the_session(executor: PythonExecutor) -> None:
    """Start the session (with state worth losing), kill it from outside, and move its working
    directory away so that no new session can start until it is restored."""
    await executor.execute(Action(text="started = True"))
    assert executor.pid is not None
    os.kill(executor.pid, signal.SIGKILL)
    workdir = os.fspath(str(executor.cwd))
    os.rename(workdir, _away(workdir))


async def restore_the_workdir(executor: PythonExecutor) -> None:
    workdir = os.fspath(str(executor.cwd))
    os.rename(_away(workdir), workdir)


class TestPythonExecutorContract(ActionExecutorContract):
    @pytest_asyncio.fixture
    async def action_executor(  # type: ignore[override]  # pytest types a fixture as an object
        self, tmp_path: Path
    ) -> AsyncIterator[PythonExecutor]:
        workdir = tmp_path / "session"
        workdir.mkdir()
        async with PythonExecutor(timeout_s=10, cwd=workdir, max_observation_chars=CAP) as executor:
            yield executor

    @pytest.fixture
    def action_samples(self) -> ActionSamples:
        return ActionSamples(
            executes_cleanly=Action(text="total = sum(range(10))\nprint(total)"),
            executes_but_errors=Action(text="1 / 0"),
            more_executes_but_errors=(
                Action(text="len(5)"),  # TypeError
                Action(text="int('five')"),  # ValueError
                Action(text="None.real_part"),  # AttributeError
            ),
            never_refuses=True,
            break_environment=kill_the_session,
            restore_environment=restore_the_workdir,
            echo=lambda text: Action(text=f"print({text!r}, end='')"),
            truncates_at=CAP,
            keeps_printing=lambda marker: Action(
                text=f"import time\nfor _ in range(300):\n    print({marker!r}, flush=True)\n"
                "    time.sleep(0.01)"
            ),
        )
