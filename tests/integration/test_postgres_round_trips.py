"""PostgresStore's commits counted on the wire: statements and round trips per commit, and
groups committing at once on several connections (issue 38, docs/design/0005).

Counted with libpq's own protocol trace (``PQtrace``) of each pool connection: every message
the client sends (``F``) and receives (``B``) is a line. A statement is a simple ``Query`` or
an extended-protocol ``Execute``; a round trip is the client sending and then waiting for the
server's answer — one ``ReadyForQuery`` the server sends for each ``Sync`` (or simple query)
the client sent. No timing anywhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from polyloop import ModelCallIntent, Record, RunFinished, RunQuery, RunStarted, StopReason
from polyloop.stores import PostgresStore

pytestmark = [pytest.mark.postgres]


def started(run_id: str) -> RunStarted:
    return RunStarted(
        run_id=run_id,
        goal="count",
        parameters={},
        parameters_hash="sha256:" + "0" * 64,
        started_at="2026-12-06T05:00:00.000Z",
        labels={"split": "train"},
    )


def intents(first: int, count: int) -> tuple[Record, ...]:
    return tuple(ModelCallIntent(step_index=first + n, prompt_chars=n) for n in range(count))


def finished() -> RunFinished:
    return RunFinished(
        stop_reason=StopReason.AGENT_FINISHED,
        final_answer="done",
        executed_actions=0,
        finished_at="2026-12-06T05:00:01.000Z",
    )


@dataclass
class Wire:
    """What the traced connections sent and received."""

    lines: list[str]

    def count(self, direction: str, message: str) -> int:
        return sum(1 for line in self.lines if line.split("\t")[:3:2] == [direction, message])

    @property
    def statements(self) -> int:
        return self.count("F", "Query") + self.count("F", "Execute")

    @property
    def round_trips(self) -> int:
        return self.count("B", "ReadyForQuery")

    @property
    def turns(self) -> int:
        """How often the client went from sending to receiving: at least the round trips'
        count (a pipeline's answers read while it is still sending would add some)."""
        sides = [line[0] for line in self.lines if line[:1] in {"F", "B"}]
        return sum(1 for a, b in itertools.pairwise(sides) if (a, b) == ("F", "B"))


@contextlib.contextmanager
def traced(store: PostgresStore) -> Iterator[list[Wire]]:
    """Trace every connection the store's pool holds now, one file each, until the block
    ends; then the wire of each connection that carried anything."""
    from psycopg import pq

    wires: list[Wire] = []
    with tempfile.TemporaryDirectory() as directory:
        files: list[tuple[Any, Path, int]] = []
        for n, conn in enumerate(list(store._connections)):
            path = Path(directory) / f"conn-{n}.trace"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
            conn.pgconn.trace(fd)
            conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
            files.append((conn, path, fd))
        try:
            yield wires
        finally:
            for conn, path, _ in files:
                conn.pgconn.untrace()  # flushes what libpq buffered
                lines = path.read_text().splitlines()
                if lines:
                    wires.append(Wire(lines))


@contextlib.asynccontextmanager
async def store_with(dsn: str, connections: int) -> AsyncIterator[PostgresStore]:
    """A store whose pool holds ``connections`` connections, all open and configured."""
    async with PostgresStore(dsn, min_size=connections, max_size=connections) as store:
        await store.run_ids()
        pool = store._binding.pool  # type: ignore[union-attr]
        assert pool is not None
        await pool.wait()
        yield store


@pytest.mark.asyncio
async def test_a_lone_commit_is_one_statement_in_one_round_trip(postgres_database_dsn: str) -> None:
    async with store_with(postgres_database_dsn, 1) as store:
        batches = [
            (started("lone"), *intents(1, 1)),  # the run's first commit: the runs row made
            intents(2, 2),  # a middle commit
            (*intents(4, 1), finished()),  # the last: the index's end columns
        ]
        sequence = 0
        for batch in batches:
            with traced(store) as wires:
                await store.append_many("lone", batch, sequence=sequence)
            sequence += len(batch)
            (wire,) = wires
            # Was 6.8 statements in 5.8 round trips: BEGIN, SELECT … FOR UPDATE, the runs row,
            # the records, the index, COMMIT.
            assert (wire.statements, wire.round_trips, wire.turns) == (1, 1, 1), wire.lines
        log = await store.read_log("lone")
        assert list(log.records) == [r for batch in batches for r in batch]


@pytest.mark.asyncio
async def test_a_refused_lone_commit_is_one_round_trip_and_raises_the_rules_error(
    postgres_database_dsn: str,
) -> None:
    from polyloop.errors import RunAlreadyExists, RunConflict

    async with store_with(postgres_database_dsn, 1) as store:
        await store.append_many("r", (started("r"),), sequence=0)
        for batch, sequence, error in (
            (intents(5, 1), 5, RunConflict),
            ((started("r"),), 0, RunAlreadyExists),
        ):
            with traced(store) as wires, pytest.raises(error):
                await store.append_many("r", batch, sequence=sequence)
            (wire,) = wires
            assert (wire.statements, wire.round_trips) == (1, 1), wire.lines


@pytest.mark.asyncio
async def test_a_group_is_one_round_trip_whatever_its_size(postgres_database_dsn: str) -> None:
    async with store_with(postgres_database_dsn, 2) as store:
        runs = [f"g{n:02}" for n in range(12)]
        for run_id in runs:
            await store.append_many(run_id, (started(run_id),), sequence=0)
        blocker = asyncio.ensure_future(store.append_many("g00", intents(1, 1), sequence=1))
        with traced(store) as wires:
            # Started while the blocker commits: they wait, and take one group together.
            await asyncio.gather(
                *(store.append_many(r, intents(1, 2), sequence=1) for r in runs[1:])
            )
            await blocker
        by_size = sorted((wire.statements, wire.round_trips) for wire in wires)
        # The blocker alone (1 statement), the group: BEGIN, 11 calls, COMMIT, one round trip.
        assert by_size == [(1, 1), (13, 1)], [w.lines for w in wires]


@pytest.mark.asyncio
async def test_groups_commit_at_once_on_several_connections(postgres_database_dsn: str) -> None:
    """While a group waits for a row lock, the next group commits on another connection (one
    group in flight at a time made every later append wait for the lock's holder)."""
    import psycopg

    runs = ("held-1", "held-2", "free-1", "free-2")
    async with store_with(postgres_database_dsn, 3) as store:
        for run_id in runs:
            await store.append_many(run_id, (started(run_id),), sequence=0)
        async with await psycopg.AsyncConnection.connect(postgres_database_dsn) as locker:
            await locker.execute(
                "SELECT 1 FROM polyloop_runs WHERE run_id IN ('held-1', 'held-2') FOR UPDATE"
            )
            lone = asyncio.ensure_future(store.append_many("held-1", intents(1, 1), sequence=1))
            await asyncio.sleep(0)  # committing alone, waiting for the lock
            grouped = asyncio.ensure_future(store.append_many("held-2", intents(1, 1), sequence=1))
            await asyncio.sleep(0.05)  # a group of its own, waiting for the lock too
            later = [store.append_many(r, intents(1, 1), sequence=1) for r in runs[2:]]
            await asyncio.wait_for(asyncio.gather(*later), timeout=10)
            assert not lone.done()
            assert not grouped.done()
            await locker.commit()
        await asyncio.gather(lone, grouped)
        for run_id in runs:
            assert len((await store.read_log(run_id)).records) == 2


@pytest.mark.asyncio
async def test_many_writers_on_several_connections_keep_every_log_whole(
    postgres_database_dsn: str,
) -> None:
    """Sixty-four runs of five commits each, through groups on four connections and two
    store objects at once: every log whole and in order, every commit acknowledged once."""
    async with (
        store_with(postgres_database_dsn, 4) as first,
        store_with(postgres_database_dsn, 4) as second,
    ):

        async def write(store: PostgresStore, run_id: str) -> None:
            await store.append_many(run_id, (started(run_id),), sequence=0)
            for n in range(4):
                await store.append_many(run_id, intents(1 + 2 * n, 2), sequence=1 + 2 * n)
            await store.append_many(run_id, (finished(),), sequence=9)

        await asyncio.gather(
            *(write(first if n % 2 else second, f"w{n:02}") for n in range(64)),
        )
        for n in range(64):
            log = await first.read_log(f"w{n:02}")
            steps = [record for k in range(4) for record in intents(1 + 2 * k, 2)]
            assert list(log.records) == [started(f"w{n:02}"), *steps, finished()]
        summaries = await first.query_runs(RunQuery())
        assert len(summaries) == 64
        assert {s.stop_reason for s in summaries} == {StopReason.AGENT_FINISHED}


def test_two_processes_writing_the_same_runs_in_concurrent_groups_stay_fenced(
    postgres_database_dsn: str, tmp_path: Path
) -> None:
    """Two processes, each with sixteen writers committing in groups on several connections,
    append to the same six runs at once: each log is exactly the batches acknowledged to one
    writer or the other, each once, in order — the fence holds across processes whatever the
    groups' order, and no group deadlocks."""
    import subprocess

    from polyloop.stores import open_store
    from tests.integration._scenario import CHILD_TIMEOUT_S, REPO_ROOT, child_command

    acks = tmp_path / "acks"
    children = [
        subprocess.Popen(
            child_command("contending_child", postgres_database_dsn, str(acks), str(tag)),
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in (1, 2)
    ]
    for child in children:
        out, err = child.communicate(timeout=CHILD_TIMEOUT_S)
        assert child.returncode == 0, err
        assert "DONE" in out, err

    acked: dict[str, dict[int, str]] = {}
    for line in acks.read_text().splitlines():
        run_id, at, writer = line.split()
        assert int(at) not in acked.setdefault(run_id, {}), f"acknowledged twice: {line}"
        acked[run_id][int(at)] = writer

    async def logs() -> dict[str, list[Record]]:
        store = open_store(postgres_database_dsn)
        try:
            return {run_id: list((await store.read_log(run_id)).records) for run_id in acked}
        finally:
            await store.aclose()  # type: ignore[attr-defined]

    assert len(acked) == 6
    tags: set[int] = set()
    for run_id, log in asyncio.run(logs()).items():
        assert log[0] == RunStarted(
            run_id=run_id,
            goal="contend",
            parameters={},
            parameters_hash="sha256:" + "0" * 64,
            started_at="2026-12-06T06:00:00.000Z",
        )
        expected: list[tuple[int, int]] = []
        for sequence in sorted(acked[run_id])[1:]:
            tag = int(acked[run_id][sequence])
            tags.add(tag)
            expected += [(sequence, tag), (sequence + 1, tag)]
        intents = [r for r in log[1:] if isinstance(r, ModelCallIntent)]
        assert len(intents) == len(log) - 1
        assert [(r.step_index, r.prompt_chars) for r in intents] == expected
    assert tags == {1, 2}  # both processes got batches in
