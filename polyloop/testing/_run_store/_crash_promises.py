"""The run store's crash promises: a process killed inside a write, a reopened store, a power
loss."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from polyloop.ports import RunStore
from polyloop.testing._run_store._crash_writer import FactoryError, load_factory
from polyloop.testing._run_store._durability import (
    CrashFindings,
    CrashProbeCannotRun,
    crash_findings,
    reopen_problems,
)
from polyloop.testing._run_store._power import (
    INSTALL_HINT,
    PowerFindings,
    StoreRefused,
    TracerUnavailable,
    missing_for_power_probe,
    power_findings,
)
from polyloop.testing._shared._base import (
    ContractBase,
    UnusableSamples,
    require_samples,
    samples_hint,
    suite_of,
)
from polyloop.testing._shared._samples import StoreSamples
from polyloop.testing._shared._skips import not_applicable, unverifiable

__all__ = ["CrashAndPowerLoss"]


def _sample_line(suite: type[ContractBase]) -> str:
    """Which sample turns a crash promise on, said for every route that finds a store."""
    factory = "StoreSamples(factory='package.module:callable')"
    return (
        "give the suite a factory (a callable that takes a fresh directory and returns your "
        f"store over data kept there): {samples_hint(suite, 'store_samples', factory)}"
        "; the kit then checks this"
    )


_ATOMIC = (
    "a crash during append() leaves the record wholly present or wholly absent",
    "write to one transaction or one atomic rename per record",
)


_DURABLE = (
    "once append() returns, the record survives a crash: the log after a crash is a prefix of "
    "what was appended",
    "commit (fsync, or a synchronous database commit) before append() returns",
)


def _factory_or_skip(
    suite: type[ContractBase],
    samples: object,
    promise: tuple[str, str],
    test: str = "test it by killing a writer",
) -> str:
    """The factory to probe, or the skip that says which sample turns the promise on."""
    if samples is None:
        unverifiable(
            promise=promise[0],
            why="the suite has no way to reopen your store's data or to kill a process writing it",
            verify_yourself=f"{_sample_line(suite)}; or {promise[1]}, and {test}",
        )
    checked = require_samples(samples, StoreSamples, "store_samples")
    if checked.factory is None:
        not_applicable(
            promise=promise[0],
            why="StoreSamples(in_memory=True) declares that the store keeps nothing across a crash",
            verify_yourself="use a persistent store for runs that must survive a crash",
        )
    return checked.factory


def _load(factory: str) -> Callable[[Path], Any]:
    try:
        return load_factory(factory)
    except FactoryError as error:
        raise UnusableSamples(f"store_samples: {error}", "store_samples") from None


async def _probe(factory: str, promise: tuple[str, str]) -> CrashFindings:
    _load(factory)
    try:
        return await crash_findings(factory)
    except CrashProbeCannotRun as error:
        # Nothing was judged: neither held nor violated (a store need not serve two processes).
        unverifiable(
            promise=promise[0],
            why=f"the crash probe could not run: {error}",
            verify_yourself=(
                f"{promise[1]}, and test it by killing a process that writes through your store"
            ),
        )
    except RuntimeError as error:
        pytest.fail(f"the crash probe's writer failed: {error}", pytrace=False)


_POWER = (
    "an acknowledged append survives a power loss or an operating-system crash",
    "fsync (or fdatasync) the file before append() returns, and its directory after creating "
    "or renaming a file in it",
)


_POWER_BY_HAND = (
    "check where your store syncs: `strace -f -e trace=write,pwrite64,fsync,fdatasync,rename,"
    "openat` on a test that appends shows whether an fsync or fdatasync of the file (and of its "
    "directory, for a new file or a rename) comes before append returns; then crash the "
    "storage under it (LazyFS, or a dm-log-writes device replayed up to each flush) and check "
    "that the store opens and every acknowledged record reads back; a database server: run it "
    "with synchronous commits (PostgreSQL synchronous_commit=on, fsync=on, full_page_writes=on)"
)


async def _power_or_skip(suite: type[ContractBase], samples: object) -> PowerFindings:
    """The power-loss probe's findings, or the skip that says what it lacks to run."""
    factory = _factory_or_skip(
        suite, samples, _POWER, "test it on storage that drops unsynced writes"
    )
    missing, install = missing_for_power_probe(), f"{INSTALL_HINT}; or {_POWER_BY_HAND}"
    if missing is not None:
        unverifiable(promise=_POWER[0], why=missing, verify_yourself=install)
    _load(factory)
    try:
        findings = await power_findings(factory)
    except TracerUnavailable as error:
        unverifiable(
            promise=_POWER[0],
            why=str(error),
            verify_yourself=f"{INSTALL_HINT}; or {_POWER_BY_HAND}",
        )
    except StoreRefused as error:  # a verdict on the store, not a probe that could not run
        pytest.fail(str(error), pytrace=False)
    except RuntimeError as error:
        pytest.fail(f"the power-loss probe could not run: {error}", pytrace=False)
    if findings.not_judged is not None:
        unverifiable(promise=_POWER[0], why=findings.not_judged, verify_yourself=_POWER_BY_HAND)
    return findings


def _power_summary(findings: PowerFindings) -> str:
    shown = findings.violations[:5]
    if len(findings.violations) > 5:
        shown.append(f"… and {len(findings.violations) - 5} more")
    return "\n".join([*shown, f"({findings.summary()})"])


def _summary(problems: list[str], findings: CrashFindings) -> str:
    shown = "\n".join(problems[:5])
    more = f"\n… and {len(problems) - 5} more" if len(problems) > 5 else ""
    return f"{shown}{more}\n({findings.acknowledged} acknowledged appends over the rounds)"


class CrashAndPowerLoss:
    """A process killed inside a write, a reopened store, a power loss."""

    async def test_atomic_append(self, run_store: RunStore, store_samples: object) -> None:
        """A crash during ``append`` leaves the record wholly present or wholly absent, and a
        crash during ``append_many`` the whole batch or none of it.

        A half-written record is unreadable; the resume then cannot tell whether the action
        whose intent it was has run — and half a batch is a reply without the intent it was
        committed with. Checked when ``store_samples`` names a factory: writer processes are
        killed (``SIGKILL``) after varied numbers of appends, and at many points spread over
        the measured duration of one big call — an ``append`` of a record over 1 MiB, and, when
        the store has it, an ``append_many`` around one — so the kill lands inside the write,
        which then spans many pages and system calls. Then every run must read back exactly as
        a prefix of what was sent, ending at a batch boundary (no partial or torn record, no
        decode error, ``StoreCorrupted`` included), and take its next append at the right
        sequence. This is a *process* crash: the operating system keeps what was written, so a
        missing ``fsync`` cannot show here (``run_store.survives_power_loss`` is that promise).
        """
        factory = _factory_or_skip(suite_of(type(self)), store_samples, _ATOMIC)
        findings = await _probe(factory, _ATOMIC)
        assert not findings.atomicity, _summary(findings.atomicity, findings)

    async def test_prefix_durability(self, run_store: RunStore, store_samples: object) -> None:
        """After a crash the log is a prefix of what was appended: a returned append is durable.

        The loop executes an action only after its intent's append returned; if that record
        can vanish in a crash, the resume repeats an action it was told had an intent. Checked
        when ``store_samples`` names a factory: a second store opened on the same data must
        read back every acknowledged record (a forgotten commit shows here), and after a writer
        process is killed — between calls, or inside a big ``append`` or ``append_many`` —
        every call it was told had returned must be there, batches whole. This is a *process*
        crash (``SIGKILL`` cannot lose the operating system's page cache, so a missing
        ``fsync`` cannot show); surviving a power loss is ``run_store.survives_power_loss``.
        """
        factory = _factory_or_skip(suite_of(type(self)), store_samples, _DURABLE)
        with tempfile.TemporaryDirectory(prefix="polyloop-reopen-") as directory:
            problems = await reopen_problems(_load(factory), Path(directory))
        assert not problems, "\n".join(problems)
        findings = await _probe(factory, _DURABLE)
        assert not findings.durability, _summary(findings.durability, findings)

    async def test_survives_power_loss(self, run_store: RunStore, store_samples: object) -> None:
        """Once ``append`` or ``append_many`` returned, its records survive a power loss or an
        operating-system crash, and the store then opens and reads as a prefix of what was
        appended.

        The process-crash promises (``atomic_append``, ``prefix_durability``) cannot see this:
        a killed process leaves its writes in the operating system's page cache, which reaches
        the disk anyway. Only the ``fsync`` (or ``fdatasync``, or a synchronous database
        commit) before ``append`` returns — of the file and, for a new file or a rename, of its
        directory — puts the record on the disk, and leaving it out passes every test that runs
        in a process. Checked when ``store_samples`` names a factory, on Linux with ``strace``:
        the writer appends through the factory on an empty directory — new runs and existing
        ones, single appends and ``append_many`` batches, a run finished — under a system-call
        trace; the trace is replayed up to many crash points (before and after every sync,
        inside every write of more than a page), keeping of what was not synced nothing, all,
        only file data, only directory changes, or a seeded choice. On each state the store
        must open, every acknowledged record must read back exactly, no record or batch may be
        half-present, and the append rules must still hold (a finished run stays finished).
        """
        findings = await _power_or_skip(suite_of(type(self)), store_samples)
        assert not findings.violations, _power_summary(findings)
