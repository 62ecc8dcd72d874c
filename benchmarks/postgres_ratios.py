"""Durable throughput on PostgreSQL against its ceilings and its peer, side by side: ratios.

    python benchmarks/postgres_ratios.py [--runs N] [--rounds R] [--postgres-dsn DSN]
        [--no-langgraph] [--no-processes]

The workload is ``concurrent_runs.py``'s: ``--runs`` three-step runs (two actions, then an
answer; the model and the executor answer at once) through ``run_many``, six commits a run.
Every case runs once per round, the order reversed every other round, all on one throwaway
PostgreSQL server (``fsync`` on, ``synchronous_commit`` on, its data in the temporary
directory; or ``--postgres-dsn``). Each ratio is the median of the rounds' side-by-side
ratios, each round's printed beside it, with its target (issue 38):

* PostgresStore at 64 against itself at 1 (>= 4) and against MemoryStore at 64 (>= 0.4);
* PostgresStore at 64 against LangGraph's ``AsyncPostgresSaver`` at 64 on the same server
  (>= 3): an equivalent graph (a model node answering the same three scripted replies, a tool
  node answering at once, ``durability="sync"``), its saver on a pool of as many connections
  as PostgresStore's. LangGraph is an optional benchmark dependency, never polyloop's
  (``pip install langgraph langgraph-checkpoint-postgres``); without it the case is skipped
  and the benchmark says so;
* SQLiteStore at 64 against MemoryStore at 64 (>= 0.6);
* ``ProcessBackend`` with 2 workers against 1, on SQLite and on PostgreSQL (>= 1.7), the same
  64 runs in flight in both.

Beside each throughput: the client's CPU per run (this process; the worker processes' for
``ProcessBackend`` are not in it) and, for the PostgreSQL cases, the server's CPU per run (the
postmaster and every backend, from ``/proc``), so that a limit can be told apart: a client CPU
per run near the wall time per run means the client is the limit. Also printed: the fsync
cost of the disk under the server (write + fsync of 1 KB) and the load average at the start and
at the end of every round, since the machine may be shared.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import glob
import importlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from concurrent_runs import REPLIES  # sibling scripts
from durable_ratios import Case, _measure, throwaway_postgres
from loop_steps import fsync_ms

TARGETS = (  # (label, top, bottom, target)
    ("PostgreSQL@64 / PostgreSQL@1", "postgres@64", "postgres@1", 4.0),
    ("PostgreSQL@64 / MemoryStore@64", "postgres@64", "memory@64", 0.4),
    ("PostgreSQL@64 / LangGraph saver@64", "postgres@64", "langgraph@64", 3.0),
    ("PostgreSQL@1 / LangGraph saver@1", "postgres@1", "langgraph@1", None),
    ("SQLite@64 / MemoryStore@64", "sqlite@64", "memory@64", 0.6),
    ("ProcessBackend 2 / 1 workers, SQLite", "sqlite 2 workers", "sqlite 1 worker", 1.7),
    ("ProcessBackend 2 / 1 workers, PostgreSQL", "postgres 2 workers", "postgres 1 worker", 1.7),
)


@dataclass
class Result:
    rates: list[float] = field(default_factory=list)
    client_ms: list[float] = field(default_factory=list)  # client CPU per run
    server_ms: list[float] = field(default_factory=list)  # server CPU per run


def server_cpu_s(data: Path | None) -> float:
    """CPU seconds of the server whose data directory is ``data``: the postmaster, its live
    children, and the children it reaped (0 where ``/proc`` or the directory is not at hand)."""
    if data is None:
        return 0.0
    try:
        postmaster = int((data / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            pid, ppid = int(stat.parent.name), int(fields[1])
            if pid == postmaster:
                total += sum(int(v) for v in fields[11:15])  # utime stime cutime cstime
            elif ppid == postmaster:
                total += int(fields[11]) + int(fields[12])
    return total / ticks


# --------------------------------------------------------------------------- LangGraph


class State(TypedDict):
    """The graph's state: the conversation so far and the next scripted reply's index."""

    messages: list[str]
    step: int


async def model(state: State) -> dict[str, Any]:
    reply = REPLIES[state["step"]]
    return {"messages": [*state["messages"], reply], "step": state["step"] + 1}


async def tools(state: State) -> dict[str, Any]:
    return {"messages": [*state["messages"], "ok\n" * 20]}


def route(state: State) -> str:
    return "__end__" if state["messages"][-1].startswith("FINAL ") else "tools"


def langgraph_available() -> str | None:
    """``None`` if LangGraph's Postgres saver can be imported, else why not."""
    try:
        _langgraph_modules()
    except ImportError as exc:
        return f"{exc} (pip install langgraph langgraph-checkpoint-postgres)"
    return None


def _langgraph_modules() -> tuple[Any, Any]:
    """LangGraph's saver and graph modules, imported by name: an optional dependency of this
    benchmark only, which the type checker need not see."""
    saver = importlib.import_module("langgraph.checkpoint.postgres.aio")
    graph = importlib.import_module("langgraph.graph")
    return saver, graph


async def _langgraph(dsn: str, runs: int, concurrency: int, tag: str) -> float:
    """Runs per second of the equivalent graph on ``AsyncPostgresSaver``, durability "sync"."""
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    saver_module, graph_module = _langgraph_modules()
    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        dsn, min_size=1, max_size=10, kwargs=kwargs, open=False
    )
    await pool.open()
    try:
        saver = saver_module.AsyncPostgresSaver(pool)
        await saver.setup()
        graph = graph_module.StateGraph(State)
        graph.add_node("model", model)
        graph.add_node("tools", tools)
        graph.add_edge(graph_module.START, "model")
        graph.add_conditional_edges("model", route, ["tools", graph_module.END])
        graph.add_edge("tools", "model")
        app = graph.compile(checkpointer=saver)
        gate = asyncio.Semaphore(concurrency)

        async def one(index: int) -> None:
            async with gate:
                config: Any = {"configurable": {"thread_id": f"{tag}-{index}"}}
                state = {"messages": [f"task {index}"], "step": 0}
                out = await app.ainvoke(state, config, durability="sync")
                assert out["messages"][-1] == REPLIES[-1], out

        started = time.perf_counter()
        await asyncio.gather(*(one(index) for index in range(runs)))
        return runs / (time.perf_counter() - started)
    finally:
        await pool.close()


# --------------------------------------------------------------------------- the rounds


Measure = Callable[[int, str], Coroutine[Any, Any, float]]


def cases(dsn: str | None, directory: Path, langgraph: bool, processes: bool) -> dict[str, Any]:
    """Each case's measurement: ``(runs, tag) -> runs per second``."""

    def polyloop_case(store: str, concurrency: int, workers: int | None = None) -> Measure:
        case = Case("", store, concurrency, workers=workers)
        return lambda runs, tag: _measure(case, directory, runs, tag)

    found: dict[str, Measure] = {
        "memory@64": polyloop_case("memory", 64),
        "sqlite@64": polyloop_case("sqlite", 64),
    }
    if processes:
        found["sqlite 1 worker"] = polyloop_case("sqlite", 64, 1)
        found["sqlite 2 workers"] = polyloop_case("sqlite", 64, 2)
    if dsn is not None:
        found["postgres@1"] = polyloop_case(dsn, 1)
        found["postgres@64"] = polyloop_case(dsn, 64)
        if processes:
            found["postgres 1 worker"] = polyloop_case(dsn, 64, 1)
            found["postgres 2 workers"] = polyloop_case(dsn, 64, 2)
        if langgraph:
            found["langgraph@1"] = lambda runs, tag: _langgraph(dsn, runs, 1, tag)
            found["langgraph@64"] = lambda runs, tag: _langgraph(dsn, runs, 64, tag)
    return found


def measure(
    found: dict[str, Measure], runs: int, rounds: int, directory: Path, data: Path | None
) -> tuple[dict[str, Result], list[float], list[str]]:
    results = {name: Result() for name in found}
    fsyncs: list[float] = []
    loads: list[str] = []
    names = list(found)
    for round_ in range(rounds):
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        fsyncs.append(fsync_ms(directory, b"x" * 1024, 200))
        for index, name in enumerate(names if round_ % 2 == 0 else names[::-1]):
            tag = f"q{round_}-{index}-{os.getpid()}-{time.time_ns()}"
            cpu, server = time.process_time(), server_cpu_s(data)
            rate = asyncio.run(found[name](runs, tag))
            result = results[name]
            result.rates.append(rate)
            result.client_ms.append((time.process_time() - cpu) * 1000 / runs)
            result.server_ms.append((server_cpu_s(data) - server) * 1000 / runs)
            print(f"round {round_ + 1}: {name}: {rate:,.0f} runs/s", file=sys.stderr, flush=True)
        loads.append(
            f"round {round_ + 1}: load {load} -> {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
        )
    return results, fsyncs, loads


def report(
    results: dict[str, Result], fsyncs: list[float], loads: list[str], skipped: list[str]
) -> list[str]:
    lines = [
        f"{'case':<22}{'runs/s':>9}{'ms/run':>9}{'client CPU ms/run':>19}{'server CPU ms/run':>19}"
    ]
    for name, r in results.items():
        rate = statistics.median(r.rates)
        lines.append(
            f"{name:<22}{rate:>9,.0f}{1000 / rate:>9.2f}{statistics.median(r.client_ms):>19.2f}"
            f"{statistics.median(r.server_ms):>19.2f}"
        )
    lines.append(f"{'ratio':<44}{'measured':>9}{'target':>9}  verdict  (per round)")
    for label, top, bottom, target in TARGETS:
        if top not in results or bottom not in results:
            lines.append(f"{label:<44}{'skipped':>9}")
            continue
        each = [a / b for a, b in zip(results[top].rates, results[bottom].rates, strict=True)]
        value = statistics.median(each)
        shown = "" if target is None else f">= {target:g}"
        verdict = "" if target is None else ("met" if value >= target else "NOT met")
        per_round = " ".join(f"{x:.2f}" for x in each)
        lines.append(f"{label:<44}{value:>9.2f}{shown:>9}  {verdict:<7}  {per_round}")
    lines.append(
        f"fsync ms (write + fsync of 1 KB, per round): {' '.join(f'{x:.3f}' for x in fsyncs)}"
    )
    lines.extend(loads)
    lines.extend(f"skipped: {why}" for why in skipped)
    lines.append(f"cpus: {os.cpu_count()}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--runs", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--postgres-dsn", default=os.environ.get("POLYLOOP_BENCH_DSN"))
    parser.add_argument("--no-langgraph", action="store_true")
    parser.add_argument("--no-processes", action="store_true")
    args = parser.parse_args(argv)
    if min(args.runs, args.rounds) < 1:
        parser.error("--runs and --rounds must be >= 1")
    skipped: list[str] = []
    langgraph = not args.no_langgraph
    if langgraph and (why := langgraph_available()) is not None:
        skipped.append(f"LangGraph's AsyncPostgresSaver: {why}")
        langgraph = False
    with contextlib.ExitStack() as stack:
        directory = Path(
            stack.enter_context(tempfile.TemporaryDirectory(prefix="polyloop-pg-ratios-"))
        )
        dsn, data = args.postgres_dsn, None
        if dsn is None:
            dsn = stack.enter_context(throwaway_postgres())
            if dsn is None:
                skipped.append("PostgreSQL: no server binaries to start a throwaway server")
            else:
                data = _throwaway_data_dir()
        found = cases(dsn, directory, langgraph, not args.no_processes)
        results, fsyncs, loads = measure(found, args.runs, args.rounds, directory, data)
    print("\n".join(report(results, fsyncs, loads, skipped)))
    return 0


def _throwaway_data_dir() -> Path | None:
    """The data directory of the throwaway server just started (the newest one)."""
    found = sorted(
        glob.glob(os.path.join(tempfile.gettempdir(), "polyloop-ratios-pg-*", "data")),
        key=os.path.getmtime,
    )
    return Path(found[-1]) if found else None


if __name__ == "__main__":
    sys.exit(main())
