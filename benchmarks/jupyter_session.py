"""What a Jupyter kernel costs against PythonExecutor: session start, and overhead per cell.

    python benchmarks/jupyter_session.py [--rounds N] [--cells N]

*Session start* is the wall time from constructing an executor to the answer of its first
action (``1``): the child or kernel starts lazily, so that is what a run's first step pays.
*Per-cell overhead* is the median wall time of one more action ``pass`` in a running session:
what every step pays beyond the code's own work. Both executors are measured in the same run,
in alternation, and printed with the Jupyter/Python ratio (the baseline is measured here, not
remembered). The default runtime is about 10 s on an idle machine.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from polyloop import Action, ActionStatus
from polyloop.executors import JupyterExecutor, PythonExecutor
from polyloop.ports import ActionExecutor

Executor = PythonExecutor | JupyterExecutor
FACTORIES: dict[str, Callable[[], Executor]] = {
    "PythonExecutor": PythonExecutor,
    "JupyterExecutor": JupyterExecutor,
}


@dataclass
class Timings:
    starts: list[float]
    cells: list[float]


async def timed(executor: ActionExecutor, code: str) -> float:
    started = time.perf_counter()
    outcome = await executor.execute(Action(text=code))
    took = time.perf_counter() - started
    if outcome.status is not ActionStatus.EXECUTED:
        raise RuntimeError(f"{code!r} came back {outcome.status}: {outcome.observation}")
    return took


async def one_session(factory: Callable[[], Executor], cells: int, timings: Timings) -> None:
    started = time.perf_counter()
    async with factory() as executor:
        await timed(executor, "1")
        timings.starts.append(time.perf_counter() - started)
        for _ in range(cells):
            timings.cells.append(await timed(executor, "pass"))


async def measure(rounds: int, cells: int) -> dict[str, Timings]:
    results = {name: Timings([], []) for name in FACTORIES}
    for _ in range(rounds):  # alternate, so a change of machine load hits both alike
        for name, factory in FACTORIES.items():
            await one_session(factory, cells, results[name])
    return results


def render(results: dict[str, Timings]) -> str:
    python, jupyter = results["PythonExecutor"], results["JupyterExecutor"]
    rows = [
        ("session start", statistics.median(python.starts), statistics.median(jupyter.starts)),
        ("per-cell overhead", statistics.median(python.cells), statistics.median(jupyter.cells)),
    ]
    lines = [f"{'':<20}{'PythonExecutor':>16}{'JupyterExecutor':>17}{'ratio':>8}"]
    for label, base, measured in rows:
        lines.append(
            f"{label:<20}{base * 1000:>13.1f} ms{measured * 1000:>14.1f} ms{measured / base:>7.1f}x"
        )
    lines.append(
        f"(medians of {len(python.starts)} sessions and {len(python.cells)} cells per executor)"
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=3, help="sessions per executor")
    parser.add_argument("--cells", type=int, default=100, help="cells timed per session")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.cells < 1:
        parser.error("--rounds and --cells must be >= 1")
    print(render(asyncio.run(measure(args.rounds, args.cells))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
