"""The power-loss probe: a traced writer, replayed up to many crash points, each reopened.

The crash probe's writer (``_crash_writer.py --power``) appends the rounds of
:func:`~polyloop.testing._run_store._crash_writer.power_rounds` through the implementer's factory
on an empty directory, under ``strace``; each acknowledged call is a ``write`` of ``power-ack`` in
the same trace. :class:`~polyloop.testing._run_store._power_model.Replay` then replays the trace;
after every call that changed a file or directory of the store (and inside every write of more than
a page) the probe builds what a power loss there could leave (:func:`crash_states`), writes it to
a fresh directory, opens the store on it through the factory and checks it
(:func:`judge_state`). See ``docs/design/0006-power-loss-probe.md``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import random
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from polyloop._base._exception_text import exception_text
from polyloop.errors import RunAlreadyFinished
from polyloop.testing._run_store import _crash_writer
from polyloop.testing._run_store._crash_writer import (
    POWER_ACK,
    POWER_REFUSED,
    close_store,
    load_factory,
    open_store,
    power_logs,
    power_rounds,
)
from polyloop.testing._run_store._power_model import DataOp, Node, Replay, Snapshot, Unmodelable
from polyloop.testing._run_store._power_trace import Syscall, TraceError, parse_trace
from polyloop.testing._run_store._run_ids import fresh_run_ids
from polyloop.testing._shared._child import child_env
from polyloop.testing._shared._shapes import mismatch
from polyloop.types import ModelCallIntent, Record, RunFinished

__all__ = [
    "INSTALL_HINT",
    "PowerFindings",
    "TracerUnavailable",
    "missing_for_power_probe",
    "power_findings",
    "run_power_probe",
]

#: The seed of the probe's random choices of which unsynced operations survive; the report
#: shows it. ``POLYLOOP_POWER_SEED`` sets another.
DEFAULT_SEED = 31
PAGE = 4096
_TRACED = (
    "open,openat,openat2,creat,write,writev,pwrite64,pwritev,pwritev2,read,readv,lseek,"
    "fsync,fdatasync,sync,syncfs,rename,renameat,renameat2,unlink,unlinkat,rmdir,mkdir,"
    "mkdirat,truncate,ftruncate,fallocate,mmap,link,linkat,symlink,symlinkat,"
    "copy_file_range,sendfile,splice,io_uring_setup"
)
_WRITER_BOUND_S = 120.0  # the traced writer: a cold interpreter and every round, under load
INSTALL_HINT = (
    "install strace (Debian/Ubuntu: `apt-get install strace`; Fedora: `dnf install strace`; "
    "Alpine: `apk add strace`) and run the suite on Linux where processes may be traced "
    "(in a container: `--cap-add SYS_PTRACE`)"
)
_NO_ACK = "no call acknowledged yet"


class TracerUnavailable(RuntimeError):
    """``strace`` is installed but cannot trace here (``ptrace`` refused, say); says why."""


class StoreRefused(RuntimeError):
    """The store refused one of the traced writer's own calls by an append rule: a verdict on
    the store (every call is at the right sequence of a log the writer built), not a probe that
    could not run. The text names the call and what it raised."""


def _refused(lines: list[str], run_ids: list[str]) -> StoreRefused | None:
    """The writer's ``power-refused`` line, if it printed one, as the verdict it is."""
    said = next((line for line in lines if line.startswith(POWER_REFUSED + " ")), None)
    if said is None:
        return None
    _, number, position, raised = said.split(" ", 3)
    run_id, sequence, records = power_rounds(run_ids, "power-plan 1" in lines)[int(number)][
        int(position)
    ]
    call = "append" if len(records) == 1 else "append_many"
    size = f"{records[0].kind}" if len(records) == 1 else f"{len(records)} records"
    return StoreRefused(
        f"the store refused its own {call}(run {run_id}, {size}, sequence={sequence}) in round "
        f"{number} (call {position} of that round), raising {raised}: the power-loss probe's "
        "writer makes every call at the right sequence of a log it built itself, through store "
        "objects opened one after another on the same directory, before any crash state is "
        "replayed — the store does not take its own next record (does it read back what it "
        "wrote, after a reopen, after a batch?)"
    )


@dataclass
class PowerFindings:
    """What the probe found: violations, or why it could not judge; and what it did."""

    violations: list[str] = field(default_factory=list)
    not_judged: str | None = None
    seed: int = DEFAULT_SEED
    crash_points: int = 0
    states: int = 0
    acknowledged: int = 0

    def summary(self) -> str:
        return (
            f"{self.crash_points} crash points of the traced writer, {self.states} distinct "
            f"states after a power loss reopened and read, {self.acknowledged} acknowledged "
            f"calls; seed {self.seed} (POLYLOOP_POWER_SEED)"
        )


def missing_for_power_probe() -> str | None:
    """What this machine lacks for the probe (said as the reason it is not judged), or None."""
    if not sys.platform.startswith("linux"):
        return (
            f"the power-loss probe replays a Linux system-call trace (strace), and this is "
            f"{sys.platform}"
        )
    if shutil.which("strace") is None:
        return "the power-loss probe needs strace, which is not installed (not on PATH)"
    return None


# ------------------------------------------------------------------ the traced writer
async def trace_writer(factory: str, directory: Path, trace: Path, run_ids: list[str]) -> bool:
    """Run the power-loss writer under ``strace`` until it is done; whether it used batches.

    Raises :class:`StoreRefused` when the store refused one of the writer's own calls by an
    append rule (a verdict), :class:`RuntimeError` when it failed otherwise (the store raised,
    or ``strace`` could not trace: the text says which). The writer and ``strace`` are one
    process group, killed as one on a timeout or a cancellation (an interrupted test), so
    nothing is left running.
    """
    command = [
        shutil.which("strace") or "strace",
        *("-f", "--seccomp-bpf", "-y", "-xx", "-s", "64", "-e", "write=all"),
        *("-e", f"trace={_TRACED}"),
        *("-o", str(trace), sys.executable, _crash_writer.__file__, factory, str(directory)),
        *("--power", _json_list(run_ids)),
    ]
    process = await asyncio.create_subprocess_exec(
        *command,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=child_env(),
        start_new_session=True,
    )
    try:
        async with asyncio.timeout(_WRITER_BOUND_S):
            out, err = await process.communicate()
    except TimeoutError:
        raise RuntimeError(
            f"the traced writer did not finish within {_WRITER_BOUND_S:g} s (a store call "
            "that hangs?)"
        ) from None
    finally:
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            await process.wait()
    lines = out.decode("utf-8", "replace").splitlines()
    refused = _refused(lines, run_ids)
    if refused is not None:
        raise refused
    if process.returncode != 0 or "done" not in lines:
        said = err.decode("utf-8", "replace").strip().splitlines()
        tracer = [line for line in said if line.startswith("strace: ")]
        if tracer and not any(line.startswith("power-plan") for line in lines):
            raise TracerUnavailable(f"strace cannot trace a process here: {tracer[0]}")
        tail = "\n".join(said[-12:])
        raise RuntimeError(f"the traced writer failed (exit code {process.returncode}):\n{tail}")
    return "power-plan 1" in lines


def _json_list(items: list[str]) -> str:
    return json.dumps(items)


# ------------------------------------------------------------------ crash states
@dataclass
class CrashState:
    """The files one power loss leaves, and what had been acknowledged before it."""

    files: Snapshot
    acked: int
    where: str


@dataclass
class _Walk:
    replay: Replay
    rng: random.Random
    seed: int
    step: int = 0
    acked: int = 0
    ack_steps: list[int] = field(default_factory=list)


def _all_data(node: Node) -> int:
    return len(node.pending)


def _all_names(node: Node) -> int:
    return len(node.pending_names)


def _nothing(node: Node) -> int:
    return 0


_VARIANTS: tuple[tuple[str, Callable[[Node], int], Callable[[Node], int]], ...] = (
    ("nothing that was not synced survived", _nothing, _nothing),
    ("everything written survived (as a process crash leaves it)", _all_data, _all_names),
    ("unsynced file data survived, unsynced directory changes did not", _all_data, _nothing),
    ("unsynced directory changes survived, unsynced file data did not", _nothing, _all_names),
)


def _is_ack(call: Syscall) -> bool:
    return call.name == "write" and bytes(call.data).startswith(POWER_ACK.encode() + b" ")


def _strict(walk: _Walk, change: str) -> Iterator[CrashState]:
    """After every change: nothing unsynced survived; on a seeded quarter of the changes, a
    seeded choice of each file's and directory's unsynced operations too."""
    where = f"power loss after step {walk.step} ({change})"
    files = walk.replay.snapshot(_nothing, _nothing)
    yield CrashState(files, walk.acked, f"{where}; nothing that was not synced survived")
    if walk.rng.random() >= 0.25:
        return
    chosen = {
        number: walk.rng.randint(0, max(len(node.pending), len(node.pending_names)))
        for number, node in sorted(walk.replay.nodes.items())
    }

    def keep(node: Node) -> int:
        return chosen.get(node.number, 0)

    text = f"a seeded choice of the unsynced operations survived (seed {walk.seed})"
    yield CrashState(walk.replay.snapshot(keep, keep), walk.acked, f"{where}; {text}")


def _before(walk: _Walk, coming: str) -> Iterator[CrashState]:
    """Just before a sync, a rename, a removal or an acknowledgement (and at the end): every
    way the unsynced changes since the last sync may have survived, whole."""
    where = f"power loss after step {walk.step}, before {coming}"
    for text, data, names in _VARIANTS[1:]:
        yield CrashState(walk.replay.snapshot(data, names), walk.acked, f"{where}; {text}")


def _torn(walk: _Walk, call: Syscall) -> Iterator[CrashState]:
    """States of a power loss inside a write of more than a page: its first pages landed."""
    target = walk.replay.target(call)
    if target is None or len(target[2]) <= PAGE:
        return
    node, offset, data = target
    first = (offset // PAGE + 1) * PAGE - offset
    cuts = sorted({first, first + (len(data) - first) // PAGE // 2 * PAGE})
    name = walk.replay.relative(node.number)
    for cut in (c for c in cuts if 0 < c < len(data)):
        torn: tuple[int, DataOp] = (node.number, ("write", offset, data[:cut]))
        where = (
            f"power loss inside step {walk.step + 1} ({call.name} of {len(data)} bytes at "
            f"offset {offset} of {name}, after its first {cut} bytes)"
        )
        yield CrashState(
            walk.replay.snapshot(_all_data, _all_names, torn),
            walk.acked,
            f"{where}; everything else written survived",
        )
        yield CrashState(
            walk.replay.snapshot(_nothing, _all_names, torn),
            walk.acked,
            f"{where}; other files' unsynced data did not survive",
        )


_WRITE_CALLS = frozenset({"write", "pwrite64", "writev", "pwritev", "pwritev2"})
_BOUNDARIES = frozenset(
    {"fsync", "fdatasync", "sync", "syncfs", "rename", "renameat", "renameat2"}
    | {"unlink", "unlinkat", "rmdir"}
)


def crash_states(calls: Iterable[Syscall], walk: _Walk) -> Iterator[CrashState]:
    """Every crash state of the trace, in order; ``walk.ack_steps`` fills in as it goes."""
    yield from _strict(walk, "before the writer changed anything")
    for call in calls:
        if _is_ack(call):
            yield from _before(walk, "an acknowledgement")
            walk.acked += 1
            walk.ack_steps.append(walk.step)
            continue
        if call.name in _WRITE_CALLS:
            yield from _torn(walk, call)
        elif call.name in _BOUNDARIES and call.result is not None:
            yield from _before(walk, f"the {call.name} of step {walk.step + 1}")
        change = walk.replay.feed(call)
        if change is None:
            continue
        walk.step += 1
        yield from _strict(walk, change)
    yield from _before(walk, "the end of the trace")


# ------------------------------------------------------------------ judging a state
@dataclass
class _Plan:
    calls: list[tuple[int, int, str, int, list[Record]]]  # round, position, run, seq, records
    logs: dict[str, list[Record]]


def _plan(run_ids: list[str], batches: bool) -> _Plan:
    calls = [
        (number, position, run_id, sequence, records)
        for number, round_calls in enumerate(power_rounds(run_ids, batches))
        for position, (run_id, sequence, records) in enumerate(round_calls)
    ]
    return _Plan(calls, dict(zip(run_ids, power_logs(run_ids), strict=True)))


def _materialize(files: Snapshot, directory: Path) -> None:
    directory.mkdir()
    for relative, content in files.items():
        path = directory / relative
        if content is None:
            path.mkdir()
        else:
            path.write_bytes(content)


def _acked_at(plan: _Plan, ack_steps: list[int], index: int) -> str:
    number, position, _, _, records = plan.calls[index]
    call = "append" if len(records) == 1 else f"append_many of {len(records)} records"
    step = ack_steps[index] if index < len(ack_steps) else "?"
    return f"acknowledged after step {step} (round {number}, call {position}: {call})"


async def _judge_run(
    store: Any, run_id: str, state: CrashState, plan: _Plan, ack_steps: list[int]
) -> list[str]:
    sent = plan.logs[run_id]
    mine = [i for i, call in enumerate(plan.calls) if call[2] == run_id]
    acked = [i for i in mine if i < state.acked]
    acked_len = sum(len(plan.calls[i][4]) for i in acked)
    try:
        log = tuple((await store.read_log(run_id)).records)
    except Exception as error:
        return [f"run {run_id}: read_log raised {exception_text(error)} (a torn record?)"]
    problem = "more records than were sent" if len(log) > len(sent) else None
    problem = problem or mismatch(tuple(sent[: len(log)]), log, "log")
    if problem is not None:
        return [f"run {run_id} is not a prefix of what was appended (torn?): {problem}"]
    problems = []
    if len(log) < acked_len:
        lost = next(i for i in acked if plan.calls[i][3] + len(plan.calls[i][4]) > len(log))
        count = acked_len - len(log)
        problems.append(
            f"run {run_id} lost sequence {len(log)} and on ({count} acknowledged "
            f"record{'' if count == 1 else 's'}): sequence {plan.calls[lost][3]} was "
            f"{_acked_at(plan, ack_steps, lost)}"
        )
    boundaries = {0} | {plan.calls[i][3] + len(plan.calls[i][4]) for i in mine}
    if len(log) not in boundaries:
        problems.append(
            f"run {run_id} holds part of an append_many batch (it reads {len(log)} records, "
            "which ends no call): a batch must survive whole or not at all"
        )
    return problems + await _append_rules(store, run_id, log)


async def _append_rules(store: Any, run_id: str, log: tuple[Record, ...]) -> list[str]:
    """A finished run refuses the next record; any other run takes it at its length."""
    if not log:
        return []
    record = ModelCallIntent(step_index=900, prompt_chars=len(log))
    try:
        await store.append(run_id, record, sequence=len(log))
    except RunAlreadyFinished:
        if isinstance(log[-1], RunFinished):
            return []
        return [f"run {run_id} refused the next append with RunAlreadyFinished, unfinished"]
    except Exception as error:
        return [
            f"run {run_id}: the next append at sequence {len(log)} raised {exception_text(error)}"
        ]
    if isinstance(log[-1], RunFinished):
        return [f"run {run_id} was finished, yet took another record after the power loss"]
    try:
        after = tuple((await store.read_log(run_id)).records)
    except Exception as error:
        return [f"run {run_id}: read_log after the next append raised {exception_text(error)}"]
    found = mismatch((*log, record), after, "records")
    if found is not None:
        return [f"run {run_id}: after the next append it reads back other records: {found}"]
    return []


async def judge_state(
    open_factory: Callable[[Path], Any],
    state: CrashState,
    directory: Path,
    plan: _Plan,
    ack_steps: list[int],
) -> list[str]:
    """Open the store on one crash state and check it; the problems, each saying where."""
    _materialize(state.files, directory)
    try:
        try:
            store = await open_store(open_factory, directory)
        except Exception as error:
            return [f"{state.where}: the store did not open: {exception_text(error)}"]
        problems: list[str] = []
        try:
            for run_id in plan.logs:
                found = await _judge_run(store, run_id, state, plan, ack_steps)
                problems += [f"{state.where}: {problem}" for problem in found]
        finally:
            try:
                await close_store(store)
            except Exception as error:
                problems.append(f"{state.where}: closing the store raised {exception_text(error)}")
        return problems
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _key(state: CrashState) -> bytes:
    digest = hashlib.blake2b(str(state.acked).encode(), digest_size=20)
    for relative, content in sorted(state.files.items()):
        digest.update(relative.encode("utf-8", "surrogateescape") + b"\0")
        digest.update(b"d" if content is None else len(content).to_bytes(8, "big") + content)
    return digest.digest()


async def _data_elsewhere(open_factory: Callable[[Path], Any], plan: _Plan, base: Path) -> bool:
    """Whether a store opened on an empty directory reads the writer's records: its data is
    kept elsewhere (a database server), out of the probe's reach."""
    empty = base / "empty"
    empty.mkdir()
    store = await open_store(open_factory, empty)
    try:
        for run_id in plan.logs:
            if (await store.read_log(run_id)).records:
                return True
        return False
    finally:
        await close_store(store)
        shutil.rmtree(empty, ignore_errors=True)


async def run_power_probe(factory: str, base: Path, seed: int = DEFAULT_SEED) -> PowerFindings:
    """Trace the writer in ``base``, then judge every distinct crash state of the trace."""
    findings = PowerFindings(seed=seed)
    open_factory = load_factory(factory)
    store_dir = base / "store"
    store_dir.mkdir()
    root = str(store_dir.resolve())
    run_ids = fresh_run_ids(len(power_logs(["x"] * 4)))
    trace = base / "trace.txt"
    batches = await trace_writer(factory, Path(root), trace, run_ids)
    plan = _plan(run_ids, batches)
    findings.acknowledged = len(plan.calls)
    if await _data_elsewhere(open_factory, plan, base):
        findings.not_judged = (
            "the store keeps its data outside the directory its factory was given - a database "
            "server's, say (a store opened on an empty directory reads the records the writer "
            "appended): the probe can only cut the power under files the writer process "
            "writes itself, not under another process's"
        )
        return findings
    walk = _Walk(Replay(root, os.getcwd()), random.Random(seed), seed)
    seen: set[bytes] = set()
    with trace.open(encoding="ascii", errors="replace") as lines:
        for state in crash_states(parse_trace(lines), walk):
            key = _key(state)
            if key in seen:
                continue
            seen.add(key)
            found = await judge_state(
                open_factory, state, base / f"state-{len(seen)}", plan, walk.ack_steps
            )
            findings.violations += found
            if len(findings.violations) >= 40:
                break
    findings.crash_points, findings.states = walk.step, len(seen)
    return findings


def _scratch() -> str | None:
    """Where the probe works: ``POLYLOOP_POWER_TMPDIR`` if set, else a memory file system when
    there is one (``/dev/shm``: the states' stores sync for free there), else the default
    temporary directory."""
    chosen = os.environ.get("POLYLOOP_POWER_TMPDIR")
    if chosen:
        return chosen
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK) else None


# Keyed by everything the findings depend on: the same factory under another tracer (one that
# may not trace) or another seed is another probe.
_PROBED: dict[tuple[str, int, str | None], PowerFindings] = {}


async def power_findings(factory: str) -> PowerFindings:
    """The probe's findings for ``factory``, run once per process for each tracer and seed, in
    a temporary directory removed however the probe ends. A trace the probe cannot replay is
    not judged."""
    seed = int(os.environ.get("POLYLOOP_POWER_SEED", DEFAULT_SEED))
    key = (factory, seed, shutil.which("strace"))
    if key not in _PROBED:
        with tempfile.TemporaryDirectory(prefix="polyloop-power-", dir=_scratch()) as directory:
            try:
                _PROBED[key] = await run_power_probe(factory, Path(directory), seed)
            except (Unmodelable, TraceError) as error:
                _PROBED[key] = PowerFindings(seed=seed, not_judged=str(error))
    return _PROBED[key]
