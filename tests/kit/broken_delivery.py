"""Sinks and stores written the way downstream teams write them, each beside its correct twin.

Issue #21, class 4 (the strategies were too tame) and class 7 (sinks were checked for not
raising, not for what they deliver). Every broken one here kept every promise of the kit before
those fixes; the twin beside it does the same job correctly and stays clean.

* Class 4, stores (``round_trips_every_record_kind``): a document store that re-encodes each
  record's JSON with ``errors="replace"``, and one that writes bytes with ``surrogateescape``
  (which covers only the low surrogates a stray byte makes). Twin: ``KeepsRecordText``.
* Class 4, sinks (``accepts_every_event_kind``): a shipper that encodes its line as strict
  UTF-8, and one that sends each event as one datagram (at most 64 KiB). Twin:
  ``EscapingLineShipper``.
* Class 7 (``delivers_each_event_exactly_once``, read back with :func:`read_shipped`): a batching
  log shipper (``BatchingShipper``, correct) and five ways teams get it wrong.

Imported by the pytester sandboxes through ``tests.kit.broken`` (re-exported there).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from polyloop.stores import MemoryStore
from polyloop.types import RECORD_TYPES, Event, Record, StepRecord, record_from_json

__all__ = [
    "BatchingShipper",
    "CapsLongFields",
    "DatagramShipper",
    "DropsEverything",
    "EscapingLineShipper",
    "KeepsRecordText",
    "ReordersIntColumns",
    "ReplacesUnencodableChars",
    "ReplacesUnencodableText",
    "ResendsLastBatchOnFlush",
    "StrictUtf8Shipper",
    "SurrogateEscapeBytes",
    "SwapsBufferAfterSend",
    "read_shipped",
]

# --------------------------------------------------------------------------- class 4: stores


def _reencoded(record: Record, errors: str) -> Record:
    """The record through a store's own JSON: dumped without ASCII escapes, encoded to bytes
    with ``errors``, decoded back as UTF-8."""
    text = json.dumps(json.loads(record.to_json()), ensure_ascii=False)
    return record_from_json(text.encode("utf-8", errors).decode("utf-8", errors))


class _DocumentStore(MemoryStore):
    """Keeps each record as the bytes its own JSON encoder writes (as a document database or a
    file-per-record store does); ``errors`` is how it encodes them."""

    errors = "strict"

    def commit_now(self, run_id: str, records: Sequence[Record], *, sequence: int) -> bool:
        stored = [_reencoded(record, self.errors) for record in records]
        return super().commit_now(run_id, stored, sequence=sequence)


class KeepsRecordText(MemoryStore):
    """Correct twin: keeps ``record.to_json()`` as its bytes, exactly as the codec gives it."""

    def commit_now(self, run_id: str, records: Sequence[Record], *, sequence: int) -> bool:
        stored = [record_from_json(record.to_json().encode("utf-8")) for record in records]
        return super().commit_now(run_id, stored, sequence=sequence)


class ReplacesUnencodableText(_DocumentStore):
    """``errors="replace"``: a lone surrogate comes back as ``?``, silently."""

    errors = "replace"


class SurrogateEscapeBytes(_DocumentStore):
    """``errors="surrogateescape"``: round-trips the low surrogates a stray byte makes
    (``\\udc80``–``\\udcff``), raises ``UnicodeEncodeError`` on every other one."""

    errors = "surrogateescape"


# --------------------------------------------------------------------------- class 4: sinks


class _LineShipper:
    """Ships each event as one JSON line to a collector (here: a list of bytes)."""

    max_message = 0  # 0: no limit

    def __init__(self) -> None:
        self.collector: list[bytes] = []

    def encode(self, event: Event) -> bytes:
        data = {"run_id": event.run_id, "sequence": event.sequence}
        data["record"] = json.loads(event.record.to_json())
        return json.dumps(data, ensure_ascii=True).encode("ascii")

    async def emit(self, event: Event) -> None:
        message = self.encode(event)
        if self.max_message and len(message) > self.max_message:
            raise ValueError(f"message too long ({len(message)} bytes)")  # EMSGSIZE
        await asyncio.sleep(0)  # the network
        self.collector.append(message)


class EscapingLineShipper(_LineShipper):
    """Correct twin: JSON with ASCII escapes, any size."""


class StrictUtf8Shipper(_LineShipper):
    """Writes its line as UTF-8 without ASCII escapes, strictly: a lone surrogate raises."""

    def encode(self, event: Event) -> bytes:
        data = {"run_id": event.run_id, "sequence": event.sequence}
        data["record"] = json.loads(event.record.to_json())
        return json.dumps(data, ensure_ascii=False).encode("utf-8")


class DatagramShipper(_LineShipper):
    """Sends each event as one UDP datagram: an event over 64 KiB cannot be sent."""

    max_message = 65_507


# --------------------------------------------------------------------------- class 7


_CLASSES = {cls.kind: cls for cls in RECORD_TYPES}
_FIELD_LIMIT = 32 * 1024


def _capped(value: Any) -> Any:
    if isinstance(value, str) and len(value) > _FIELD_LIMIT:
        return value[:_FIELD_LIMIT]
    if isinstance(value, dict):
        return {k: _capped(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_capped(v) for v in value]
    return value


class BatchingShipper:
    """A batching log shipper, correct: ``emit`` buffers an encoded line; a full buffer is taken
    (swapped for an empty one *before* the await) and sent as one batch; ``flush`` sends the
    rest. ``collector`` is what the far end received."""

    batch_size = 8

    def __init__(self) -> None:
        self._buffer: list[bytes] = []
        self.collector: list[bytes] = []

    def encode(self, event: Event) -> bytes:
        data = {"run_id": event.run_id, "sequence": event.sequence}
        data["record"] = json.loads(event.record.to_json())
        return json.dumps(data, ensure_ascii=True).encode("ascii")

    @staticmethod
    def decode(line: bytes) -> Event:
        data = json.loads(line)
        record = record_from_json(json.dumps(data["record"]))
        return Event(run_id=data["run_id"], sequence=data["sequence"], record=record)

    async def emit(self, event: Event) -> None:
        self._buffer.append(self.encode(event))
        if len(self._buffer) >= self.batch_size:
            await self._send_buffer()

    async def flush(self) -> None:
        await self._send_buffer()

    async def _send_buffer(self) -> None:
        batch, self._buffer = self._buffer, []
        await self._send(batch)

    async def _send(self, batch: list[bytes]) -> None:
        await asyncio.sleep(0)  # the network
        self.collector.extend(batch)


class DropsEverything:
    """Discards every event by design (a sink switched off), and says so in its samples."""

    async def emit(self, event: Event) -> None:
        return None


async def read_shipped(sink: BatchingShipper) -> list[Event]:
    """The ``EventSinkSamples.read_back`` of every shipper here: flush, decode what arrived."""
    await sink.flush()
    return [sink.decode(line) for line in sink.collector]


class SwapsBufferAfterSend(BatchingShipper):
    """Copies the buffer, awaits the send, then empties it: what other emits appended during
    the send (they saw a send in progress and left their line in the buffer for it) is thrown
    away. A flag, not a lock, and the swap on the wrong side of the await."""

    def __init__(self) -> None:
        super().__init__()
        self._sending = False

    async def _send_buffer(self) -> None:
        if self._sending:
            return  # the send in progress takes the buffer — or so it seems
        self._sending = True
        try:
            batch = list(self._buffer)
            await self._send(batch)
            self._buffer = []
        finally:
            self._sending = False


class ResendsLastBatchOnFlush(BatchingShipper):
    """Keeps the last batch for a retry and never clears it on success: ``flush`` sends it
    again with the rest."""

    def __init__(self) -> None:
        super().__init__()
        self._last: list[bytes] = []

    async def _send_buffer(self) -> None:
        batch, self._buffer = self._buffer, []
        self._last = batch
        await self._send(batch)

    async def flush(self) -> None:
        batch, self._buffer = self._buffer, []
        await self._send(self._last + batch)  # "in case the last one was lost"


class CapsLongFields(BatchingShipper):
    """Cuts every string over 32 KiB (as attribute-length limits and syslog relays do)."""

    def encode(self, event: Event) -> bytes:
        data = {"run_id": event.run_id, "sequence": event.sequence}
        data["record"] = _capped(json.loads(event.record.to_json()))
        return json.dumps(data, ensure_ascii=True).encode("ascii")


class ReplacesUnencodableChars(BatchingShipper):
    """Writes UTF-8 with ``errors="replace"``: a lone surrogate arrives as ``?``."""

    def encode(self, event: Event) -> bytes:
        data = {"run_id": event.run_id, "sequence": event.sequence}
        data["record"] = json.loads(event.record.to_json())
        return json.dumps(data, ensure_ascii=False).encode("utf-8", errors="replace")


class ReordersIntColumns(BatchingShipper):
    """A compact wire format: a record's int fields go out as one column list in key order,
    and the reader fills them back in the record class's declaration order."""

    def encode(self, event: Event) -> bytes:
        record = json.loads(event.record.to_json())
        for part in (record, record.get("step")):
            if isinstance(part, dict):
                names = sorted(k for k, v in part.items() if type(v) is int)
                part["_ints"] = [part.pop(k) for k in names]
        data = {"run_id": event.run_id, "sequence": event.sequence, "record": record}
        return json.dumps(data, ensure_ascii=True).encode("ascii")

    @staticmethod
    def decode(line: bytes) -> Event:
        data = json.loads(line)
        record = data["record"]
        cls = _CLASSES[record["kind"]]
        for part, owner in ((record, cls), (record.get("step"), StepRecord)):
            if isinstance(part, dict):
                ints = part.pop("_ints")
                declared = [f.name for f in dataclasses.fields(owner) if f.name not in part]
                part.update(zip(declared, ints, strict=False))
        rebuilt = record_from_json(json.dumps(record))
        return Event(run_id=data["run_id"], sequence=data["sequence"], record=rebuilt)
