"""The run-store crash promises: reopen the store, and kill a writer process mid-append.

Both need what a suite running inside one process cannot do alone — reach the same data from a
second store object and from another process — so they run only when the implementer names an
importable factory (:class:`~polyloop.testing.StoreSamples`). The probe is run once per factory
in a test session and its findings are shared by ``prefix_durability`` and ``atomic_append``.
A killed process keeps what it handed the kernel; a power loss is ``_power.py``'s probe.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import sysconfig
import tempfile
import traceback
from asyncio.subprocess import Process
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from polyloop._base._exception_text import exception_text
from polyloop.testing._run_store import _crash_writer
from polyloop.testing._run_store._crash_writer import (
    close_store,
    open_store,
    planned_calls,
    planned_records,
)
from polyloop.testing._run_store._run_ids import fresh_run_ids
from polyloop.testing._shared._child import child_env
from polyloop.testing._shared._sample_records import started
from polyloop.testing._shared._shapes import mismatch
from polyloop.types import Action, ActionIntent, ModelCallIntent, Record

__all__ = [
    "CrashFindings",
    "CrashProbeCannotRun",
    "crash_findings",
    "reopen_problems",
    "run_crash_probe",
]

RUNS_PER_ROUND = 3
#: (kind, amount) of the interleaved rounds: kill right after that many acknowledged calls, or
#: when a file of the store reaches that many bytes past the largest one the first call grew.
#: Every kill point is a count of what was written, never a time: the same store is killed at
#: the same places on every run, so it gets the same verdict.
SCHEDULE: tuple[tuple[str, float], ...] = (
    ("acks", 1),
    ("acks", 4),
    ("bytes", 3_000),
    ("acks", 11),
    ("bytes", 50_000),
    ("acks", 26),
    ("bytes", 150_000),
)
#: Kill points of the rounds that kill inside one big ``append`` (a record over 1 MiB): when a
#: file of the store reaches the size of the largest one the run's start grew plus that fraction
#: of the record's size — the write is cut there, inside it (past 1: the call returned, then its
#: record must be there).
INSIDE_KILLS: tuple[float, ...] = (0.0, 0.2, 0.35, 0.5, 0.65, 0.8, 0.95, 1.1)
#: The same for ``append_many`` (when the store has it), on a batch of small, big, small.
BATCH_KILLS: tuple[float, ...] = (0.0, 0.3, 0.6, 0.9, 1.05)
_PROBE_BOUND_S = 240.0  # the whole probe (a cold interpreter and every round, under load)


@dataclass
class CrashFindings:
    """What the probe saw: problems of durability and of atomicity, plus what it did."""

    durability: list[str] = field(default_factory=list)
    atomicity: list[str] = field(default_factory=list)
    acknowledged: int = 0
    rounds: int = 0
    batches: bool = False


class CrashProbeCannotRun(Exception):
    """No writer process could open the store, before any kill: the probe saw nothing to judge
    (a store that only the process which created it may open). The message says why."""


def crash_plan(run_ids: Callable[[int], list[str]], batches: bool) -> list[dict[str, Any]]:
    """Every round of the probe: interleaved rounds on :data:`SCHEDULE` (in batches when the
    store has ``append_many``), then one round per kill point inside a big ``append`` and, with
    batches, inside a big ``append_many``."""
    plan: list[dict[str, Any]] = [
        {"kind": kind, "amount": amount, "runs": run_ids(RUNS_PER_ROUND), "batches": batches}
        for kind, amount in SCHEDULE
    ]
    for batch, kills in ((False, INSIDE_KILLS), (True, BATCH_KILLS if batches else ())):
        plan += [
            {"kind": "inside", "amount": amount, "runs": run_ids(1), "batches": batch}
            for amount in kills
        ]
    return plan


async def _run_writer(
    factory: str,
    directory: Path,
    plan: list[dict[str, Any]],
    on_round: Callable[[int, int], Awaitable[None]],
) -> None:
    """Run the writer process over the whole plan; await ``on_round(round, acknowledged calls)``
    as each round's writer is reaped (the next round writes meanwhile)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        _crash_writer.__file__,
        factory,
        str(directory),
        json.dumps(plan),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=child_env(),
        start_new_session=True,  # its writers too are in its process group: one kill ends all
    )
    assert process.stdin is not None
    assert process.stdout is not None
    assert process.stderr is not None
    errors = asyncio.ensure_future(process.stderr.read())
    acked = [0] * len(plan)
    ended, opened = "no round ended", False
    try:
        async with asyncio.timeout(_PROBE_BOUND_S):
            while raw := await process.stdout.readline():
                words = raw.decode("utf-8", "replace").split()
                if words[:1] == ["ack"]:
                    acked[int(words[1])] = int(words[2]) + 1
                elif words[:1] == ["opened"]:
                    opened = True
                elif words[:1] == ["end"]:
                    ended = " ".join(words)
                    if words[2] != "killed":
                        break
                    await on_round(int(words[1]), acked[int(words[1])])
                    process.stdin.write(b"go\n")  # the writer is dead and the probe has read
                    await process.stdin.drain()
                elif words == ["done"]:
                    return
    except TimeoutError:
        raise RuntimeError(
            f"the writer process did not finish its rounds within {_PROBE_BOUND_S:g} s "
            "(a store call that hangs?)"
        ) from None
    finally:
        if process.returncode is None:
            _kill_group(process)
        await process.wait()
        text = (await errors).decode("utf-8", "replace")
    if not opened:  # one line, the exception: it becomes the reason of a skip
        raised = text.strip().splitlines()[-1:] or ["nothing on its standard error"]
        raise CrashProbeCannotRun(
            f"the writer process could not open the store through the factory, before any "
            f"kill (exit code {process.returncode}): {raised[0]}"
        )
    raise RuntimeError(_writer_failure(plan, ended, text, process.returncode))


def _writer_failure(plan: list[dict[str, Any]], ended: str, text: str, code: int | None) -> str:
    """What happened, in plain words, when a round's writer ended without being killed: which
    round, what it was doing (reopening the store after the previous round's kill, or
    appending), the exception and where it was raised; then the traceback's end."""
    phase, _, trace = (
        text.partition("\n")
        if text.startswith(_crash_writer.PHASE_PREFIX)
        else (
            "",
            "",
            text,
        )
    )
    lines = trace.strip().splitlines()
    raised = _short_exception(lines[-1]) if lines else f"no traceback (exit code {code})"
    frames = [line.strip() for line in lines if line.strip().startswith('File "')]
    places = []
    for frame in frames:
        path, _, rest = frame[len('File "') :].partition('", line ')
        line, _, function = rest.partition(", in ")
        places.append((path, line, function))
    place = _outside_stdlib(places)
    where = f" at {Path(place[0]).name}:{place[1]} (in {place[2]})" if place else ""
    words = ended.split()
    if len(words) < 3 or not words[1].isascii() or not words[1].isdigit():
        what = "the writer process failed before its first round"
    else:
        number = int(words[1])
        before = (
            f"after a writer was killed {_kill_words(plan[number - 1])} "
            f"({_describe(plan[number - 1], number - 1)}), "
            if number > 0
            else "in the first round, before any kill, "
        )
        doing = phase.removeprefix(_crash_writer.PHASE_PREFIX).strip()
        action = "reopening the store" if doing == _crash_writer.OPENING else "appending"
        what = f"{before}{action} failed (round {number}'s writer)"
    tail = "\n".join(lines[-12:])
    return f"{what}: `{raised}`{where}\n{tail}".rstrip()


def _reopen_failure(spec: dict[str, Any], at: str, error: BaseException) -> str:
    """The probe's own reopening failed after a round's kill: the same words as a writer's."""
    frames = traceback.extract_tb(error.__traceback__)
    place = _outside_stdlib([(f.filename, str(f.lineno), f.name) for f in frames])
    where = f" at {Path(place[0]).name}:{place[1]} (in {place[2]})" if place else ""
    return (
        f"after a writer was killed {_kill_words(spec)} ({at}), reopening the store failed: "
        f"`{exception_text(error)}`{where}"
    )


def _outside_stdlib(places: list[tuple[str, str, str]]) -> tuple[str, str, str] | None:
    """The innermost frame in the store's own code (not Python's library): where it failed."""
    stdlib = sysconfig.get_paths()["stdlib"]
    for place in reversed(places):
        if not place[0].startswith(stdlib):
            return place
    return places[-1] if places else None


def _short_exception(line: str) -> str:
    """``json.decoder.JSONDecodeError: …`` as ``JSONDecodeError: …``."""
    name, colon, message = line.strip().partition(":")
    return f"{name.rpartition('.')[2]}{colon}{message}"


def _kill_words(spec: dict[str, Any]) -> str:
    if spec["kind"] == "inside":
        return "in the middle of an " + ("append_many" if spec["batches"] else "append")
    return "between its appends"


def _kill_group(process: Process) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


async def _check_round(
    store: Any,
    spec: dict[str, Any],
    acked_calls: int,
    findings: CrashFindings,
    at: str,
) -> list[tuple[str, tuple[Record, ...]]]:
    """Judge what survived of one round; the runs (and their logs) to append to next."""
    calls = planned_calls(spec)
    readable: list[tuple[str, tuple[Record, ...]]] = []
    for index, run_id in enumerate(spec["runs"]):
        mine = [records for run, records in calls if run == index]
        acked = sum(len(records) for records in mine[: _acked_of(calls, index, acked_calls)])
        findings.acknowledged += acked
        try:
            log = tuple((await store.read_log(run_id)).records)
        except Exception as error:
            problem = f"{at}: read_log({run_id!r}) raised {exception_text(error)}"
            findings.atomicity.append(problem + " (a partial record?)")
            findings.durability.append(problem)
            continue
        _compare(log, mine, acked, run_id, findings, at)
        readable.append((run_id, log))
    return readable


def _acked_of(calls: list[Any], index: int, acked_calls: int) -> int:
    """How many of run ``index``'s calls are among the first ``acked_calls`` of the round."""
    return sum(1 for run, _ in calls[:acked_calls] if run == index)


def _compare(
    log: tuple[Record, ...],
    calls: list[list[Record]],
    acked: int,
    run_id: str,
    findings: CrashFindings,
    at: str,
) -> None:
    sent = [record for records in calls for record in records]
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
        return
    boundaries, total = {0}, 0
    for records in calls:
        total += len(records)
        boundaries.add(total)
    if len(log) not in boundaries:
        cut = max(b for b in boundaries if b < len(log))
        size = min(b for b in boundaries if b > len(log)) - cut
        findings.atomicity.append(
            f"{at}: run {run_id} holds {len(log) - cut} of the {size} records of the "
            f"append_many batch at sequence {cut}: a batch must be all or nothing"
        )


async def _append_next(
    store: Any, run_id: str, log: tuple[Record, ...], findings: CrashFindings, at: str
) -> None:
    record: Record = (
        ModelCallIntent(step_index=999, prompt_chars=1)
        if log
        else started(
            run_id, "after the crash", parameters={}, started_at="2026-01-01T00:00:02.000Z"
        )
    )
    try:
        await store.append(run_id, record, sequence=len(log))
        after = (await store.read_log(run_id)).records
    except Exception as error:
        findings.atomicity.append(
            f"{at}: the next append to run {run_id} at sequence {len(log)} raised "
            f"{exception_text(error)}"
        )
        return
    found = mismatch((*log, record), tuple(after), "records")
    if found is not None:
        findings.atomicity.append(
            f"{at}: after the next append at sequence {len(log)}, run {run_id} reads back "
            f"other than the {len(log) + 1} records it holds: {found}"
        )


def _describe(spec: dict[str, Any], number: int) -> str:
    call = "append_many" if spec["batches"] else "append"
    if spec["kind"] == "inside":
        return (
            f"round {number} (killed when the store's file reached {spec['amount']:.0%} of a "
            f"big {call}'s records)"
        )
    if spec["kind"] == "bytes":
        return (
            f"round {number} ({call}, killed when a file of the store grew {spec['amount']:,.0f} "
            "bytes past the largest one of the first call)"
        )
    return f"round {number} ({call}, killed right after {spec['amount']:g} acknowledged calls)"


async def run_crash_probe(factory: str, directory: Path) -> CrashFindings:
    """Run every round of :func:`crash_plan` in one writer process, then reopen and judge.

    The writer forks one child per round (one interpreter start for the whole probe); each
    child is killed at its round's point. Then a store opened here reads that round's runs
    and is closed before the next round starts; at the end one more appends to every run.
    """
    open_factory = _crash_writer.load_factory(factory)
    findings = CrashFindings()
    store = await open_store(open_factory, directory)  # creates the store before the writers
    try:
        findings.batches = callable(getattr(store, "append_many", None))
    finally:
        await close_store(store)
    plan = crash_plan(lambda count: fresh_run_ids(count), findings.batches)
    later: list[tuple[str, tuple[Record, ...], str]] = []

    async def check(number: int, acked_calls: int) -> None:
        # Read only once the round's writer is dead and before the next one starts (a store may
        # let one process at a time open its data), through a store opened anew each round.
        spec, at = plan[number], _describe(plan[number], number)
        store = await _reopen(open_factory, directory, findings, spec, at)
        try:
            runs = await _check_round(store, spec, acked_calls, findings, at)
        finally:
            await close_store(store)
        later.extend((run_id, log, at) for run_id, log in runs)
        findings.rounds += 1

    try:
        await _run_writer(factory, directory, plan, check)
        if later:
            store = await _reopen(
                open_factory, directory, findings, plan[-1], "after the last round"
            )
            try:
                for run_id, log, at in later:
                    await _append_next(store, run_id, log, findings, at)
            finally:
                await close_store(store)
    except _Abandon:
        pass
    return findings


async def _reopen(
    open_factory: Callable[[Path], Any],
    directory: Path,
    findings: CrashFindings,
    spec: dict[str, Any],
    at: str,
) -> Any:
    try:
        return await open_store(open_factory, directory)
    except Exception as error:  # e.g. StoreCorrupted: the kill broke the whole store
        problem = _reopen_failure(spec, at, error)
        findings.atomicity.append(problem)
        findings.durability.append(problem)
        raise _Abandon from error


class _Abandon(Exception):
    """The store cannot be reopened: nothing more to judge."""


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
    plan = _reopen_plan(fresh_run_ids(2))
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
