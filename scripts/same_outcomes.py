"""Run the conformance main job several times, serially and under ``-n 2``, and compare.

    python scripts/same_outcomes.py [--runs 10] [PATH ...]   (default: tests/contract examples)

An outcome must not depend on timing: the same implementation gets the same outcome for every
promise on every run. This prints, for each run, its wall time and verdict, then every
(implementation, promise) whose outcome differed between runs, and exits 1 if any did.
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
Outcomes = dict[tuple[str, str], str]


def one_run(paths: list[str], extra: list[str]) -> tuple[float, str, Outcomes]:
    with tempfile.TemporaryDirectory() as directory:
        report = Path(directory) / "report.json"
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "pytest", "--polyloop-conformance", "-q", "-p",
             "no:cacheprovider", *extra, *paths, f"--polyloop-report={report}"],
            cwd=ROOT, capture_output=True, check=False,
        )  # fmt: skip
        elapsed = time.perf_counter() - started
        data = json.loads(report.read_text(encoding="utf-8"))
    outcomes = {
        (entry["id"], promise["id"]): promise["outcome"]
        for entry in data["implementations"]
        for promise in entry["promises"]
    }
    return elapsed, data["verdict"], outcomes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="runs of each mode (default 10)")
    parser.add_argument("paths", nargs="*", default=["tests/contract", "examples"])
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    seen: dict[tuple[str, str], set[str]] = {}
    for mode, extra in (("serial", ["-p", "no:xdist"]), ("-n 2", ["-n", "2"])):
        for index in range(args.runs):
            elapsed, verdict, outcomes = one_run(args.paths, extra)
            print(f"{mode:6} run {index + 1:2}: {elapsed:5.1f} s  {verdict}  "
                  f"{len(outcomes)} outcomes", flush=True)  # fmt: skip
            for key, outcome in outcomes.items():
                seen.setdefault(key, set()).add(outcome)
    differing = {key: found for key, found in seen.items() if len(found) > 1}
    for (implementation, promise), found in sorted(differing.items()):
        print(f"DIFFERS  {implementation}  {promise}: {', '.join(sorted(found))}")
    print(f"{len(seen)} (implementation, promise) pairs, {len(differing)} differed between runs")
    return 1 if differing else 0


if __name__ == "__main__":
    raise SystemExit(main())
