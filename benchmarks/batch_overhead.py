"""What ``run_many`` costs over a hand-written ``asyncio.gather`` with a semaphore over ``run()``.

    python benchmarks/batch_overhead.py [--runs 1000] [--concurrency 8] [--rounds 5]
                                        [--store memory|sqlite] [--dir DIR]

The workload: ``--runs`` short runs (one action, then a final answer: two steps, five records)
of one agent, each with its own seams built by a factory, ``--concurrency`` at a time, on a
fresh store per round (``memory``: MemoryStore, the default — the store's own cost is left out,
so the runner's is in full view; ``sqlite``: SQLiteStore in ``--dir``, durable commits). The
baseline is the loop a user writes today::

    semaphore = asyncio.Semaphore(concurrency)

    async def one(task):
        async with semaphore:
            seams = factory(task)
            run_id = batch_run_id(batch, task.id)
            return await run(agent, task.goal, ..., store=store, run_id=run_id)

    await asyncio.gather(*(one(task) for task in tasks))

``run_many`` does more for the same runs: it checks every task against the store before
anything starts, decides per task (skip / resume / start), counts steps, actions and usage,
closes each run's executor and builds the summary. Rounds alternate the two, in this process;
printed: seconds per batch for each (the median over rounds), the ratio of each round, and
their median against the target.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from polyloop import (
    Action,
    ActionOutcome,
    ActionStatus,
    AgentDefinition,
    Budget,
    FinalAnswer,
    Message,
    ModelReply,
    ParsedReply,
    RunSeams,
    SyntheticObservations,
    Task,
    batch_run_id,
    run,
    run_many,
)
from polyloop.ports import RunStore
from polyloop.stores import MemoryStore, SQLiteStore

TARGET = 1.1
BATCH = "bench"
AGENT = AgentDefinition(
    system_prompt="You are a benchmark.",
    budget=Budget(
        max_steps=10, max_executed_actions=10, max_consecutive_parse_failures=3,
        max_prompt_chars=100_000,
    ),
    synthetic_observations=SyntheticObservations(not_executed="no", env_error="broken"),
)  # fmt: skip


class OneActionModel:
    """Asks for one action, then answers."""

    async def complete(self, messages: Sequence[Message]) -> ModelReply:
        done = any(m.role == "assistant" for m in messages)
        return ModelReply(text="ANSWER" if done else "ACT", call_id=f"c{len(messages)}")


class Parser:
    def parse(self, reply: ModelReply) -> ParsedReply:
        if reply.text == "ANSWER":
            return FinalAnswer(text="42")
        return Action(text=reply.text, tool_name="act")


class Executor:
    async def execute(self, action: Action) -> ActionOutcome:
        return ActionOutcome(status=ActionStatus.EXECUTED, observation="done")


def factory(task: Task) -> RunSeams:
    return RunSeams(model=OneActionModel(), parser=Parser(), executor=Executor())


async def hand_written(tasks: list[Task], store: RunStore, concurrency: int) -> None:
    semaphore = asyncio.Semaphore(concurrency)

    async def one(task: Task) -> object:
        async with semaphore:
            seams = factory(task)
            return await run(
                AGENT,
                task.goal,
                model=seams.model,
                parser=seams.parser,
                executor=seams.executor,
                store=store,
                run_id=batch_run_id(BATCH, task.id),
            )

    await asyncio.gather(*(one(task) for task in tasks))


async def with_run_many(tasks: list[Task], store: RunStore, concurrency: int) -> None:
    summary = await run_many(
        AGENT, tasks, seams=factory, store=store, batch=BATCH, concurrency=concurrency
    )
    assert summary.what == {"started": len(tasks)}, summary.what


Way = Callable[[list[Task], RunStore, int], Awaitable[None]]


def timed(way: Way, tasks: list[Task], concurrency: int, kind: str, where: Path) -> float:
    async def once() -> float:
        store: Any = MemoryStore() if kind == "memory" else SQLiteStore(where / "runs.db")
        try:
            started = time.perf_counter()
            await way(tasks, store, concurrency)
            return time.perf_counter() - started
        finally:
            await store.aclose()

    try:
        return asyncio.run(once())
    finally:
        for path in where.glob("runs.db*"):
            path.unlink()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--store", choices=("memory", "sqlite"), default="memory")
    parser.add_argument("--dir", type=Path, default=None, help="where the SQLite file goes")
    args = parser.parse_args()
    where = Path(tempfile.mkdtemp(dir=args.dir))
    tasks = [Task(f"t{n}", f"task {n}") for n in range(args.runs)]
    store_name = "MemoryStore" if args.store == "memory" else f"SQLiteStore in {where}"
    print(f"{args.runs} runs of 2 steps, concurrency {args.concurrency}, {store_name}")
    try:
        timed(with_run_many, tasks[:50], args.concurrency, args.store, where)  # warm up
        timed(hand_written, tasks[:50], args.concurrency, args.store, where)
        baseline: list[float] = []
        runner: list[float] = []
        for _ in range(args.rounds):
            baseline.append(timed(hand_written, tasks, args.concurrency, args.store, where))
            runner.append(timed(with_run_many, tasks, args.concurrency, args.store, where))
    finally:
        shutil.rmtree(where, ignore_errors=True)
    ratios = [r / b for r, b in zip(runner, baseline, strict=True)]
    print(f"gather + semaphore over run(): {statistics.median(baseline):.3f} s")
    print(f"run_many:                      {statistics.median(runner):.3f} s")
    print("ratio per round: " + " ".join(f"{ratio:.2f}" for ratio in ratios))
    ratio = statistics.median(ratios)
    verdict = "met" if ratio <= TARGET else "NOT met"
    print(f"target: run_many <= {TARGET}x the hand-written loop: {ratio:.2f}, {verdict}")


if __name__ == "__main__":
    main()
