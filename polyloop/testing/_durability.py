"""The run-store crash promises: reopen the store, and kill a writer process mid-append.

Both need what a suite running inside one process cannot do alone — reach the same data from a
second store object and from another process — so they run only when the implementer names an
importable factory (:class:`~polyloop.testing.StoreSamples`). The probe is run once per factory
in a test session and its findings are shared by ``prefix_durability`` and ``atomic_append``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import tempfile
import uuid
from asyncio.subprocess import Process
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from polyloop.testing import _crash_writer
from polyloop.testing._crash_writer import close_store, open_store, planned_records
from polyloop.testing._shapes import mismatch
from polyloop.types import Action, ActionIntent, ModelCallIntent, Record, RunStarted

__all__ = ["CrashFindings", "crash_findings", "reopen_problems", "run_crash_probe"]

RUNS_PER_ROUND = 3
#: (kind, amount): kill after that many acknowledgements, or that many seconds after the first.
SCHEDULE: tuple[tuple[str, float], ...] = (
    ("acks", 1),
    ("acks", 4),
    ("delay", 0.02),
    ("acks", 11),
    ("delay", 0.09),
    ("acks", 26),
)
_START_BOUND_S = 30.0  # the writer's import and first append (a cold interpreter under load)


@dataclass
class CrashFindings:
    """What the probe saw: problems of durability and of atomicity, plus what it did."""

    durability: list[str] = field(default_factory=list)
    atomicity: list[str] = field(default_factory=list)
    acknowledged: int = 0


def _child_env() -> dict[str, str]:
    """The parent's environment, with its ``sys.path`` so the factory imports the same way."""
    paths = [entry or os.getcwd() for entry in sys.path]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


async def _spawn_writer(factory: str, directory: Path, run_ids: list[str]) -> Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        _crash_writer.__file__,
        factory,
        str(directory),
        *run_ids,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=_child_env(),
    )


async def _kill_on_schedule(process: Process, kill: tuple[str, float]) -> list[tuple[int, int]]:
    """Kill the writer at its kill point; the acks it printed (before and at its death)."""
    assert process.stdout is not None
    assert process.stdin is not None
    lines: list[str] = []
    try:
        process.stdin.write(b"go\n")
        await process.stdin.drain()
        await _until_kill_point(process.stdout, lines, kill)
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGKILL)
        rest, errors = await process.communicate()
    lines += rest.decode("utf-8", "replace").splitlines()
    acks = [line.split() for line in lines if line.startswith("ack ")]
    if "done" not in lines and process.returncode != -signal.SIGKILL:
        text = errors.decode("utf-8", "replace").strip().splitlines()[-12:]
        raise RuntimeError(
            f"the writer process failed before it was killed, exit code {process.returncode}:\n"
            + "\n".join(text)
        )
    return [(int(index), int(sequence)) for _, index, sequence in acks]


async def _until_kill_point(
    stream: asyncio.StreamReader, lines: list[str], kill: tuple[str, float]
) -> None:
    kind, amount = kill
    loop = asyncio.get_running_loop()
    deadline = loop.time() + _START_BOUND_S
    while True:
        try:
            async with asyncio.timeout_at(deadline):
                raw = await stream.readline()
        except TimeoutError:
            return
        if not raw:
            return
        line = raw.decode("utf-8", "replace").strip()
        lines.append(line)
        acked = sum(1 for seen in lines if seen.startswith("ack "))
        if line == "done" or (kind == "acks" and acked >= amount):
            return
        if kind == "delay" and acked == 1:
            deadline = loop.time() + amount


async def _check_round(
    store: Any, run_ids: list[str], acks: list[tuple[int, int]], findings: CrashFindings, at: str
) -> None:
    acked = {index: 0 for index in range(len(run_ids))}
    for index, sequence in acks:
        acked[index] = max(acked[index], sequence + 1)
    findings.acknowledged += len(acks)
    for index, run_id in enumerate(run_ids):
        sent = planned_records(run_id, index)
        try:
            log = (await store.read_log(run_id)).records
        except Exception as error:
            problem = f"{at}: read_log({run_id!r}) raised {type(error).__name__}: {error}"
            findings.atomicity.append(problem + " (a partial record?)")
            findings.durability.append(problem)
            continue
        _compare(tuple(log), sent, acked[index], run_id, findings, at)
        await _append_next(store, run_id, tuple(log), findings, at)


def _compare(
    log: tuple[Record, ...],
    sent: list[Record],
    acked: int,
    run_id: str,
    findings: CrashFindings,
    at: str,
) -> None:
    if len(log) < acked:
        findings.durability.append(
            f"{at}: run {run_id} has {len(log)} records, but the writer was told {acked} "
            "appends succeeded: an acknowledged append did not survive the kill"
        )
    head = tuple(sent[: len(log)])
    problem = "more records than were sent" if len(log) > len(sent) else mismatch(head, log, "log")
    if problem is not None:
        findings.atomicity.append(
            f"{at}: run {run_id} is not a prefix of what was appended (a partial or torn "
            f"record?): {problem}"
        )


async def _append_next(
    store: Any, run_id: str, log: tuple[Record, ...], findings: CrashFindings, at: str
) -> None:
    record: Record = (
        ModelCallIntent(step_index=999, prompt_chars=1)
        if log
        else RunStarted(
            run_id=run_id,
            goal="after the crash",
            parameters={},
            parameters_hash="sha256:" + "1" * 64,
            started_at="2026-01-01T00:00:02.000Z",
        )
    )
    try:
        await store.append(run_id, record, sequence=len(log))
        after = (await store.read_log(run_id)).records
    except Exception as error:
        findings.atomicity.append(
            f"{at}: the next append to run {run_id} at sequence {len(log)} raised "
            f"{type(error).__name__}: {error}"
        )
        return
    if tuple(after) != (*log, record):
        findings.atomicity.append(
            f"{at}: after the next append at sequence {len(log)}, run {run_id} reads back "
            f"{len(after)} records, not the {len(log) + 1} expected"
        )


async def run_crash_probe(factory: str, directory: Path) -> CrashFindings:
    """Kill a writer at each point of :data:`SCHEDULE`, then reopen and judge what survived.

    Every round's writer is started at once (interpreter starts overlap); each waits for its
    turn before it opens the store, so the rounds write one after another.
    """
    open_factory = _crash_writer.load_factory(factory)
    findings = CrashFindings()
    rounds = [[uuid.uuid4().hex for _ in range(RUNS_PER_ROUND)] for _ in SCHEDULE]
    writers = [await _spawn_writer(factory, directory, run_ids) for run_ids in rounds]
    try:
        for number, (kill, run_ids) in enumerate(zip(SCHEDULE, rounds, strict=True), start=1):
            acks = await _kill_on_schedule(writers[number - 1], kill)
            at = f"round {number} (killed at {kill[1]:g} {'acks' if kill[0] == 'acks' else 's'})"
            try:
                store = await open_store(open_factory, directory)
            except Exception as error:  # e.g. StoreCorrupted: the kill broke the whole store
                problem = f"{at}: reopening the store raised {type(error).__name__}: {error}"
                findings.atomicity.append(problem)
                findings.durability.append(problem)
                continue
            try:
                await _check_round(store, run_ids, acks, findings, at)
            finally:
                await close_store(store)
    finally:
        for writer in writers:  # a round failed: leave no writer behind
            if writer.returncode is None:
                writer.kill()
                await writer.communicate()
    return findings


_PROBED: dict[str, CrashFindings] = {}


async def crash_findings(factory: str) -> CrashFindings:
    """The probe's findings for ``factory``, run once per process (both promises read them)."""
    if factory not in _PROBED:
        with tempfile.TemporaryDirectory(prefix="polyloop-crash-") as directory:
            _PROBED[factory] = await run_crash_probe(factory, Path(directory))
    return _PROBED[factory]


def _reopen_plan(run_ids: list[str]) -> dict[str, list[Record]]:
    return {
        run_id: [
            planned_records(run_id, index)[0],
            ModelCallIntent(step_index=0, prompt_chars=10 + index),
            ActionIntent(step_index=0, action=Action(text=f"reopen check {index}: " + "é" * 300)),
        ]
        for index, run_id in enumerate(run_ids)
    }


async def reopen_problems(open_factory: Callable[[Path], Any], directory: Path) -> list[str]:
    """Append through one store object; read back through a second one opened while the first
    is still open (an uncommitted write is invisible to it), then through a third opened after
    both were closed. Returns what went missing."""
    plan = _reopen_plan([uuid.uuid4().hex for _ in range(2)])
    first = await open_store(open_factory, directory)
    try:
        for sequence in range(3):
            for run_id, records in plan.items():
                await first.append(run_id, records[sequence], sequence=sequence)
        problems = await _read_back(open_factory, directory, plan, "while the first is open")
    finally:
        await close_store(first)
    return problems + await _read_back(open_factory, directory, plan, "after it was closed")


async def _read_back(
    open_factory: Callable[[Path], Any], directory: Path, plan: dict[str, list[Record]], when: str
) -> list[str]:
    store = await open_store(open_factory, directory)
    problems: list[str] = []
    try:
        for run_id, records in plan.items():
            log = tuple((await store.read_log(run_id)).records)
            found = mismatch(tuple(records), log, "records")
            if found is not None:
                problems.append(
                    f"a store reopened through the factory {when} does not read back what the "
                    f"first one acknowledged for run {run_id} (not committed?): {found}"
                )
    finally:
        await close_store(store)
    return problems
