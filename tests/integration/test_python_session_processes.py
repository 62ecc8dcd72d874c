"""PythonExecutor at the process level: forked grandchildren, and the session's resource limits."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from polyloop import Action, ActionStatus
from polyloop.executors import PythonExecutor
from tests.unit.test_executors import process_exists

pytestmark = pytest.mark.asyncio

LOOP_FOREVER = "while True:\n    time.sleep(0.05)\n"

# Each snippet starts a grandchild that never exits and writes its pid to the file PIDFILE.
FORKS = {
    "os.fork": (
        "import os, time\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    while True:\n"
        "        time.sleep(0.05)\n"
    ),
    "multiprocessing.Process": (
        "import multiprocessing, time\n"
        "grandchild = multiprocessing.Process(target=time.sleep, args=(10**6,))\n"
        "grandchild.start()\n"
        "pid = grandchild.pid\n"
    ),
    "subprocess.Popen": (
        "import subprocess, sys, time\n"
        "loop = 'import time\\nwhile 1: time.sleep(0.05)'\n"
        "pid = subprocess.Popen([sys.executable, '-c', loop]).pid\n"
    ),
}


def forking(style: str, pidfile: Path, *, then_loop: bool) -> Action:
    record = f"with open({str(pidfile)!r}, 'w') as f:\n    f.write(str(pid))\n"
    return Action(text=FORKS[style] + record + (LOOP_FOREVER if then_loop else ""))


def wait_for_text(path: Path) -> None:
    """Until the action has written ``path`` (a thread: the event loop must keep serving)."""
    deadline = time.monotonic() + 30
    while not path.exists() or not path.read_text():
        assert time.monotonic() < deadline, f"{path} was never written"
        time.sleep(0.02)


async def gone(pid: int) -> bool:
    """Whether ``pid`` is dead (SIGKILL is asynchronous: give the kernel a moment to deliver it)."""
    for _ in range(20):
        if not process_exists(pid):
            return True
        await asyncio.sleep(0.05)
    return False


@pytest.mark.parametrize("style", FORKS)
async def test_a_forked_grandchild_does_not_stretch_a_timeout_and_is_killed(style, tmp_path):
    pidfile = tmp_path / "grandchild.pid"
    async with PythonExecutor(timeout_s=2) as executor:
        await executor.execute(Action(text="1"))  # the session is up: time only the action
        session = executor.pid
        started = time.monotonic()
        outcome = await executor.execute(forking(style, pidfile, then_loop=True))
        took = time.monotonic() - started
        grandchild = int(pidfile.read_text())
        after = await executor.execute(Action(text="6 * 7"))
    assert took < 2 + 2, f"execute() took {took:.1f} s"
    assert outcome.status is ActionStatus.EXECUTED
    assert outcome.observation.startswith("TimeoutError: the code did not finish within 2 s")
    assert session is not None
    assert await gone(session)
    assert await gone(grandchild)
    assert after.observation == "42\n"  # a fresh session serves the next action


@pytest.mark.parametrize("style", FORKS)
async def test_aclose_ends_a_session_with_a_running_grandchild_within_two_seconds(style, tmp_path):
    pidfile = tmp_path / "grandchild.pid"
    executor = PythonExecutor(timeout_s=10)
    outcome = await executor.execute(forking(style, pidfile, then_loop=False))
    assert outcome.status is ActionStatus.EXECUTED, outcome.observation
    grandchild = int(pidfile.read_text())
    assert process_exists(grandchild)
    started = time.monotonic()
    await executor.aclose()
    took = time.monotonic() - started
    assert took < 2, f"aclose() took {took:.1f} s"
    assert await gone(grandchild)


async def test_cancelling_an_action_with_a_grandchild_reraises_and_kills_it(tmp_path):
    pidfile = tmp_path / "grandchild.pid"
    executor = PythonExecutor(timeout_s=30)
    try:
        await executor.execute(Action(text="1"))
        task = asyncio.ensure_future(executor.execute(forking("os.fork", pidfile, then_loop=True)))
        await asyncio.to_thread(wait_for_text, pidfile)
        grandchild = int(pidfile.read_text())
        started = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert time.monotonic() - started < 2
        assert await gone(grandchild)
    finally:
        await executor.aclose()


# --------------------------------------------------------------------------- resource limits

ROOT = Path(__file__).resolve().parents[2]


def another_user() -> tuple[str, dict[str, object]]:
    """A Python >= 3.11 and the ``subprocess.run`` options to run it as an ordinary user.

    Root is exempt from RLIMIT_NPROC and may raise hard limits, so those two promises can only
    be seen from an ordinary user; as root we take a fresh uid no other process uses (so the
    process count is ours) and an interpreter that uid may execute (the core is stdlib only).
    """
    if os.getuid() != 0:
        return sys.executable, {}
    uid = 61000 + os.getpid() % 4000
    options: dict[str, object] = {"user": uid, "group": uid, "extra_groups": []}
    candidates = (
        sys.executable,
        shutil.which("python3"),
        "/usr/bin/python3",
        "/usr/local/bin/python3",
    )
    for python in candidates:
        if python and runs_as(python, options):
            return python, options
    pytest.skip(f"no Python >= 3.11 that uid {uid} may execute")


def runs_as(python: str, options: dict[str, object]) -> bool:
    version_ok = "import sys; sys.exit(sys.version_info < (3, 11))"
    try:
        return subprocess.run([python, "-c", version_ok], **options).returncode == 0  # type: ignore[call-overload, no-any-return]
    except OSError:  # that user may not execute it (a home directory closed to others)
        return False


def copy_readable_by_all(package: Path, into: Path) -> None:
    """``package`` copied under ``into``, every directory and file readable by any user.

    The checkout may sit in a directory closed to others (``mktemp -d`` makes one 0700), where
    the ordinary user could run Python but not import polyloop from it; the core is stdlib only,
    so the package alone runs."""
    into.chmod(0o755)
    target = into / package.name
    shutil.copytree(package, target, ignore=shutil.ignore_patterns("__pycache__"))
    for path in [target, *target.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)


async def as_another_user(script: str) -> str:
    """Run ``script`` as an ordinary user (see :func:`another_user`); what it printed."""
    python, options = another_user()
    command = [python, "-c", script]
    with tempfile.TemporaryDirectory(prefix="polyloop-for-others-") as source:
        copy_readable_by_all(ROOT / "polyloop", Path(source))
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": source}

        def run() -> subprocess.CompletedProcess[str]:
            return subprocess.run(  # type: ignore[call-overload, no-any-return]
                command, capture_output=True, text=True, cwd="/", env=env, timeout=120, **options
            )

        done = await asyncio.to_thread(run)
    assert done.returncode == 0, done.stderr
    return str(done.stdout)


def executor_script(options: str, action: str) -> str:
    return (
        "import asyncio\n"
        "from polyloop import Action\n"
        "from polyloop.executors import PythonExecutor\n"
        "async def main():\n"
        f"    async with PythonExecutor({options}) as executor:\n"
        f"        outcome = await executor.execute(Action(text={action!r}))\n"
        "    print(outcome.status.value, outcome.observation)\n"
        "asyncio.run(main())\n"
    )


async def test_a_cpu_loop_beyond_the_cpu_limit_is_stopped_and_the_session_restarts():
    async with PythonExecutor(timeout_s=60, cpu_time_s=1) as executor:
        await executor.execute(Action(text="x = 1"))
        spun = await executor.execute(Action(text="while True:\n    pass"))
        after = await executor.execute(Action(text="'x' in globals()"))
    assert spun.status is ActionStatus.EXECUTED
    assert "used up its CPU time (cpu_time_s=1)" in spun.observation
    assert "earlier actions are lost" in spun.observation
    assert after.observation == "False\n"


async def test_allocating_beyond_the_memory_limit_is_a_memory_error_and_the_session_lives():
    async with PythonExecutor(timeout_s=30, memory_bytes=512 * 2**20) as executor:
        small = await executor.execute(Action(text="len(bytearray(10 * 2**20))"))
        big = await executor.execute(Action(text="len(bytearray(2 * 2**30))"))
        after = await executor.execute(Action(text="6 * 7"))
    assert small.observation == f"{10 * 2**20}\n"
    assert big.status is ActionStatus.EXECUTED
    assert "MemoryError" in big.observation
    assert after.observation == "42\n"


async def test_writing_beyond_the_file_size_limit_fails(tmp_path):
    target = tmp_path / "big.bin"
    write = f"with open({str(target)!r}, 'wb') as f:\n    f.write(b'x' * 5000)"
    async with PythonExecutor(timeout_s=30, max_file_bytes=1000) as executor:
        outcome = await executor.execute(Action(text=write))
    assert outcome.status is ActionStatus.EXECUTED
    assert "File too large" in outcome.observation
    assert target.stat().st_size <= 1000


CONNECT = (
    "import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=5).close()\n'connected'"
)


async def test_without_network_the_session_cannot_reach_a_server_on_loopback():
    server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with PythonExecutor(timeout_s=30) as executor:
            allowed = await executor.execute(Action(text=CONNECT.format(port=port)))
        async with PythonExecutor(timeout_s=30, network=False) as executor:
            refused = await executor.execute(Action(text=CONNECT.format(port=port)))
    finally:
        server.close()
    assert allowed.observation == "'connected'\n"  # the server is reachable from outside
    assert refused.status is ActionStatus.EXECUTED
    assert "OSError" in refused.observation or "unreachable" in refused.observation
    assert "'connected'" not in refused.observation


FORK_BOMB = (
    "import os, time\n"
    "forked = 0\n"
    "try:\n"
    "    for _ in range(200):\n"
    "        if os.fork() == 0:\n"
    "            time.sleep(60)\n"
    "            os._exit(0)\n"
    "        forked += 1\n"
    "finally:\n"
    "    print('forked', forked)\n"
)


async def test_a_fork_bomb_is_stopped_by_the_process_count_limit():
    printed = await as_another_user(executor_script("timeout_s=60, max_processes=20", FORK_BOMB))
    assert printed.startswith("executed forked "), printed
    assert int(printed.split()[2]) < 20
    assert "BlockingIOError" in printed


async def test_a_limit_the_os_refuses_is_an_env_error_that_names_it():
    lowered = (
        "import resource\nresource.setrlimit(resource.RLIMIT_FSIZE, (10_000, 10_000))\n"
    ) + executor_script("timeout_s=60, max_file_bytes=10**6", "1")
    printed = await as_another_user(lowered)
    assert printed.startswith("env_error The Python session could not apply its limits:")
    assert "max_file_bytes=1000000 could not be applied (RLIMIT_FSIZE" in printed


async def test_a_session_that_dies_leaving_a_grandchild_is_an_env_error_at_once(tmp_path):
    pidfile = tmp_path / "grandchild.pid"
    dying = Action(text=forking("os.fork", pidfile, then_loop=False).text + "os._exit(7)\n")
    async with PythonExecutor(timeout_s=30) as executor:
        await executor.execute(Action(text="1"))
        started = time.monotonic()
        outcome = await executor.execute(dying)  # the grandchild still holds the pipes
        took = time.monotonic() - started
        after = await executor.execute(Action(text="6 * 7"))
    assert outcome.status is ActionStatus.ENV_ERROR
    assert "exited with code 7" in outcome.observation
    assert took < 10, f"execute() took {took:.1f} s: it waited for the pipes, not the child"
    assert await gone(int(pidfile.read_text()))
    assert after.observation == "42\n"


async def test_a_session_killed_while_idle_is_an_env_error_that_says_its_state_is_lost():
    async with PythonExecutor(timeout_s=30) as executor:
        await executor.execute(Action(text="x = 1"))
        pid = executor.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        assert await gone(pid)
        for _ in range(100):  # until the event loop has reaped it: the session died idle
            if executor.pid is None:
                break
            await asyncio.sleep(0.02)
        assert executor.pid is None
        outcome = await executor.execute(Action(text="print(x)"))
        after = await executor.execute(Action(text="print(x)"))
        fresh = await executor.execute(Action(text="x = 2\nx"))
    assert outcome.status is ActionStatus.ENV_ERROR, outcome
    assert "died" in outcome.observation
    assert f"killed by signal {signal.SIGKILL}" in outcome.observation
    assert "state is lost" in outcome.observation
    assert after.status is ActionStatus.EXECUTED
    assert "NameError" in after.observation  # the next action got a fresh session
    assert fresh.observation == "2\n"
