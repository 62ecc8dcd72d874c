"""``polyloop.run_many``: every task to one stop, resumable as a whole, refusals before writes."""

from __future__ import annotations

import asyncio
import pickle
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import polyloop
from polyloop import (
    ActionIntent,
    RunFinished,
    RunSeams,
    RunStarted,
    StopReason,
    Task,
    TaskRefused,
    batch_run_id,
    run_many,
)
from polyloop._batch import drive_task
from polyloop.stores import MemoryStore, SQLiteStore
from polyloop.types import Record
from tests import batch_doubles
from tests.batch_doubles import AGENT, CALLS, CLOSED, seams, tasks

pytestmark = pytest.mark.asyncio


@pytest.fixture(autouse=True)
def _fresh_counts() -> None:
    batch_doubles.reset()


class CountingStore(MemoryStore):
    """A MemoryStore counting its commits and the records they wrote (every append path of
    MemoryStore goes through ``commit_now``)."""

    def __init__(self) -> None:
        super().__init__()
        self.commits = 0
        self.records = 0
        self.reads = 0

    async def read_log(self, run_id: str) -> polyloop.RunLog:
        self.reads += 1
        return await super().read_log(run_id)

    def commit_now(self, run_id: str, records: Sequence[Record], *, sequence: int) -> bool:
        done = super().commit_now(run_id, records, sequence=sequence)
        self.commits += 1
        self.records += len(records)
        return done


async def finishes(store: Any, run_id: str) -> list[RunFinished]:
    log = await store.read_log(run_id)
    return [r for r in log.records if isinstance(r, RunFinished)]


# --------------------------------------------------------------------------- the happy path


async def test_two_hundred_tasks_each_end_with_exactly_one_run_finished() -> None:
    store = CountingStore()
    given = tasks(200, "steps=2", split="dev")
    summary = await run_many(AGENT, given, seams=seams, store=store, batch="b", concurrency=16)
    assert summary.what == {"started": 200}
    assert summary.stop_reasons == {"agent_finished": 200}
    assert sorted(await store.run_ids()) == sorted(batch_run_id("b", t.id) for t in given)
    for task in given:
        assert len(await finishes(store, batch_run_id("b", task.id))) == 1
    assert all(count == 1 for count in CALLS.values())
    assert len(CALLS) == 400


async def test_run_started_carries_the_batch_the_task_id_and_the_labels() -> None:
    store = MemoryStore()
    task = Task("q-17", "steps=1", {"split": "test", "source": "gsm8k"})
    await run_many(AGENT, [task], seams=seams, store=store, batch="evals")
    started = (await store.read_log("evals.q-17")).started
    assert started is not None
    assert (started.batch, started.task_id, started.labels) == (
        "evals",
        "q-17",
        {"split": "test", "source": "gsm8k"},
    )
    assert started.goal == "steps=1"


async def test_rerunning_a_finished_batch_appends_nothing_and_starts_nothing() -> None:
    store = CountingStore()
    given = tasks(200)
    await run_many(AGENT, given, seams=seams, store=store, batch="b")
    commits, records, runs = store.commits, store.records, await store.run_ids()
    built: list[str] = []

    def counting_seams(task: Task) -> RunSeams:
        built.append(task.id)
        return seams(task)

    reads = store.reads
    again = await run_many(AGENT, given, seams=counting_seams, store=store, batch="b")
    assert (store.commits, store.records, await store.run_ids()) == (commits, records, runs)
    assert store.reads - reads == 200  # each finished log read once
    assert again.what == {"skipped": 200}
    assert built == []  # a skipped task's seams are never built
    assert again.stop_reasons == {"agent_finished": 200}  # read from the logs
    assert again.steps.max == 3
    assert again.usage == {"completion_tokens": 600}


async def test_new_tasks_in_a_rerun_are_started_and_the_old_ones_skipped() -> None:
    store = MemoryStore()
    await run_many(AGENT, tasks(3), seams=seams, store=store, batch="b")
    summary = await run_many(AGENT, tasks(5), seams=seams, store=store, batch="b")
    assert summary.what == {"started": 2, "skipped": 3}
    assert len(await store.run_ids()) == 5


async def test_the_summary_counts_steps_actions_and_usage_of_the_finished_runs() -> None:
    given = [Task(f"t{n}", f"steps={n}") for n in range(10)]
    summary = await run_many(AGENT, given, seams=seams, store=MemoryStore(), batch="b")
    # n actions then a final answer: n + 1 steps, n executed actions, n + 1 replies
    assert (summary.steps.median, summary.steps.p90, summary.steps.max) == (5, 9, 10)
    assert (summary.executed_actions.median, summary.executed_actions.max) == (4, 9)
    assert summary.usage == {"completion_tokens": sum(n + 1 for n in range(10))}
    assert summary.share("agent_finished") == 1.0
    assert summary.unfinished == 0
    assert summary.wall_s > 0


async def test_the_seams_factory_is_called_once_per_run_with_its_task() -> None:
    seen: list[Task] = []

    def recording(task: Task) -> RunSeams:
        seen.append(task)
        return seams(task)

    given = tasks(20)
    await run_many(AGENT, given, seams=recording, store=MemoryStore(), batch="b", concurrency=4)
    assert sorted(seen, key=lambda t: t.id) == given


async def test_a_mapping_of_seams_is_accepted() -> None:
    def as_mapping(task: Task) -> dict[str, Any]:
        found = seams(task)
        return {"model": found.model, "parser": found.parser, "executor": found.executor}

    summary = await run_many(AGENT, tasks(3), seams=as_mapping, store=MemoryStore(), batch="b")
    assert summary.what == {"started": 3}


async def test_each_run_gets_its_own_executor_and_it_is_closed_when_the_run_stops() -> None:
    executors: list[object] = []

    def recording(task: Task) -> RunSeams:
        found = seams(task)
        executors.append(found.executor)
        return found

    await run_many(AGENT, tasks(6), seams=recording, store=MemoryStore(), batch="b")
    assert len({id(e) for e in executors}) == 6
    assert sorted(CLOSED) == [t.id for t in tasks(6)]


async def test_concurrency_bounds_the_runs_in_flight() -> None:
    in_flight = peak = 0

    class Watched(batch_doubles.CountingExecutor):
        async def execute(self, action: polyloop.Action) -> polyloop.ActionOutcome:
            nonlocal in_flight, peak
            in_flight += 1
            peak = max(peak, in_flight)
            try:
                await asyncio.sleep(0.001)
                return await super().execute(action)
            finally:
                in_flight -= 1

    def watched(task: Task) -> RunSeams:
        return RunSeams(batch_doubles.StepModel(task), batch_doubles.StepParser(), Watched(task))

    await run_many(AGENT, tasks(30), seams=watched, store=MemoryStore(), batch="b", concurrency=3)
    assert peak == 3


async def test_a_store_url_is_opened_and_closed_by_run_many(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    summary = await run_many(AGENT, tasks(4), seams=seams, store=url, batch="b")
    assert summary.what == {"started": 4}
    async with SQLiteStore(tmp_path / "runs.db") as store:
        assert len(await store.run_ids()) == 4


async def test_progress_is_called_with_every_outcome() -> None:
    seen: list[polyloop.TaskOutcome] = []
    summary = await run_many(
        AGENT, tasks(7), seams=seams, store=MemoryStore(), batch="b", progress=seen.append
    )
    assert seen == list(summary.outcomes)
    assert len(seen) == 7


async def test_an_outcome_pickles() -> None:
    summary = await run_many(AGENT, tasks(1), seams=seams, store=MemoryStore(), batch="b")
    outcome = summary.outcomes[0]
    assert pickle.loads(pickle.dumps(outcome)) == outcome


# --------------------------------------------------------------------------- one run failing


async def test_a_seam_raising_fails_its_run_alone_and_leaves_it_resumable() -> None:
    store = MemoryStore()
    given = [*tasks(5), Task("broken", "steps=2 fail")]
    summary = await run_many(AGENT, given, seams=seams, store=store, batch="b")
    assert summary.what == {"started": 5, "failed": 1}
    (failed,) = summary.failures
    assert failed.task_id == "broken"
    assert failed.error == "RuntimeError: the executor of broken broke"
    log = await store.read_log("b.broken")
    assert log.finished is None
    assert isinstance(log.records[-1], ActionIntent)
    assert summary.unfinished == 1


async def test_a_failed_run_is_resumed_by_the_next_invocation() -> None:
    store = MemoryStore()
    await run_many(AGENT, [Task("x", "steps=2 fail")], seams=seams, store=store, batch="b")

    def mended(task: Task) -> RunSeams:
        return RunSeams(
            batch_doubles.StepModel(task),
            batch_doubles.StepParser(),
            batch_doubles.CountingExecutor(Task(task.id, "steps=2")),
        )

    # The goal is the same task; only the executor is mended (it ran once and raised: the
    # intent has no result, so the loop decides resume_state_unknown, never a replay).
    summary = await run_many(AGENT, [Task("x", "steps=2 fail")], seams=mended, store=store,
                             batch="b")  # fmt: skip
    assert summary.what == {"resumed": 1}
    assert summary.stop_reasons == {"resume_state_unknown": 1}
    assert CALLS[("x", "x-0")] == 1


async def test_a_seams_factory_that_raises_or_returns_junk_fails_that_task_only() -> None:
    def picky(task: Task) -> Any:
        if task.id == "t000":
            raise LookupError("no model for t000")
        if task.id == "t001":
            return {"model": None}
        if task.id == "t002":
            return "seams"
        return seams(task)

    store = MemoryStore()
    summary = await run_many(AGENT, tasks(5), seams=picky, store=store, batch="b")
    errors = {o.task_id: o.error for o in summary.failures}
    assert errors["t000"] == "LookupError: no model for t000"
    assert "without parser, executor" in (errors["t001"] or "")
    assert "got str" in (errors["t002"] or "")
    assert summary.what == {"started": 2, "failed": 3}
    assert await store.run_ids() == ["b.t003", "b.t004"]  # nothing written for the others


# --------------------------------------------------------------------------- interruption


async def test_cancelling_run_many_leaves_the_runs_in_flight_unfinished_and_resumable() -> None:
    store = MemoryStore()
    given = tasks(10, "steps=3 slow=0.05")
    batch = asyncio.create_task(
        run_many(AGENT, given, seams=seams, store=store, batch="b", concurrency=4)
    )
    await batch_doubles.calls_reach(6)
    batch.cancel()
    with pytest.raises(asyncio.CancelledError):
        await batch
    unfinished = 0
    for run_id in await store.run_ids():
        log = await store.read_log(run_id)
        assert log.finished is None or log.finished.stop_reason is not StopReason.CANCELLED
        unfinished += log.finished is None
    assert unfinished == 4  # the four in flight; none finished cancelled
    calls_before = dict(CALLS)
    summary = await run_many(AGENT, given, seams=seams, store=store, batch="b")
    assert summary.what.get("resumed") == 4
    assert "cancelled" not in summary.stop_reasons
    for key, count in CALLS.items():
        assert count == 1, key  # no action ran twice, across both invocations
    assert set(calls_before) <= set(CALLS)
    for task in given:
        assert len(await finishes(store, batch_run_id("b", task.id))) == 1


async def test_an_interrupt_event_gives_a_summary_instead_of_cancellation() -> None:
    from polyloop._batch import execute, plan, vet

    store = MemoryStore()
    checked = plan(
        AGENT,
        tasks(10, "steps=3 slow=0.05"),
        seams=seams,
        store=store,
        store_url=None,
        batch="b",
        concurrency=2,
        time_limit_s=None,
        backend=None,
    )
    checked = await vet(checked)
    interrupt = asyncio.Event()
    asyncio.get_running_loop().call_later(0.12, interrupt.set)
    summary = await execute(checked, interrupt=interrupt)
    assert summary.interrupted
    assert summary.what.get("interrupted") == 2
    assert summary.what.get("not_started", 0) > 0
    assert sum(summary.what.values()) == 10
    for outcome in summary.outcomes:
        if outcome.what == "interrupted":
            assert (await store.read_log(outcome.run_id)).finished is None


async def test_a_deliberate_cancel_of_run_still_finishes_cancelled() -> None:
    store = MemoryStore()
    task = Task("x", "steps=3 slow=1")
    running = asyncio.create_task(
        polyloop.run(AGENT, task.goal, store=store, run_id="x", **_kwargs(task))
    )
    await batch_doubles.calls_reach(1)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    log = await store.read_log("x")
    assert log.finished is not None
    assert log.finished.stop_reason is StopReason.CANCELLED


def _kwargs(task: Task) -> dict[str, Any]:
    found = seams(task)
    return {"model": found.model, "parser": found.parser, "executor": found.executor}


# --------------------------------------------------------------------------- time limit


async def test_a_run_past_its_time_limit_finishes_time_limit() -> None:
    store = MemoryStore()
    given = [Task("slow", "steps=5 slow=0.2"), Task("quick", "steps=1")]
    summary = await run_many(AGENT, given, seams=seams, store=store, batch="b", time_limit_s=0.3)
    assert summary.stop_reasons == {"agent_finished": 1, "time_limit": 1}
    log = await store.read_log("b.slow")
    assert log.finished is not None
    assert log.finished.stop_reason is StopReason.TIME_LIMIT
    assert isinstance(log.records[-2], ActionIntent)  # cut inside the action, as cancel would
    assert 0 < len(log.steps) < 5


async def test_a_time_limit_cut_in_the_model_call_finishes_time_limit() -> None:
    store = MemoryStore()
    summary = await run_many(AGENT, [Task("t", "steps=1 think=5")], seams=seams, store=store,
                             batch="b", time_limit_s=0.05)  # fmt: skip
    assert summary.stop_reasons == {"time_limit": 1}
    assert (await store.read_log("b.t")).records[-2].kind == "model_call_intent"


async def test_a_seams_own_timeout_error_is_a_failure_not_the_time_limit() -> None:
    class TimingOut(batch_doubles.CountingExecutor):
        async def execute(self, action: polyloop.Action) -> polyloop.ActionOutcome:
            raise TimeoutError("the tool timed out")

    def timing_out(task: Task) -> RunSeams:
        return RunSeams(batch_doubles.StepModel(task), batch_doubles.StepParser(), TimingOut(task))

    store = MemoryStore()
    summary = await run_many(AGENT, tasks(1), seams=timing_out, store=store, batch="b",
                             time_limit_s=30)  # fmt: skip
    assert summary.failures[0].error == "TimeoutError: the tool timed out"
    assert (await store.read_log("b.t000")).finished is None


async def test_a_time_limit_is_not_reached_by_a_quick_run() -> None:
    summary = await run_many(AGENT, tasks(3), seams=seams, store=MemoryStore(), batch="b",
                             time_limit_s=30)  # fmt: skip
    assert summary.stop_reasons == {"agent_finished": 3}


# --------------------------------------------------------------------------- refusals


async def test_a_changed_goal_is_refused_before_anything_starts() -> None:
    store = CountingStore()
    await run_many(AGENT, tasks(3), seams=seams, store=store, batch="b")
    commits = store.commits
    changed = [*tasks(3)[:2], Task("t002", "steps=9"), Task("new", "steps=1")]
    with pytest.raises(TaskRefused, match=r"task 3: task 't002': run b\.t002 was started with "
                       r"another goal \('steps=2', now 'steps=9'\)") as refused:  # fmt: skip
        await run_many(AGENT, changed, seams=seams, store=store, batch="b")
    assert (refused.value.index, refused.value.task_id) == (2, "t002")
    assert store.commits == commits  # the new task was not started either
    assert "b.new" not in await store.run_ids()


async def test_changed_labels_are_refused_and_the_other_refusals_counted() -> None:
    store = MemoryStore()
    await run_many(AGENT, tasks(3, split="a"), seams=seams, store=store, batch="b")
    with pytest.raises(TaskRefused, match="other labels") as refused:
        await run_many(AGENT, tasks(3, split="b"), seams=seams, store=store, batch="b")
    assert refused.value.others == 2
    assert "2 more tasks refused likewise" in str(refused.value)


async def test_a_run_of_another_batch_under_the_same_id_is_refused() -> None:
    store = MemoryStore()
    # batch "a" with task "b.c" and batch "a.b" with task "c" both make run id "a.b.c"
    await run_many(AGENT, [Task("b.c", "steps=1")], seams=seams, store=store, batch="a")
    with pytest.raises(TaskRefused, match=r"was not started for task 'c' of batch 'a\.b'"):
        await run_many(AGENT, [Task("c", "steps=1")], seams=seams, store=store, batch="a.b")


async def test_a_run_started_by_hand_under_a_batch_run_id_is_refused() -> None:
    store = MemoryStore()
    task = Task("t", "steps=1")
    await polyloop.run(AGENT, task.goal, store=store, run_id="b.t", **_kwargs(task))
    with pytest.raises(TaskRefused, match="names batch None, task None"):
        await run_many(AGENT, [task], seams=seams, store=store, batch="b")


async def test_an_unfinished_run_of_another_agent_is_refused_a_finished_one_skipped() -> None:
    store = MemoryStore()
    await run_many(AGENT, [Task("x", "steps=2 fail"), Task("y", "steps=1")], seams=seams,
                   store=store, batch="b")  # fmt: skip
    other = polyloop.AgentDefinition(
        system_prompt="Another prompt.",
        budget=AGENT.budget,
        synthetic_observations=AGENT.synthetic_observations,
    )
    with pytest.raises(TaskRefused, match="unfinished and was started with other agent"):
        await run_many(other, [Task("x", "steps=2 fail")], seams=seams, store=store, batch="b")
    summary = await run_many(other, [Task("y", "steps=1")], seams=seams, store=store, batch="b")
    assert summary.what == {"skipped": 1}


@pytest.mark.parametrize(
    ("task_id", "why"),
    [
        ("has space", "makes no valid run id"),
        ("../etc", "makes no valid run id"),
        ("a/b", "makes no valid run id"),
        ("\ud800", "makes no valid run id"),
        ("é", "makes no valid run id"),
        ("x" * 200, "makes no valid run id"),
    ],
)
async def test_a_task_whose_run_id_would_be_invalid_is_refused(task_id: str, why: str) -> None:
    store = CountingStore()
    with pytest.raises(TaskRefused, match=why) as refused:
        await run_many(AGENT, [*tasks(2), Task(task_id, "g")], seams=seams, store=store,
                       batch="b")  # fmt: skip
    assert refused.value.index == 2
    assert store.commits == 0


async def test_a_duplicate_task_id_is_refused_naming_both_positions() -> None:
    store = CountingStore()
    with pytest.raises(TaskRefused, match=r"task 3: duplicate task id 't000' \(first at task 1\)"):
        await run_many(AGENT, [*tasks(2), Task("t000", "g")], seams=seams, store=store, batch="b")
    assert store.commits == 0


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"agent": "agent"}, TypeError, "agent must be an AgentDefinition"),
        ({"seams": None}, TypeError, "seams must be a callable"),
        ({"concurrency": 0}, ValueError, "concurrency must be an int >= 1"),
        ({"concurrency": -3}, ValueError, "concurrency must be an int >= 1"),
        ({"concurrency": True}, ValueError, "concurrency must be an int >= 1"),
        ({"concurrency": 2.0}, ValueError, "concurrency must be an int >= 1"),
        ({"time_limit_s": 0}, ValueError, "time_limit_s must be a finite number > 0"),
        ({"time_limit_s": float("inf")}, ValueError, "time_limit_s must be a finite number"),
        ({"time_limit_s": float("nan")}, ValueError, "time_limit_s must be a finite number"),
        ({"batch": None}, TypeError, "batch must be a str"),
        ({"batch": ""}, TaskRefused, "batch id must not be empty"),
        ({"batch": "-b"}, TaskRefused, "batch id '-b' cannot start a run id"),
        ({"batch": "a b"}, TaskRefused, "batch id 'a b' cannot start a run id"),
        ({"tasks": "t000"}, TypeError, "tasks must be an iterable of Task, got str"),
        ({"tasks": [{"id": "x", "goal": "g"}]}, TypeError, "task 1 is not a Task, got dict"),
        ({"backend": object()}, TypeError, "backend must have a run"),
    ],
)
async def test_bad_arguments_are_refused_before_anything_is_written(
    kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    store = CountingStore()
    arguments: dict[str, Any] = {
        "agent": AGENT, "tasks": tasks(2), "seams": seams, "store": store, "batch": "b",
        **kwargs,
    }  # fmt: skip
    with pytest.raises(error, match=match):
        await run_many(arguments.pop("agent"), arguments.pop("tasks"), **arguments)
    assert store.commits == 0
    assert await store.run_ids() == []


async def test_no_tasks_is_an_empty_summary() -> None:
    summary = await run_many(AGENT, [], seams=seams, store=MemoryStore(), batch="b")
    assert (summary.tasks, summary.outcomes, summary.stop_reasons) == (0, (), {})


async def test_a_store_that_cannot_be_read_is_raised_before_anything_starts(tmp_path: Path) -> None:
    not_a_store = tmp_path / "x.db"
    not_a_store.write_bytes(b"hello, not sqlite" * 100)
    with pytest.raises(polyloop.StoreCorrupted):
        await run_many(AGENT, tasks(2), seams=seams, store=str(not_a_store), batch="b")
    assert not_a_store.read_bytes() == b"hello, not sqlite" * 100


# --------------------------------------------------------------------------- drive_task


async def test_drive_task_skips_a_finished_run_without_building_its_seams() -> None:
    store = CountingStore()
    task = Task("t", "steps=1")
    first = await drive_task(AGENT, task, seams=seams, store=store, batch="b")
    commits = store.commits

    def forbidden(task: Task) -> RunSeams:
        raise AssertionError("seams built for a finished run")

    again = await drive_task(AGENT, task, seams=forbidden, store=store, batch="b")
    assert (first.what, again.what, store.commits) == ("started", "skipped", commits)
    assert (again.steps, again.executed_actions, again.stop_reason) == (2, 1, "agent_finished")


async def test_drive_task_refuses_when_the_store_changed_since_the_check() -> None:
    store = MemoryStore()
    await drive_task(AGENT, Task("t", "steps=1"), seams=seams, store=store, batch="b")
    outcome = await drive_task(AGENT, Task("t", "other"), seams=seams, store=store, batch="b")
    assert outcome.what == "refused"
    assert "another goal" in (outcome.error or "")


async def test_drive_task_reports_a_store_failure_as_a_failed_task() -> None:
    class Unreadable(MemoryStore):
        async def read_log(self, run_id: str) -> polyloop.RunLog:
            raise ConnectionError("the store is gone")

    outcome = await drive_task(AGENT, Task("t", "g"), seams=seams, store=Unreadable(), batch="b")
    assert (outcome.what, outcome.error) == ("failed", "ConnectionError: the store is gone")


async def test_run_started_without_batch_fields_reads_as_none() -> None:
    store = MemoryStore()
    task = Task("t", "steps=1")
    await polyloop.run(AGENT, task.goal, store=store, run_id="plain", **_kwargs(task))
    started = (await store.read_log("plain")).started
    assert isinstance(started, RunStarted)
    assert (started.batch, started.task_id, started.labels) == (None, None, {})


async def test_lone_surrogates_in_goal_and_labels_survive_a_durable_store_and_a_rerun(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    task = Task("t", "steps=1 \ud800", {"\udcff": "\ud83d", "k": "日本"})
    first = await run_many(AGENT, [task], seams=seams, store=url, batch="b")
    again = await run_many(AGENT, [task], seams=seams, store=url, batch="b")
    assert (first.what, again.what) == ({"started": 1}, {"skipped": 1})


async def test_a_huge_goal_is_recorded_whole() -> None:
    store = MemoryStore()
    goal = "steps=1 " + "x" * 1_000_000
    await run_many(AGENT, [Task("t", goal)], seams=seams, store=store, batch="b")
    started = (await store.read_log("b.t")).started
    assert started is not None
    assert started.goal == goal
