"""Runs per second on one SQLite store: many runs at once against one at a time (group commit).

    python benchmarks/concurrent_runs.py [--dir DIR] [--runs N] [--concurrency 1 64] [--rounds R]

The workload: ``--runs`` short runs (a scripted model that asks for two actions and then answers,
an executor that returns a short observation at once), each a fresh run on one fresh
``SQLiteStore`` (WAL, ``synchronous=FULL``: durable when a commit returns), driven by
``polyloop.run_many`` with each ``--concurrency``. Each run makes six commits, so at
concurrency 1 a run costs six fsyncs plus the loop's own work; at 64, the runs' commits meet
and the store commits the waiting ones together, one fsync for the group
(docs/design/0005-group-commit.md).

Printed: runs per second at each concurrency (the median over the rounds, which alternate the
concurrencies so that disk drift hits all alike), the ratio of the highest to the lowest (the
median of the rounds' side-by-side ratios), and the fsync cost of this filesystem (write +
fsync of 1 KB, measured in the same directory in each round). Where fsync is nearly free
(under 0.05 ms: a RAM disk, a VM that ignores it) there is nothing to share, and the benchmark
says the gain cannot be shown here instead of claiming it. The target: >= 2x at 64 against 1.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from loop_steps import fsync_ms  # a sibling script, as the other benchmarks import it

from polyloop import (
    Action,
    ActionOutcome,
    ActionStatus,
    AgentDefinition,
    Budget,
    FinalAnswer,
    ModelReply,
    ParsedReply,
    RunSeams,
    StopReason,
    SyntheticObservations,
    Task,
    run_many,
)
from polyloop.models import ScriptedModel
from polyloop.stores import SQLiteStore

REPLIES = ("run the tests", "read the log", "FINAL done")
TARGET = 2.0  # runs/s at the highest concurrency over the lowest
NEARLY_FREE_FSYNC_MS = 0.05
AGENT = AgentDefinition(
    system_prompt="You are a benchmark.",
    budget=Budget(
        max_steps=10,
        max_executed_actions=10,
        max_consecutive_parse_failures=3,
        max_prompt_chars=10**9,
    ),
    synthetic_observations=SyntheticObservations(not_executed="no", env_error="down"),
)


class ScriptParser:
    """``FINAL <answer>`` ends the run; any other reply is one action."""

    def parse(self, reply: ModelReply) -> ParsedReply:
        if reply.text.startswith("FINAL "):
            return FinalAnswer(text=reply.text.removeprefix("FINAL "))
        return Action(text=reply.text, tool_name="bash", tool_args={"cmd": reply.text})


class InstantExecutor:
    async def execute(self, action: Action) -> ActionOutcome:
        return ActionOutcome(status=ActionStatus.EXECUTED, observation="ok\n" * 20)


def _seams(task: Task) -> RunSeams:
    return RunSeams(model=ScriptedModel(REPLIES), parser=ScriptParser(), executor=InstantExecutor())


async def runs_per_second(path: Path, runs: int, concurrency: int) -> float:
    """``runs`` runs on a fresh store at ``path`` through ``run_many``, ``concurrency`` at
    once: runs/s."""
    tasks = [Task(id=str(index), goal=f"task {index}") for index in range(runs)]
    async with SQLiteStore(path) as store:
        os.sync()  # what earlier measurements left dirty is not this one's to write back
        started = time.perf_counter()
        summary = await run_many(
            AGENT,
            tasks,
            seams=_seams,
            store=store,
            batch=f"c{concurrency}",
            concurrency=concurrency,
        )
        elapsed = time.perf_counter() - started
        assert len(await store.run_ids()) == runs
    stops = {outcome.stop_reason for outcome in summary.outcomes}
    assert stops == {StopReason.AGENT_FINISHED}, stops
    for suffix in ("", "-wal", "-shm"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)
    return runs / elapsed


def measure(
    directory: Path, runs: int, levels: Sequence[int], rounds: int
) -> tuple[dict[int, list[float]], list[float]]:
    """runs/s per concurrency, one sample per round, and the fsync cost measured each round."""
    rates: dict[int, list[float]] = {level: [] for level in levels}
    fsyncs: list[float] = []
    for round_ in range(rounds):
        fsyncs.append(fsync_ms(directory, b"x" * 1024, 200))
        # Alternate the order too, so neither level always follows the other's writes.
        for level in levels if round_ % 2 == 0 else list(reversed(levels)):
            path = directory / f"runs-{level}.db"
            rates[level].append(asyncio.run(runs_per_second(path, runs, level)))
    return rates, fsyncs


def report(rates: dict[int, list[float]], fsyncs: list[float]) -> list[str]:
    levels = sorted(rates)
    low, high = levels[0], levels[-1]
    median = statistics.median
    lines = [f"{'concurrency':>11} {'runs/s':>9}"]
    lines += [f"{level:>11} {median(rates[level]):9.1f}" for level in levels]
    ratios = [a / b for a, b in zip(rates[high], rates[low], strict=True)]
    ratio = median(ratios)
    cost = median(fsyncs)
    lines.append(f"ratio {high}/{low}: {ratio:.2f}")
    lines.append(f"ratio {high}/{low} per round: " + " ".join(f"{r:.2f}" for r in ratios))
    lines.append(f"fsync ms (write + fsync of 1 KB): {cost:.3f}")
    if cost < NEARLY_FREE_FSYNC_MS:
        lines.append(
            f"fsync is nearly free on this filesystem ({cost:.3f} ms < {NEARLY_FREE_FSYNC_MS} "
            "ms): there is no fsync to share, so the gain of group commit cannot be shown here"
        )
    else:
        met = "met" if ratio >= TARGET else "NOT met"
        lines.append(f"target: {high} runs at once >= {TARGET:g}x the runs/s of {low}: {met}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", type=Path, default=None, help="where the files go (a tmp dir)")
    parser.add_argument("--runs", type=int, default=512, help="runs per measurement")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 64])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.rounds < 1 or args.runs < 1 or min(args.concurrency) < 1:
        parser.error("--rounds, --runs and every --concurrency must be at least 1")
    if len(set(args.concurrency)) < 2:
        parser.error("--concurrency needs two different levels to compare")
    directory = Path(tempfile.mkdtemp(prefix="polyloop-concurrent-", dir=args.dir))
    try:
        levels = sorted(set(args.concurrency))
        print("\n".join(report(*measure(directory, args.runs, levels, args.rounds))))
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
