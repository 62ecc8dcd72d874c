"""Group commit (docs/design/0005-group-commit.md) on the two durable stores.

Appends that wait to commit at the same moment share one transaction, and no promise weakens:
each batch is still all or nothing (a refused batch is rolled back alone), fenced (also against
a second store object on the same database), and durable before its append returns; a failing
shared ``COMMIT`` fails every waiter with nothing written; cancelling one waiter neither cuts
its group in half nor writes a batch whose group had not begun.

Contention is made, not timed. On SQLite the worker (and the connection) is held while the
appends start, so every one of them waits and the held worker's next job is one group. On
PostgreSQL one append to a ``blocker`` run is started first: it commits alone, and the appends
started with it find a commit in flight and wait for one group. Transactions are counted where
the database says: SQLite's ``COMMIT`` statements (the connection's trace), PostgreSQL's
``xmin`` (the id of the transaction that wrote each record row).
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

import polyloop
from polyloop import (
    ModelCallIntent,
    Record,
    RunAlreadyExists,
    RunAlreadyFinished,
    RunConflict,
    RunFinished,
    RunStarted,
    StopReason,
)
from polyloop.models import ScriptedModel
from polyloop.stores import PostgresStore, SQLiteStore
from tests.integration._scenario import CHILD_TIMEOUT_S

pytestmark = pytest.mark.asyncio

Outcome = BaseException | None
Append = Callable[[], Coroutine[Any, Any, None]]


def started(run_id: str) -> RunStarted:
    return RunStarted(
        run_id=run_id,
        goal="group",
        parameters={"budget": {"max_steps": 3}},
        parameters_hash="sha256:" + "0" * 64,
        started_at="2026-12-02T10:00:00.000Z",
    )


def intents(first: int, count: int, tag: int = 0) -> tuple[Record, ...]:
    """``count`` records for sequences ``first``…; ``tag`` tells two writers' batches apart."""
    return tuple(
        ModelCallIntent(step_index=first + n, prompt_chars=tag * 1000 + n + 1) for n in range(count)
    )


def finished() -> RunFinished:
    return RunFinished(
        stop_reason=StopReason.AGENT_FINISHED,
        final_answer="done",
        executed_actions=0,
        finished_at="2026-12-02T10:00:01.000Z",
    )


async def until(condition: Callable[[], Awaitable[bool]], what: str) -> None:
    """Poll ``condition`` until it holds (a safety net of CHILD_TIMEOUT_S against a hang)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + CHILD_TIMEOUT_S
    while not await condition():
        assert loop.time() < deadline, f"never happened: {what}"
        await asyncio.sleep(0.005)


class SQLiteHarness:
    """An ``SQLiteStore`` whose worker can be held, and whose ``COMMIT`` statements are counted
    (and can be paused, on the worker, inside a group's transaction)."""

    kind = "sqlite"
    database_error: type[BaseException] = sqlite3.OperationalError
    commit_error: type[BaseException] = sqlite3.IntegrityError

    def __init__(self, path: Path) -> None:
        self.path = path
        self.store = SQLiteStore(path)
        self.commits = 0
        self._pause: tuple[asyncio.AbstractEventLoop, asyncio.Event, threading.Event] | None = None
        self._unhold: threading.Event | None = None

    async def start(self) -> None:
        await self.store.__aenter__()

        def trace(statement: str) -> None:
            if statement != "COMMIT":
                return
            self.commits += 1
            pause = self._pause
            if pause is not None and threading.current_thread().name == "polyloop-sqlite":
                self._pause = None
                loop, reached, release = pause
                loop.call_soon_threadsafe(reached.set)
                release.wait(CHILD_TIMEOUT_S)

        await self.store._in_worker(
            self.store._with_connection, lambda conn: conn.set_trace_callback(trace)
        )

    async def close(self) -> None:
        await self.store.aclose()

    async def reset(self) -> None:
        """Count transactions from here on."""
        self.commits = 0

    async def transactions(self) -> int:
        """``COMMIT`` statements since :meth:`reset`."""
        return self.commits

    async def together(self, appends: Sequence[Append]) -> list[Outcome]:
        """Start ``appends`` while the worker is held: all of them wait, then commit as one
        group once it is released. Their outcomes, in order."""
        release, holding = threading.Event(), threading.Event()

        def hold(conn: sqlite3.Connection) -> None:
            holding.set()
            release.wait(CHILD_TIMEOUT_S)

        held = asyncio.ensure_future(self.store._in_worker(self.store._with_connection, hold))

        async def is_holding() -> bool:
            return holding.is_set()

        await until(is_holding, "the worker holds the connection")
        tasks = [asyncio.ensure_future(append()) for append in appends]
        await asyncio.sleep(0)  # every append has run to its wait for the group
        release.set()
        await held
        return list(await asyncio.gather(*tasks, return_exceptions=True))

    @contextlib.asynccontextmanager
    async def group_paused(self) -> AsyncIterator[None]:
        """Appends started in this block before :meth:`wait_paused` form one group, which stops
        inside its transaction (every batch written, the ``COMMIT`` not yet run) until the
        block is left. The worker is held until then, so that all of them wait for it."""
        loop = asyncio.get_running_loop()
        reached, release = asyncio.Event(), threading.Event()
        self._pause = (loop, reached, release)
        self._unhold, holding = threading.Event(), threading.Event()
        unhold = self._unhold

        def hold(conn: sqlite3.Connection) -> None:
            holding.set()
            unhold.wait(CHILD_TIMEOUT_S)

        held = asyncio.ensure_future(self.store._in_worker(self.store._with_connection, hold))

        async def is_holding() -> bool:
            return holding.is_set()

        await until(is_holding, "the worker holds the connection")
        try:
            yield
        finally:
            unhold.set()
            release.set()
            await held

    async def wait_paused(self) -> None:
        """Let the appends started so far commit as one group; wait until it is paused."""
        assert self._pause is not None
        assert self._unhold is not None
        reached = self._pause[1]
        await asyncio.sleep(0)  # every append has run to its wait for the group
        self._unhold.set()
        await asyncio.wait_for(reached.wait(), CHILD_TIMEOUT_S)

    async def refuse_record(self, run_id: str, sequence: int) -> None:
        """Make the database itself refuse that record's INSERT (not an append rule)."""
        with contextlib.closing(sqlite3.connect(self.path, isolation_level=None)) as conn:
            conn.execute(
                "CREATE TRIGGER refuse BEFORE INSERT ON polyloop_records "
                f"WHEN NEW.run_id = '{run_id}' AND NEW.sequence = {sequence} "
                "BEGIN SELECT abs(-9223372036854775808); END"  # integer overflow
            )

    async def fail_commit_with(self, run_id: str) -> None:
        """Make any transaction that wrote a record of ``run_id`` fail at its ``COMMIT`` (a
        deferred foreign key, checked only then), the transaction left open by SQLite."""
        with contextlib.closing(sqlite3.connect(self.path, isolation_level=None)) as conn:
            conn.execute("CREATE TABLE poison_parent (id INTEGER PRIMARY KEY)")
            conn.execute(
                "CREATE TABLE poison_child (parent INTEGER "
                "REFERENCES poison_parent (id) DEFERRABLE INITIALLY DEFERRED)"
            )
            conn.execute(
                "CREATE TRIGGER poison AFTER INSERT ON polyloop_records "
                f"WHEN NEW.run_id = '{run_id}' BEGIN INSERT INTO poison_child VALUES (1); END"
            )
        await self.store._in_worker(
            self.store._with_connection, lambda conn: conn.execute("PRAGMA foreign_keys=ON")
        )


class PostgresHarness:
    """A ``PostgresStore``; appends started together behind one that commits alone."""

    kind = "postgres"

    def __init__(self, dsn: str, name: str) -> None:
        import psycopg

        self.dsn = dsn
        self.store = PostgresStore(dsn)
        self.blocker = f"blocker-{name}"
        self.blocked = 0
        self.since = 0
        self.database_error: type[BaseException] = psycopg.errors.RaiseException
        self.commit_error: type[BaseException] = psycopg.errors.RaiseException

    async def start(self) -> None:
        await self.store.append(self.blocker, started(self.blocker), sequence=0)
        self.blocked = 1
        # Each record row's top-level transaction (a savepoint's rows have an xmin of their own,
        # txid_current() is the transaction's), kept or rolled back with the row.
        await self.query(
            "CREATE TABLE IF NOT EXISTS written_by (run_id text, sequence bigint, txid bigint)"
        )
        await self.query(
            "CREATE OR REPLACE FUNCTION note_txid() RETURNS trigger LANGUAGE plpgsql AS $$ "
            "BEGIN INSERT INTO written_by VALUES (NEW.run_id, NEW.sequence, txid_current()); "
            "RETURN NULL; END $$"
        )
        # Dropped first, not CREATE OR REPLACE TRIGGER: that needs PostgreSQL 14.
        await self.query("DROP TRIGGER IF EXISTS note_txid ON polyloop_records")
        await self.query(
            "CREATE TRIGGER note_txid AFTER INSERT ON polyloop_records "
            "FOR EACH ROW EXECUTE FUNCTION note_txid()"
        )

    async def close(self) -> None:
        await self.store.aclose()

    async def query(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        import psycopg

        async with await psycopg.AsyncConnection.connect(self.dsn, autocommit=True) as conn:
            cur = await conn.execute(sql, params)
            return list(await cur.fetchall()) if cur.description else []

    async def reset(self) -> None:
        """Count transactions from here on."""
        rows = await self.query("SELECT coalesce(max(txid), 0) FROM written_by")
        self.since = int(rows[0][0])

    async def transactions(self) -> int:
        """Transactions since :meth:`reset` that wrote records of the runs under test (the
        blocker's aside)."""
        rows = await self.query(
            "SELECT count(DISTINCT txid) FROM written_by "
            "WHERE txid > %s AND run_id NOT LIKE 'blocker-%%'",
            self.since,
        )
        return int(rows[0][0])

    async def together(self, appends: Sequence[Append]) -> list[Outcome]:
        blocker = asyncio.ensure_future(
            self.store.append_many(self.blocker, intents(self.blocked, 1), sequence=self.blocked)
        )
        self.blocked += 1
        tasks = [asyncio.ensure_future(append()) for append in appends]
        outcomes = list(await asyncio.gather(*tasks, return_exceptions=True))
        await blocker
        return outcomes

    @contextlib.asynccontextmanager
    async def group_paused(self) -> AsyncIterator[None]:
        """Appends started in this block before :meth:`wait_paused` form one group, which stops
        inside its transaction until the block is left: the group also holds a batch for run
        ``zz-paused`` (written last: groups go in run-id order), whose row another connection
        holds locked, as it does the blocker's (whose append, started first, commits alone)."""
        import psycopg

        await self.store.append("zz-paused", started("zz-paused"), sequence=0)
        await self.reset()  # that setup is not the group's
        async with await psycopg.AsyncConnection.connect(self.dsn) as locker:
            await locker.execute(
                "SELECT 1 FROM polyloop_runs WHERE run_id IN (%s, 'zz-paused') FOR UPDATE",
                (self.blocker,),
            )
            blocker = asyncio.ensure_future(
                self.store.append_many(
                    self.blocker, intents(self.blocked, 1), sequence=self.blocked
                )
            )
            self.blocked += 1
            paused = asyncio.ensure_future(
                self.store.append_many("zz-paused", intents(1, 1), sequence=1)
            )
            try:
                yield
            finally:
                await locker.commit()
        await asyncio.gather(blocker, paused)

    async def wait_paused(self) -> None:
        async def lock_waited() -> bool:
            rows = await self.query(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
            return int(rows[0][0]) >= 2  # the blocker's transaction and the group's

        await until(lock_waited, "the group waits for the locked row")

    async def refuse_record(self, run_id: str, sequence: int) -> None:
        await self.query(
            "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            f"IF NEW.run_id = '{run_id}' AND NEW.sequence = {sequence} THEN "
            "RAISE EXCEPTION 'refused by the database'; END IF; RETURN NEW; END $$"
        )
        await self.query(
            "CREATE TRIGGER refuse BEFORE INSERT ON polyloop_records "
            "FOR EACH ROW EXECUTE FUNCTION refuse()"
        )

    async def fail_commit_with(self, run_id: str) -> None:
        await self.query(
            "CREATE FUNCTION poison() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            f"IF NEW.run_id = '{run_id}' THEN RAISE EXCEPTION 'refused at commit'; END IF; "
            "RETURN NULL; END $$"
        )
        await self.query(
            "CREATE CONSTRAINT TRIGGER poison AFTER INSERT ON polyloop_records "
            "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION poison()"
        )


Harness = SQLiteHarness | PostgresHarness


def make_harness(request: pytest.FixtureRequest, tmp_path: Path, name: str) -> Harness:
    if request.param == "sqlite":
        return SQLiteHarness(tmp_path / "runs.db")
    dsn: str = request.getfixturevalue("postgres_database_dsn")
    return PostgresHarness(dsn, name)


STORES = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest_asyncio.fixture(params=STORES)
async def harness(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Harness]:
    made = make_harness(request, tmp_path, "a")
    await made.start()
    try:
        yield made
    finally:
        await made.close()


@pytest_asyncio.fixture(params=STORES)
async def two(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[Harness, Harness]]:
    """Two store objects on one database."""
    first, second = make_harness(request, tmp_path, "a"), make_harness(request, tmp_path, "b")
    await first.start()
    await second.start()
    try:
        yield first, second
    finally:
        await first.close()
        await second.close()


async def start_runs(harness: Harness, run_ids: Sequence[str]) -> None:
    for run_id in run_ids:
        await harness.store.append(run_id, started(run_id), sequence=0)
    await harness.reset()


def append(harness: Harness, run_id: str, records: Sequence[Record], sequence: int) -> Append:
    return lambda: harness.store.append_many(run_id, records, sequence=sequence)


async def records_of(harness: Harness, run_id: str) -> list[Record]:
    return list((await harness.store.read_log(run_id)).records)


# --------------------------------------------------------------------------- grouping


async def test_batches_waiting_together_commit_in_one_transaction(harness: Harness) -> None:
    runs = [f"g{n}" for n in range(16)]
    await start_runs(harness, runs)

    outcomes = await harness.together([append(harness, r, intents(1, 3), 1) for r in runs])

    assert outcomes == [None] * len(runs)
    assert await harness.transactions() == 1  # was one per batch: 16
    for run_id in runs:
        assert await records_of(harness, run_id) == [started(run_id), *intents(1, 3)]


async def test_a_refused_batch_is_rolled_back_alone_and_its_group_commits(
    harness: Harness,
) -> None:
    good = ["g-ok0", "g-ok1", "g-ok2"]
    await start_runs(harness, [*good, "g-conflict", "g-finished", "g-exists", "g-db"])
    await harness.store.append_many("g-finished", (finished(),), sequence=1)
    await harness.refuse_record("g-db", 2)  # the second record of its batch
    await harness.reset()

    outcomes = await harness.together(
        [
            append(harness, "g-ok0", intents(1, 2), 1),
            append(harness, "g-conflict", intents(5, 2), 5),  # RunConflict: the log has 1
            append(harness, "g-ok1", intents(1, 2), 1),
            append(harness, "g-finished", intents(2, 1), 2),  # RunAlreadyFinished
            append(harness, "g-exists", (started("g-exists"),), 1),  # RunAlreadyExists
            append(harness, "g-db", intents(1, 3), 1),  # the database refuses its 2nd record
            append(harness, "g-ok2", intents(1, 2), 1),
        ]
    )

    kinds = [None if o is None else type(o) for o in outcomes]
    assert kinds == [
        None,
        RunConflict,
        None,
        RunAlreadyFinished,
        RunAlreadyExists,
        harness.database_error,
        None,
    ], outcomes
    assert await harness.transactions() == 1  # the three good batches, together
    for run_id in good:
        assert await records_of(harness, run_id) == [started(run_id), *intents(1, 2)]
    # Nothing of a refused batch, not even the record of g-db's that was inserted before the
    # database refused the next one (rolled back to the batch's savepoint).
    for run_id in ("g-conflict", "g-exists", "g-db"):
        assert await records_of(harness, run_id) == [started(run_id)]
    assert await records_of(harness, "g-finished") == [started("g-finished"), finished()]


async def test_a_failing_commit_fails_every_waiter_and_writes_nothing(harness: Harness) -> None:
    runs = ["g-a", "g-b", "g-poison", "g-c"]
    await start_runs(harness, runs)
    await harness.fail_commit_with("g-poison")

    outcomes = await harness.together([append(harness, r, intents(1, 2), 1) for r in runs])

    # Every waiter gets the COMMIT's error: not only g-poison's, whose record made it fail.
    assert [type(o) for o in outcomes] == [harness.commit_error] * len(runs), outcomes
    for run_id in runs:
        assert await records_of(harness, run_id) == [started(run_id)]
    # Nothing was remembered of the failed group: the same appends now succeed.
    outcomes = await harness.together([append(harness, r, intents(1, 2), 1) for r in runs[:2]])
    assert outcomes == [None, None]
    assert await records_of(harness, "g-a") == [started("g-a"), *intents(1, 2)]


async def test_batches_of_one_run_in_one_group_are_fenced_against_each_other(
    harness: Harness,
) -> None:
    await start_runs(harness, ["g-one", "g-other"])

    outcomes = await harness.together(
        [
            append(harness, "g-one", intents(1, 2), 1),
            append(harness, "g-one", intents(3, 2), 3),  # follows the first, in the same group
            append(harness, "g-one", intents(1, 2, tag=9), 1),  # the first's place: taken
            append(harness, "g-other", intents(1, 1), 1),
        ]
    )

    assert outcomes[:2] == [None, None]
    assert isinstance(outcomes[2], RunConflict), outcomes[2]
    assert outcomes[3] is None
    expected = [started("g-one"), *intents(1, 2), *intents(3, 2)]
    assert await records_of(harness, "g-one") == expected
    assert await harness.transactions() == 1
    # What the store remembers of the log's end after the group is right: the next append fits.
    await harness.store.append_many("g-one", intents(5, 1), sequence=5)
    with pytest.raises(RunConflict):
        await harness.store.append_many("g-one", intents(5, 1), sequence=5)


# --------------------------------------------------------------------------- cancellation


async def test_cancelling_a_waiter_whose_group_began_does_not_cut_the_group(
    harness: Harness,
) -> None:
    runs = [f"g{n}" for n in range(6)]
    await start_runs(harness, runs)

    async with harness.group_paused():
        tasks = [
            asyncio.ensure_future(harness.store.append_many(r, intents(1, 3), sequence=1))
            for r in runs
        ]
        await harness.wait_paused()  # the group's transaction holds every batch, uncommitted
        tasks[2].cancel()
        await asyncio.sleep(0)
    outcomes = await asyncio.gather(*tasks, return_exceptions=True)

    assert isinstance(outcomes[2], asyncio.CancelledError)
    assert [o for n, o in enumerate(outcomes) if n != 2] == [None] * 5
    for run_id in runs:  # the cancelled waiter's batch too, whole: its group committed it
        assert await records_of(harness, run_id) == [started(run_id), *intents(1, 3)]
    assert await harness.transactions() == 1


async def test_a_waiter_cancelled_before_its_group_began_writes_nothing(
    harness: Harness,
) -> None:
    first, later = ["g-first0", "g-first1"], ["g-later0", "g-later1", "g-later2"]
    await start_runs(harness, [*first, *later])

    async with harness.group_paused():
        busy = [
            asyncio.ensure_future(harness.store.append_many(r, intents(1, 1), sequence=1))
            for r in first
        ]
        await harness.wait_paused()  # a group is in flight: the next appends wait for the next
        waiting = [
            asyncio.ensure_future(harness.store.append_many(r, intents(1, 2), sequence=1))
            for r in later
        ]
        await asyncio.sleep(0)
        waiting[1].cancel()
    assert await asyncio.gather(*busy) == [None, None]
    outcomes = await asyncio.gather(*waiting, return_exceptions=True)

    assert outcomes[0] is None
    assert outcomes[2] is None
    assert isinstance(outcomes[1], asyncio.CancelledError)
    assert await records_of(harness, "g-later1") == [started("g-later1")]
    for run_id in ("g-later0", "g-later2"):
        assert await records_of(harness, run_id) == [started(run_id), *intents(1, 2)]
    assert await harness.transactions() == 2  # the paused group, then the two left waiting


# --------------------------------------------------------------------------- fencing


async def test_two_store_objects_grouping_at_once_stay_fenced_and_never_deadlock(
    two: tuple[Harness, Harness],
) -> None:
    a, b = two
    await start_runs(a, ["shared-1", "shared-2", "own-a"])  # a knows the shared runs' length
    await start_runs(b, ["own-b"])
    await a.reset()

    # The two groups take the shared runs in opposite orders of arrival.
    outcomes_a, outcomes_b = await asyncio.gather(
        a.together(
            [
                append(a, "shared-2", intents(1, 2, tag=1), 1),
                append(a, "shared-1", intents(1, 2, tag=1), 1),
                append(a, "own-a", intents(1, 2), 1),
            ]
        ),
        b.together(
            [
                append(b, "shared-1", intents(1, 2, tag=2), 1),
                append(b, "shared-2", intents(1, 2, tag=2), 1),
                append(b, "own-b", intents(1, 2), 1),
            ]
        ),
    )

    assert outcomes_a[2] is None
    assert outcomes_b[2] is None
    for run_id, from_a, from_b in (
        ("shared-1", outcomes_a[1], outcomes_b[0]),
        ("shared-2", outcomes_a[0], outcomes_b[1]),
    ):
        # Exactly one writer won each shared run; the other was fenced off, nothing written.
        assert sorted([from_a is None, from_b is None]) == [False, True], (from_a, from_b)
        loser = from_b if from_a is None else from_a
        assert isinstance(loser, RunConflict), loser
        tag = 1 if from_a is None else 2
        assert await records_of(a, run_id) == [started(run_id), *intents(1, 2, tag=tag)]
    if isinstance(a, SQLiteHarness) and isinstance(b, SQLiteHarness):
        assert (a.commits, b.commits) == (1, 1)
    else:
        assert await a.transactions() == 2  # one group per store object


# --------------------------------------------------------------------------- the loop


SCRIPT = ("CALL one", "CALL two", "FINAL done")


class ScriptParser:
    def parse(self, reply: polyloop.ModelReply) -> polyloop.ParsedReply:
        if reply.text.startswith("FINAL "):
            return polyloop.FinalAnswer(text=reply.text.removeprefix("FINAL "))
        return polyloop.Action(text=reply.text, tool_name="t", tool_args={"a": reply.text})


class Executor:
    async def execute(self, action: polyloop.Action) -> polyloop.ActionOutcome:
        return polyloop.ActionOutcome(status=polyloop.ActionStatus.EXECUTED, observation="ok")


AGENT = polyloop.AgentDefinition(
    system_prompt="s",
    budget=polyloop.Budget(
        max_steps=5,
        max_executed_actions=5,
        max_consecutive_parse_failures=2,
        max_prompt_chars=10**6,
    ),
    synthetic_observations=polyloop.SyntheticObservations(not_executed="no", env_error="down"),
)


async def run_all(harness: Harness, count: int) -> list[polyloop.RunResult]:
    return list(
        await asyncio.gather(
            *(
                polyloop.run(
                    AGENT,
                    "go",
                    model=ScriptedModel(SCRIPT),
                    parser=ScriptParser(),
                    executor=Executor(),
                    store=harness.store,
                    run_id=f"loop-{n}",
                )
                for n in range(count)
            )
        )
    )


async def test_many_concurrent_runs_share_commits_and_each_log_is_whole(harness: Harness) -> None:
    await harness.reset()

    results = await run_all(harness, 48)

    assert {r.stop_reason for r in results} == {StopReason.AGENT_FINISHED}
    alone = await records_of(harness, "loop-0")
    assert [r.kind for r in alone][-1] == "run_finished"
    for n in range(48):
        log = await records_of(harness, f"loop-{n}")
        assert [r.kind for r in log] == [r.kind for r in alone]
    # Six commits a run, grouped or not (docs/design/0003): [RunStarted, intent], then per
    # action step [reply, action intent] and [step, intent], and [reply, RunFinished].
    batches = 48 * 6
    assert await harness.transactions() < batches // 2, await harness.transactions()


@pytest.mark.postgres
async def test_appends_one_after_another_on_postgres_commit_alone_in_the_callers_task(
    postgres_database_dsn: str,
) -> None:
    harness = PostgresHarness(postgres_database_dsn, "a")
    await harness.start()
    try:
        await start_runs(harness, ["alone"])
        loop = asyncio.get_running_loop()
        made: list[str] = []

        def factory(
            loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any], **kwargs: Any
        ) -> asyncio.Task[Any]:
            made.append(getattr(coro, "__qualname__", "?"))
            return asyncio.Task(coro, loop=loop, **kwargs)

        loop.set_task_factory(factory)  # type: ignore[arg-type]
        try:
            for step in (1, 2, 3):
                await harness.store.append_many("alone", intents(step, 1), sequence=step)
        finally:
            loop.set_task_factory(None)

        assert made == []  # no group task: each append was its own transaction, as before
        assert await harness.transactions() == 3
    finally:
        await harness.close()
