"""The run index of every bundled store: rows agree with the logs, filters select, statistics
count, and the row is written in the records' own transaction."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from polyloop import (
    IndexNotBuilt,
    ModelCallIntent,
    Percentiles,
    Record,
    RunConflict,
    RunQuery,
    StopReason,
)
from polyloop._base._run_index import (
    histogram_percentiles,
    nearest_rank,
    percentiles,
    stats_of,
    summarize_log,
)
from polyloop.ports import IndexedRunStore
from polyloop.stores import MemoryStore, SQLiteStore, open_store
from tests.unit._index_runs import finished, run_batches

STRANGE = "naïve ✓ \ud800 \x00 key"  # a lone surrogate and a NUL: neither database's text


@pytest_asyncio.fixture(
    params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    if request.param == "memory":
        built: Any = MemoryStore()
    elif request.param == "sqlite":
        built = SQLiteStore(tmp_path / "runs.db")
    else:
        built = open_store(request.getfixturevalue("postgres_database_dsn"))
    async with built:
        yield built


async def write(store: Any, run_id: str, batches: Sequence[Sequence[Record]]) -> None:
    sequence = 0
    for batch in batches:
        await store.append_many(run_id, list(batch), sequence=sequence)
        sequence += len(batch)


async def fill(store: Any) -> None:
    await write(
        store,
        "a-done",
        run_batches(
            "a-done",
            steps=3,
            reason=StopReason.AGENT_FINISHED,
            at="2026-11-30T10:00:00.000Z",
            batch="b1",
            task_id="t1",
            labels={"split": "train", STRANGE: STRANGE},
            usage={"prompt_tokens": 10, "cost": 0.5},
        ),
    )
    await write(
        store,
        "b-budget",
        run_batches(
            "b-budget",
            steps=5,
            reason=StopReason.STEP_BUDGET,
            at="2026-11-30T11:00:00.000Z",
            batch="b1",
            task_id="t2",
            labels={"split": "test"},
            usage={"prompt_tokens": 1},
        ),
    )
    await write(
        store,
        "c-running",
        run_batches(
            "c-running", steps=2, reason=None, at="2026-12-01T09:00:00.000Z", batch=STRANGE
        ),
    )
    await write(store, "d-plain", run_batches("d-plain", steps=1, reason=StopReason.AGENT_FINISHED))


def ids(rows: Sequence[Any]) -> list[str]:
    return [row.run_id for row in rows]


@pytest.mark.asyncio
async def test_every_bundled_store_offers_the_index(store: Any) -> None:
    assert isinstance(store, IndexedRunStore)


@pytest.mark.asyncio
async def test_each_row_agrees_with_the_summary_of_its_log(store: Any) -> None:
    await fill(store)

    rows = await store.query_runs(RunQuery())

    assert ids(rows) == ["a-done", "d-plain", "b-budget", "c-running"]  # oldest first
    for row in rows:
        assert row == summarize_log(row.run_id, await store.read_log(row.run_id))
    done = rows[0]
    assert (done.batch, done.task_id, done.stop_reason) == ("b1", "t1", "agent_finished")
    assert done.labels == {"split": "train", STRANGE: STRANGE}
    assert (done.steps, done.executed_actions) == (3, 3)
    assert done.usage == {"prompt_tokens": 30, "cost": 1.5}
    assert type(done.usage["prompt_tokens"]) is int
    running = rows[-1]
    assert (running.batch, running.stop_reason, running.finished_at) == (STRANGE, None, None)
    assert (running.steps, running.executed_actions) == (2, 2)


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("query", "expected"),
    [
        (RunQuery(batch="b1"), ["a-done", "b-budget"]),
        (RunQuery(batch=STRANGE), ["c-running"]),
        (RunQuery(batch="nope"), []),
        (RunQuery(stop_reasons=("running",)), ["c-running"]),
        (RunQuery(stop_reasons=("step_budget", "running")), ["b-budget", "c-running"]),
        (RunQuery(since="2026-11-30T10:30:00Z"), ["b-budget", "c-running"]),
        (RunQuery(since="2026-12-01"), ["c-running"]),
        (RunQuery(since="2026-11-30T12:30:00+02:00"), ["b-budget", "c-running"]),
        (RunQuery(labels={"split": "test"}), ["b-budget"]),
        (RunQuery(labels={STRANGE: STRANGE, "split": "train"}), ["a-done"]),
        (RunQuery(labels={STRANGE: "other"}), []),
        (RunQuery(limit=2), ["b-budget", "c-running"]),  # the newest two, oldest first
        (RunQuery(batch="b1", limit=1), ["b-budget"]),
        (RunQuery(limit=100), ["a-done", "d-plain", "b-budget", "c-running"]),
    ],
)
@pytest.mark.asyncio
async def test_filters_select_the_runs_they_name(
    store: Any, query: RunQuery, expected: list[str]
) -> None:
    await fill(store)

    assert ids(await store.query_runs(query)) == expected


@pytest.mark.asyncio
async def test_stats_count_stop_reasons_spread_and_usage(store: Any) -> None:
    await fill(store)

    stats = await store.run_stats(RunQuery())

    assert (stats.runs, stats.running) == (4, 1)
    assert stats.stop_reasons == {"agent_finished": 2, "step_budget": 1}
    assert stats.steps == Percentiles(median=3, p90=5, max=5)  # over 1, 3, 5
    assert stats.usage == {"prompt_tokens": 35, "cost": 1.5}
    assert (await store.run_stats(RunQuery(batch="b1", limit=1))).runs == 2  # limit ignored
    empty = await store.run_stats(RunQuery(batch="nope"))
    assert (empty.runs, empty.steps, empty.usage) == (0, None, {})


@pytest.mark.asyncio
async def test_a_refused_batch_leaves_the_row_as_it_was(store: Any) -> None:
    batches = run_batches("r", steps=2, reason=None, batch="b")
    await write(store, "r", batches)
    before = await store.query_runs(RunQuery())
    length = sum(len(b) for b in batches)

    with pytest.raises(RunConflict):
        await store.append_many(
            "r",
            [ModelCallIntent(step_index=2, prompt_chars=1), finished(StopReason.ENV_ERROR)],
            sequence=length - 1,
        )

    assert await store.query_runs(RunQuery()) == before
    assert before[0].stop_reason is None


@pytest.mark.asyncio
async def test_usage_numbers_beyond_64_bits_are_indexed_without_failing_the_append(
    store: Any,
) -> None:
    huge = 1 << 70
    await write(store, "big", run_batches("big", steps=2, reason=None, usage={"tokens": huge}))

    (row,) = await store.query_runs(RunQuery())

    assert row.usage["tokens"] == pytest.approx(float(2 * huge))


def test_sqlite_writes_the_row_in_the_records_transaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The index write fails after the records were inserted: the records must go too.
    import polyloop.stores._sqlite as sqlite_module

    def broken(*args: object) -> None:
        raise RuntimeError("index write failed")

    async def go() -> tuple[int, list[Any]]:
        async with SQLiteStore(tmp_path / "runs.db") as store:
            await write(store, "r", run_batches("r", steps=1, reason=None))
            monkeypatch.setattr(sqlite_module, "index_batch", broken)
            with pytest.raises(RuntimeError, match="index write failed"):
                await store.append_many("r", [finished()], sequence=5)
            monkeypatch.undo()
            return len((await store.read_log("r")).records), await store.query_runs(RunQuery())

    length, rows = asyncio.run(go())

    assert length == 5  # the RunFinished was rolled back with its index write
    assert rows[0].stop_reason is None


@pytest.mark.postgres
def test_postgres_writes_the_row_in_the_records_transaction(postgres_database_dsn: str) -> None:
    import psycopg

    async def go() -> tuple[int, list[Any]]:
        async with open_store(postgres_database_dsn) as store:  # type: ignore[attr-defined]
            await write(store, "r", run_batches("r", steps=1, reason=None))
            # The run's end refused where the index is written (the runs row's end columns):
            # the records written in the same statement are rolled back with it.
            async with await psycopg.AsyncConnection.connect(
                postgres_database_dsn, autocommit=True
            ) as admin:
                await admin.execute(
                    "CREATE FUNCTION refuse_end() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                    "IF NEW.finished_at IS NOT NULL THEN RAISE EXCEPTION 'index write failed'; "
                    "END IF; RETURN NEW; END $$"
                )
                await admin.execute(
                    "CREATE TRIGGER refuse_end BEFORE UPDATE ON polyloop_runs "
                    "FOR EACH ROW EXECUTE FUNCTION refuse_end()"
                )
                with pytest.raises(psycopg.errors.RaiseException, match="index write failed"):
                    await store.append_many("r", [finished()], sequence=5)
                await admin.execute("DROP TRIGGER refuse_end ON polyloop_runs")
            rows = await store.query_runs(RunQuery())
            return len((await store.read_log("r")).records), rows

    length, rows = asyncio.run(go())

    assert length == 5
    assert rows[0].stop_reason is None


@pytest.mark.postgres
def test_postgres_opened_without_migrating_refuses_to_append(postgres_database_dsn: str) -> None:
    from polyloop.stores import PostgresStore

    async def go() -> None:
        async with PostgresStore(postgres_database_dsn, migrate=False) as store:
            # A new database: the store makes the current schema, so the index is there.
            await write(store, "r", run_batches("r", steps=1, reason=None))
            assert ids(await store.query_runs(RunQuery())) == ["r"]

    asyncio.run(go())
    assert IndexNotBuilt.__mro__[1].__name__ == "PolyloopError"


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([7], (7, 7, 7)),
        ([1, 2], (1, 2, 2)),
        (list(range(1, 11)), (5, 9, 10)),
        (list(range(1, 71)), (35, 63, 70)),  # 0.9 * 70 in floats is 63.000...01
        ([5, 1, 3], (3, 5, 5)),
    ],
)
def test_percentiles_are_nearest_rank_in_integers(
    values: list[int], expected: tuple[int, int, int]
) -> None:
    spread = percentiles(values)

    assert spread is not None
    assert (spread.median, spread.p90, spread.max) == expected
    assert nearest_rank(90, 70) == 63


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"stop_reasons": ("finished",)}, "unknown stop reason 'finished'"),
        ({"limit": 0}, "limit must be at least 1"),
        ({"limit": -5}, "limit must be at least 1"),
        ({"limit": True}, "limit must be an int"),
        ({"since": "yesterday"}, "invalid --since 'yesterday'"),
        ({"since": ""}, "invalid --since ''"),
        ({"labels": {"": "x"}}, "labels must map non-empty str to str"),
        ({"batch": 3}, "batch must be a str or None"),
    ],
)
def test_a_bad_query_is_refused_naming_what_is_wrong(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RunQuery(**kwargs)


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "query",
    [
        RunQuery(),
        RunQuery(batch="b1"),
        RunQuery(batch=STRANGE),
        RunQuery(stop_reasons=("running",)),
    ],
)
async def test_stats_from_the_tallies_agree_with_the_rows(store: Any, query: RunQuery) -> None:
    # The tallies answer a query by batch and stop reason; a start time makes a scan.
    await fill(store)
    await write(
        store,
        "e-env",
        run_batches("e-env", steps=2, reason=StopReason.ENV_ERROR, batch="b1", usage={"x": 2}),
    )

    tallied = await store.run_stats(query)
    scanned = await store.run_stats(replace(query, since="2000-01-01"))

    assert tallied == scanned == stats_of(await store.query_runs(query))


@pytest.mark.asyncio
async def test_a_batch_run_by_run_many_is_indexed_as_its_summary_counts_it(store: Any) -> None:
    from polyloop import run_many
    from tests import batch_doubles

    batch_doubles.reset()
    given = batch_doubles.tasks(12, "steps=2", split="dev")

    summary = await run_many(
        batch_doubles.AGENT, given, seams=batch_doubles.seams, store=store, batch="b7"
    )

    rows = await store.query_runs(RunQuery(batch="b7", labels={"split": "dev"}))
    assert sorted(row.task_id for row in rows) == sorted(task.id for task in given)
    for row in rows:
        assert row == summarize_log(row.run_id, await store.read_log(row.run_id))
    stats = await store.run_stats(RunQuery(batch="b7"))
    assert (stats.runs, stats.running) == (12, 0)
    assert stats.stop_reasons == summary.stop_reasons


def test_percentiles_of_a_histogram_are_those_of_the_values_it_counts() -> None:
    rng = random.Random(33)
    for _ in range(200):
        histogram = {rng.randrange(0, 40): rng.randrange(1, 5) for _ in range(rng.randrange(1, 9))}
        values = [value for value, count in histogram.items() for _ in range(count)]
        rng.shuffle(values)
        assert histogram_percentiles(histogram) == percentiles(values)
    assert histogram_percentiles({}) is None
    assert percentiles([]) is None
