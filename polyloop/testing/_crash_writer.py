"""The writer process of the crash probe, and what it shares with the probe.

Run as a script (``python _crash_writer.py FACTORY DIRECTORY RUN_ID...``), not as
``-m polyloop.testing._crash_writer``: as a script it imports neither pytest nor Hypothesis (the
``polyloop.testing`` package does), so each killed writer starts in a fraction of a second. It
opens the store through the implementer's factory, appends the planned records of several runs
interleaved, and prints ``ack <run index> <sequence>`` after each append returned. The probe
kills it; whatever it acknowledged must survive.
"""

from __future__ import annotations

import asyncio
import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from polyloop.types import Action, ActionIntent, ModelCallIntent, Record, RunStarted

__all__ = ["close_store", "load_factory", "open_store", "planned_records"]

RECORDS_PER_RUN = 40


class FactoryError(Exception):
    """A store factory that cannot be imported or called; the message says what to fix."""


def load_factory(spec: str) -> Callable[[Path], Any]:
    """The callable named by ``"package.module:callable"``, or :class:`FactoryError`."""
    module_name, _, attribute = spec.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
    except Exception as error:
        raise FactoryError(
            f"store factory {spec!r}: cannot import module {module_name!r} "
            f"({type(error).__name__}: {error})"
        ) from error
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise FactoryError(
                f"store factory {spec!r}: module {module_name!r} has no {attribute!r}"
            ) from None
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


def planned_records(run_id: str, run_index: int) -> list[Record]:
    """The records the writer appends to one run, in order; sizes vary from tiny to ~12 KB so a
    kill can land inside a write that takes more than one system call."""
    records: list[Record] = [
        RunStarted(
            run_id=run_id,
            goal=f"crash probe run {run_index}",
            parameters={"system_prompt": "crash probe"},
            parameters_hash="sha256:" + "0" * 64,
            started_at="2026-01-01T00:00:00.000Z",
        )
    ]
    for step in range(RECORDS_PER_RUN - 1):
        if step % 2 == 0:
            records.append(ModelCallIntent(step_index=step, prompt_chars=step * 7 + run_index))
        else:
            filler = "é—x" * ((step * 397 + run_index * 131) % 4000)
            text = f"run {run_index} step {step}: {filler}"
            records.append(ActionIntent(step_index=step, action=Action(text=text)))
    return records


async def _write(spec: str, directory: Path, run_ids: list[str]) -> None:
    factory = load_factory(spec)
    # Started early so the interpreter's start overlaps earlier rounds; write only when told.
    await asyncio.to_thread(sys.stdin.readline)
    store = await open_store(factory, directory)
    plans = [planned_records(run_id, index) for index, run_id in enumerate(run_ids)]
    for sequence in range(RECORDS_PER_RUN):
        for index, run_id in enumerate(run_ids):
            await store.append(run_id, plans[index][sequence], sequence=sequence)
            sys.stdout.write(f"ack {index} {sequence}\n")
            sys.stdout.flush()
    sys.stdout.write("done\n")
    sys.stdout.flush()
    await asyncio.sleep(3600)  # wait for the kill: a writer that exits on its own is no crash


if __name__ == "__main__":
    asyncio.run(_write(sys.argv[1], Path(sys.argv[2]), sys.argv[3:]))
