"""Run the contract kit's crash probe many times against correct stores: it must never complain.

    python benchmarks/crash_probe_false_alarms.py [--repeats N] [--postgres-dsn DSN]
        [FACTORY ...]

The crash probe (``run_store.atomic_append`` / ``run_store.prefix_durability``) kills writer
processes at fixed points, inside 1 MiB writes too; a correct store must come out clean every
time, or the promise would accuse correct implementations. Default factories: the bundled
SQLite store and the correct stores of the kit's own tests; PostgreSQL joins with a DSN
(``--postgres-dsn`` or ``POLYLOOP_BENCH_DSN``). Run from the repository root. Exit status 1 on
any false alarm.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from polyloop.testing._run_store._durability import run_crash_probe
from tests.contract.store_factories import POSTGRES_DSN_VARIABLE

DEFAULT_FACTORIES = [
    "tests.contract.store_factories:open_sqlite_store",
    "tests.kit.broken_stores:LineFileStore",
    "tests.kit.broken_stores:SqliteLogStore",
    "tests.kit.broken_stores:ChunkedLineFileStore",
]


async def _repeat(factory: str, repeats: int) -> int:
    alarms = 0
    started = time.perf_counter()
    for _ in range(repeats):
        with tempfile.TemporaryDirectory(prefix="polyloop-false-alarms-") as directory:
            findings = await run_crash_probe(factory, Path(directory))
        problems = findings.durability + findings.atomicity
        alarms += bool(problems)
        for problem in problems[:3]:
            print(f"  FALSE ALARM {factory}: {problem}")
    seconds = (time.perf_counter() - started) / repeats
    print(f"{factory}: {repeats} probes, {alarms} with a false alarm, {seconds:.2f} s per probe")
    return alarms


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("factories", nargs="*", default=None)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--postgres-dsn", default=os.environ.get("POLYLOOP_BENCH_DSN"))
    args = parser.parse_args()
    factories = list(args.factories or DEFAULT_FACTORIES)
    if args.postgres_dsn:
        os.environ[POSTGRES_DSN_VARIABLE] = args.postgres_dsn
        factories.append("tests.contract.store_factories:open_postgres_store")
    alarms = sum(asyncio.run(_repeat(factory, args.repeats)) for factory in factories)
    return 1 if alarms else 0


if __name__ == "__main__":
    sys.exit(main())
