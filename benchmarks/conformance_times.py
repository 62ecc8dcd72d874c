"""Seconds each implementation's whole conformance suite takes when run on its own.

    python benchmarks/conformance_times.py [PATH ...]   (default: tests/contract examples)

What a downstream CI pays per implementation: ``pytest --polyloop-conformance`` on just that
implementation's promises, in a fresh process — interpreter start, collection, fixture set-up
(a PostgreSQL server, a Jupyter kernel, an MCP server) and every promise. The node ids come from
one run of the whole job (its JSON report). The target (issue #9) is under 10 s for each; the
slowest is printed first, then the sum, to compare with one run of the whole job.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_S = 10.0


def pytest_args(*args: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "--polyloop-conformance", "-q", "-p", "no:randomly",
            "-p", "no:cacheprovider", *args]  # fmt: skip


def implementations(paths: list[str]) -> tuple[float, list[tuple[str, list[str]]]]:
    """The whole job's wall time, and each implementation's id and node ids."""
    with tempfile.TemporaryDirectory() as directory:
        report = Path(directory) / "report.json"
        started = time.perf_counter()
        subprocess.run(pytest_args(*paths, "--polyloop-report", str(report)), cwd=ROOT,
                       capture_output=True, check=False)  # fmt: skip
        whole = time.perf_counter() - started
        data = json.loads(report.read_text(encoding="utf-8"))
    return whole, [
        (impl["id"], sorted({p["nodeid"] for p in impl["promises"]}))
        for impl in data["implementations"]
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("paths", nargs="*", default=["tests/contract", "examples"])
    whole, found = implementations(parser.parse_args().paths)
    rows = []
    for ident, nodeids in found:
        started = time.perf_counter()
        done = subprocess.run(pytest_args(*nodeids), cwd=ROOT, capture_output=True, check=False)
        rows.append((time.perf_counter() - started, ident, len(nodeids), done.returncode))
    for seconds, ident, count, code in sorted(rows, reverse=True):
        print(f"{seconds:6.1f} s  {ident}  ({count} tests, exit {code})")
    slowest = max((row[0] for row in rows), default=0.0)
    print(f"implementations: {len(rows)}, sum {sum(r[0] for r in rows):.1f} s, "
          f"whole job in one run {whole:.1f} s")  # fmt: skip
    print(f"target: each under {TARGET_S:.0f} s: slowest {slowest:.1f} s, "
          f"{'met' if slowest < TARGET_S else 'NOT met'}")  # fmt: skip


if __name__ == "__main__":
    main()
