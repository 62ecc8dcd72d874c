"""``polyloop batch`` killed mid-batch and run again: 200 tasks, a SQLite file, real processes.

SIGKILL leaves whatever the kill cut; SIGINT and SIGTERM interrupt (the runs in flight stay
unfinished, the summary is printed). Either way the same command, run again, finishes every
task with exactly one ``RunFinished``, none ``cancelled``, and no action recorded as executed
runs twice: the executor appends a line per call to a file, a count that survives the killed
process. A run cut inside an action ends ``resume_state_unknown`` (the loop's own decision:
that action may or may not have run and may not be replayed). Each test runs twice: the batch in
one process, and in two worker processes (``--workers 2``), whose runs a killed driver leaves
as resumable as its own.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from polyloop import ActionStatus, RunFinished, StopReason
from polyloop.stores import SQLiteStore
from tests import batch_doubles

pytestmark = pytest.mark.slow

TASKS = 200
ACTIONS = 3  # per task: 3 actions, then a final answer
KILL_AT = 150  # executor calls seen before the signal (of 600)
DEADLINE_S = 120.0


@pytest.fixture(params=[(), ("--workers", "2")], ids=["one-process", "two-workers"])
def more(request: pytest.FixtureRequest) -> tuple[str, ...]:
    """The batch in this process, or in two worker processes (``ProcessBackend``)."""
    options: tuple[str, ...] = request.param
    return options


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A directory with the tasks file and the agent's module (imported from the cwd)."""
    shutil.copy(batch_doubles.__file__, tmp_path / "batch_doubles.py")
    with (tmp_path / "tasks.jsonl").open("w", encoding="utf-8") as lines:
        for n in range(TASKS):
            task = {"id": f"t{n:03d}", "goal": f"steps={ACTIONS}", "labels": {"n": str(n)}}
            lines.write(json.dumps(task) + "\n")
    return tmp_path


def command(workdir: Path, *, slow: bool, more: tuple[str, ...] = ()) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "BATCH_CALLS": str(workdir / "calls.txt"),
        "BATCH_SLOW": "0.02" if slow else "0",
        "PYTHONPATH": "",  # the module must be found through the current directory alone
    }
    return subprocess.Popen(
        [sys.executable, "-m", "polyloop.cli", "batch", "tasks.jsonl", "--agent",
         "batch_doubles:AGENT", "--seams", "batch_doubles:seams", "--concurrency", "8", *more],
        cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def calls(workdir: Path) -> Counter[tuple[str, str]]:
    path = workdir / "calls.txt"
    return batch_doubles.calls_in(str(path)) if path.exists() else Counter()


def wait_for_calls(workdir: Path, process: subprocess.Popen[str], count: int) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while sum(calls(workdir).values()) < count:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the batch never got going"
        time.sleep(0.01)


def finish(process: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=DEADLINE_S)
    return process.returncode, out, err


def logs(workdir: Path) -> dict[str, Any]:
    async def read() -> dict[str, Any]:
        async with SQLiteStore(workdir / "polyloop.db") as store:
            return {run_id: await store.read_log(run_id) for run_id in await store.run_ids()}

    return asyncio.run(read())


def assert_every_task_finished_once_and_no_action_ran_twice(workdir: Path) -> Counter[str]:
    found = logs(workdir)
    assert sorted(found) == [f"tasks.t{n:03d}" for n in range(TASKS)]
    counted = calls(workdir)
    stops: Counter[str] = Counter()
    for run_id, log in found.items():
        finishes = [r for r in log.records if isinstance(r, RunFinished)]
        assert len(finishes) == 1, run_id
        assert log.records[-1] is finishes[0], run_id
        assert finishes[0].stop_reason is not StopReason.CANCELLED, run_id
        stops[finishes[0].stop_reason.value] += 1
        task_id = run_id.removeprefix("tasks.")
        for completed in log.steps:
            if completed.step.action_status is ActionStatus.EXECUTED:
                assert counted[(task_id, completed.step.action)] == 1, (run_id, completed.step)
    assert max(counted.values()) == 1  # not even an unrecorded action ran twice
    return stops


def test_sigkill_mid_batch_then_the_same_command_finishes_every_task(
    workdir: Path, more: tuple[str, ...]
) -> None:
    first = command(workdir, slow=True, more=more)
    wait_for_calls(workdir, first, KILL_AT)
    first.send_signal(signal.SIGKILL)
    assert finish(first)[0] == -signal.SIGKILL
    unfinished = [run_id for run_id, log in logs(workdir).items() if log.finished is None]
    assert unfinished  # the kill did cut runs in flight

    status, out, err = finish(command(workdir, slow=False, more=more))
    assert status == 0, (out, err)
    assert "resumed" in out.splitlines()[0]
    stops = assert_every_task_finished_once_and_no_action_ran_twice(workdir)
    assert stops["agent_finished"] + stops["resume_state_unknown"] == TASKS

    # and once more: nothing left to do, nothing written
    records = sum(len(log.records) for log in logs(workdir).values())
    status, out, _ = finish(command(workdir, slow=False, more=more))
    assert status == 0
    assert f"{TASKS} tasks: {TASKS} skipped" in out.splitlines()[0]
    assert sum(len(log.records) for log in logs(workdir).values()) == records


@pytest.mark.parametrize(
    ("signal_number", "status", "times"),
    [(signal.SIGINT, 130, 1), (signal.SIGTERM, 143, 1), (signal.SIGINT, 130, 3)],
)
def test_an_interrupted_batch_leaves_its_runs_resumable_and_never_cancelled(
    workdir: Path, more: tuple[str, ...], signal_number: int, status: int, times: int
) -> None:
    first = command(workdir, slow=True, more=more)
    wait_for_calls(workdir, first, KILL_AT)
    for _ in range(times):  # once is enough; an impatient user's next ones change nothing
        first.send_signal(signal_number)
        time.sleep(0.005)
    code, out, err = finish(first)
    assert code == status, (out, err)
    head = out.splitlines()[0]
    assert head.startswith("batch tasks: interrupted in "), out
    assert "interrupted" in head.split(":", 2)[2]
    assert "unfinished: run the same command again to resume" in out
    found = logs(workdir)
    assert all(
        log.finished is None or log.finished.stop_reason is not StopReason.CANCELLED
        for log in found.values()
    )
    assert any(log.finished is None for log in found.values())

    code, out, err = finish(command(workdir, slow=False, more=more))
    assert code == 0, (out, err)
    assert "resumed" in out.splitlines()[0]
    assert_every_task_finished_once_and_no_action_ran_twice(workdir)
