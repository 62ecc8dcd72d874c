"""Probes of the optional inline commit (``InlineCommitRunStore.commit_now``).

The loop calls ``commit_now`` in the run's own task instead of awaiting ``append_many`` when
the store offers it under the rule of :func:`polyloop._loop._commit.inline_commit`; the run-store
suite checks it through the same rule, so it checks exactly the method the loop would call.
Every comparison reads both logs through the store's own ``read_log``: the probes are about
the commit, and a store's reading is checked by the other promises.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from polyloop._loop._commit import inline_commit
from polyloop.ports import BatchRunStore, RunStore
from polyloop.testing._shared import _sample_records
from polyloop.testing._shared._boundaries import BOUNDARY_BYTE_SIZES
from polyloop.testing._shared._shapes import mismatch
from polyloop.testing._shared._skips import not_applicable
from polyloop.types import (
    Action,
    ActionIntent,
    ModelCallIntent,
    ModelReplied,
    ModelReply,
    Record,
    RunStarted,
    StopReason,
    canonical_json,
)

__all__ = [
    "InlineCommit",
    "calls",
    "inline_or_skip",
    "read",
    "same_log",
    "sized_batches",
    "started",
]

InlineCommit = Callable[..., bool]


def inline_or_skip(store: RunStore) -> tuple[InlineCommit, BatchRunStore]:
    """The ``commit_now`` the loop would call on ``store``, and the store as a batch store;
    ``not_applicable`` when the loop would await ``append_many`` instead."""
    commit_now = inline_commit(store)
    if commit_now is None or not isinstance(store, BatchRunStore):
        not_applicable(
            promise="commit_now(run_id, records, *, sequence) commits a batch without awaiting",
            why=(
                "this store offers no commit_now the loop would use (polyloop.ports."
                "InlineCommitRunStore; a commit_now inherited from a class above the one that "
                "defines append_many is not used), so the loop awaits append_many"
            ),
            verify_yourself=(
                "to offer it, add def commit_now(run_id, records, *, sequence) -> bool beside "
                "append_many: commit the batch now and return True, or return False having "
                "done nothing"
            ),
        )
    return commit_now, store


def started(run_id: str) -> RunStarted:
    return _sample_records.started(run_id, "inline commit probe")


_FINISHED = _sample_records.finished(None, executed_actions=1, stop_reason=StopReason.STEP_BUDGET)
_STEP: tuple[Record, ...] = (
    ModelCallIntent(step_index=0, prompt_chars=5),
    ModelReplied(step_index=0, reply=ModelReply(text="a reply")),
    ActionIntent(step_index=0, action=Action(text="an action that must run once")),
    ModelCallIntent(step_index=1, prompt_chars=9),
    ModelReplied(step_index=1, reply=ModelReply(text="another reply")),
)


def _json_bytes(records: Sequence[Record]) -> int:
    return sum(len(canonical_json(r.to_json()).encode("utf-8")) for r in records)


def _sized(step: int, size: int) -> tuple[Record, ...]:
    """A step's reply and action intent (and the next call's intent) of ``size`` bytes of
    canonical JSON in all, the reply's text padded to reach it."""

    def batch(text: str) -> tuple[Record, ...]:
        return (
            ModelReplied(step_index=step, reply=ModelReply(text=text)),
            ActionIntent(step_index=step, action=Action(text=f"action {step}")),
            ModelCallIntent(step_index=step + 1, prompt_chars=7),
        )

    return batch("r" * max(0, size - _json_bytes(batch(""))))


#: The batch sizes past which real stores take another path (a buffer, a chunked write, a
#: page): just under, at and over 2, 4, 8, 16 and 64 KiB (``BOUNDARY_BYTE_SIZES``).
_BATCH_BYTES = tuple(n for n in BOUNDARY_BYTE_SIZES if n <= 65_537)


def sized_batches(first_step: int) -> list[tuple[Record, ...]]:
    """Batches of :data:`_BATCH_BYTES` bytes, one step each from ``first_step`` on."""
    return [_sized(first_step + n, size) for n, size in enumerate(_BATCH_BYTES)]


def calls(run_id: str, *, finish: bool) -> list[tuple[Record, ...]]:
    """The batches of a run as the loop commits them: the start with the first intent, a reply
    with its action intent, single records, batches of every size of :data:`_BATCH_BYTES`,
    and (``finish``) a last batch ending the run."""
    first, reply, action, intent, second = _STEP
    batches: list[tuple[Record, ...]] = [(started(run_id), first), (reply, action), (intent,)]
    batches += sized_batches(2)
    batches.append((second, _FINISHED) if finish else (second,))
    return batches


async def read(store: RunStore, run_id: str, *, sequence: int = 1) -> tuple[Record, ...]:
    """The records through the store's own ``read_log`` (the shape of what it returns is other
    promises' business); a run with no commit yet (``sequence`` 0) is not read: it is empty."""
    if sequence == 0:
        return ()
    log: Any = await store.read_log(run_id)
    return tuple(getattr(log, "records", log))


def _comparable(records: Sequence[Record]) -> tuple[Record, ...]:
    """The records with the run id a ``RunStarted`` carries blanked: two runs compare equal."""
    return tuple(
        dataclasses.replace(r, run_id="-") if isinstance(r, RunStarted) else r for r in records
    )


def same_log(found: tuple[Record, ...], expected: tuple[Record, ...], what: str) -> None:
    problem = mismatch(_comparable(expected), _comparable(found), "records")
    assert problem is None, f"{what}: {problem}"
