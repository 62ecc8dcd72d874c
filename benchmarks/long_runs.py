"""Microseconds per step as a run grows: per-step work must not grow with the history.

    python benchmarks/long_runs.py [--steps 2000 4000 8000] [--rounds N]

The workload of ``loop_steps.py`` (a fake model that always asks for one action, a 1 KB
observation, the run stopped by its step budget) on ``MemoryStore``, so the numbers are the
loop's own work plus the record encoding, not the disk. Printed: µs per step at each length
(median over rounds) and each length's ratio to the shortest, measured in the same run. Flat
means ratios near 1.0; before the prompt size became a running total they were 1.6 and 3.9
(185/303/722 µs per step at 2k/4k/8k, issue #11).

What still grows, by design: the loop hands the model client a fresh ``list`` of the history
each step (a pointer copy, ~5 ns per message), because a client may keep or reuse what it is
given. Any real client then reads every message to build its request, which costs far more.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
from collections.abc import Sequence

from loop_steps import seconds_for

from polyloop.stores import MemoryStore


async def us_per_step(steps: int) -> float:
    return await seconds_for(steps, MemoryStore()) * 1e6 / steps


def report(steps: Sequence[int], rounds: int) -> list[str]:
    samples: dict[int, list[float]] = {n: [] for n in steps}
    for _ in range(rounds):
        for n in steps:  # alternated, so a burst of load hits every length alike
            samples[n].append(asyncio.run(us_per_step(n)))
    medians = {n: statistics.median(values) for n, values in samples.items()}
    base = medians[min(steps)]
    lines = [f"{'steps':>6} {'us/step':>9} {'ratio':>6}"]
    lines += [f"{n:>6} {medians[n]:9.1f} {medians[n] / base:6.2f}" for n in steps]
    lines.append(f"growth {max(steps)}/{min(steps)}: {medians[max(steps)] / base:.2f}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, nargs="+", default=[2000, 4000, 8000])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print("\n".join(report(sorted(set(args.steps)), args.rounds)))


if __name__ == "__main__":
    main()
