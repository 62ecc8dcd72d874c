"""Appends per second for each bundled store, against the disk's own write+fsync limit.

    python benchmarks/store_throughput.py [--dir DIR] [--seconds S] [--postgres-dsn DSN]

Every durable append costs at least one fsync, so the ceiling for a store that is durable on
return is a loop that writes a record-sized buffer and fsyncs it — measured here in the same
directory as the SQLite file, in the same process, in slices that alternate with the stores'.
The SQLite lines' ratio to that limit is the number the design note
(docs/design/0002-sqlite-durability.md) tracks; the target is >= 0.5 for the store's sustained
throughput (16 runs appending at once), and one run alone is printed beside it.

Appends are sequential (one run at a time, as one driver writes one run) unless noted; the
"concurrent" line drives several runs at once from one event loop. PostgreSQL is measured only
when a DSN is given (``--postgres-dsn`` or ``POLYLOOP_BENCH_DSN``); its runs are left in that
database under ``bench-`` run ids. The default runtime is about 16 s (21 s with PostgreSQL).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from polyloop import (
    Action,
    ActionIntent,
    ActionStatus,
    ModelCallIntent,
    ModelReplied,
    ModelReply,
    Record,
    RunFinished,
    RunStarted,
    StepCompleted,
    StepRecord,
    StopReason,
)
from polyloop.ports import RunStore
from polyloop.stores import MemoryStore, SQLiteStore, open_store


def run_records(steps: int) -> list[Record]:
    """A plausible run: a start, four records per step, a finish (record sizes as in life)."""
    records: list[Record] = [
        RunStarted(
            run_id="bench",
            goal="Find the failing test and fix it. " * 4,
            parameters={"system_prompt": "You are a careful engineer. " * 20},
            parameters_hash="sha256:" + "ab" * 32,
            started_at="2026-11-30T10:00:00.000Z",
        )
    ]
    for i in range(steps):
        reply = "I will run the tests first.\n```bash\npytest -x -q\n```\n" * 3
        step = StepRecord(
            step_index=i,
            raw_output=reply,
            response_chars=len(reply),
            reasoning_chars=0,
            action="pytest -x -q",
            parse_ok=True,
            parse_error=None,
            observation="F.....\nFAILED tests/test_x.py::test_y - AssertionError\n" * 4,
            observation_is_synthetic=False,
            observation_truncated_chars=0,
            prompt_chars=4000 + 300 * i,
            llm_call_id=f"call-{i}",
            step_wall_ms=1200,
            tool_name="bash",
            tool_args_json='{"cmd":"pytest -x -q"}',
            action_status=ActionStatus.EXECUTED,
        )
        records += [
            ModelCallIntent(step_index=i, prompt_chars=step.prompt_chars),
            ModelReplied(step_index=i, reply=ModelReply(text=reply, call_id=f"call-{i}")),
            ActionIntent(
                step_index=i,
                action=Action(text="pytest -x -q", tool_name="bash", tool_args={"cmd": "pytest"}),
            ),
            StepCompleted(step=step),
        ]
    records.append(
        RunFinished(
            stop_reason=StopReason.TASK_COMPLETED,
            final_answer=None,
            executed_actions=steps,
            finished_at="2026-11-30T10:01:00.000Z",
        )
    )
    return records


TARGET_RATIO = 0.5  # sustained SQLite appends (many runs at once) against the raw fsync loop
RECORDS = run_records(steps=12)
MEAN_RECORD_BYTES = sum(len(r.to_json().encode()) for r in RECORDS) // len(RECORDS)


@dataclass(frozen=True)
class Measurement:
    name: str
    appends: int
    seconds: float
    note: str = ""

    @property
    def per_second(self) -> float:
        return self.appends / self.seconds if self.seconds > 0 else 0.0


async def drive_runs(store: RunStore, seconds: float, concurrency: int = 1) -> tuple[int, float]:
    """Append whole runs until ``seconds`` pass; return (appends, elapsed)."""
    prefix = f"bench-{uuid.uuid4().hex[:12]}"
    deadline = time.perf_counter() + seconds
    appends = 0

    async def driver(worker: int) -> None:
        nonlocal appends
        run = 0
        while time.perf_counter() < deadline:
            run_id = f"{prefix}-{worker}-{run}"
            for sequence, record in enumerate(RECORDS):
                await store.append(run_id, record, sequence=sequence)
                appends += 1
                if time.perf_counter() >= deadline:
                    return
            run += 1

    start = time.perf_counter()
    await asyncio.gather(*(driver(w) for w in range(concurrency)))
    return appends, time.perf_counter() - start


class FsyncLoop:
    """The physical limit: append a record-sized buffer to a file and fsync it, in a loop."""

    def __init__(self, directory: Path) -> None:
        self.payload = b"x" * (MEAN_RECORD_BYTES - 1) + b"\n"
        self.fd = os.open(directory / "raw-fsync.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND)

    def run(self, seconds: float) -> tuple[int, float]:
        appends = 0
        start = time.perf_counter()
        deadline = start + seconds
        while time.perf_counter() < deadline:
            os.write(self.fd, self.payload)
            os.fsync(self.fd)
            appends += 1
        return appends, time.perf_counter() - start

    def close(self) -> None:
        os.close(self.fd)


@dataclass
class Contender:
    name: str
    store: RunStore
    concurrency: int = 1
    note: str = ""
    appends: int = 0
    seconds: float = 0.0

    async def run(self, seconds: float) -> None:
        appends, elapsed = await drive_runs(self.store, seconds, self.concurrency)
        self.appends += appends
        self.seconds += elapsed


async def benchmark(
    directory: Path, seconds: float, rounds: int, dsn: str | None
) -> list[Measurement]:
    """Measure the limit and each durable store in alternating slices.

    The disk is shared with whatever else runs on the machine, and its speed drifts. Taking
    turns (limit, SQLite, ..., limit, SQLite, ...) exposes every contender to the same drift, so
    the ratios stay meaningful even when the absolute numbers move.
    """
    limit = FsyncLoop(directory)
    durable = [
        Contender("SQLiteStore", SQLiteStore(directory / "sequential.db")),
        Contender("SQLiteStore, 16 runs at once", SQLiteStore(directory / "concurrent.db"), 16),
    ]
    if dsn:
        durable.append(Contender("PostgresStore", open_store(dsn), note="server's own disk"))
    limit_appends, limit_seconds = 0, 0.0
    try:
        limit.run(0.1)  # warm-up: allocate, settle the file system journal
        for contender in durable:
            await drive_runs(contender.store, 0.1)  # open, create tables, warm caches
        for _ in range(rounds):
            appends, elapsed = limit.run(seconds / rounds)
            limit_appends, limit_seconds = limit_appends + appends, limit_seconds + elapsed
            for contender in durable:
                await contender.run(seconds / rounds)
        memory = Contender("MemoryStore", MemoryStore(), note="no disk: the library's own cost")
        await memory.run(min(seconds, 1.0))
    finally:
        limit.close()
        for contender in durable:
            aclose = getattr(contender.store, "aclose", None)
            if aclose is not None:
                await aclose()
    results = [
        Measurement(
            "raw write+fsync (the limit)",
            limit_appends,
            limit_seconds,
            f"{MEAN_RECORD_BYTES}-byte appends, same directory",
        )
    ]
    results += [Measurement(c.name, c.appends, c.seconds, c.note) for c in [*durable, memory]]
    return results


def render(results: Sequence[Measurement], dsn: str | None, directory: Path) -> str:
    limit = results[0].per_second
    lines = [
        f"polyloop store throughput — {directory} — {sys.platform}, Python "
        f"{sys.version.split()[0]}",
        f"{'store':<32}{'appends/s':>12}{'x limit':>10}  note",
    ]
    for m in results:
        ratio = f"{m.per_second / limit:.2f}" if limit > 0 else "-"
        lines.append(f"{m.name:<32}{m.per_second:>12,.0f}{ratio:>10}  {m.note}".rstrip())
    if not dsn:
        lines.append(
            f"{'PostgresStore':<32}{'skipped':>12}{'':>10}  "
            "no DSN (--postgres-dsn or POLYLOOP_BENCH_DSN)"
        )
    if limit > 0:
        # The target is the store's sustained durable throughput: many runs appending at once,
        # the load of a rollout harness. One run alone is reported beside it because it is
        # latency-bound by one thread hand-off per append (docs/design/0002-sqlite-durability.md).
        sustained = next(m for m in results if m.name.startswith("SQLiteStore, "))
        alone = next(m for m in results if m.name == "SQLiteStore")
        ratio_value = sustained.per_second / limit
        verdict = "met" if ratio_value >= TARGET_RATIO else "NOT met"
        lines.append(
            f"target: SQLiteStore sustained >= {TARGET_RATIO} x the fsync limit: "
            f"{ratio_value:.2f}, {verdict} (one run alone: {alone.per_second / limit:.2f})"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--dir",
        type=Path,
        default=Path.cwd(),
        help="where to put the SQLite files and the raw fsync file (default: the current "
        "directory; a temporary subdirectory is made and removed)",
    )
    parser.add_argument(
        "--seconds",
        type=float,
        default=5.0,
        help="time spent on each durable contender and on the limit (default 5)",
    )
    parser.add_argument(
        "--rounds", type=int, default=10, help="alternating slices per contender (default 10)"
    )
    parser.add_argument(
        "--postgres-dsn",
        default=os.environ.get("POLYLOOP_BENCH_DSN"),
        help="measure PostgresStore too (default: $POLYLOOP_BENCH_DSN)",
    )
    args = parser.parse_args(argv)
    if args.seconds <= 0 or args.rounds < 1:
        parser.error("--seconds must be > 0 and --rounds >= 1")
    directory = Path(tempfile.mkdtemp(prefix="polyloop-bench-", dir=args.dir))
    try:
        results = asyncio.run(benchmark(directory, args.seconds, args.rounds, args.postgres_dsn))
        print(render(results, args.postgres_dsn, directory.parent))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
