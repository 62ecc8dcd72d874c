"""JupyterExecutor keeps every ActionExecutor promise of the contract kit (a real ipykernel).

Like PythonExecutor it has no refusal path (any text is code to run), declared with
``never_refuses``. Its environment is broken by killing the kernel from outside between two
actions and moving its working directory away: the next ``execute`` must return ``env_error``
(the kernel's state is lost), and the ones after it, which cannot start a kernel there, must
return ``env_error`` too — the break lasts (``break_lasts``) until ``restore_environment`` moves
the directory back, after which the executor starts a new kernel. ``echo`` writes its text to
standard output without a newline (``sys.stdout.write``, not ``print``'s ``end``, which an
executor may ignore), against a cap of ``_CAP`` characters (``truncates_at``).
"""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from polyloop import Action
from polyloop.executors import JupyterExecutor
from polyloop.testing import ActionExecutorContract, ActionSamples


async def kill_the_kernel(executor: JupyterExecutor) -> None:
    """Start the kernel (with state worth losing), kill it from outside, and move its working
    directory away so that no new kernel can start for the rest of the test."""
    await executor.execute(Action(text="started = True"))
    assert executor.pid is not None
    assert executor.cwd is not None
    os.kill(executor.pid, signal.SIGKILL)
    os.rename(executor.cwd, executor.cwd + ".away")


async def move_the_directory_back(executor: JupyterExecutor) -> None:
    """Undo ``kill_the_kernel``: a new kernel can start in the working directory again."""
    assert executor.cwd is not None
    os.rename(executor.cwd + ".away", executor.cwd)


def echo(text: str) -> Action:
    """Code whose whole output is ``text``; the value of the last line is ``None``, so the
    kernel shows no result after it."""
    return Action(text=f"import sys\n_ = sys.stdout.write({text!r})\nNone")


#: The observation cap of the executor (``truncates_at``).
_CAP = 4_096


class TestJupyterExecutorContract(ActionExecutorContract):
    @pytest_asyncio.fixture
    async def action_executor(  # type: ignore[override]  # pytest types a fixture as an object
        self, tmp_path: Path
    ) -> AsyncIterator[JupyterExecutor]:
        workdir = tmp_path / "kernel"
        workdir.mkdir()
        async with JupyterExecutor(
            "python3", timeout_s=10, cwd=workdir, max_observation_chars=_CAP
        ) as executor:
            yield executor

    @pytest.fixture
    def action_samples(self) -> ActionSamples:
        return ActionSamples(
            executes_cleanly=Action(text="total = sum(range(10))\nprint(total)"),
            executes_but_errors=Action(text="1 / 0"),
            never_refuses=True,
            break_environment=kill_the_kernel,
            keeps_printing=lambda marker: Action(
                text=f"import time\nfor _ in range(300):\n    print({marker!r}, flush=True)\n"
                "    time.sleep(0.01)"
            ),
            break_lasts=True,  # no kernel starts until the directory is back
            restore_environment=move_the_directory_back,
            echo=echo,
            truncates_at=_CAP,
        )
