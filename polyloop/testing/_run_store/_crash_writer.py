"""The writer process of the crash probe, and what it shares with the probe.

Run as a script (``python _crash_writer.py FACTORY DIRECTORY PLAN_JSON``), not as
``-m polyloop.testing._run_store._crash_writer``: as a script it imports neither pytest nor
Hypothesis (the ``polyloop.testing`` package does), so it starts in a fraction of a second. It
imports the implementer's factory once, then forks one writer per round of the plan (one
interpreter for every kill point): the writer opens the store through the factory, makes the
round's appends — single ``append`` calls and, when the store has it, ``append_many`` batches — and
prints ``ack <round> <call>`` after each call returned. Each writer dies at its round's kill
point, chosen by what was written, never by a clock (a timer's kill landed somewhere else on
every run, and a store torn only inside one short write was caught in one run and not the
next): right after a number of acknowledged calls (it kills itself, ``SIGKILL``), or when a file
of the store reaches a byte offset — the file size limit (``RLIMIT_FSIZE``) cuts the write that
crosses it there, and the next write past it kills the writer (``SIGXFSZ``) inside that system
call; a store that goes on after the cut write is killed before that call is acknowledged. A
store whose files do not grow in the writer (a server's) is killed after its round's last call.
The parent prints ``end <round> <status>``
once it reaped that writer, and forks the next one only when the probe, done reading what
survived, writes ``go`` on its standard input; whatever a writer acknowledged must survive its
kill. It prints ``opened <round>`` once a writer opened the store.

With ``--power`` (``python _crash_writer.py FACTORY DIRECTORY --power RUN_IDS_JSON``) it is the
power-loss probe's writer instead: no fork and no kill — it appends the rounds of
:func:`power_rounds` on the directory, one newly opened store per round, prints
``power-ack <round> <call>`` after each call returned and exits; the probe runs it under
``strace`` and cuts the trace afterwards (``_power.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import os
import resource
import signal
import stat
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from polyloop._base._exception_text import exception_text
from polyloop._base._import_path import BadImportPath, load
from polyloop.errors import RunAlreadyExists, RunAlreadyFinished, RunConflict
from polyloop.testing._shared._sample_records import finished, started
from polyloop.types import Action, ActionIntent, ModelCallIntent, Record, RunStarted

__all__ = [
    "BIG_RECORD_CHARS",
    "POWER_ACK",
    "PowerCall",
    "close_store",
    "load_factory",
    "open_store",
    "planned_calls",
    "planned_records",
]

RECORDS_PER_RUN = 40
#: The action text of a big record: its JSON is over 1 MiB, so writing it takes many pages
#: (and, for a store that writes in pieces, many system calls).
BIG_RECORD_CHARS = 1_060_000
_BATCH_SIZES = (1, 3, 2)

#: One call of a round: (run index, records). One record is ``append``, several ``append_many``.
Call = tuple[int, list[Record]]
#: One call of the power-loss probe's writer: (run id, sequence, records).
PowerCall = tuple[str, int, list[Record]]
#: What the power-loss writer prints after each call returned: ``power-ack <round> <call>``.
POWER_ACK = "power-ack"
#: What it prints when the store refused one of its calls by an append rule, and exits:
#: ``power-refused <round> <call> <ExcType: message>`` (a verdict, not a probe that failed).
POWER_REFUSED = "power-refused"
#: The append rules' refusals: raised by the writer's own calls, each at the right sequence.
_REFUSALS = (RunConflict, RunAlreadyExists, RunAlreadyFinished)


class FactoryError(Exception):
    """A store factory that cannot be imported or called; the message says what to fix."""


def load_factory(spec: str) -> Callable[[Path], Any]:
    """The callable named by ``"package.module:callable"``, or :class:`FactoryError`."""
    try:
        target: Any = load("store factory", spec)
    except BadImportPath as error:
        raise FactoryError(str(error)) from None
    if not callable(target):
        raise FactoryError(f"store factory {spec!r} is a {type(target).__name__}, not callable")
    factory: Callable[[Path], Any] = target
    return factory


async def open_store(factory: Callable[[Path], Any], directory: Path) -> Any:
    """``factory(directory)``, entered if it is an async context manager."""
    store = factory(directory)
    if hasattr(store, "__aenter__"):
        entered = await store.__aenter__()
        return store if entered is None else entered
    return store


async def close_store(store: Any) -> None:
    """Leave the store the way its type says: ``__aexit__``, else ``aclose()``, else nothing."""
    if hasattr(store, "__aexit__"):
        await store.__aexit__(None, None, None)
    elif callable(getattr(store, "aclose", None)):
        await store.aclose()


def _start(run_id: str, run_index: int) -> RunStarted:
    return started(
        run_id, f"crash probe run {run_index}", parameters={"system_prompt": "crash probe"}
    )


def planned_records(run_id: str, run_index: int) -> list[Record]:
    """The records the writer appends to one run of an interleaved round, in order; sizes vary
    from tiny to ~12 KB."""
    records: list[Record] = [_start(run_id, run_index)]
    for step in range(RECORDS_PER_RUN - 1):
        if step % 2 == 0:
            records.append(ModelCallIntent(step_index=step, prompt_chars=step * 7 + run_index))
        else:
            filler = "é—x" * ((step * 397 + run_index * 131) % 4000)
            text = f"run {run_index} step {step}: {filler}"
            records.append(ActionIntent(step_index=step, action=Action(text=text)))
    return records


def _big(run_id: str, step: int) -> ActionIntent:
    unit = f"{run_id[-6:]}/{step} big record, é "
    text = (unit * (BIG_RECORD_CHARS // len(unit) + 1))[:BIG_RECORD_CHARS]
    return ActionIntent(step_index=step, action=Action(text=text))


def _small(step: int) -> ModelCallIntent:
    return ModelCallIntent(step_index=step, prompt_chars=step + 1)


def planned_calls(spec: dict[str, Any]) -> list[Call]:
    """The calls of one round, in the order the writer makes them.

    * ``acks``/``bytes`` rounds: the runs' :func:`planned_records`, interleaved, in batches of
      1, 3 and 2 records when ``batches`` (else one by one).
    * ``inside`` rounds: one run — its start, then a big record (or a batch: small, big,
      small) with the kill inside it.
    """
    runs: list[str] = spec["runs"]
    if spec["kind"] == "inside":
        run_id = runs[0]
        shape: list[list[Record]]
        if spec["batches"]:
            shape = [
                [_start(run_id, 0), _small(0)],
                [_small(1), _big(run_id, 1), _small(2)],
                [_small(3), _big(run_id, 3), _small(4)],
            ]
        else:
            shape = [[_start(run_id, 0)], [_big(run_id, 1)], [_big(run_id, 2)]]
        return [(0, records) for records in shape[:2]]
    per_run: list[list[list[Record]]] = []
    for index, run_id in enumerate(runs):
        records = planned_records(run_id, index)
        calls: list[list[Record]] = []
        at, size = 0, 0
        while at < len(records):
            take = _BATCH_SIZES[size % len(_BATCH_SIZES)] if spec["batches"] else 1
            calls.append(records[at : at + take])
            at, size = at + take, size + 1
        per_run.append(calls)
    ordered: list[Call] = []
    for position in range(max(len(calls) for calls in per_run)):
        ordered.extend(
            (index, calls[position]) for index, calls in enumerate(per_run) if position < len(calls)
        )
    return ordered


#: The power-loss writer's rounds, each on a newly opened store: (run, first sequence, count)
#: chunks — a chunk of several records is one ``append_many`` (or that many ``append`` calls).
#: Round 0 starts runs 0-2 one record at a time; round 1 continues runs 0 and 1 and starts
#: run 3, in batches; round 2 finishes run 0 alone and run 1 inside a batch.
_POWER_ROUNDS: tuple[tuple[tuple[int, int, int], ...], ...] = (
    tuple((run, step, 1) for step in range(4) for run in range(3)),
    ((0, 4, 1), (1, 4, 3), (3, 0, 2), (0, 5, 3), (1, 7, 2), (3, 2, 2)),
    ((2, 4, 1), (0, 8, 1), (1, 9, 2), (3, 4, 1), (2, 5, 1)),
)
#: Each run's records in the power-loss rounds (sizes up to ~17 KB: many pages per write).
_POWER_LOGS = ((8, True), (10, True), (6, False), (5, False))


def power_logs(run_ids: list[str]) -> list[list[Record]]:
    """Every record the power-loss writer appends to each run, in order."""
    logs: list[list[Record]] = []
    for index, (count, ends) in enumerate(_POWER_LOGS):
        records = planned_records(run_ids[index], index)[:count]
        logs.append(records + ([finished(f"power probe run {index}")] if ends else []))
    return logs


def power_rounds(run_ids: list[str], batches: bool) -> list[list[PowerCall]]:
    """The power-loss writer's calls, round by round; without ``batches`` each record of a
    chunk is its own ``append``."""
    logs = power_logs(run_ids)
    rounds: list[list[PowerCall]] = []
    for chunks in _POWER_ROUNDS:
        calls: list[PowerCall] = []
        for run, start, count in chunks:
            records = logs[run][start : start + count]
            if batches:
                calls.append((run_ids[run], start, records))
            else:
                calls += [(run_ids[run], start + n, [r]) for n, r in enumerate(records)]
        rounds.append(calls)
    return rounds


async def _power(factory: Callable[[Path], Any], directory: Path, run_ids: list[str]) -> None:
    """The power-loss writer: every round on a newly opened store, each call acknowledged on
    standard output as it returns (the acknowledgement is a ``write`` in the trace, so it is
    ordered with the store's own calls), the store closed after each round."""
    rounds: list[list[PowerCall]] | None = None
    for number in range(len(_POWER_ROUNDS)):
        store = await open_store(factory, directory)
        try:
            if rounds is None:
                batches = callable(getattr(store, "append_many", None))
                _say(f"power-plan {int(batches)}")
                rounds = power_rounds(run_ids, batches)
            for position, (run_id, sequence, records) in enumerate(rounds[number]):
                try:
                    if len(records) == 1:
                        await store.append(run_id, records[0], sequence=sequence)
                    else:
                        await store.append_many(run_id, records, sequence=sequence)
                except _REFUSALS as error:
                    text = " ".join(exception_text(error).split())
                    _say(f"{POWER_REFUSED} {number} {position} {text}")
                    raise SystemExit(3) from None
                _say(f"{POWER_ACK} {number} {position}")
        finally:
            await close_store(store)
    _say("done")


def _say(line: str) -> None:
    os.write(1, (line + "\n").encode())


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _sizes(directory: Path, depth: int = 2) -> dict[str, int]:
    """The size of every file in ``directory`` and its subdirectories (two levels), by path."""
    sizes: dict[str, int] = {}
    with contextlib.suppress(OSError), os.scandir(directory) as entries:
        for entry in entries:
            with contextlib.suppress(OSError):
                if entry.is_file():
                    sizes[entry.path] = entry.stat().st_size
                elif entry.is_dir() and depth > 1:
                    sizes.update(_sizes(Path(entry.path), depth - 1))
    return sizes


def _kill_at_size(limit: int) -> None:
    """From now on no file of this process may grow past ``limit`` bytes: the write that would
    is cut at the limit, and the next one kills the writer (``SIGXFSZ``, its default action, set
    in :func:`_writer`) inside that system call. The kill point is a byte offset, not a time."""
    _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    # A write that crosses the limit is only cut short; code that loops on a short count (a
    # buffered file, SQLite) then makes the write that kills. Code that calls os.write once and
    # ignores the count would go on — and a store that truncates away its torn tail would then
    # write on below the limit, a state no crash leaves. So the cut write itself kills here.
    write = os.write

    def cut_write_kills(descriptor: int, data: Any) -> int:
        written = write(descriptor, data)
        if written < len(data) and stat.S_ISREG(os.fstat(descriptor).st_mode):
            _die()
        return written

    os.write = cut_write_kills


def _size_limit(spec: dict[str, Any], grown: list[int], records: list[Record]) -> int | None:
    """Where a ``bytes`` or ``inside`` round kills: the largest file the store grew in the
    round's first call, plus ``amount`` bytes (``bytes``) or ``amount`` of the next call's
    records' size (``inside``). ``None`` for a store whose files did not grow (a server's):
    its round is killed after its last call returned."""
    if not grown:
        return None
    amount = float(spec["amount"])
    if spec["kind"] == "inside":
        amount *= sum(len(record.to_json().encode()) for record in records)
    return max(grown) + int(amount)


def _reached(directory: Path, limit: int) -> bool:
    """A file is at the limit: the store went on after a write the limit cut short (one
    ``os.write`` whose count it does not check) — the writer was killed inside that call."""
    return any(size >= limit for size in _sizes(directory).values())


async def _call(store: Any, run_id: str, records: list[Record], sequence: int) -> None:
    if len(records) == 1:
        await store.append(run_id, records[0], sequence=sequence)
    else:
        await store.append_many(run_id, records, sequence=sequence)


async def _round(
    factory: Callable[[Path], Any],
    directory: Path,
    number: int,
    spec: dict[str, Any],
    report: Callable[[str], None],
) -> None:
    """One writer's round: its calls in order, each acknowledged once it returned; killed by
    what was written — after ``amount`` acknowledged calls (``acks``), when a file of the store
    reaches a byte offset (``bytes``, ``inside``), else after its last call."""
    _phase[0] = OPENING
    store = await open_store(factory, directory)
    _phase[0] = APPENDING
    _say(f"opened {number}")
    calls = planned_calls(spec)
    run_ids: list[str] = spec["runs"]
    lengths = [0] * len(run_ids)
    before, limit = _sizes(directory), None
    for position, (index, records) in enumerate(calls):
        if position == 1 and spec["kind"] in ("bytes", "inside"):
            after = _sizes(directory)
            grown = [size for path, size in after.items() if size > before.get(path, 0)]
            limit = _size_limit(spec, grown, records)
            if limit is not None:
                _kill_at_size(limit)
        await _call(store, run_ids[index], records, lengths[index])
        if limit is not None and _reached(directory, limit):
            _die()
        lengths[index] += len(records)
        _say(f"ack {number} {position}")
        if position == 0:
            report("")
        if spec["kind"] == "acks" and position + 1 == int(spec["amount"]):
            _die()  # right after the acknowledgement, before the next call
    _die()  # every call returned: killed after the last


#: What a writer that raised was doing, told to the probe on the first line of its stderr.
PHASE_PREFIX = "polyloop-crash-writer-phase: "
OPENING, APPENDING = "opening", "appending"
_phase = [OPENING]


def _writer(
    spec_factory: str, directory: Path, number: int, spec: dict[str, Any], report: int
) -> None:
    known = set(sys.modules)

    def tell(line: str) -> None:
        """Tell the parent which modules the store imported on first use (a driver imported
        lazily): it imports them before the next fork, so no writer pays for them again."""
        names = " ".join(sorted(set(sys.modules) - known))
        known.update(sys.modules)
        with contextlib.suppress(OSError):
            os.write(report, f"{line}\nmodules {names}\n".encode()[:60000])

    # Python ignores SIGXFSZ (a write past the size limit then raises EFBIG): the writer
    # takes its default action instead, death inside the write, and leaves no core file.
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
    resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))
    try:
        asyncio.run(_round(load_factory(spec_factory), directory, number, spec, tell))
    except BaseException:
        # The first line says what the writer was doing (the probe words its failure by it).
        os.write(2, f"{PHASE_PREFIX}{_phase[0]}\n{traceback.format_exc()}".encode())
        os._exit(70)
    _die()


def main(spec_factory: str, directory: Path, plan: list[dict[str, Any]]) -> None:
    """Fork one writer per round, one after another; report each one's end."""
    load_factory(spec_factory)  # imported once, here: every writer inherits the module
    sys.stdout.flush()
    for number, planned in enumerate(plan):
        spec = dict(planned)
        reading, report = os.pipe()
        pid = os.fork()
        if pid == 0:  # the writer
            os.close(reading)
            _writer(spec_factory, directory, number, spec, report)
        os.close(report)
        _, status = os.waitpid(pid, 0)
        _import_what_the_writer_imported(reading)
        killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) in _KILLS
        _say(f"end {number} {'killed' if killed else status}")
        # The probe reads what survived, then says go: no writer runs while it reads (a store
        # may let one process at a time open its data).
        if not killed or sys.stdin.readline().strip() != "go":
            return
    _say("done")


#: How a writer dies at its kill point: killed by itself, or by the file size limit.
_KILLS = (signal.SIGKILL, signal.SIGXFSZ)


def _import_what_the_writer_imported(reading: int) -> None:
    """Import the modules a writer imported on first use: no later writer pays for them."""
    chunks = []
    while chunk := os.read(reading, 65536):
        chunks.append(chunk)
    os.close(reading)
    for line in b"".join(chunks).decode(errors="replace").splitlines():
        words = line.split()
        if words[:1] == ["modules"]:
            for name in words[1:]:
                with contextlib.suppress(BaseException):  # it fails in the writer too, then
                    importlib.import_module(name)


if __name__ == "__main__":
    if sys.argv[3:4] == ["--power"]:  # the power-loss probe's writer: no fork, no kill
        asyncio.run(_power(load_factory(sys.argv[1]), Path(sys.argv[2]), json.loads(sys.argv[4])))
    else:
        main(sys.argv[1], Path(sys.argv[2]), json.loads(sys.argv[3]))
