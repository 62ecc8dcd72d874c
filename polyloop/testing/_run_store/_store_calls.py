"""What every family of the run-store suite does with a store: check its methods, append, read
back and compare."""

from __future__ import annotations

from collections.abc import Sequence

from polyloop.ports import RunStore
from polyloop.testing._shared._base import (
    require_seam,
)
from polyloop.testing._shared._shapes import mismatch, run_log_problems
from polyloop.types import (
    Record,
    RunLog,
)

__all__ = ["append_all", "assert_log_is", "check_store", "read_checked"]


def check_store(store: object) -> None:
    for method, signature in (
        ("append", "async append(run_id, record, *, sequence)"),
        ("read_log", "async read_log(run_id) -> RunLog"),
        ("run_ids", "async run_ids() -> list[str]"),
    ):
        require_seam(store, "run_store", method, signature)


async def read_checked(store: RunStore, run_id: str) -> RunLog:
    log = await store.read_log(run_id)
    problems = run_log_problems(log, f"read_log({run_id!r})")
    assert not problems, "\n".join(problems)
    return log


async def append_all(store: RunStore, run_id: str, records: Sequence[Record]) -> None:
    for sequence, record in enumerate(records):
        await store.append(run_id, record, sequence=sequence)


def assert_log_is(log: RunLog, expected: Sequence[Record], what: str) -> None:
    found = mismatch(tuple(expected), log.records, "records")
    assert found is None, f"{what}: {found}"
