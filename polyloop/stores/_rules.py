"""The rules every bundled store enforces, each written once: appends and reading rows back.

A store computes two facts inside its own transaction (the log's length and whether it ends
with ``RunFinished``) and asks :func:`check_append`; the precedence between the three errors is
part of the public contract, so it is written once. A durable store reads its rows back through
:func:`decode_log`, so one corruption reads as one message whichever store holds it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from polyloop._base._run_id import validate_run_id
from polyloop.errors import (
    RunAlreadyExists,
    RunAlreadyFinished,
    RunConflict,
    SchemaVersionError,
    StoreCorrupted,
)
from polyloop.types import (
    RECORD_TYPES,
    Record,
    RunFinished,
    RunLog,
    RunStarted,
    record_from_json,
)


def check_record(run_id: str, record: object, sequence: object) -> None:
    """Argument checks done before any I/O (bad input never reaches the backing store)."""
    validate_run_id(run_id)
    _check_is_record(record)
    if not isinstance(sequence, int) or isinstance(sequence, bool) or sequence < 0:
        raise ValueError(f"sequence must be an int >= 0, got {sequence!r}")


def check_batch(run_id: str, records: object, sequence: object) -> tuple[Record, ...]:
    """:func:`check_record` for a batch: every record, before any I/O; the batch as a tuple.

    An empty batch is a ``ValueError`` (there is nothing to fence), a ``str`` or a single record
    is a ``TypeError`` (a sequence of records is expected).
    """
    if isinstance(records, str | bytes) or not isinstance(records, Sequence):
        raise TypeError(f"append_many expects a sequence of records, got {type(records).__name__}")
    batch = tuple(records)
    if not batch:
        raise ValueError("append_many needs at least one record")
    check_record(run_id, batch[0], sequence)
    for record in batch[1:]:  # the run id and sequence are checked once, above
        _check_is_record(record)
    return batch


def _check_is_record(record: object) -> None:
    if not isinstance(record, RECORD_TYPES):
        raise TypeError(f"append expects a polyloop record, got {type(record).__name__}")


def check_append_many(
    run_id: str, records: Sequence[Record], *, sequence: int, length: int, finished: bool
) -> None:
    """The rules of :func:`check_append` for each record in order, as if appended one by one.

    The first violation is the batch's error; the caller then writes none of the batch.
    """
    for offset, record in enumerate(records):
        check_append(
            run_id, record, sequence=sequence + offset, length=length + offset, finished=finished
        )
        finished = isinstance(record, RunFinished)


def check_append(
    run_id: str, record: Record, *, sequence: int, length: int, finished: bool
) -> None:
    """Raise the error this append must fail with, or return if it may be written."""
    if isinstance(record, RunStarted) and length > 0:
        raise RunAlreadyExists(f"run {run_id!r} already has a log ({_records(length)})")
    if finished:
        raise RunAlreadyFinished(f"run {run_id!r} is finished; nothing may be appended")
    if sequence != length:
        raise RunConflict(
            f"run {run_id!r}: append at sequence {sequence} but the log has {_records(length)} "
            "(another process is driving this run)"
        )
    if length == 0 and not isinstance(record, RunStarted):
        raise RunConflict(f"run {run_id!r}: the first record must be RunStarted, got {record.kind}")


def decode_log(run_id: str, rows: Iterable[Sequence[Any]], *, where: str) -> RunLog:
    """The log held in ``rows`` of ``(sequence, kind, body)`` in sequence order.

    ``where`` names the store (a file, a server) in every error. A missing sequence, a body that
    does not decode, or a body indexed under another kind is ``StoreCorrupted``; a body of an
    unknown major version stays a ``SchemaVersionError`` (a newer polyloop wrote it).
    """
    records: list[Record] = []
    for expected, (sequence, kind, body) in enumerate(rows):
        at = f"{where}: run {run_id!r}, sequence {expected}"
        if sequence != expected:
            raise StoreCorrupted(
                f"{at}: record missing, a gap in the log (next stored is {sequence!r})"
            )
        try:
            record = record_from_json(body)  # a body of another type is a ValueError too
        except SchemaVersionError as exc:
            raise SchemaVersionError(f"{at}: {exc}") from None
        # RecursionError: JSON nested past the parser's limit is damage too, not a crash.
        except (TypeError, ValueError, RecursionError) as exc:
            raise StoreCorrupted(f"{at}: unreadable record ({exc})") from None
        if record.kind != kind:
            raise StoreCorrupted(f"{at}: record body is a {record.kind} but is indexed as {kind!r}")
        records.append(record)
    return RunLog(tuple(records))


def _records(count: int) -> str:
    return f"{count} record{'' if count == 1 else 's'}"
