"""``ProcessBackend``: a batch driven by worker processes on one SQLite file (or PostgreSQL).

Real processes throughout: the workers are spawned, the executor appends a line per call to a
file (``BATCH_CALLS``) so a count survives the process that made it, a worker is SIGKILLed in
the middle of a batch, and Ctrl-C reaches the whole process group of ``polyloop batch
--workers 2``. Every time, the runs stay resumable: the same call, run again, finishes every
task with exactly one ``RunFinished`` and no recorded action runs twice.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import types
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from polyloop import ActionStatus, ProcessBackend, RunFinished, StopReason, run_many
from polyloop.stores import MemoryStore, open_store
from tests import batch_doubles
from tests.batch_doubles import AGENT, seams, tasks

DEADLINE_S = 60.0


@pytest.fixture
def calls_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every executor call, in whatever process, as one line of this file."""
    path = tmp_path / "calls.txt"
    monkeypatch.setenv("BATCH_CALLS", str(path))
    batch_doubles.reset()
    return path


def calls(path: Path) -> Counter[tuple[str, str]]:
    return batch_doubles.calls_in(str(path)) if path.exists() else Counter()


async def calls_reach(path: Path, count: int) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while sum(calls(path).values()) < count:
        assert time.monotonic() < deadline, "the batch never got going"
        await asyncio.sleep(0.01)


async def logs(url: str) -> dict[str, Any]:
    store = open_store(url)
    try:
        return {run_id: await store.read_log(run_id) for run_id in await store.run_ids()}
    finally:
        aclose = getattr(store, "aclose", None)
        if aclose is not None:
            await aclose()


async def assert_each_finished_once_and_no_action_twice(url: str, path: Path, count: int) -> None:
    found = await logs(url)
    assert len(found) == count
    counted = calls(path)
    for run_id, log in found.items():
        finishes = [r for r in log.records if isinstance(r, RunFinished)]
        assert len(finishes) == 1, run_id
        assert finishes[0].stop_reason is not StopReason.CANCELLED, run_id
        task_id = run_id.split(".", 1)[1]
        for completed in log.steps:
            if completed.step.action_status is ActionStatus.EXECUTED:
                assert counted[(task_id, completed.step.action)] == 1, (run_id, completed.step)
    assert max(counted.values()) == 1


def workers_alive() -> list[multiprocessing.process.BaseProcess]:
    return [
        p for p in multiprocessing.active_children() if p.name.startswith("polyloop-batch-worker")
    ]


# --------------------------------------------------------------------------- run_many


@pytest.mark.asyncio
async def test_a_killed_worker_stops_no_other_and_its_runs_are_resumed(
    tmp_path: Path, calls_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    monkeypatch.setenv("BATCH_SLOW", "0.05")
    batch = asyncio.ensure_future(
        run_many(AGENT, tasks(40, "steps=3"), seams=seams, store=url, batch="b", concurrency=4,
                 backend=ProcessBackend(workers=2))
    )  # fmt: skip
    await calls_reach(calls_file, 20)
    victims = workers_alive()
    assert len(victims) == 2
    os.kill(victims[0].pid or 0, signal.SIGKILL)
    summary = await asyncio.wait_for(batch, DEADLINE_S)
    assert summary.tasks == 40
    assert not summary.interrupted
    failed = [o for o in summary.outcomes if o.what == "failed"]
    assert failed, summary.what  # the killed worker had runs in flight
    assert all("worker process died (exit code -9)" in (o.error or "") for o in failed)
    assert summary.what.get("started", 0) + len(failed) == 40
    # Each run left unfinished is one reported failed. (Not the converse: a commit the killed
    # worker had written to SQLite's WAL without publishing it to the other processes is
    # recovered later, so a run read back as unfinished may then turn out finished.)
    unfinished = [r for r, log in (await logs(url)).items() if log.finished is None]
    assert unfinished
    assert set(unfinished) <= {o.run_id for o in failed}

    monkeypatch.setenv("BATCH_SLOW", "0")
    again = await run_many(AGENT, tasks(40, "steps=3"), seams=seams, store=url, batch="b",
                           backend=ProcessBackend(workers=2))  # fmt: skip
    assert again.what.get("resumed", 0) == len(unfinished)
    assert again.what.get("started", 0) + len(unfinished) <= len(failed)  # nothing logged yet
    assert set(again.what) <= {"skipped", "resumed", "started"}
    await assert_each_finished_once_and_no_action_twice(url, calls_file, 40)
    assert not workers_alive()


@pytest.mark.asyncio
async def test_cancelling_run_many_drains_the_workers_then_the_rerun_resumes(
    tmp_path: Path, calls_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    monkeypatch.setenv("BATCH_SLOW", "0.2")
    batch = asyncio.ensure_future(
        run_many(AGENT, tasks(30, "steps=3"), seams=seams, store=url, batch="b", concurrency=3,
                 backend=ProcessBackend(workers=2))
    )  # fmt: skip
    await calls_reach(calls_file, 6)
    batch.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(batch, DEADLINE_S)
    found = await logs(url)
    assert any(log.finished is None for log in found.values())
    for log in found.values():  # drained: each action in flight finished and was recorded
        assert log.finished is None or log.finished.stop_reason is StopReason.AGENT_FINISHED
        assert type(log.records[-1]).__name__ != "ActionIntent"
    assert not workers_alive()

    monkeypatch.setenv("BATCH_SLOW", "0")
    again = await run_many(AGENT, tasks(30, "steps=3"), seams=seams, store=url, batch="b",
                           backend=ProcessBackend(workers=2))  # fmt: skip
    assert set(again.what) <= {"skipped", "resumed", "started"}
    assert again.stop_reasons == {"agent_finished": 30}  # nothing was left in doubt
    await assert_each_finished_once_and_no_action_twice(url, calls_file, 30)


@pytest.mark.asyncio
async def test_two_invocations_racing_on_the_same_runs_are_fenced_by_the_store(
    tmp_path: Path, calls_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two batch invocations, each with its own worker process, on the same tasks and store:
    each run is driven to its end once, and never does an action of one run execute twice."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    monkeypatch.setenv("BATCH_SLOW", "0.01")
    given = tasks(30, "steps=3")

    def one() -> Any:
        return run_many(AGENT, given, seams=seams, store=url, batch="b", concurrency=4,
                        backend=ProcessBackend(workers=1))  # fmt: skip

    first, second = await asyncio.wait_for(asyncio.gather(one(), one()), DEADLINE_S)
    for summary in (first, second):
        assert set(summary.what) <= {"started", "resumed", "skipped", "failed"}, summary.what
        for outcome in summary.outcomes:
            if outcome.what == "failed":  # fenced off: the other process holds the run
                assert re.search(
                    r"RunConflict|RunAlreadyExists|RunAlreadyFinished", outcome.error or ""
                ), outcome
    await assert_each_finished_once_and_no_action_twice(url, calls_file, 30)
    again = await run_many(AGENT, given, seams=seams, store=url, batch="b",
                           backend=ProcessBackend(workers=1))  # fmt: skip
    assert again.what == {"skipped": 30}


@pytest.mark.asyncio
async def test_a_store_object_or_memory_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="needs the store as a URL"):
        await run_many(AGENT, tasks(2), seams=seams, store=MemoryStore(), batch="b",
                       backend=ProcessBackend(workers=2))  # fmt: skip
    with pytest.raises(ValueError, match="cannot use the store 'memory:'"):
        await run_many(AGENT, tasks(2), seams=seams, store="memory:", batch="b",
                       backend=ProcessBackend(workers=2))  # fmt: skip


@pytest.mark.asyncio
async def test_a_seams_factory_that_cannot_be_pickled_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    with pytest.raises(TypeError, match="by pickling"):
        await run_many(AGENT, tasks(2), seams=lambda task: seams(task), store=url, batch="b",
                       backend=ProcessBackend(workers=2))  # fmt: skip
    assert (await logs(url)) == {}


@pytest.mark.asyncio
async def test_a_seams_factory_the_workers_cannot_import_fails_every_task_naming_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a factory defined in a notebook would: picklable here (by reference to a module this
    process has), not importable in a worker. Every task fails with the reason; nothing is
    written, so the next invocation (with an importable factory) starts them all."""
    ghost = types.ModuleType("polyloop_ghost_seams")

    def ghost_seams(task: Any) -> Any:
        return seams(task)

    ghost_seams.__module__ = ghost.__name__
    ghost_seams.__qualname__ = "ghost_seams"
    ghost.ghost_seams = ghost_seams  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, ghost.__name__, ghost)
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    summary = await asyncio.wait_for(
        run_many(AGENT, tasks(6), seams=ghost_seams, store=url, batch="b",
                 backend=ProcessBackend(workers=2)),
        DEADLINE_S,
    )  # fmt: skip
    assert summary.what == {"failed": 6}
    for outcome in summary.outcomes:
        assert "the worker could not load the job" in (outcome.error or ""), outcome
        assert "polyloop_ghost_seams" in (outcome.error or ""), outcome
    assert (await logs(url)) == {}
    assert not workers_alive()


@pytest.mark.parametrize("workers", [0, -1, True, 1.5, "2", None])
def test_a_bad_worker_count_is_refused(workers: Any) -> None:
    with pytest.raises(ValueError, match="workers must be an int >= 1"):
        ProcessBackend(workers=workers)


@pytest.mark.asyncio
async def test_a_store_that_a_worker_cannot_open_fails_the_tasks_with_the_reason(
    tmp_path: Path,
) -> None:
    """The store's URL is opened by the driver and then by each worker; a worker that cannot
    open it (here: the file is replaced by a directory in between) fails its tasks, naming
    why, and the batch ends."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"

    class Swapping(ProcessBackend):
        async def run(self, tasks: Any, job: Any, **kwargs: Any) -> None:
            await job.store.aclose()
            os.remove(tmp_path / "runs.db")
            os.mkdir(tmp_path / "runs.db")
            await super().run(tasks, job, **kwargs)

    summary = await asyncio.wait_for(
        run_many(AGENT, tasks(5), seams=seams, store=url, batch="b", backend=Swapping(2)),
        DEADLINE_S,
    )
    assert summary.what == {"failed": 5}
    assert all(
        "is a directory, not a polyloop database" in (o.error or "") for o in summary.outcomes
    ), [o.error for o in summary.outcomes]


# --------------------------------------------------------------------------- the CLI


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    shutil.copy(batch_doubles.__file__, tmp_path / "batch_doubles.py")
    with (tmp_path / "tasks.jsonl").open("w", encoding="utf-8") as lines:
        for n in range(60):
            lines.write(json.dumps({"id": f"t{n:03d}", "goal": "steps=3"}) + "\n")
    return tmp_path


def cli(workdir: Path, *args: str, slow: str = "0") -> subprocess.Popen[str]:
    env = {**os.environ, "BATCH_CALLS": str(workdir / "calls.txt"), "BATCH_SLOW": slow,
           "PYTHONPATH": ""}  # fmt: skip
    return subprocess.Popen(
        [sys.executable, "-m", "polyloop.cli", *args], cwd=workdir, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip


BATCH = ("batch", "tasks.jsonl", "--agent", "batch_doubles:AGENT", "--seams",
         "batch_doubles:seams", "--workers", "2", "--concurrency", "4")  # fmt: skip


def counts(head: str) -> dict[str, int]:
    listed = head.split(" tasks: ", 1)[1]
    return {m[2]: int(m[1]) for m in re.finditer(r"(\d+) ([a-z ]+?)(?:,|$)", listed)}


def test_ctrl_c_to_the_process_group_drains_exits_130_and_the_summary_is_stats(
    workdir: Path,
) -> None:
    first = cli(workdir, *BATCH, slow="0.1")
    deadline = time.monotonic() + DEADLINE_S
    while sum(calls(workdir / "calls.txt").values()) < 12:
        assert first.poll() is None, first.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.01)
    os.killpg(first.pid, signal.SIGINT)  # as a terminal does: the workers get it too
    out, err = first.communicate(timeout=DEADLINE_S)
    assert first.returncode == 130, (out, err)
    head = out.splitlines()[0]
    assert head.startswith("batch tasks: interrupted in "), out
    said = counts(head)
    stats_run = cli(workdir, "stats", "--batch", "tasks", "--format", "json")
    stats_out, stats_err = stats_run.communicate(timeout=DEADLINE_S)
    assert stats_run.returncode == 0, stats_err
    stats = json.loads(stats_out)
    assert said.get("started", 0) == stats["finished"], (out, stats)
    assert said.get("interrupted", 0) == stats["running"], (out, stats)
    assert stats["running"] > 0
    assert sum(said.values()) == 60

    rerun = cli(workdir, *BATCH)
    out, err = rerun.communicate(timeout=DEADLINE_S)
    assert rerun.returncode == 0, (out, err)
    assert "resumed" in out.splitlines()[0]
    url = f"sqlite:///{workdir / 'polyloop.db'}"
    asyncio.run(assert_each_finished_once_and_no_action_twice(url, workdir / "calls.txt", 60))


@pytest.mark.parametrize(
    ("more", "message"),
    [
        (("--workers", "0"), "--workers must be an integer >= 1, got '0'"),
        (("--workers", "two"), "--workers must be an integer >= 1, got 'two'"),
        (("--workers", "2", "--store", "memory:"), "not memory:"),
        (("--workers", "2", "--otel"), "--workers cannot be combined with --otel"),
    ],
)
def test_a_bad_workers_option_is_refused_and_nothing_written(
    workdir: Path, more: tuple[str, ...], message: str
) -> None:
    args = [a for a in BATCH if a not in ("--workers", "2")]
    run = cli(workdir, *args, *more)
    out, err = run.communicate(timeout=DEADLINE_S)
    assert run.returncode == 2, (out, err)
    assert message in err
    assert not (workdir / "polyloop.db").exists()
