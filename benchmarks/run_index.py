"""``polyloop runs --limit`` and ``polyloop stats`` over 10,000 and 100,000 runs.

    python benchmarks/run_index.py [--dir DIR] [--sizes 10000 100000] [--rounds N]

Targets (issue 22): ``polyloop runs --limit 20`` and ``polyloop stats`` each take <= 1 s over
100,000 runs on the development machine, and no more than 2x their time over 10,000 runs. Each
command is timed as a user runs it — a new ``python -m polyloop.cli`` process, interpreter
start-up included — round by round, every command at every size in turn (so a busy machine
slows them alike), and the median is printed; so are the start-up alone (a process that only
imports the CLI: the floor of every command) and the median time of the same call inside this
process (``main(argv)``), which is what the index itself costs. The same commands with a label
filter are printed for comparison, with the same targets: a label (or ``--since``) makes
``stats`` group the matching rows instead of reading the per-batch tallies, so it grows with
the runs the filter matches.

The fixture is a SQLiteStore file of runs of 7 action steps (30 records each, with a batch,
labels and token usage), one in ten unfinished and the others spread over four stop reasons.
It is bulk-written: the records of every run are inserted in one transaction, and each run's
index row is written by the store's own ``index_batch`` — the call its commit makes — in that
transaction (one durable commit per run would take over ten minutes for 100,000 runs, and
measure the disk, not the index). A fixture file is reused if ``--dir`` already holds it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
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
from polyloop.cli import main
from polyloop.stores import SQLiteStore
from polyloop.stores._sqlite_index import index_batch

STEPS = 7
REASONS = (
    StopReason.AGENT_FINISHED,
    StopReason.AGENT_FINISHED,
    StopReason.STEP_BUDGET,
    StopReason.ENV_ERROR,
    StopReason.PARSE_FAILED_REPEATEDLY,
)
TARGET_S = 1.0
TARGET_GROWTH = 2.0


def _steps() -> list[Record]:
    """The 28 records of 7 action steps, the same for every run (they hold no run id)."""
    records: list[Record] = []
    for index in range(STEPS):
        step = StepRecord(
            step_index=index,
            raw_output=f"CALC: {index} + 1",
            response_chars=12,
            reasoning_chars=0,
            action=f"CALC: {index} + 1",
            parse_ok=True,
            parse_error=None,
            observation=str(index + 1),
            observation_is_synthetic=False,
            observation_truncated_chars=0,
            prompt_chars=200 + 40 * index,
            llm_call_id=f"call-{index}",
            step_wall_ms=120,
            action_status=ActionStatus.EXECUTED,
        )
        usage = {"prompt_tokens": 60 + 10 * index, "completion_tokens": 8}
        records += [
            ModelCallIntent(step_index=index, prompt_chars=200 + 40 * index),
            ModelReplied(step_index=index, reply=ModelReply(text=step.raw_output, usage=usage)),
            ActionIntent(step_index=index, action=Action(text=step.raw_output)),
            StepCompleted(step=step),
        ]
    return records


def build_fixture(path: Path, count: int) -> None:
    """``count`` runs in a new SQLiteStore file at ``path`` (see the module docstring)."""

    async def create() -> None:
        async with SQLiteStore(path):
            pass  # the store's own schema, with the run index

    asyncio.run(create())
    steps = _steps()
    step_rows = [(record.kind, record.to_json()) for record in steps]
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        for n in range(count):
            run_id = f"run-{n:06d}"
            start = RunStarted(
                run_id=run_id,
                goal=f"task {n}",
                parameters={},
                parameters_hash="sha256:" + "0" * 64,
                started_at=f"2026-11-{1 + n // 86400 % 28:02d}T{n // 3600 % 24:02d}:"
                f"{n // 60 % 60:02d}:{n % 60:02d}.000Z",
                batch=f"batch-{n % 10}",
                task_id=f"task-{n}",
                labels={"split": "test" if n % 5 == 0 else "train", "model": f"m{n % 3}"},
            )
            batch: list[Record] = [start, *steps]
            rows = [(run_id, 0, start.kind, start.to_json())]
            rows += [(run_id, 1 + i, kind, body) for i, (kind, body) in enumerate(step_rows)]
            if n % 10 != 9:  # one in ten still running
                finish = RunFinished(
                    stop_reason=REASONS[n % len(REASONS)],
                    final_answer=None,
                    executed_actions=STEPS,
                    finished_at=start.started_at,
                )
                batch.append(finish)
                rows.append((run_id, len(rows), finish.kind, finish.to_json()))
            conn.executemany(
                "INSERT INTO polyloop_records (run_id, sequence, kind, body) VALUES (?, ?, ?, ?)",
                rows,
            )
            index_batch(conn, run_id, batch)
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


def _fixture(directory: Path, count: int) -> Path:
    path = directory / f"run-index-{count}.db"
    marker = path.with_suffix(".complete")
    if not marker.exists():
        for stale in directory.glob(f"{path.name}*"):
            stale.unlink()
        started = time.perf_counter()
        build_fixture(path, count)
        marker.write_text("ok\n")
        print(f"fixture: {count:,} runs written in {time.perf_counter() - started:.1f} s")
    return path


def time_process(argv: Sequence[str]) -> float:
    """Wall time of ``python -m polyloop.cli ARGV`` as a new process."""
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "polyloop.cli", *argv],
        check=True,
        stdout=subprocess.DEVNULL,
        timeout=600,
    )
    return time.perf_counter() - started


def time_start_up() -> float:
    """Wall time of a process that only imports the CLI: the floor of every command."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import polyloop.cli"], check=True, timeout=600)
    return time.perf_counter() - started


def time_in_process(argv: Sequence[str]) -> float:
    """Wall time of ``main(argv)`` in this process (no interpreter start-up)."""
    with contextlib.redirect_stdout(io.StringIO()):
        started = time.perf_counter()
        status = main(list(argv))
        elapsed = time.perf_counter() - started
    if status != 0:
        raise SystemExit(f"polyloop {' '.join(argv)} exited {status}")
    return elapsed


COMMANDS = {
    "runs --limit 20": ["runs", "--limit", "20"],
    "runs --limit 20 --batch --label": [
        "runs", "--limit", "20", "--batch", "batch-3", "--label", "split=test",
    ],
    "stats": ["stats"],
    "stats --stop-reason --label": ["stats", "--stop-reason", "step_budget", "--label", "model=m1"],
}  # fmt: skip


def main_benchmark(directory: Path, sizes: Sequence[int], rounds: int) -> None:
    paths = {size: _fixture(directory, size) for size in sizes}
    process: dict[tuple[str, int], list[float]] = {}
    inner: dict[tuple[str, int], list[float]] = {}
    start_up: list[float] = []
    # Round by round, every command at every size in turn: a busy machine slows them alike.
    for _ in range(rounds):
        start_up.append(time_start_up())
        for name, argv in COMMANDS.items():
            for size in sizes:
                full = [*argv, "--store", str(paths[size])]
                process.setdefault((name, size), []).append(time_process(full))
                inner.setdefault((name, size), []).append(time_in_process(full))
    floor = statistics.median(start_up)
    print(f"python start-up + import polyloop.cli: {floor:.3f} s (median of {rounds})")
    print(f"{'command':<34} {'runs':>8} {'process s':>10} {'in-process s':>13}")
    measured = {key: statistics.median(times) for key, times in process.items()}
    for name in COMMANDS:
        for size in sizes:
            own = statistics.median(inner[(name, size)])
            print(f"{name:<34} {size:>8,} {measured[(name, size)]:>10.3f} {own:>13.4f}")
    small, large = min(sizes), max(sizes)
    print()
    for name in COMMANDS:
        slow = measured[(name, large)]
        growth = slow / measured[(name, small)]
        verdict = "met" if slow <= TARGET_S and growth <= TARGET_GROWTH else "NOT met"
        print(
            f"target: {name} <= {TARGET_S:.0f} s at {large:,} runs and <= {TARGET_GROWTH:.0f}x "
            f"its time at {small:,}: {slow:.3f} s, {growth:.2f}x, {verdict}"
        )


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, default=None, help="keep the fixtures here")
    parser.add_argument("--sizes", type=int, nargs=2, default=[10_000, 100_000])
    parser.add_argument("--rounds", type=int, default=5)
    return parser.parse_args()


if __name__ == "__main__":
    arguments = _arguments()
    if arguments.dir is not None:
        arguments.dir.mkdir(parents=True, exist_ok=True)
        main_benchmark(arguments.dir, arguments.sizes, arguments.rounds)
    else:
        scratch = Path(tempfile.mkdtemp(prefix="polyloop-run-index-"))
        try:
            main_benchmark(scratch, arguments.sizes, arguments.rounds)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
