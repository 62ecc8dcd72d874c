"""How close durable batches come to the in-memory ceiling, and what a second core adds: ratios.

    python benchmarks/durable_ratios.py [--dir DIR] [--runs N] [--postgres-runs N] [--slow-tasks N]
        [--slow-concurrency N] [--model-s S] [--rounds R] [--postgres-dsn DSN | --no-postgres]

Every figure is a ratio of two throughputs measured in this run, taken side by side and
alternated round by round (the median of the rounds' ratios), so the drift of a shared machine
hits both sides alike; the absolute rates are printed beside them for scale only.

* The *instant* workload is ``concurrent_runs.py``'s: ``--runs`` three-step runs (two actions,
  then an answer; the model and the executor answer at once) through ``run_many`` on a fresh
  store. Ratios: SQLite at concurrency 64 against
  MemoryStore at 64 (durability's CPU cost;
  target >= 0.75) and against SQLite at 1 (group commit; target >= 4).
* The *slow-model* workload: every model call sleeps ``--model-s`` seconds; ``--slow-tasks``
  three-step runs, ``--slow-concurrency`` at a time, in steps per second. The issue's own
  figure is 20,000 tasks at 5,000 at once with a 1 s model; the defaults are scaled down
  (2,000 tasks, 1,000 at once, 0.25 s) so the whole benchmark ends in a minute or two, while
  still asking more of the loop than one core gives. Ratios: SQLite against MemoryStore
  (target >= 0.75), and ``ProcessBackend`` with 2 worker processes against 1 on SQLite (the
  same runs in flight in all; target >= 1.7 on a machine with two free cores).
* PostgreSQL beside them, when a server is at hand: ``--postgres-dsn`` (or
  ``POLYLOOP_BENCH_DSN``), else a throwaway server started from the PostgreSQL binaries found
  on this machine (durable: ``fsync`` on, its data in the temporary directory), else
  "skipped". PostgreSQL is far slower here, so its slow workload is one wave (as many runs as
  are at once: the same load per step) and its instant one ``--postgres-runs`` runs.
* The fsync cost of the file system (write + fsync of 1 KB), measured in ``--dir``; and, for
  each ``ProcessBackend`` case, how long its worker processes ran on a CPU and how long they
  were ready but waited for one (Linux): a wait as long as the run means the cores were taken
  by other work, and the 2 / 1 ratio cannot show what a free second core would add.

Each target line says ``met`` or ``NOT met``. The machine may be shared: read the spread.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import glob
import multiprocessing
import os
import pwd
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from concurrent_runs import AGENT, REPLIES, ScriptParser, _seams  # sibling scripts
from loop_steps import fsync_ms

from polyloop import (
    ModelReply,
    ProcessBackend,
    RunSeams,
    StopReason,
    Task,
    run_many,
)
from polyloop._batch import Backend
from polyloop.models import ScriptedModel
from polyloop.stores import MemoryStore

TARGETS = {
    "sqlite64/memory64": 0.75,
    "sqlite64/sqlite1": 4.0,
    "slow sqlite/memory": 0.75,
    "slow processes 2/1 sqlite": 1.7,
}
#: Per ProcessBackend case: (seconds its workers ran, seconds they waited for a CPU), a round each.
WAITS: dict[str, list[tuple[float, float]]] = {}
MODEL_S = {"s": 0.25}  # the slow model's delay; set in the workers from the environment


class SlowModel:
    """The scripted replies of the instant workload, each after ``MODEL_S`` seconds."""

    def __init__(self) -> None:
        self.inner = ScriptedModel(REPLIES)
        self.delay = float(os.environ.get("POLYLOOP_BENCH_MODEL_S", MODEL_S["s"]))

    async def complete(self, messages: Sequence[object]) -> ModelReply:
        await asyncio.sleep(self.delay)
        return await self.inner.complete(messages)  # type: ignore[arg-type]


def slow_seams(task: Task) -> RunSeams:
    """Module level, so the worker processes of ``ProcessBackend`` can import it."""
    plain = _seams(task)
    return RunSeams(model=SlowModel(), parser=ScriptParser(), executor=plain.executor)


# --------------------------------------------------------------------------- one measurement


@dataclass(frozen=True, slots=True)
class Case:
    """One throughput to measure: a store (``memory``, a SQLite file, a DSN), a workload."""

    name: str
    store: str  # "memory", "sqlite" or a PostgreSQL DSN
    concurrency: int
    slow: bool = False
    workers: int | None = None  # ProcessBackend(workers), or the default backend
    runs: int | None = None  # the runs of this case, if not the workload's


async def _measure(case: Case, directory: Path, runs: int, tag: str) -> float:
    """Per second: runs (instant workload) or model steps (slow workload) of ``case``."""
    tasks = [Task(id=str(index), goal=f"task {index}") for index in range(runs)]
    path = directory / f"{tag}.db"
    store: MemoryStore | str
    if case.store == "memory":
        store = MemoryStore()
    elif case.store == "sqlite":
        store = f"sqlite:///{path}"
    else:
        store = case.store
    backend: Backend | None = None if case.workers is None else ProcessBackend(case.workers)
    concurrency = case.concurrency // (case.workers or 1)
    os.sync()  # what earlier measurements left dirty is not this one's to write back
    started = time.perf_counter()
    summary = await run_many(
        AGENT,
        tasks,
        seams=slow_seams if case.slow else _seams,
        store=store,
        batch=tag,
        concurrency=max(1, concurrency),
        backend=backend,
    )
    elapsed = time.perf_counter() - started
    stops = {outcome.stop_reason for outcome in summary.outcomes}
    assert stops == {StopReason.AGENT_FINISHED}, (case, summary.what)
    for suffix in ("", "-wal", "-shm"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)
    return runs * (len(REPLIES) if case.slow else 1) / elapsed


class CpuWait:
    """How long the worker processes of ``ProcessBackend`` ran and how long they were ready to
    run but waited for a CPU (Linux's ``/proc/PID/task/*/schedstat``, sampled every 0.1 s):
    when the wait is as long as the run, other work holds the cores and a second worker has
    none to take. Zeros where ``/proc`` has no such files."""

    def __init__(self) -> None:
        self.seen: dict[int, tuple[float, float]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> CpuWait:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        while not self._stop.wait(0.1):
            for child in multiprocessing.active_children():
                if child.pid is None or not child.name.startswith("polyloop-batch-worker"):
                    continue
                ran = waited = 0
                for stat in glob.glob(f"/proc/{child.pid}/task/*/schedstat"):
                    with contextlib.suppress(OSError, ValueError):
                        on_cpu, ready, _ = Path(stat).read_text().split()
                        ran, waited = ran + int(on_cpu), waited + int(ready)
                self.seen[child.pid] = (ran / 1e9, waited / 1e9)

    def totals(self) -> tuple[float, float]:
        return sum(v[0] for v in self.seen.values()), sum(v[1] for v in self.seen.values())


def measure(
    cases: Sequence[Case],
    directory: Path,
    sizes: tuple[int, int],
    rounds: int,
    progress: Callable[[str], None],
) -> tuple[dict[str, list[float]], list[float]]:
    """Each case once per round, in an order reversed every other round; the fsync cost each
    round. A batch id never repeats, so a PostgreSQL database needs no cleaning."""
    rates: dict[str, list[float]] = {case.name: [] for case in cases}
    fsyncs: list[float] = []
    for round_ in range(rounds):
        fsyncs.append(fsync_ms(directory, b"x" * 1024, 200))
        for index, case in enumerate(cases if round_ % 2 == 0 else list(reversed(cases))):
            runs = case.runs or (sizes[1] if case.slow else sizes[0])
            tag = f"r{round_}-{index}-{os.getpid()}-{time.time_ns()}"
            with CpuWait() as cpu:
                rates[case.name].append(asyncio.run(_measure(case, directory, runs, tag)))
            if case.workers is not None:
                ran, waited = cpu.totals()
                WAITS.setdefault(case.name, []).append((ran, waited))
            progress(f"round {round_ + 1}: {case.name}: {rates[case.name][-1]:,.0f}/s")
    return rates, fsyncs


# --------------------------------------------------------------------------- the report


def ratio(rates: dict[str, list[float]], top: str, bottom: str) -> tuple[float, list[float]]:
    """The median of the rounds' ratios, and the ratios."""
    each = [a / b for a, b in zip(rates[top], rates[bottom], strict=True)]
    return statistics.median(each), each


RATIOS = (  # (label, top, bottom, target key or None)
    ("SQLite@64 / MemoryStore@64", "sqlite@64", "memory@64", "sqlite64/memory64"),
    ("SQLite@64 / SQLite@1", "sqlite@64", "sqlite@1", "sqlite64/sqlite1"),
    ("slow model: SQLite / MemoryStore", "slow sqlite", "slow memory", "slow sqlite/memory"),
    (
        "slow model: ProcessBackend 2 / 1 workers, SQLite",
        "slow sqlite 2 workers",
        "slow sqlite 1 worker",
        "slow processes 2/1 sqlite",
    ),
    ("PostgreSQL@64 / MemoryStore@64", "postgres@64", "memory@64", "sqlite64/memory64"),
    ("PostgreSQL@64 / PostgreSQL@1", "postgres@64", "postgres@1", "sqlite64/sqlite1"),
    ("slow model: PostgreSQL / MemoryStore", "slow postgres", "slow memory", "slow sqlite/memory"),
    (
        "slow model: ProcessBackend 2 / 1 workers, PostgreSQL",
        "slow postgres 2 workers",
        "slow postgres 1 worker",
        "slow processes 2/1 sqlite",
    ),
)


def report(
    rates: dict[str, list[float]], fsyncs: list[float], postgres: str | None, slow: str
) -> list[str]:
    lines = [f"{'throughput (median)':<28}{'per second':>12}"]
    for name, values in rates.items():
        unit = "steps" if name.startswith("slow") else "runs"
        lines.append(f"{name:<28}{statistics.median(values):>12,.0f} {unit}")
    lines.append(f"slow model: {slow}")
    lines.append(f"{'ratio':<52}{'measured':>9}{'target':>9}  verdict  (per round)")
    for label, top, bottom, key in RATIOS:
        if top not in rates or bottom not in rates:
            lines.append(f"{label:<52}{'skipped':>9}  ({postgres or 'no PostgreSQL'})")
            continue
        value, each = ratio(rates, top, bottom)
        target = TARGETS[key]
        verdict = "met" if value >= target else "NOT met"
        rounds = " ".join(f"{r:.2f}" for r in each)
        lines.append(f"{label:<52}{value:>9.2f}{'>= ' + f'{target:g}':>9}  {verdict:<7}  {rounds}")
    lines.append(f"fsync ms (write + fsync of 1 KB): {statistics.median(fsyncs):.3f}")
    for name, waits in WAITS.items():
        lines.append(
            f"{name}: worker processes on a CPU / waiting for one (s, per round): "
            + ", ".join(f"{ran:.1f} / {waited:.1f}" for ran, waited in waits)
        )
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    lines.append(
        f"cpus: {os.cpu_count()}, load average now {load} (on a shared machine the figures are "
        "noisy, and a second worker process has no free core to use)"
    )
    return lines


def cases(postgres: str | None, slow_concurrency: int, postgres_runs: int) -> list[Case]:
    found = [
        Case("memory@64", "memory", 64),
        Case("sqlite@64", "sqlite", 64),
        Case("sqlite@1", "sqlite", 1),
        Case("slow memory", "memory", slow_concurrency, slow=True),
        Case("slow sqlite", "sqlite", slow_concurrency, slow=True),
        Case("slow sqlite 1 worker", "sqlite", slow_concurrency, slow=True, workers=1),
        Case("slow sqlite 2 workers", "sqlite", slow_concurrency, slow=True, workers=2),
    ]
    if postgres is not None:
        found += [
            Case("postgres@64", postgres, 64, runs=postgres_runs),
            Case("postgres@1", postgres, 1, runs=postgres_runs),
            Case("slow postgres", postgres, slow_concurrency, True, None, slow_concurrency),
            Case("slow postgres 1 worker", postgres, slow_concurrency, True, 1, slow_concurrency),
            Case("slow postgres 2 workers", postgres, slow_concurrency, True, 2, slow_concurrency),
        ]
    return found


# --------------------------------------------------------------------------- PostgreSQL


def _postgres_bindir() -> Path | None:
    for bindir in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if (Path(bindir) / "initdb").is_file() and (Path(bindir) / "pg_ctl").is_file():
            return Path(bindir)
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb is not None else None


@contextlib.contextmanager
def throwaway_postgres() -> Iterator[str | None]:
    """A DSN of a durable PostgreSQL server started for this run in the temporary directory
    (stopped and removed on the way out), or ``None`` where none can be started."""
    bindir = _postgres_bindir()
    prefix: list[str] = []
    if os.geteuid() == 0:  # initdb and pg_ctl refuse root
        runuser = shutil.which("runuser")
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            runuser = None
        prefix = [runuser, "-u", "postgres", "--"] if runuser else []
        if not prefix:
            bindir = None
    if bindir is None:
        yield None
        return
    base = Path(tempfile.mkdtemp(prefix="polyloop-ratios-pg-"))
    data = base / "data"
    if prefix:
        owner = pwd.getpwnam("postgres")
        os.chown(base, owner.pw_uid, owner.pw_gid)
    pg_ctl = [*prefix, str(bindir / "pg_ctl"), "-D", str(data)]
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    run = {"capture_output": True, "timeout": 120, "check": False}
    initdb = [*prefix, str(bindir / "initdb"), "-D", str(data), "-U", "bench", "--auth=trust"]
    started = (
        subprocess.run([*initdb, "--encoding=UTF8", "--locale=C"], **run).returncode == 0  # type: ignore[call-overload]
        and subprocess.run(  # type: ignore[call-overload]
            [*pg_ctl, "-l", str(base / "log"), "-w", "-o",
             f"-c listen_addresses=127.0.0.1 -p {port} -k {base} -c max_connections=200",
             "start"], **run,
        ).returncode == 0
    )  # fmt: skip
    try:
        yield f"postgresql://bench@127.0.0.1:{port}/postgres" if started else None
    finally:
        subprocess.run([*pg_ctl, "-m", "immediate", "-w", "stop"], **run)  # type: ignore[call-overload]
        shutil.rmtree(base, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--dir", type=Path, default=None, help="where the files go (a tmp dir)")
    parser.add_argument("--runs", type=int, default=512, help="runs of the instant workload")
    parser.add_argument(
        "--postgres-runs", type=int, default=128, help="runs of the instant workload, PostgreSQL"
    )
    parser.add_argument("--slow-tasks", type=int, default=2000, help="runs of the slow workload")
    parser.add_argument("--slow-concurrency", type=int, default=1000)
    parser.add_argument("--model-s", type=float, default=0.25, help="the slow model's delay")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--postgres-dsn", default=os.environ.get("POLYLOOP_BENCH_DSN"))
    parser.add_argument("--no-postgres", action="store_true", help="skip PostgreSQL")
    args = parser.parse_args(argv)
    if min(args.runs, args.postgres_runs, args.slow_tasks, args.slow_concurrency, args.rounds) < 1:
        parser.error(
            "--runs, --postgres-runs, --slow-tasks, --slow-concurrency and --rounds must be >= 1"
        )
    if not 0 <= args.model_s < 60:
        parser.error("--model-s must be a number of seconds in [0, 60)")
    os.environ["POLYLOOP_BENCH_MODEL_S"] = repr(args.model_s)  # the workers read it
    # `timeout` sends SIGTERM: leave through the finally blocks (the throwaway server stops).
    signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(128 + number))
    directory = Path(tempfile.mkdtemp(prefix="polyloop-ratios-", dir=args.dir))
    slow = (
        f"{args.slow_tasks} runs of 3 steps, {args.slow_concurrency} at once, each model call "
        f"{args.model_s:g} s (scaled down from 20,000 / 5,000 / 1 s)"
    )
    try:
        with contextlib.ExitStack() as stack:
            postgres = args.postgres_dsn
            if postgres is None and not args.no_postgres:
                postgres = stack.enter_context(throwaway_postgres())
            rates, fsyncs = measure(
                cases(postgres, args.slow_concurrency, args.postgres_runs),
                directory,
                (args.runs, args.slow_tasks),
                args.rounds,
                lambda line: print(line, file=sys.stderr, flush=True),
            )
            shown = None if postgres is None else "PostgreSQL"
            print("\n".join(report(rates, fsyncs, shown, slow)))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
