"""The store promises across store objects: several objects on the same data, one truth.

A deployment runs many processes (and often many store objects in one process) over one
database or directory. A store that keeps a run's length, its "started" or "finished" flag, or
the list of runs in the object — a cache that is right as long as this object is the only
writer — keeps every fence with one object and lets a second writer through. When the samples
name a factory (:class:`~polyloop.testing.StoreSamples`), the fence promises open three objects
on one fresh location and interleave their calls: each object first reads what it will write
(as ``run()`` does before a start), then the others write, then it writes.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from polyloop._base._exception_text import exception_text
from polyloop.errors import RunAlreadyExists, RunAlreadyFinished, RunConflict
from polyloop.testing._run_store._crash_writer import (
    FactoryError,
    close_store,
    load_factory,
    open_store,
)
from polyloop.testing._run_store._run_ids import fresh_run_ids
from polyloop.testing._run_store._store_child import CHILD_RECORD, CHILD_SOURCE
from polyloop.testing._shared import _sample_records
from polyloop.testing._shared._base import require_samples
from polyloop.testing._shared._child import child_env
from polyloop.testing._shared._samples import StoreSamples
from polyloop.testing._shared._shapes import mismatch
from polyloop.types import (
    Action,
    ActionIntent,
    ModelCallIntent,
    Record,
    RunFinished,
    RunStarted,
)

__all__ = [
    "across_objects",
    "across_processes",
    "batch_fence_across_objects",
    "exclusive_start_across_objects",
    "fence_across_objects",
    "finish_across_objects",
    "listing_across_objects",
    "store_objects",
]

OBJECTS = 3
_NAMES = ("first", "second", "third")


@asynccontextmanager
async def store_objects(samples: object) -> AsyncIterator[list[Any]]:
    """Three store objects on one fresh location, when the samples name a factory; else none
    (the single-object checks are all there is)."""
    if samples is None:
        yield []
        return
    checked = require_samples(samples, StoreSamples, "store_samples")
    if checked.factory is None:
        yield []
        return
    try:
        factory = load_factory(checked.factory)
    except FactoryError as error:
        pytest.fail(f"store_samples: {error}", pytrace=False)
    with tempfile.TemporaryDirectory(prefix="polyloop-objects-") as directory:
        opened: list[Any] = []
        try:
            for _ in range(OBJECTS):
                opened.append(await open_store(factory, Path(directory)))
            yield opened
        finally:
            for store in opened:
                await close_store(store)


async def across_objects(samples: object, check: Callable[[list[Any]], Awaitable[None]]) -> None:
    """``check`` on three store objects on one fresh location when the samples name a factory;
    nothing otherwise (the single-object checks are all there is)."""
    async with store_objects(samples) as objects:
        if objects:
            await check(objects)


def _started(run_id: str) -> RunStarted:
    return _sample_records.started(run_id, "shared by store objects")


def _finished() -> RunFinished:
    return _sample_records.finished("done by another object")


async def _expect(
    objects: Sequence[Any],
    which: int,
    run_id: str,
    record: Record | list[Record],
    sequence: int,
    error: type[Exception] | None,
    story: str,
) -> None:
    """Append through object ``which`` — ``append`` for a record, ``append_many`` for a list —
    and fail unless it raises ``error`` (``None``: accepted)."""
    name = _NAMES[which]
    try:
        if isinstance(record, list):
            kinds = ", ".join(r.kind for r in record)
            call = f"the {name} store object's append_many([{kinds}], sequence={sequence})"
            await objects[which].append_many(run_id, list(record), sequence=sequence)
        else:
            call = f"the {name} store object's append({record.kind}, sequence={sequence})"
            await objects[which].append(run_id, record, sequence=sequence)
    except Exception as raised:
        if error is None or not isinstance(raised, error):
            wanted = "to be accepted" if error is None else f"to raise {error.__name__}"
            pytest.fail(
                f"{call} raised {exception_text(raised)}, but {story}, so it had "
                f"{wanted} (three objects were opened through the factory on the same data)",
                pytrace=False,
            )
        return
    if error is not None:
        pytest.fail(
            f"{call} was accepted, but {story}: it had to raise {error.__name__} (three objects "
            "were opened through the factory on the same data; the fence must hold across "
            "them, as across processes)",
            pytrace=False,
        )


async def _read_everywhere(objects: Sequence[Any], run_id: str) -> None:
    for store in objects:
        await store.read_log(run_id)


async def _all_read(objects: Sequence[Any], run_id: str, expected: Sequence[Record]) -> None:
    for which, store in enumerate(objects):
        log = tuple((await store.read_log(run_id)).records)
        found = mismatch(tuple(expected), log, "records")
        assert found is None, (
            f"the {_NAMES[which]} store object reads run {run_id} differently from what the "
            f"objects wrote together: {found}"
        )


async def fence_across_objects(objects: Sequence[Any]) -> None:
    """Each object appends at the length it last saw after another object moved the log on."""
    (run_id,) = fresh_run_ids(1)
    await _read_everywhere(objects, run_id)
    records: list[Record] = [_started(run_id)]
    await _expect(objects, 0, run_id, records[0], 0, None, "the log was empty")
    await _read_everywhere(objects, run_id)
    step = ModelCallIntent(step_index=0, prompt_chars=3)
    await _expect(objects, 1, run_id, step, 1, None, "the log held 1 record")
    records.append(step)
    stale = ActionIntent(step_index=0, action=Action(text="an action that must not run twice"))
    await _expect(objects, 0, run_id, stale, 1, RunConflict, "the second object had appended at 1")
    await _expect(objects, 2, run_id, stale, 2, None, "the log held 2 records")
    records.append(stale)
    await _expect(objects, 1, run_id, stale, 2, RunConflict, "the third object had appended at 2")
    await _all_read(objects, run_id, records)


async def batch_fence_across_objects(objects: Sequence[Any]) -> None:
    """The fences of ``append_many`` across objects: a batch is a path of its own in a store
    (one transaction, one write), and a store may check it against what the object cached.

    Each object sends a batch at the length it last saw after another object moved the log on
    (``RunConflict``), a batch starting the run again (``RunAlreadyExists``) and, once another
    object finished the run, a batch after the finish (``RunAlreadyFinished``)."""
    (run_id,) = fresh_run_ids(1)
    await _read_everywhere(objects, run_id)
    first: list[Record] = [_started(run_id), ModelCallIntent(step_index=0, prompt_chars=3)]
    await _expect(objects, 0, run_id, first, 0, None, "the log was empty")
    await _read_everywhere(objects, run_id)
    step: list[Record] = [
        ModelCallIntent(step_index=0, prompt_chars=4),
        ActionIntent(step_index=0, action=Action(text="an action that must not run twice")),
    ]
    await _expect(objects, 1, run_id, step, 2, None, "the log held 2 records")
    story = "the second object had appended a batch at 2"
    await _expect(objects, 0, run_id, step, 2, RunConflict, story)
    await _expect(objects, 2, run_id, step, 4, None, "the log held 4 records")
    story = "the third object had appended a batch at 4"
    await _expect(objects, 1, run_id, step, 4, RunConflict, story)
    story = "the first object had started this run"
    await _expect(objects, 1, run_id, first, 6, RunAlreadyExists, story)
    end: list[Record] = [ModelCallIntent(step_index=1, prompt_chars=5), _finished()]
    await _expect(objects, 0, run_id, end, 6, None, "the log held 6 records")
    story = "the first object had finished this run"
    await _expect(objects, 2, run_id, step, 8, RunAlreadyFinished, story)
    await _expect(objects, 1, run_id, end, 8, RunAlreadyFinished, story)
    await _all_read(objects, run_id, [*first, *step, *step, *end])


async def exclusive_start_across_objects(objects: Sequence[Any]) -> None:
    """Every object checked that the run is free; one starts it; the others must be refused."""
    (run_id,) = fresh_run_ids(1)
    await _read_everywhere(objects, run_id)
    start = _started(run_id)
    await _expect(objects, 0, run_id, start, 0, None, "the run had no log")
    story = "the first object had started this run"
    await _expect(objects, 1, run_id, _started(run_id), 0, RunAlreadyExists, story)
    await _expect(objects, 2, run_id, _started(run_id), 1, RunAlreadyExists, story)
    await _all_read(objects, run_id, [start])


async def finish_across_objects(objects: Sequence[Any]) -> None:
    """A run finished through one object is final for every other object too."""
    (run_id,) = fresh_run_ids(1)
    start = _started(run_id)
    await _expect(objects, 0, run_id, start, 0, None, "the run had no log")
    await _read_everywhere(objects, run_id)
    finish = _finished()
    await _expect(objects, 2, run_id, finish, 1, None, "the log held 1 record")
    story = "the third object had finished this run"
    late = ModelCallIntent(step_index=1, prompt_chars=1)
    await _expect(objects, 0, run_id, late, 1, RunAlreadyFinished, story)
    await _expect(objects, 1, run_id, late, 2, RunAlreadyFinished, story)
    await _expect(objects, 1, run_id, _finished(), 2, RunAlreadyFinished, story)
    await _all_read(objects, run_id, [start, finish])


async def listing_across_objects(objects: Sequence[Any]) -> None:
    """A run started through one object is listed by every object, opened before or after."""
    run_ids = fresh_run_ids(OBJECTS)
    for store in objects:
        await store.run_ids()
    for which, run_id in enumerate(run_ids):
        await _expect(objects, which, run_id, _started(run_id), 0, None, "the run had no log")
        for other, store in enumerate(objects):
            listed = await store.run_ids()
            for started in run_ids[: which + 1]:
                count = listed.count(started) if isinstance(listed, list) else 0
                assert count == 1, (
                    f"the {_NAMES[other]} store object's run_ids() lists run {started} "
                    f"{count} times after the objects started runs {run_ids[: which + 1]} "
                    "(a listing must show every run on the data, whichever object wrote it)"
                )


async def across_processes(samples: object) -> None:
    """The fence and the reads after a second process wrote (issue 30 §1, place).

    A store object appends and reads (and may cache), and is closed; a second process opens the
    data through the factory and appends at the right sequence; then a store object of this
    process — a new one, so the store never has to serve two processes at once — must read the
    second process's record and refuse an append at the sequence that process used. A cache
    shared by every object of one process passes the three-object checks and fails here.
    """
    if samples is None:
        return
    checked = require_samples(samples, StoreSamples, "store_samples")
    if checked.factory is None:
        return
    try:
        factory = load_factory(checked.factory)
    except FactoryError as error:
        pytest.fail(f"store_samples: {error}", pytrace=False)
    (run_id,) = fresh_run_ids(1)
    with tempfile.TemporaryDirectory(prefix="polyloop-process-") as directory:
        records: list[Record] = [_started(run_id), ModelCallIntent(step_index=0, prompt_chars=3)]
        await _in_one_object(factory, Path(directory), run_id, records)
        await _second_process(checked.factory, directory, run_id, len(records))
        records.append(CHILD_RECORD)
        store = await open_store(factory, Path(directory))
        try:
            log = tuple((await store.read_log(run_id)).records)
            found = mismatch(tuple(records), log, "records")
            assert found is None, (
                f"a new store object of this process reads run {run_id} without what a second "
                f"process appended after this process had read and cached it: {found}"
            )
            story = "a second process had appended at that sequence (after this one read it)"
            await _expect([store], 0, run_id, CHILD_RECORD, 2, RunConflict, story)
        finally:
            await close_store(store)


async def _in_one_object(
    factory: Callable[[Path], Any], directory: Path, run_id: str, records: Sequence[Record]
) -> None:
    store = await open_store(factory, directory)
    try:
        for sequence, record in enumerate(records):
            await _expect([store], 0, run_id, record, sequence, None, "the log was in order")
        await store.read_log(run_id)
    finally:
        await close_store(store)


async def _second_process(factory: str, directory: str, run_id: str, sequence: int) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        CHILD_SOURCE,
        factory,
        directory,
        run_id,
        str(sequence),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=child_env(),
    )
    out, err = await process.communicate()
    if process.returncode != 0 or b"appended" not in out:
        said = err.decode("utf-8", "replace").strip().splitlines()[-5:]
        pytest.fail(
            f"a second process (polyloop.testing._run_store._store_child) opened the store "
            f"through {factory!r} after this one had closed it, and could not append at "
            f"sequence {sequence} (exit {process.returncode}): {' / '.join(said)}",
            pytrace=False,
        )
