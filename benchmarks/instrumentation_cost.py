"""Microseconds per step with and without an instrumentation, measured side by side.

    python benchmarks/instrumentation_cost.py [--steps 500] [--rounds 7]

The workload of ``loop_steps.py`` on ``MemoryStore`` (the loop's own work, not the disk), run
three ways, alternated round by round: ``none`` (no ``instrumentation=``: the loop tests one
``None`` per seam call and calls nothing), ``null`` (an instrumentation whose every call does
nothing: the port's own dispatch) and, with the ``otel`` extra, ``otel`` (
``OpenTelemetryInstrumentation`` on an SDK tracer and meter provider with no processor or reader:
span and metric bookkeeping, no export). Printed: µs per step of each (the median over rounds)
and each one's ratio to ``none`` (the median of the per-round ratios).

The cost of a run *without* instrumentation before and after the port was added is measured by
running ``long_runs.py`` on both versions of the code in one session (the CHANGELOG entry of the
port gives the numbers).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

from loop_steps import FakeModel, KilobyteExecutor, OneActionParser, agent

from polyloop import RunResult, RunStarted, StopReason, run
from polyloop._extras import extra_installed
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


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.steps < 1:
        parser.error("--rounds and --steps must be at least 1")
    print("\n".join(report(args.steps, args.rounds)))


if __name__ == "__main__":
    main()
