"""Microseconds per step with and without an instrumentation, measured side by side.

    python benchmarks/instrumentation_cost.py [--steps 500] [--rounds 7] [--baseline DIR]

The workload of ``loop_steps.py`` on ``MemoryStore`` (the loop's own work, not the disk), run
three ways, alternated round by round: ``none`` (no ``instrumentation=``: the loop tests one
``None`` per seam call and calls nothing), ``null`` (an instrumentation whose every call does
nothing: the port's own dispatch) and, with the ``otel`` extra, ``otel`` (
``OpenTelemetryInstrumentation`` on an SDK tracer and meter provider with no processor or reader:
span and metric bookkeeping, no export). Printed: µs per step of each (the median over rounds)
and each one's ratio to ``none`` (the median of the per-round ratios).

``--baseline DIR`` (a checkout of another version, e.g. ``git worktree add /tmp/base <commit>``)
also compares the run *without* instrumentation on this code and on that one: each version in
its own ``python -S`` process (the core needs only the standard library), alternated round by
round, timing CPU (``time.process_time``, less sensitive than the wall clock to other
processes on a loaded machine), the best of several runs per process. Printed: each version's
median and the median of the per-round ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any

from loop_steps import FakeModel, KilobyteExecutor, OneActionParser, agent

from polyloop import RunResult, RunStarted, StopReason, run
from polyloop._base._extras import extra_installed
from polyloop.ports import Instrumentation
from polyloop.stores import MemoryStore


class _NullCall:
    def returned(self, value: object) -> None:
        return None


class _NullRun:
    trace_parent = None
    call = nullcontext(_NullCall())

    def model_call(self, *args: Any) -> AbstractContextManager[_NullCall]:
        return self.call

    def parse(self, *args: Any) -> AbstractContextManager[_NullCall]:
        return self.call

    def execute(self, *args: Any) -> AbstractContextManager[_NullCall]:
        return self.call

    def finished(self, result: RunResult) -> None:
        return None


class NullInstrumentation:
    """Observes nothing: what remains is the loop calling the port."""

    @contextmanager
    def run(self, started: RunStarted, *, resumed: bool) -> Iterator[_NullRun]:
        yield _NullRun()


def otel_instrumentation() -> Instrumentation | None:
    if not extra_installed("otel"):
        return None
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.trace import TracerProvider

    from polyloop.instrumentation import OpenTelemetryInstrumentation

    return OpenTelemetryInstrumentation(
        tracer_provider=TracerProvider(), meter_provider=MeterProvider()
    )


async def us_per_step(steps: int, instrumentation: Instrumentation | None) -> float:
    started = time.perf_counter()
    result = await run(
        agent(steps),
        "benchmark",
        model=FakeModel(),
        parser=OneActionParser(),
        executor=KilobyteExecutor(),
        store=MemoryStore(),
        instrumentation=instrumentation,
    )
    elapsed = time.perf_counter() - started
    assert result.stop_reason is StopReason.STEP_BUDGET
    assert len(result.steps) == steps
    return elapsed * 1e6 / steps


def report(steps: int, rounds: int) -> list[str]:
    contenders: dict[str, Callable[[], Instrumentation | None]] = {
        "none": lambda: None,
        "null": NullInstrumentation,
    }
    if otel_instrumentation() is not None:
        contenders["otel"] = otel_instrumentation
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(rounds):
        for name, make in contenders.items():  # alternated: load bursts hit each alike
            samples[name].append(asyncio.run(us_per_step(steps, make())))
    lines = [f"{'instrumentation':<16} {'us/step':>9} {'x none':>7}"]
    for name, values in samples.items():
        ratios = [v / base for v, base in zip(values, samples["none"], strict=True)]
        lines.append(
            f"{name:<16} {statistics.median(values):9.1f} {statistics.median(ratios):7.2f}"
        )
    if "otel" not in samples:
        lines.append(f"{'otel':<16} {'not installed':>17}")
    return lines


# Run in a fresh ``python -S`` process whose path starts with one version's checkout.
_CPU_PROBE = """
import asyncio, sys, time
from loop_steps import FakeModel, KilobyteExecutor, OneActionParser, agent
from polyloop import run
from polyloop.stores import MemoryStore
steps = int(sys.argv[1])
async def once():
    await run(agent(steps), "benchmark", model=FakeModel(), parser=OneActionParser(),
              executor=KilobyteExecutor(), store=MemoryStore())
best = float("inf")
for _ in range(7):
    started = time.process_time()
    asyncio.run(once())
    best = min(best, (time.process_time() - started) * 1e6 / steps)
print(best)
"""


def cpu_us_per_step(checkout: Path, steps: int) -> float:
    path = f"{checkout / 'benchmarks'}:{checkout}"
    done = subprocess.run(
        [sys.executable, "-S", "-c", f"import sys; sys.path[:0] = {path.split(':')!r}\n"
         + _CPU_PROBE, str(steps)],
        capture_output=True, text=True, check=True, timeout=600,
    )  # fmt: skip
    return float(done.stdout)


def versions(baseline: Path, steps: int, rounds: int) -> list[str]:
    here = Path(__file__).resolve().parents[1]
    samples: dict[str, list[float]] = {"this code": [], "baseline": []}
    for index in range(rounds):
        order = [("this code", here), ("baseline", baseline)]
        for name, checkout in order if index % 2 == 0 else order[::-1]:
            samples[name].append(cpu_us_per_step(checkout, steps))
    ratios = [a / b for a, b in zip(samples["this code"], samples["baseline"], strict=True)]
    lines = [f"no instrumentation, CPU us/step (best of 7 runs per process, {rounds} rounds):"]
    for name, values in samples.items():
        lines.append(f"{name:<16} {statistics.median(values):9.1f}")
    lines.append(f"this code / baseline: {statistics.median(ratios):.3f}")
    return lines


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--baseline", type=Path, default=None, help="another version's checkout")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.steps < 1:
        parser.error("--rounds and --steps must be at least 1")
    if args.baseline is not None and not (args.baseline / "polyloop" / "__init__.py").is_file():
        parser.error(f"--baseline {args.baseline}: not a polyloop checkout")
    print("\n".join(report(args.steps, args.rounds)))
    if args.baseline is not None:
        print("\n".join(versions(args.baseline.resolve(), args.steps, args.rounds)))


if __name__ == "__main__":
    main()
