"""Write ``tests/slow-tests.txt`` from measured test durations.

    pytest -n 2 -m "not ray" -p no:randomly --durations=0 -q tests > durations.log
    python scripts/slow_tests.py durations.log [more.log ...] [--at-least 2.5] [--keep-listed]

A test function is listed when one of its cases (setup, call and teardown together) took at
least ``--at-least`` seconds; ``tests/conftest.py`` marks every listed function ``slow``, so
the README's everyday test command leaves it to CI's slow-test step. The durations are the
machine's: measure on two cores, as CI runs. A test marked ``slow`` in its own module (the
kit's mutant matrices, crash points, load) may be listed too; marking it twice changes nothing.
``--keep-listed`` keeps what the listing has already (measure the everyday suite alone, which
no longer runs the listed tests, and add what has grown slow since).
"""

from __future__ import annotations

import argparse
import collections
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LISTING = ROOT / "tests" / "slow-tests.txt"
_LINE = re.compile(r"([\d.]+)s (?:call|setup|teardown)\s+(\S+)")
HEADER = (
    "# Test functions the everyday suite leaves to CI's slow-test step (tests/conftest.py marks\n"
    "# them slow): a case took at least {at_least:g} s on two cores. Regenerate with\n"
    "# scripts/slow_tests.py (its docstring says how); seconds measured, all cases together.\n"
)


def durations(logs: list[Path]) -> dict[str, tuple[float, float]]:
    """{test function: (its longest case, all its cases)} from ``--durations=0`` output."""
    cases: dict[str, float] = collections.defaultdict(float)
    for log in logs:
        for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
            found = _LINE.match(line)
            if found:
                cases[found[2]] += float(found[1])
    functions: dict[str, tuple[float, float]] = {}
    for node, seconds in cases.items():
        name = node.split("[", 1)[0]
        longest, whole = functions.get(name, (0.0, 0.0))
        functions[name] = (max(longest, seconds), whole + seconds)
    return functions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("logs", nargs="+", type=Path)
    parser.add_argument("--at-least", type=float, default=2.5)
    parser.add_argument("--keep-listed", action="store_true")
    options = parser.parse_args()
    found = {
        name: f"{whole:.0f} s"
        for name, (longest, whole) in durations(options.logs).items()
        if longest >= options.at_least
    }
    if options.keep_listed:
        for line in LISTING.read_text(encoding="utf-8").splitlines():
            name, _, said = line.partition("#")
            if name.strip():
                found.setdefault(name.strip(), said.strip())
    listed = sorted(found.items())
    lines = [HEADER.format(at_least=options.at_least)]
    lines += [f"{name}  # {said}\n" for name, said in listed]
    LISTING.write_text("".join(lines), encoding="utf-8")
    print(f"{len(listed)} test functions listed in {LISTING.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
