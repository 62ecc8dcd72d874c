"""The append rules every bundled store enforces, in their precedence order, in one place.

A store computes two facts inside its own transaction (the log's length and whether it ends
with ``RunFinished``) and asks :func:`check_append`; the precedence between the three errors is
part of the public contract, so it is written once.
"""

from __future__ import annotations

from polyloop._run_id import validate_run_id
from polyloop.errors import RunAlreadyExists, RunAlreadyFinished, RunConflict
from polyloop.types import RECORD_TYPES, Record, RunStarted


def check_record(run_id: str, record: object, sequence: object) -> None:
    """Argument checks done before any I/O (bad input never reaches the backing store)."""
    validate_run_id(run_id)
    if not isinstance(record, RECORD_TYPES):
        raise TypeError(f"append expects a polyloop record, got {type(record).__name__}")
    if not isinstance(sequence, int) or isinstance(sequence, bool) or sequence < 0:
        raise ValueError(f"sequence must be an int >= 0, got {sequence!r}")


def check_append(
    run_id: str, record: Record, *, sequence: int, length: int, finished: bool
) -> None:
    """Raise the error this append must fail with, or return if it may be written."""
    if isinstance(record, RunStarted) and length > 0:
        raise RunAlreadyExists(f"run {run_id!r} already has a log ({length} records)")
    if finished:
        raise RunAlreadyFinished(f"run {run_id!r} is finished; nothing may be appended")
    if sequence != length:
        raise RunConflict(
            f"run {run_id!r}: append at sequence {sequence} but the log has {length} records "
            "(another process is driving this run)"
        )
    if length == 0 and not isinstance(record, RunStarted):
        raise RunConflict(f"run {run_id!r}: the first record must be RunStarted, got {record.kind}")
