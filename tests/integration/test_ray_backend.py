"""The Ray backend on a real local Ray cluster (two CPUs) and the throwaway PostgreSQL server.

A worker process is SIGKILLed in the middle of a batch — found by the process id the stopped
task writes to a file (``tests/integration/ray_seams.py``) — and every run still ends with
exactly one ``RunFinished``, through Ray's retry or through the next invocation, while the
``executions`` table (one row per side effect) shows that no action ran twice. Two workers
driving the same run at once are fenced by the store: one gets ``RunConflict``.

Marked ``ray``: CI runs these in their own step, with the ``ray`` extra installed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

import polyloop
from polyloop import RunFinished, RunLog, StopReason
from polyloop.stores import open_store
from tests.conftest import require_extra
from tests.integration.ray_seams import (
    AGENT,
    EXECUTIONS_TABLE,
    Seams,
    Stop,
    actions_of,
)

pytestmark = [pytest.mark.ray, pytest.mark.postgres, pytest.mark.slow]

REPO_ROOT = Path(__file__).resolve().parents[2]
# How long the stopped task may take to appear, and the whole batch to end, on a loaded
# 2-core machine; a hang past them is a bug, not a wait.
STOP_APPEARS_S = 120.0


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[None]:
    """A local Ray cluster of two CPUs, started for this module and shut down after it.

    Its workers import this project's tests (the seams factory's class) from the repository
    root whatever the current directory; token authentication is off (the cluster listens on
    this machine only and lives for the module), which also keeps Ray from writing a token
    file into the home directory.
    """
    require_extra("ray")
    import ray

    with pytest.MonkeyPatch.context() as env:
        env.setenv("RAY_AUTH_MODE", "disabled")
        temp = tempfile.mkdtemp(prefix="plray-")  # short: Ray's socket paths have a limit
        try:
            ray.init(
                num_cpus=2,
                include_dashboard=False,
                _temp_dir=temp,
                object_store_memory=100 * 1024 * 1024,
                log_to_driver=False,
                runtime_env={"env_vars": {"PYTHONPATH": str(REPO_ROOT)}},
            )
            yield
        finally:
            ray.shutdown()
            shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture
def dsn(postgres_database_dsn: str) -> str:
    """A fresh database with the ``executions`` table the counting executor writes."""
    import psycopg

    with psycopg.connect(postgres_database_dsn, autocommit=True) as conn:
        conn.execute(EXECUTIONS_TABLE)
    return postgres_database_dsn


def tasks(count: int) -> list[polyloop.Task]:
    return [polyloop.Task(id=f"t-{i:04d}", goal=f"task number {i}") for i in range(count)]


def executions(dsn: str) -> Counter[str]:
    """How many times each action (by its token) ran, from the side-effect table."""
    import psycopg

    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT token FROM executions").fetchall()
    return Counter(token for (token,) in rows)


async def logs(dsn: str) -> dict[str, RunLog]:
    store = open_store(dsn)
    try:
        return {run_id: await store.read_log(run_id) for run_id in await store.run_ids()}
    finally:
        await store.aclose()  # type: ignore[attr-defined]


async def wait_for_pid(stop: Stop) -> int:
    """The process id the stopped task wrote, once it is there."""
    deadline = time.monotonic() + STOP_APPEARS_S
    while time.monotonic() < deadline:
        with contextlib.suppress(FileNotFoundError, ValueError):
            return int(stop.pid_file.read_text())
        await asyncio.sleep(0.05)
    raise AssertionError(f"no task stopped within {STOP_APPEARS_S} s")


def run_finished_count(log: RunLog) -> int:
    return sum(isinstance(record, RunFinished) for record in log.records)


def executed_tokens(log: RunLog) -> list[str]:
    """The tokens of the actions the log records as executed."""
    return [
        json.loads(step.step.tool_args_json or "{}")["token"]
        for step in log.steps
        if step.step.action_status is polyloop.ActionStatus.EXECUTED
    ]


@contextlib.asynccontextmanager
async def killer(stop: Stop, dsn: str) -> AsyncIterator[dict[str, int]]:
    """Kills (SIGKILL) the worker process of the stopped task as soon as it has stopped; says
    which process it killed and how many runs the store held at that moment."""
    killed: dict[str, int] = {}

    async def kill() -> None:
        pid = await wait_for_pid(stop)
        store = open_store(dsn)
        try:
            killed["runs"] = len(await store.run_ids())
        finally:
            await store.aclose()  # type: ignore[attr-defined]
        os.kill(pid, signal.SIGKILL)
        killed["pid"] = pid

    task = asyncio.create_task(kill())
    try:
        yield killed
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@pytest.mark.asyncio
async def test_a_worker_killed_mid_batch_loses_no_run_and_repeats_no_action(
    ray_cluster: None, dsn: str, tmp_path: Path
) -> None:
    from polyloop.ray import RayBackend

    batch = tasks(200)
    # Task 37 stops inside its first action, right after the side effect and before its step
    # is recorded: the worst place to die, since a blind retry would run the action again.
    stop = Stop(task_id="t-0037", where="action", step=0, directory=str(tmp_path))
    async with killer(stop, dsn) as killed:
        summary = await polyloop.run_many(
            AGENT,
            batch,
            seams=Seams(dsn, stop),
            store=dsn,
            batch="ray",
            concurrency=8,
            backend=RayBackend(max_retries=3),
        )
    assert "pid" in killed, "the stopped worker was never killed"
    assert 0 < killed["runs"] < 200, killed  # mid-batch: some runs there, not all

    found = await logs(dsn)
    assert len(found) == 200
    assert all(run_finished_count(log) == 1 for log in found.values())
    ran = executions(dsn)
    assert ran
    assert max(ran.values()) == 1, [t for t, n in ran.items() if n > 1]
    # Every action a log records as executed ran exactly once, and nothing ran unrecorded
    # except the action the worker died in.
    recorded = Counter(t for log in found.values() for t in executed_tokens(log))
    assert set(ran) - set(recorded) == {"t-0037.0"}
    assert all(ran[t] == 1 for t in recorded)
    # Ray's retry resumed the interrupted run; its last action's outcome was unknown.
    killed_run = found["ray.t-0037"]
    assert killed_run.finished is not None
    assert killed_run.finished.stop_reason is StopReason.RESUME_STATE_UNKNOWN
    others = [log for run_id, log in found.items() if run_id != "ray.t-0037"]
    assert all(
        log.finished and log.finished.stop_reason is StopReason.AGENT_FINISHED for log in others
    )
    assert sum(log.finished.executed_actions for log in others if log.finished) == sum(
        actions_of(task.id) for task in batch if task.id != "t-0037"
    )
    # The driver heard of every task once; the killed one came back resumed by Ray's retry.
    outcomes = {o.task_id: o for o in summary.outcomes}
    assert len(summary.outcomes) == len(outcomes) == 200
    assert outcomes.pop("t-0037").what == "resumed"
    assert {o.what for o in outcomes.values()} == {"started"}


@pytest.mark.asyncio
async def test_a_task_whose_retries_are_spent_is_resumed_by_the_next_invocation(
    ray_cluster: None, dsn: str, tmp_path: Path
) -> None:
    from polyloop.ray import RayBackend

    batch = tasks(12)
    # Task 5 (three actions) stops inside its second model call, after its first action.
    stop = Stop(task_id="t-0005", where="model", step=1, directory=str(tmp_path))
    backend = RayBackend(max_retries=0)
    async with killer(stop, dsn) as killed:
        first = await polyloop.run_many(
            AGENT, batch, seams=Seams(dsn, stop), store=dsn, batch="again", backend=backend
        )
    assert "pid" in killed, "the stopped worker was never killed"
    lost = {o.task_id: o for o in first.outcomes}["t-0005"]
    assert lost.what == "interrupted"
    assert lost.error is not None
    assert "WorkerCrashedError" in lost.error, lost.error
    before = await logs(dsn)
    assert before["again.t-0005"].finished is None  # left unfinished, resumable
    assert executions(dsn)["t-0005.0"] == 1

    second = await polyloop.run_many(
        AGENT, batch, seams=Seams(dsn, stop), store=dsn, batch="again", backend=backend
    )
    after = await logs(dsn)
    assert {o.task_id: o.what for o in second.outcomes} == {
        task.id: "resumed" if task.id == "t-0005" else "skipped" for task in batch
    }
    # The finished runs were skipped without a record written; the interrupted one finished
    # as if never interrupted, its first action not run again.
    assert {r: len(log.records) for r, log in after.items() if r != "again.t-0005"} == {
        r: len(log.records) for r, log in before.items() if r != "again.t-0005"
    }
    resumed = after["again.t-0005"]
    assert run_finished_count(resumed) == 1
    assert resumed.finished is not None
    assert resumed.finished.stop_reason is StopReason.AGENT_FINISHED
    assert executed_tokens(resumed) == ["t-0005.0", "t-0005.1", "t-0005.2"]
    ran = executions(dsn)
    assert set(ran.values()) == {1}
    assert sum(ran.values()) == sum(actions_of(task.id) for task in batch)


@pytest.mark.asyncio
async def test_two_workers_driving_one_run_are_fenced_by_the_store(
    ray_cluster: None, dsn: str, tmp_path: Path
) -> None:
    """A second invocation resumes a run whose first driver is still alive (stopped in a model
    call): once released, the first one's next append is refused with RunConflict, reported as
    its task's failure, and it runs no action."""
    from polyloop.ray import RayBackend

    task = tasks(3)[2:]  # t-0002: three actions
    (tmp_path / "first").mkdir()
    (tmp_path / "second").mkdir()
    first_stop = Stop(task_id="t-0002", where="model", step=2, directory=str(tmp_path / "first"))
    second_stop = Stop(task_id="t-0002", where="model", step=3, directory=str(tmp_path / "second"))
    backend = RayBackend()
    first = asyncio.create_task(
        polyloop.run_many(
            AGENT, task, seams=Seams(dsn, first_stop), store=dsn, batch="twice", backend=backend
        )
    )
    await wait_for_pid(first_stop)
    second = asyncio.create_task(
        polyloop.run_many(
            AGENT, task, seams=Seams(dsn, second_stop), store=dsn, batch="twice", backend=backend
        )
    )
    await wait_for_pid(second_stop)  # the second driver ran the third action, then stopped
    first_stop.release_file.touch()
    first_summary = await first
    second_stop.release_file.touch()
    second_summary = await second

    (fenced,) = first_summary.outcomes
    assert fenced.what == "failed"
    assert fenced.error is not None
    assert fenced.error.startswith("RunConflict"), fenced.error
    (winner,) = second_summary.outcomes
    assert winner.what == "resumed"
    assert winner.stop_reason is StopReason.AGENT_FINISHED
    log = (await logs(dsn))["twice.t-0002"]
    assert run_finished_count(log) == 1
    assert executed_tokens(log) == ["t-0002.0", "t-0002.1", "t-0002.2"]
    assert executions(dsn) == Counter({"t-0002.0": 1, "t-0002.1": 1, "t-0002.2": 1})


def test_the_how_to_batch_runs_on_a_cluster(ray_cluster: None, dsn: str, tmp_path: Path) -> None:
    """The how-to run whole as a reader follows it, its Ray section included: rollouts.py written
    where the page says, the Python and shell sections before it, then its own block, which
    reaches the cluster through RAY_ADDRESS (its RayBackend() is given no address) and must print
    what the page says; its store is the test's PostgreSQL server."""
    import ray

    from tests.docs.test_how_tos_run_whole import run_how_to, the_run_failed

    page = REPO_ROOT / "docs" / "how-to" / "run-a-batch.md"
    env = {"RAY_ADDRESS": ray.get_runtime_context().gcs_address, "RAY_AUTH_MODE": "disabled"}

    done = run_how_to(page, tmp_path / "reader", {"postgres": dsn, "ray": ""}, env)

    assert done.returncode == 0, the_run_failed(done)
    runs = asyncio.run(logs(dsn))
    assert sorted(runs) == sorted(f"sums.q{n}" for n in range(50))
    assert all(run_finished_count(log) == 1 for log in runs.values())
    assert all(log.started and log.started.batch == "sums" for log in runs.values())


@pytest.mark.asyncio
async def test_cancelling_the_batch_leaves_its_runs_in_flight_resumable(
    ray_cluster: None, dsn: str, tmp_path: Path
) -> None:
    """Ctrl-C in the driver is a cancellation of run_many: the Ray tasks in flight are
    force-cancelled (their workers killed), their runs stay unfinished — never `cancelled` —
    and the next invocation resumes them without running an action again."""
    from polyloop.ray import RayBackend

    batch = tasks(6)
    stop = Stop(task_id="t-0004", where="model", step=1, directory=str(tmp_path))
    backend = RayBackend()
    heard: list[polyloop.TaskOutcome] = []
    running = asyncio.create_task(
        polyloop.run_many(
            AGENT,
            batch,
            seams=Seams(dsn, stop),
            store=dsn,
            batch="cut",
            concurrency=1,  # one at a time: task 5 is never submitted
            backend=backend,
            progress=heard.append,
        )
    )
    pid = await wait_for_pid(stop)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert [(o.task_id, o.what) for o in heard] == [
        *((f"t-{n:04d}", "started") for n in range(4)),
        ("t-0004", "interrupted"),
    ]
    deadline = time.monotonic() + 60
    while _alive(pid) and time.monotonic() < deadline:  # noqa: ASYNC110  # polls a process
        await asyncio.sleep(0.05)
    assert not _alive(pid), "the cancelled task's worker is still running"
    found = await logs(dsn)
    assert sorted(found) == [f"cut.t-{n:04d}" for n in range(5)]
    assert found["cut.t-0004"].finished is None

    again = await polyloop.run_many(
        AGENT, batch, seams=Seams(dsn, stop), store=dsn, batch="cut", backend=backend
    )
    assert {o.task_id: o.what for o in again.outcomes} == {
        **{f"t-{n:04d}": "skipped" for n in range(4)},
        "t-0004": "resumed",
        "t-0005": "started",
    }
    after = await logs(dsn)
    assert all(run_finished_count(log) == 1 for log in after.values())
    assert all(
        log.finished and log.finished.stop_reason is StopReason.AGENT_FINISHED
        for log in after.values()
    )
    assert set(executions(dsn).values()) == {1}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.asyncio
async def test_a_seams_factory_the_workers_cannot_import_fails_each_task_with_the_reason(
    ray_cluster: None, dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from polyloop.ray import RayBackend

    (tmp_path / "driver_only_seams.py").write_text(
        "def seams(task):\n    raise AssertionError('never called')\n", encoding="utf-8"
    )
    monkeypatch.syspath_prepend(str(tmp_path))  # importable here, not in the workers
    import driver_only_seams  # type: ignore[import-not-found]

    summary = await polyloop.run_many(
        AGENT,
        tasks(3),
        seams=driver_only_seams.seams,
        store=dsn,
        batch="noimport",
        backend=RayBackend(),
    )
    assert [o.what for o in summary.outcomes] == ["failed"] * 3
    for outcome in summary.outcomes:
        assert outcome.error is not None
        assert "driver_only_seams" in outcome.error, outcome.error
    assert await logs(dsn) == {}  # nothing started


@pytest.mark.asyncio
async def test_an_address_while_ray_is_already_initialised_is_refused(
    ray_cluster: None, dsn: str
) -> None:
    from polyloop.ray import RayBackend

    with pytest.raises(RuntimeError, match="Ray is already initialised in this process"):
        await polyloop.run_many(
            AGENT,
            tasks(1),
            seams=Seams(dsn),
            store=dsn,
            batch="b",
            backend=RayBackend(address="auto"),
        )
    assert await logs(dsn) == {}


@pytest.mark.asyncio
async def test_a_relative_sqlite_path_names_the_drivers_file_in_every_worker(
    ray_cluster: None, dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On one machine a SQLite file serves as the store; the workers started in another
    directory (the cluster's), so the path they open is the driver's, made absolute."""
    from polyloop.ray import RayBackend

    monkeypatch.chdir(tmp_path)
    batch = tasks(10)
    summary = await polyloop.run_many(
        AGENT, batch, seams=Seams(dsn), store="runs.db", batch="lite", backend=RayBackend()
    )
    assert {o.what for o in summary.outcomes} == {"started"}
    found = await logs(f"sqlite:///{tmp_path / 'runs.db'}")
    assert sorted(found) == [f"lite.{task.id}" for task in batch]
    assert all(run_finished_count(log) == 1 for log in found.values())
    assert not (REPO_ROOT / "runs.db").exists()
