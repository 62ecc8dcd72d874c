"""JupyterExecutor against a real ipykernel: interrupts keep state, death is an env_error, the
kernel's process group dies with aclose(), and outputs arrive in order, summarised and capped.

One kernel is shared by the tests that leave it usable (a start costs about a second); every
test sets up the state it reads in the same test.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from polyloop import Action, ActionStatus
from polyloop.executors import JupyterExecutor
from tests.conftest import require_extra
from tests.unit.test_executors import process_exists

require_extra("jupyter")

pytestmark = pytest.mark.asyncio(loop_scope="module")

SECRET = "POLYLOOP_TEST_SECRET"


@pytest.fixture(scope="module")
def parent_secret() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(SECRET, "hunter2")
        yield


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def kernel(parent_secret: None) -> AsyncIterator[JupyterExecutor]:
    async with JupyterExecutor(timeout_s=2, env={"POLYLOOP_GREETING": "hello"}) as executor:
        yield executor


async def run(executor: JupyterExecutor, code: str) -> tuple[ActionStatus, str]:
    outcome = await executor.execute(Action(text=code))
    return outcome.status, outcome.observation


def group_members(pgid: int) -> list[int]:
    """The live processes whose process group is ``pgid`` (read from /proc)."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            members.append(int(stat.parent.name))
    return members


async def gone(pid: int) -> None:
    """Until ``pid`` is dead (SIGKILL is asynchronous)."""
    deadline = time.monotonic() + 5
    while process_exists(pid) and time.monotonic() < deadline:  # noqa: ASYNC110  # polls /proc
        await asyncio.sleep(0.02)
    assert not process_exists(pid)


async def test_the_kernel_keeps_its_state_through_a_timeout(kernel):
    await run(kernel, "x = 41")

    started = time.monotonic()
    status, observation = await run(kernel, "print('before'); import time\nwhile True: pass")
    took = time.monotonic() - started

    assert status is ActionStatus.EXECUTED
    assert took < 2 + 2, f"execute() took {took:.1f} s"
    assert observation.startswith("before\n")
    assert "KeyboardInterrupt" in observation
    assert observation.endswith(
        "did not finish within 2 s and was interrupted; the kernel keeps its state."
    )
    assert await run(kernel, "x + 1") == (ActionStatus.EXECUTED, "42\n")


async def test_code_that_survives_the_interrupt_is_stopped_and_the_observation_says_state_is_lost(
    kernel,
):
    await run(kernel, "y = 1")
    stubborn = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass"

    started = time.monotonic()
    status, observation = await run(kernel, stubborn)
    took = time.monotonic() - started

    assert status is ActionStatus.EXECUTED
    assert took < 2 + 4, f"execute() took {took:.1f} s"
    assert "did not stop when interrupted" in observation
    assert "state is lost" in observation
    status, observation = await run(kernel, "y")
    assert status is ActionStatus.EXECUTED
    assert "NameError" in observation  # a new kernel, as the observation said


async def test_a_dead_kernel_is_an_env_error_and_the_next_action_gets_a_new_kernel(kernel):
    await run(kernel, "z = 3")
    first = kernel.pid

    status, observation = await run(kernel, "import os; os._exit(3)")

    assert status is ActionStatus.ENV_ERROR
    assert observation == (
        "The Jupyter kernel died (exit code 3). Its state is lost; the next action starts a new "
        "kernel."
    )
    assert kernel.pid is None
    status, observation = await run(kernel, "'z' in dir()")
    assert (status, observation) == (ActionStatus.EXECUTED, "False\n")
    assert kernel.pid not in (None, first)


async def test_a_kernel_killed_between_actions_is_reported_then_replaced(kernel):
    await run(kernel, "1")
    pid = kernel.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    await gone(pid)

    status, observation = await run(kernel, "1 + 1")

    assert status is ActionStatus.ENV_ERROR
    assert "The Jupyter kernel died" in observation
    assert "state is lost" in observation
    assert await run(kernel, "1 + 1") == (ActionStatus.EXECUTED, "2\n")


async def test_a_broken_connection_to_the_kernel_is_an_env_error_then_a_new_kernel(kernel):
    await run(kernel, "1")
    kernel._kernel.client.stop_channels()  # the ZeroMQ sockets are gone under the executor

    status, observation = await run(kernel, "2")

    assert status is ActionStatus.ENV_ERROR
    assert observation.startswith("The connection to the Jupyter kernel broke (")
    assert observation.endswith("Its state is lost; the next action starts a new kernel.")
    assert await run(kernel, "3") == (ActionStatus.EXECUTED, "3\n")


async def test_outputs_arrive_in_the_order_the_kernel_sent_them(kernel):
    code = (
        "import sys\n"
        "from IPython.display import display\n"
        "print('out 1', flush=True)  # ipykernel buffers stdout, and flushes stderr at once\n"
        "print('err 1', file=sys.stderr); sys.stderr.flush()\n"
        "display('shown')\n"
        "print('out 2', end='')\n"
        "raise ValueError('\\x1b[31mboom')"
    )

    status, observation = await run(kernel, code)

    assert status is ActionStatus.EXECUTED
    assert observation.startswith("out 1\nerr 1\n'shown'\nout 2\n")
    assert "\x1b" not in observation  # IPython's colours are stripped from the traceback
    assert observation.rstrip().endswith("ValueError: [31mboom".replace("[31m", ""))


async def test_a_final_expression_is_the_execute_result(kernel):
    assert await run(kernel, "print('a')\n6 * 7") == (ActionStatus.EXECUTED, "a\n42\n")


async def test_rich_outputs_are_summarised_with_their_mime_type_and_size(kernel):
    png = bytes(range(256)) * 40 + b"\x01\x02"  # 10 242 bytes, base64 with padding
    code = (
        "import base64\n"
        "from IPython.display import HTML, Image, display\n"
        f"display(Image(data={png!r}, format='png'))\n"
        "HTML('<b>' + 'x' * 100 + '</b>')"
    )

    status, observation = await run(kernel, code)

    assert status is ActionStatus.EXECUTED
    assert "[image/png output, 10242 bytes]" in observation
    assert "<IPython.core.display.HTML object>\n[text/html output, 107 chars]\n" in observation
    assert "AAEC" not in observation  # no base64 pasted into the model's context


async def test_the_kernel_gets_the_default_environment_not_the_parents_secrets(kernel):
    status, observation = await run(
        kernel, f"import os; print(os.environ.get({SECRET!r}), os.environ['POLYLOOP_GREETING'])"
    )
    assert os.environ[SECRET] == "hunter2"
    assert (status, observation) == (ActionStatus.EXECUTED, "None hello\n")


async def test_a_cancelled_execute_interrupts_the_code_and_the_kernel_keeps_its_state(kernel):
    await run(kernel, "w = 7")
    task = asyncio.ensure_future(run(kernel, "import time\nwhile True: time.sleep(0.01)"))
    await asyncio.sleep(0.5)

    task.cancel()

    with pytest.raises(asyncio.CancelledError):
        await task
    assert await run(kernel, "w * 6") == (ActionStatus.EXECUTED, "42\n")


async def test_an_empty_action_is_executed_with_an_empty_observation(kernel):
    assert await run(kernel, "") == (ActionStatus.EXECUTED, "")


async def test_a_kernel_that_cannot_start_is_an_env_error_each_time(tmp_path, monkeypatch):
    spec = tmp_path / "kernels" / "exits-at-once"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-c", "import sys; sys.exit(3)", "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))

    async with JupyterExecutor("exits-at-once", start_timeout_s=30) as executor:
        outcomes = [await executor.execute(Action(text="1")) for _ in range(2)]

    for outcome in outcomes:
        assert outcome.status is ActionStatus.ENV_ERROR
        assert outcome.observation.startswith("The Jupyter kernel 'exits-at-once' could not start")
    assert executor.pid is None


async def test_output_beyond_the_cap_is_counted_not_kept():
    async with JupyterExecutor(max_observation_chars=50) as executor:
        outcome = await executor.execute(Action(text="for i in range(1000):\n    print('x' * 99)"))
    assert outcome.status is ActionStatus.EXECUTED
    assert outcome.observation_truncated_chars == 1000 * 100 - 50
    assert outcome.observation == "x" * 50 + "\n[... 99950 more characters truncated]"


async def test_a_forked_grandchild_does_not_stretch_a_timeout_and_dies_with_aclose(tmp_path):
    pidfile = tmp_path / "grandchild.pid"
    code = (
        "import os, signal, time\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the interrupt must not end it\n"
        "    while True: time.sleep(0.05)\n"
        f"open({str(pidfile)!r}, 'w').write(str(pid))\n"
        "while True: pass\n"
    )
    executor = JupyterExecutor(timeout_s=2)
    async with executor:
        await executor.execute(Action(text="v = 1"))  # the kernel is up: time only the action
        kernel_pid = executor.pid
        assert kernel_pid is not None
        started = time.monotonic()
        outcome = await executor.execute(Action(text=code))
        took = time.monotonic() - started
        grandchild = int(pidfile.read_text())
        assert process_exists(grandchild)
        after = await executor.execute(Action(text="v + 41"))

    assert took < 2 + 2, f"execute() took {took:.1f} s"
    assert outcome.status is ActionStatus.EXECUTED
    assert after.observation == "42\n"
    assert executor.pid is None
    assert not process_exists(kernel_pid)
    assert not process_exists(grandchild)
    assert group_members(kernel_pid) == []


async def test_no_process_of_the_kernel_survives_aclose():
    spawn = (
        "import subprocess, sys\n"
        "children = [subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])"
        " for _ in range(2)]"
    )
    executor = JupyterExecutor()
    await executor.execute(Action(text=spawn))
    kernel_pid = executor.pid
    assert kernel_pid is not None
    assert len(group_members(kernel_pid)) >= 3  # the kernel and its two children

    await executor.aclose()

    assert group_members(kernel_pid) == []
    assert executor.pid is None
