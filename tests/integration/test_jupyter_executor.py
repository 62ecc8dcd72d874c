"""JupyterExecutor against a real ipykernel: interrupts keep state, death is an env_error, the
kernel's process group dies with aclose(), outputs arrive in order, summarised and capped, rich
outputs are saved as content-addressed files, and interrupt() and restart() do what they say.

Two kernels are shared by the tests that leave them usable (a start costs about a second): one
with a 2 s timeout, one that saves rich outputs and waits 60 s (so an action that ends early was
ended by interrupt() or restart()). Every test sets up the state it reads in the same test.
"""

from __future__ import annotations

import asyncio
import hashlib
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


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("artifacts")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def saving_kernel(artifacts: Path) -> AsyncIterator[JupyterExecutor]:
    """A kernel that saves rich outputs, with a timeout long enough that an action it ends
    early was ended by interrupt() or restart(), not by the timeout."""
    async with JupyterExecutor(timeout_s=60, artifacts_dir=artifacts) as executor:
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


async def test_rich_outputs_without_a_directory_are_named_and_said_not_saved(kernel):
    png = bytes(range(256)) * 40 + b"\x01\x02"  # 10 242 bytes, base64 with padding
    code = (
        "from IPython.display import HTML, Image, display\n"
        f"display(Image(data={png!r}, format='png'))\n"
        "HTML('<b>' + 'x' * 100 + '</b>')"
    )

    status, observation = await run(kernel, code)

    assert status is ActionStatus.EXECUTED
    assert observation == (
        "<IPython.core.display.Image object>\n"
        "[image/png output, 10242 bytes, not saved: no artifacts directory]\n"
        "<IPython.core.display.HTML object>\n"
        "[text/html output, 107 bytes, not saved: no artifacts directory]\n"
    )


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


def install_a_kernel_that_exits_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = tmp_path / "kernels" / "exits-at-once"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-c", "import sys; sys.exit(3)", "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))


async def test_a_kernel_that_cannot_start_is_an_env_error_each_time(tmp_path, monkeypatch):
    install_a_kernel_that_exits_at_once(tmp_path, monkeypatch)

    async with JupyterExecutor("exits-at-once", start_timeout_s=30) as executor:
        outcomes = [await executor.execute(Action(text="1")) for _ in range(2)]

    for outcome in outcomes:
        assert outcome.status is ActionStatus.ENV_ERROR
        assert outcome.observation.startswith("The Jupyter kernel 'exits-at-once' could not start")
    assert executor.pid is None


async def test_a_restart_whose_kernel_cannot_start_is_a_clear_error(tmp_path, monkeypatch):
    install_a_kernel_that_exits_at_once(tmp_path, monkeypatch)
    async with JupyterExecutor("exits-at-once", start_timeout_s=30) as executor:
        first = await executor.execute(Action(text="1"))  # opens the session; no kernel starts

        with pytest.raises(
            RuntimeError, match=r"^JupyterExecutor.restart\(\): The Jupyter kernel 'exits-at-once' "
        ):
            await executor.restart()

        assert first.status is ActionStatus.ENV_ERROR
        assert await executor.interrupt() is False  # nothing runs: nothing to interrupt
        assert (await executor.execute(Action(text="1"))).status is ActionStatus.ENV_ERROR
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


# ---------------------------------------------------------------- rich outputs as artifacts

PNG = bytes(range(256)) * 4 + b"\x89PNG"  # 1 028 bytes


def saved_name(content: bytes, extension: str) -> str:
    return hashlib.sha256(content).hexdigest() + extension


async def test_each_rich_output_is_saved_as_a_file_named_by_its_content_with_its_type(
    saving_kernel, artifacts
):
    code = (
        "from IPython.display import HTML, JSON, SVG, Image, Markdown, display\n"
        f"display(Image(data={PNG!r}, format='png'))\n"
        'display(SVG(\'<svg xmlns="http://www.w3.org/2000/svg"><circle r="1"/></svg>\'))\n'
        "display(JSON({'a': [1, 2], 'é': None}))\n"
        "display(Markdown('# Títle'))\n"
        "HTML('<b>bold</b>')  # the execute_result"
    )
    svg = b'<svg xmlns="http://www.w3.org/2000/svg"><circle r="1"/></svg>'
    markdown = "# Títle".encode()
    files = {
        "image/png": (PNG, ".png"),
        "image/svg+xml": (svg, ".svg"),
        "text/markdown": (markdown, ".md"),
        "text/html": (b"<b>bold</b>", ".html"),
    }

    status, observation = await run(saving_kernel, code)

    assert status is ActionStatus.EXECUTED
    for mime, (content, extension) in files.items():
        name = saved_name(content, extension)
        assert (artifacts / name).read_bytes() == content
        assert f"[{mime} output, {len(content)} bytes, saved as {name}]\n" in observation
    [json_file] = [p for p in artifacts.glob("*.json") if b'"\\u00e9"' not in p.read_bytes()]
    assert json.loads(json_file.read_text(encoding="utf-8")) == {"a": [1, 2], "é": None}
    assert f"saved as {json_file.name}]" in observation
    lines = observation.splitlines()
    assert lines[0] == "<IPython.core.display.Image object>"  # text/plain stays the text
    assert lines[-2:] == [
        "<IPython.core.display.HTML object>",
        f"[text/html output, 11 bytes, saved as {saved_name(b'<b>bold</b>', '.html')}]",
    ]


async def test_the_same_content_twice_is_one_file_written_once(saving_kernel, artifacts):
    code = "from IPython.display import HTML, display\ndisplay(HTML('<i>twice</i>'))"
    name = saved_name(b"<i>twice</i>", ".html")
    await run(saving_kernel, code)
    written = (artifacts / name).stat()
    count = len(list(artifacts.iterdir()))

    status, observation = await run(saving_kernel, code + "\ndisplay(HTML('<i>twice</i>'))")

    assert status is ActionStatus.EXECUTED
    assert observation.count(f"saved as {name}]") == 2
    after = (artifacts / name).stat()
    assert (after.st_ino, after.st_mtime_ns) == (written.st_ino, written.st_mtime_ns)
    assert len(list(artifacts.iterdir())) == count


async def test_an_updated_display_shows_its_last_version_where_it_was_shown(
    saving_kernel, artifacts
):
    code = (
        "from IPython.display import Markdown, display\n"
        "handle = display(Markdown('first version'), display_id=True)\n"
        "print('printed after the display')\n"
        "handle.update(Markdown('second version'))\n"
        "display(Markdown('unrelated'), display_id='other')\n"
        "handle.update(Markdown('third version'))"
    )

    status, observation = await run(saving_kernel, code)

    assert status is ActionStatus.EXECUTED
    third, unrelated = saved_name(b"third version", ".md"), saved_name(b"unrelated", ".md")
    assert observation == (
        "<IPython.core.display.Markdown object>\n"
        f"[text/markdown output, 13 bytes, saved as {third}]\n"
        "printed after the display\n"
        "<IPython.core.display.Markdown object>\n"
        f"[text/markdown output, 9 bytes, saved as {unrelated}]\n"
    )
    for version in (b"first version", b"second version"):  # saved as they came
        assert (artifacts / saved_name(version, ".md")).read_bytes() == version


async def test_an_update_of_an_earlier_actions_display_shows_in_this_action(saving_kernel):
    await run(
        saving_kernel,
        "from IPython.display import Markdown, display\n"
        "earlier = display(Markdown('v1'), display_id=True)",
    )

    status, observation = await run(
        saving_kernel, "earlier.update(Markdown('v2'))\nearlier.update(Markdown('v3'))"
    )

    assert status is ActionStatus.EXECUTED
    assert observation == (  # once, in its last version: the earlier observation is history
        "<IPython.core.display.Markdown object>\n"
        f"[text/markdown output, 2 bytes, saved as {saved_name(b'v3', '.md')}]\n"
    )


@pytest.mark.parametrize("wait", [False, True])
async def test_clear_output_leaves_only_what_came_after_it(saving_kernel, wait):
    code = (
        "from IPython.display import HTML, clear_output, display\n"
        "for step in range(3):\n"
        f"    clear_output(wait={wait})\n"
        "    print(f'step {step}', flush=True)\n"
        "    display(HTML(f'<p>{step}</p>'))\n"
    )

    status, observation = await run(saving_kernel, code)

    assert status is ActionStatus.EXECUTED
    assert observation == (
        "step 2\n<IPython.core.display.HTML object>\n"
        f"[text/html output, 8 bytes, saved as {saved_name(b'<p>2</p>', '.html')}]\n"
    )


async def test_malformed_rich_outputs_are_named_and_nothing_escapes_the_directory(
    saving_kernel, artifacts
):
    bundle = {
        "text/plain": "raw bundle",
        "image/png": "this is not base64!",
        "image/jpeg": 12345,
        "text/html": ["<b>", "</b>"],
        "image/gif": "R0lGODlh\udc80",
        "../../escaped": "x",
        "image/png/../../../escaped": "eA==",
        "text/markdown": "fine",
    }
    code = f"from IPython.display import display\ndisplay({bundle!r}, raw=True)"
    before = set(artifacts.iterdir())

    status, observation = await run(saving_kernel, code)

    assert status is ActionStatus.EXECUTED
    assert observation.splitlines() == [
        "raw bundle",
        "[image/png output, not saved: not valid base64]",
        "[image/jpeg output, not saved: a int, not base64 text]",
        "[text/html output, not saved: a list, not text]",
        "[image/gif output, not saved: not valid base64]",
        "['../../escaped' output, not saved: not a MIME type]",
        "['image/png/../../../escaped' output, not saved: not a MIME type]",
        f"[text/markdown output, 4 bytes, saved as {saved_name(b'fine', '.md')}]",
    ]
    assert set(artifacts.iterdir()) - before == {artifacts / saved_name(b"fine", ".md")}
    assert not (artifacts.parent.parent / "escaped").exists()
    assert not (artifacts.parent / "escaped").exists()
    assert await run(saving_kernel, "1 + 1") == (ActionStatus.EXECUTED, "2\n")


async def test_an_artifact_that_cannot_be_written_is_said_not_saved_and_the_code_ran(tmp_path):
    directory = tmp_path / "artifacts"
    async with JupyterExecutor(artifacts_dir=directory) as executor:
        directory.rmdir()
        directory.write_text("a file where the directory was")

        outcome = await executor.execute(
            Action(text="from IPython.display import HTML\nprint('ran')\nHTML('<b>x</b>')")
        )

    assert outcome.status is ActionStatus.EXECUTED
    assert outcome.observation == (
        "ran\n<IPython.core.display.HTML object>\n"
        "[text/html output, 8 bytes, not saved: Not a directory]\n"
    )


async def test_the_observation_cap_applies_to_rich_outputs_too(tmp_path):
    code = (
        "from IPython.display import HTML, display\n"
        "for i in range(50):\n"
        "    display(HTML(f'<p>{i}</p>'))"
    )
    async with JupyterExecutor(max_observation_chars=300, artifacts_dir=tmp_path) as executor:
        outcome = await executor.execute(Action(text=code))

    assert outcome.status is ActionStatus.EXECUTED
    assert outcome.observation_truncated_chars > 0
    kept = outcome.observation.split("\n[... ")[0]
    assert len(kept) == 300
    assert outcome.observation.endswith(
        f"[... {outcome.observation_truncated_chars} more characters truncated]"
    )
    assert len(list(tmp_path.glob("*.html"))) == 50  # saved even when not named in the text


# ---------------------------------------------------------------- interrupt() and restart()

ENDLESS = "import time\nwhile True: time.sleep(0.01)"


async def interrupt_at_once(executor: JupyterExecutor, started_file: Path) -> None:
    """interrupt() as soon as it finds a request in flight: the kernel has not yet begun to run
    it, so the interrupt waits for it to begin."""
    while not await executor.interrupt():  # noqa: ASYNC110  # polls the executor's own state
        await asyncio.sleep(0)


async def interrupt_once_running(executor: JupyterExecutor, started_file: Path) -> None:
    """interrupt() once the code has signalled that it runs."""
    while not started_file.exists():  # noqa: ASYNC110, ASYNC240  # the code signals by a file
        await asyncio.sleep(0.01)
    assert await executor.interrupt() is True


@pytest.mark.parametrize("interrupt", [interrupt_at_once, interrupt_once_running])
async def test_interrupt_stops_a_long_running_cell_from_another_task_and_keeps_state(
    saving_kernel, tmp_path, interrupt
):
    await run(saving_kernel, "kept = 41")
    for attempt in range(3):  # the Nth interrupt works like the first
        started_file = tmp_path / f"started-{attempt}"
        code = f"open({str(started_file)!r}, 'w').close()\n" + ENDLESS
        task = asyncio.ensure_future(run(saving_kernel, code))
        started = time.monotonic()

        await interrupt(saving_kernel, started_file)
        status, observation = await task

        assert time.monotonic() - started < 30, "stopped by the timeout, not by interrupt()"
        assert status is ActionStatus.EXECUTED
        assert "did not finish within" not in observation
        assert observation.endswith(
            "interrupt() was called while the code ran; the kernel keeps its state."
        )
        if interrupt is interrupt_once_running:  # at once, IPython may stop before the code
            assert "KeyboardInterrupt" in observation  # and show no traceback
        assert await run(saving_kernel, "kept + 1") == (ActionStatus.EXECUTED, "42\n")


async def test_interrupt_while_idle_returns_false_and_touches_nothing(saving_kernel):
    await run(saving_kernel, "idle = 'still here'")
    pid = saving_kernel.pid

    assert await saving_kernel.interrupt() is False

    assert await run(saving_kernel, "import time; time.sleep(0.3); idle") == (
        ActionStatus.EXECUTED,
        "'still here'\n",
    )
    assert saving_kernel.pid == pid


async def test_restart_clears_the_variables_keeps_the_artifacts_and_works_repeatedly(
    saving_kernel, artifacts
):
    await run(saving_kernel, "from IPython.display import HTML, display\ndisplay(HTML('<kept/>'))")
    artifact = artifacts / saved_name(b"<kept/>", ".html")
    pids = [saving_kernel.pid]
    for restart in range(3):  # the Nth restart works like the first
        await run(saving_kernel, f"before_restart = {restart}")

        await saving_kernel.restart()

        pids.append(saving_kernel.pid)
        status, observation = await run(saving_kernel, "'before_restart' in dir()")
        assert (status, observation) == (ActionStatus.EXECUTED, "False\n")
    assert None not in pids
    assert len(set(pids)) == 4  # a new kernel each time
    for pid in pids[:-1]:
        await gone(pid)
    assert artifact.read_bytes() == b"<kept/>"


async def test_restart_stops_a_running_cell_and_waiting_actions_run_in_the_new_kernel(
    saving_kernel, tmp_path
):
    await run(saving_kernel, "lost = True")
    old_pid = saving_kernel.pid
    started_file = tmp_path / "started"
    running = asyncio.ensure_future(
        run(saving_kernel, f"open({str(started_file)!r}, 'w').close()\n" + ENDLESS)
    )
    while not started_file.exists():  # noqa: ASYNC110  # the code signals by a file
        await asyncio.sleep(0.01)
    waiting = asyncio.ensure_future(run(saving_kernel, "'lost' in dir()"))
    started = time.monotonic()

    await saving_kernel.restart()

    status, observation = await running
    assert time.monotonic() - started < 30
    assert status is ActionStatus.EXECUTED
    assert observation == (
        "restart() was called while the code ran: the code was stopped and the kernel "
        "restarted. Its state is lost."
    )
    assert await waiting == (ActionStatus.EXECUTED, "False\n")
    assert saving_kernel.pid not in (None, old_pid)
    await gone(old_pid)


@pytest.mark.parametrize("method", ["restart", "interrupt"])
async def test_restart_and_interrupt_after_aclose_are_a_clear_error(method):
    executor = JupyterExecutor()
    await executor.execute(Action(text="1"))
    await getattr(executor, method)()  # open: accepted
    await executor.aclose()

    with pytest.raises(RuntimeError, match=rf"{method}\(\): no kernel session is open"):
        await getattr(executor, method)()
    assert executor.pid is None  # the refused call started nothing


async def test_restart_after_the_kernel_died_starts_a_new_one(saving_kernel):
    status, _ = await run(saving_kernel, "import os; os._exit(1)")
    assert (status, saving_kernel.pid) == (ActionStatus.ENV_ERROR, None)

    await saving_kernel.restart()

    assert saving_kernel.pid is not None
    assert await run(saving_kernel, "2 * 21") == (ActionStatus.EXECUTED, "42\n")
    assert await saving_kernel.interrupt() is False


async def test_restart_while_the_first_kernel_starts_still_ends_with_a_fresh_kernel():
    async with JupyterExecutor() as executor:
        first = asyncio.ensure_future(executor.execute(Action(text="x = 1; x")))
        await asyncio.sleep(0)  # the execute() is starting the kernel now

        await executor.restart()

        assert (await first).observation == "1\n"  # it ran, in the kernel restart() replaced
        outcome = await executor.execute(Action(text="'x' in dir()"))
    assert outcome.observation == "False\n"


async def test_interrupt_from_another_event_loop_is_refused(saving_kernel):
    await run(saving_kernel, "1")

    with pytest.raises(RuntimeError, match="event loop that runs the kernel"):
        await asyncio.to_thread(asyncio.run, saving_kernel.interrupt())

    assert await run(saving_kernel, "3") == (ActionStatus.EXECUTED, "3\n")
