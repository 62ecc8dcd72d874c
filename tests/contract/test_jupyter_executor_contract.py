"""JupyterExecutor keeps every ActionExecutor promise of the contract kit (a real ipykernel).

Like PythonExecutor it has no refusal path (any text is code to run), declared with
``never_refuses``; its environment is broken by killing the kernel from outside between two
actions and moving its working directory away: the next ``execute`` must return ``env_error``
(the kernel's state is lost), and the ones after it, which cannot start a kernel there, must
return too. Each promise starts a kernel of its own (about a second), so the samples that
would cost more kernel starts — ``restore_environment`` (two), ``echo`` (one) — and the extra
failing actions PythonExecutor already gives for the same code path are left out of this
main-job module; ``tests/kit/test_executor_sequences.py`` checks ``echo`` through the cap.
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


class TestJupyterExecutorContract(ActionExecutorContract):
    @pytest_asyncio.fixture
    async def action_executor(  # type: ignore[override]  # pytest types a fixture as an object
        self, tmp_path: Path
    ) -> AsyncIterator[JupyterExecutor]:
        workdir = tmp_path / "kernel"
        workdir.mkdir()
        async with JupyterExecutor("python3", timeout_s=10, cwd=workdir) as executor:
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
        )
