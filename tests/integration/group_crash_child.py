"""Child process of the group-commit crash test: many writers on one store, then SIGKILL.

``python -m tests.integration.group_crash_child URL ACKS GROUPS [--writers W] [--batches B]
[--batch-size K] [--kill-in-group N]``

Each of ``W`` writer tasks starts its own run (``gw<i>``) and appends ``B`` batches of ``K``
records, one ``append_many`` after the other; after each append *returns* it writes
``<run> <sequence> <count>`` to ``ACKS`` (unbuffered, so a line written is a line kept when this
process is killed). The writers run concurrently, so their commits meet and the store commits
them in groups (docs/design/0005). Each group's batches are written to ``GROUPS`` as
``G <run>:<sequence> ...`` before the group's transaction begins.

With ``--kill-in-group N`` the process SIGKILLs itself inside the ``N``-th group of two or more
batches: every batch of it written in the open transaction, its ``COMMIT`` not yet run (SQLite:
at the ``COMMIT`` statement, via the connection's trace; PostgreSQL: after its last batch's
call was queued, before the COMMIT). Without it the process runs until the test kills it, or
prints ``DONE``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import os
import signal
import sqlite3
import threading
from collections.abc import Sequence
from typing import Any

from polyloop import ModelCallIntent, Record, RunStarted
from polyloop.ports import RunStore
from polyloop.stores import SQLiteStore
from tests.integration._scenario import opened


def batch_records(sequence: int, batch: int, size: int) -> tuple[Record, ...]:
    """Batch number ``batch`` at ``sequence``: step_index is the sequence, prompt_chars tells
    the batch and the position in it apart (so a partial batch shows)."""
    return tuple(
        ModelCallIntent(step_index=sequence + n, prompt_chars=batch * 100 + n) for n in range(size)
    )


def started(run_id: str) -> RunStarted:
    return RunStarted(
        run_id=run_id,
        goal="write batches",
        parameters={},
        parameters_hash="sha256:" + "0" * 64,
        started_at="2026-12-02T10:00:00.000Z",
    )


class GroupWatch:
    """Notes each group's batches in the GROUPS file and kills this process inside the
    ``kill_at``-th group of two or more batches."""

    def __init__(self, groups_path: str, kill_at: int | None) -> None:
        self.fd = os.open(groups_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self.kill_at = kill_at
        self.multi = 0  # groups of two or more batches so far
        self.armed = False  # the current group is the one to die in

    def began(self, group: Sequence[Any]) -> None:
        """Note the group (``K`` for the one to die in, ``G`` for any other)."""
        # Counted among the batches after the runs' starts: groups commit at once on several
        # connections, so the starts alone can make several groups of two or more.
        if len(group) >= 2 and all(w.sequence > 0 for w in group):
            self.multi += 1
            self.armed = self.multi == self.kill_at
        else:
            self.armed = False
        line = " ".join(f"{w.run_id}:{w.sequence}" for w in group)
        os.write(self.fd, f"{'K' if self.armed else 'G'} {line}\n".encode())

    def die_if_armed(self) -> None:
        if self.armed:
            os.kill(os.getpid(), signal.SIGKILL)


def watch_sqlite(store: SQLiteStore, watch: GroupWatch) -> None:
    inner = store._commit_group

    def commit_group(conn: sqlite3.Connection, *, group: list[Any]) -> list[BaseException | None]:
        watch.began(group)
        outcomes = inner(conn, group=group)
        watch.armed = False
        return outcomes

    def trace(statement: str) -> None:
        if statement == "COMMIT" and threading.current_thread().name == "polyloop-sqlite":
            watch.die_if_armed()  # the group's batches are written; the COMMIT has not run

    store._commit_group = commit_group  # type: ignore[method-assign]
    store._trace = trace  # type: ignore[attr-defined]


def watch_postgres(store: Any, watch: GroupWatch) -> None:
    """Groups commit at once on several connections, each in its own task: what a group has
    sent so far is kept in a context variable of that task."""
    inner_group, inner_send = store._commit_group, store._send_batch
    current: contextvars.ContextVar[dict[str, int] | None] = contextvars.ContextVar(
        "group", default=None
    )

    async def commit_group(pool: Any, group: list[Any]) -> list[BaseException | None]:
        watch.began(group)
        token = current.set({"count": 0, "size": len(group), "armed": int(watch.armed)})
        watch.armed = False
        try:
            outcomes: list[BaseException | None] = await inner_group(pool, group)
            return outcomes
        finally:
            current.reset(token)

    async def send_batch(conn: Any, *args: Any) -> Any:
        # In a group the calls are queued in one pipeline, COMMIT last: killed after the last
        # batch's call was queued, the COMMIT was never sent.
        cursor = await inner_send(conn, *args)
        state = current.get()
        if state is not None:
            state["count"] += 1
            if state["count"] == state["size"] and state["armed"]:
                os.kill(os.getpid(), signal.SIGKILL)
        return cursor

    store._commit_group = commit_group
    store._send_batch = send_batch


async def writer(
    store: RunStore, run_id: str, batches: int, size: int, acks: int, gate: asyncio.Barrier
) -> None:
    await store.append(run_id, started(run_id), sequence=0)
    await gate.wait()  # every run started: the batches begin together
    sequence = 1
    for batch in range(batches):
        await store.append_many(  # type: ignore[attr-defined]
            run_id, batch_records(sequence, batch, size), sequence=sequence
        )
        os.write(acks, f"{run_id} {sequence} {size}\n".encode())
        sequence += size


async def main(args: argparse.Namespace) -> None:
    acks = os.open(args.acks, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    watch = GroupWatch(args.groups, args.kill_in_group)
    async with opened(args.url) as store:
        if isinstance(store, SQLiteStore):
            watch_sqlite(store, watch)
            trace = store._trace  # type: ignore[attr-defined]
            await store._in_worker(store._with_connection, lambda c: c.set_trace_callback(trace))
        else:
            watch_postgres(store, watch)
        gate = asyncio.Barrier(args.writers)
        await asyncio.gather(
            *(
                writer(store, f"gw{n}", args.batches, args.batch_size, acks, gate)
                for n in range(args.writers)
            )
        )
    print("DONE", flush=True)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("acks")
    parser.add_argument("groups")
    parser.add_argument("--writers", type=int, default=24)
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=3)
    parser.add_argument("--kill-in-group", type=int, default=None)
    return parser.parse_args()


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
