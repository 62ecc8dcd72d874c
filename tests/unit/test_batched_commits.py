"""Two durable commits per action step (issue #13, SPEC §4): the records no side effect waits for
ride in the next commit, every commit is all or nothing, and events follow durability."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from polyloop import Event, ModelCallIntent, Record, RunFinished, RunStarted, StopReason
from polyloop.errors import RunAlreadyExists, RunAlreadyFinished, RunConflict
from polyloop.stores import MemoryStore, SQLiteStore
from tests.unit._doubles import act, agent, final, invalid, kinds, run_to_end, script

pytestmark = pytest.mark.asyncio


class CommitLog(MemoryStore):
    """The reference store, remembering the kinds of each commit."""

    def __init__(self) -> None:
        super().__init__()
        self.commits: list[list[str]] = []

    async def append_many(self, run_id: str, records: Sequence[Record], *, sequence: int) -> None:
        await super().append_many(run_id, records, sequence=sequence)
        self.commits.append([r.kind for r in records])


class DurabilityCheckingSink:
    """Asserts, at every event, that its record is already in the store at its sequence."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self.events: list[Event] = []

    async def emit(self, event: Event) -> None:
        log = await self.store.read_log(event.run_id)
        assert log.records[event.sequence] == event.record
        self.events.append(event)


def started(run_id: str) -> RunStarted:
    return RunStarted(
        run_id=run_id,
        goal="g",
        parameters={},
        parameters_hash="sha256:" + "0" * 64,
        started_at="2026-01-01T00:00:00.000Z",
    )


def finished() -> RunFinished:
    return RunFinished(
        stop_reason=StopReason.AGENT_FINISHED,
        final_answer="done",
        executed_actions=0,
        finished_at="2026-01-01T00:00:01.000Z",
    )


async def test_an_action_step_makes_two_durable_commits_and_the_final_step_one():
    store = CommitLog()

    outcome = await run_to_end(script(act(), final()), agent(), store=store)

    assert outcome.result is not None
    assert store.commits == [
        ["run_started", "model_call_intent"],  # before the first model call
        ["model_replied", "action_intent"],  # before the action
        ["step_completed", "model_call_intent"],  # before the second model call
        ["model_replied", "step_completed", "run_finished"],  # before run() returns
    ]


async def test_a_parse_failure_rides_with_the_next_model_intent():
    store = CommitLog()

    await run_to_end(script(invalid(), final()), agent(), store=store)

    assert store.commits[1] == ["model_replied", "step_completed", "model_call_intent"]


async def test_each_event_is_emitted_once_in_order_after_its_record_is_durable():
    store = CommitLog()
    sink = DurabilityCheckingSink(store)

    outcome = await run_to_end(script(act(), invalid(), final()), agent(), store=store, events=sink)

    assert outcome.error is None
    assert [e.sequence for e in sink.events] == list(range(len(outcome.log)))
    assert [e.record for e in sink.events] == list(outcome.log.records)


async def test_the_log_is_the_same_with_and_without_batches():
    class OneByOne:  # the seam without append_many: the compatibility path
        def __init__(self) -> None:
            self.inner = MemoryStore()

        async def append(self, run_id: str, record: Record, *, sequence: int) -> None:
            await self.inner.append(run_id, record, sequence=sequence)

        async def read_log(self, run_id: str) -> Any:
            return await self.inner.read_log(run_id)

        async def run_ids(self) -> list[str]:
            return await self.inner.run_ids()

    batched = await run_to_end(script(act(), invalid(), final()), agent(), store=CommitLog())
    single = await run_to_end(script(act(), invalid(), final()), agent(), store=OneByOne())

    assert kinds(batched.log) == kinds(single.log)


# --------------------------------------------------------------------------- append_many input


@pytest_asyncio.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "memory":
        yield MemoryStore()
        return
    async with SQLiteStore(tmp_path / "runs.db") as sqlite:
        yield sqlite


@pytest.mark.parametrize(
    ("records", "error"),
    [
        ([], ValueError),
        ("run_started", TypeError),
        (b"xy", TypeError),
        (None, TypeError),
        (ModelCallIntent(step_index=0, prompt_chars=1), TypeError),  # a record, not a sequence
        ([ModelCallIntent(step_index=0, prompt_chars=1), {"kind": "run_finished"}], TypeError),
    ],
)
async def test_append_many_refuses_a_malformed_batch_and_writes_nothing(store, records, error):
    await store.append("r", started("r"), sequence=0)

    with pytest.raises(error):
        await store.append_many("r", records, sequence=1)

    assert kinds(await store.read_log("r")) == ["run_started"]


@pytest.mark.parametrize("shape", ["generator", "set", "dict keys"])
async def test_append_many_refuses_records_that_are_not_a_sequence_and_writes_nothing(store, shape):
    # A set has no order and a generator is used up by a first look: neither is a batch.
    batch = [ModelCallIntent(step_index=0, prompt_chars=1)]
    records = {
        "generator": (record for record in batch),
        "set": set(batch),
        "dict keys": dict.fromkeys(batch).keys(),
    }[shape]
    await store.append("r", started("r"), sequence=0)

    got = type(records).__name__  # generator, set, dict_keys
    with pytest.raises(TypeError, match=rf"^append_many expects a sequence of records, got {got}$"):
        await store.append_many("r", records, sequence=1)

    assert kinds(await store.read_log("r")) == ["run_started"]
    await store.append_many("r", tuple(batch), sequence=1)  # the same records as a tuple: kept
    assert kinds(await store.read_log("r")) == ["run_started", "model_call_intent"]


async def test_an_append_refused_names_how_many_records_the_log_holds(store):
    await store.append("r", started("r"), sequence=0)
    with pytest.raises(RunAlreadyExists, match=r"^run 'r' already has a log \(1 record\)$"):
        await store.append("r", started("r"), sequence=1)
    await store.append("r", ModelCallIntent(step_index=0, prompt_chars=1), sequence=1)
    conflict = r"at sequence 5 but the log has 2 records \(another process is driving this run\)$"
    with pytest.raises(RunConflict, match=conflict):
        await store.append("r", ModelCallIntent(step_index=1, prompt_chars=1), sequence=5)
    with pytest.raises(ValueError, match=r"^append_many needs at least one record$"):
        await store.append_many("r", [], sequence=2)
    with pytest.raises(TypeError, match=r"^append expects a polyloop record, got dict$"):
        await store.append_many("r", [{"kind": "run_finished"}], sequence=2)


@pytest.mark.parametrize(("run_id", "sequence"), [("../x", 0), ("", 0), ("r", -1), ("r", True)])
async def test_append_many_refuses_a_bad_run_id_or_sequence(store, run_id, sequence):
    with pytest.raises(ValueError, match=r"run id|sequence"):
        await store.append_many(run_id, [started("r")], sequence=sequence)

    assert await store.run_ids() == []


async def test_sqlite_fence_sees_another_writers_finish_past_its_cached_length(tmp_path: Path):
    # Two store objects on one file stand for two processes: each knows only its own commits.
    db = tmp_path / "runs.db"
    async with SQLiteStore(db) as first, SQLiteStore(db) as second:
        await first.append_many(
            "r", [started("r"), ModelCallIntent(step_index=0, prompt_chars=1)], sequence=0
        )
        await second.append("r", finished(), sequence=2)

        with pytest.raises(RunAlreadyFinished):
            await first.append_many(
                "r", [ModelCallIntent(step_index=1, prompt_chars=1)], sequence=2
            )
        with pytest.raises(RunAlreadyFinished):
            await first.append("r", ModelCallIntent(step_index=1, prompt_chars=1), sequence=3)

        assert kinds(await first.read_log("r")) == ["run_started", "model_call_intent",
                                                     "run_finished"]  # fmt: skip


async def test_sqlite_fence_refuses_a_batch_another_writer_overtook(tmp_path: Path):
    db = tmp_path / "runs.db"
    async with SQLiteStore(db) as first, SQLiteStore(db) as second:
        await first.append_many(
            "r", [started("r"), ModelCallIntent(step_index=0, prompt_chars=1)], sequence=0
        )
        await second.append("r", ModelCallIntent(step_index=1, prompt_chars=2), sequence=2)

        with pytest.raises(RunConflict):
            await first.append_many(
                "r", [ModelCallIntent(step_index=1, prompt_chars=3), finished()], sequence=2
            )

        log = await first.read_log("r")
        assert [r.kind for r in log.records] == ["run_started"] + ["model_call_intent"] * 2
        assert log.records[2] == ModelCallIntent(step_index=1, prompt_chars=2)


async def test_a_record_after_run_finished_in_the_same_batch_is_refused_and_nothing_written(
    store: Any,
) -> None:
    # The rule "nothing after RunFinished" holds inside one batch too, as if appended one by
    # one: the batch [RunFinished, ModelCallIntent] is RunAlreadyFinished, with nothing written.
    await store.append("r", started("r"), sequence=0)
    finished = RunFinished(
        stop_reason=StopReason.AGENT_FINISHED,
        final_answer="done",
        executed_actions=0,
        finished_at="2026-12-02T10:00:00.000Z",
    )

    with pytest.raises(RunAlreadyFinished):
        await store.append_many(
            "r", [finished, ModelCallIntent(step_index=0, prompt_chars=1)], sequence=1
        )

    assert kinds(await store.read_log("r")) == ["run_started"]
    await store.append_many("r", [finished], sequence=1)  # alone, it is fine
    assert kinds(await store.read_log("r")) == ["run_started", "run_finished"]
