"""Implementations that break only on a value of the kit's boundary catalogue (issue 37 §1),
each beside its correct twin.

Every breaker here kept every promise of the kit before its probes swept the catalogue (checked
on the unchanged kit by ``tests/kit/test_matrix_boundaries.py``'s first run): the replies it
parsed carried numbers of at most a few digits, nesting only past the recursion limit and
unclosed, and prose of characters whose case mapping keeps their length; no store it probed
held more than a handful of runs, and no batch passed 2 KiB.

Parsers read the format of :mod:`tests.kit.broken_parser_axes` (one JSON object
``{"tool": ..., "args": {...}}`` anywhere in the reply, or ``{"final": ...}``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from polyloop.stores import MemoryStore
from polyloop.types import Record, RunFinished, RunStarted, canonical_json
from tests.kit.broken_inline import DeclinesEveryOtherCommit
from tests.kit.broken_parser_axes import JsonCallParser

__all__ = [
    "BatchesOver4KiBBackwards",
    "CatchesEveryValueError",
    "CatchesOnlyDecodeErrors",
    "DeclinesBatchesOver4KiB",
    "DropsARecordPast4KiB",
    "FindsTheCallOnFoldedText",
    "FindsTheCallOnOriginalText",
    "LimitsDepthLoudly",
    "LimitsDepthQuietly",
    "ListsEveryRun",
    "ListsOnePage",
    "RefusesConstantsAndDepthLoudly",
    "RefusesConstantsAndDepthQuietly",
    "StrictJsonError",
    "WritesBigBatchesInOne",
]


# ------------------------------------------------------------------------------- parsers


class CatchesOnlyDecodeErrors(JsonCallParser):
    """Catches ``json.JSONDecodeError`` (and ``RecursionError``) only: the ``ValueError`` that
    ``int()`` raises inside ``json.loads`` for an integer of more than 4 300 digits escapes."""

    def _objects(self, text: str) -> list[dict[str, Any]]:
        span = self._span(text)
        if span is None:
            return []
        try:
            value = json.loads(span)
        except (json.JSONDecodeError, RecursionError):
            return []
        return [value] if isinstance(value, dict) else []


class CatchesEveryValueError(JsonCallParser):
    """The twin: ``ValueError`` (``JSONDecodeError`` is one) is an unparsable reply."""


class StrictJsonError(Exception):
    """What a strict reader raises on JSON it refuses (not a ``ValueError``)."""


def _refuse_constant(name: str) -> float:
    raise StrictJsonError(f"{name} is not JSON")


def _depth(value: Any) -> int:
    """How deep lists and objects nest in ``value`` (without recursion)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return deepest


class _StrictJson(JsonCallParser):
    """Strict JSON, as a schema-validating framework reads it: (``constants``) no
    ``NaN``/``Infinity``, and no nesting past 100 levels. ``loud``: its own
    :class:`StrictJsonError` escapes, since it catches only the decoder's errors."""

    loud = True
    constants = True

    def _strict(self, span: str) -> Any:
        hook = _refuse_constant if self.constants else None
        value = json.loads(span, parse_constant=hook)
        if _depth(value) > 100:
            raise StrictJsonError("arguments nest deeper than 100 levels")
        return value

    def _objects(self, text: str) -> list[dict[str, Any]]:
        span = self._span(text)
        if span is None:
            return []
        caught = (ValueError, RecursionError) if self.loud else (Exception,)
        try:
            value = self._strict(span)
        except caught:
            return []
        return [value] if isinstance(value, dict) else []


class RefusesConstantsAndDepthLoudly(_StrictJson):
    """Raises its own error on ``NaN``/``Infinity`` and on nesting past 100 levels."""


class RefusesConstantsAndDepthQuietly(_StrictJson):
    """The twin: the same limits, met with an ``InvalidDecision``."""

    loud = False


class LimitsDepthLoudly(_StrictJson):
    """Reads ``NaN`` as Python does, and raises its own error past 100 levels only (nesting
    the kit drew before sat only past the recursion limit, unclosed)."""

    constants = False


class LimitsDepthQuietly(_StrictJson):
    """The twin: an ``InvalidDecision`` past 100 levels."""

    constants = False
    loud = False


_CALL = re.compile(r'\{\s*"(?:tool|final)"')


class FindsTheCallOnFoldedText(JsonCallParser):
    """Finds ``{"tool"`` case-insensitively by searching ``text.casefold()``, and cuts the
    *original* text at that offset: each ``ß``, ``ﬁ`` or ``İ`` before the call moves the cut."""

    def _span(self, text: str) -> str | None:
        found, end = _CALL.search(text.casefold()), text.rfind("}")
        return text[found.start() : end + 1] if found and found.start() < end else None


class FindsTheCallOnOriginalText(JsonCallParser):
    """The twin: the same search with ``re.IGNORECASE`` on the text itself."""

    def _span(self, text: str) -> str | None:
        found, end = re.search(_CALL.pattern, text, re.IGNORECASE), text.rfind("}")
        return text[found.start() : end + 1] if found and found.start() < end else None


# -------------------------------------------------------------------------------- stores


class ListsOnePage(MemoryStore):
    """``run_ids()`` answers with the first page of its backend's listing: 100 runs."""

    async def run_ids(self) -> list[str]:
        return (await super().run_ids())[:100]


class ListsEveryRun(MemoryStore):
    """The twin: it reads every page."""

    async def run_ids(self) -> list[str]:
        found: list[str] = []
        every = await super().run_ids()
        for start in range(0, len(every), 100):
            found += every[start : start + 100]
        return found


def _size(records: Sequence[Record]) -> int:
    return sum(len(canonical_json(record.to_json()).encode("utf-8")) for record in records)


def _fenced(records: Sequence[Record]) -> bool:
    return any(isinstance(r, RunStarted | RunFinished) for r in records)


class BatchesOver4KiBBackwards(DeclinesEveryOtherCommit):
    """``commit_now`` streams a batch over 4 KiB through a buffer that hands its records back
    newest first (when no start or finish in it pins the order)."""

    def commit_now(self, run_id: str, records: Sequence[Record], *, sequence: int) -> bool:
        if _size(records) > 4096 and not _fenced(records):
            self.calls += 1
            return self.inner.commit_now(run_id, tuple(reversed(records)), sequence=sequence)
        return super().commit_now(run_id, records, sequence=sequence)


class DeclinesBatchesOver4KiB(DeclinesEveryOtherCommit):
    """The twin: a batch over 4 KiB is declined, with nothing written (``append_many`` then
    commits it)."""

    def commit_now(self, run_id: str, records: Sequence[Record], *, sequence: int) -> bool:
        if _size(records) > 4096:
            return False
        return super().commit_now(run_id, records, sequence=sequence)


class DropsARecordPast4KiB(MemoryStore):
    """``append_many`` writes a batch over 4 KiB in chunks, loses the second record on the way
    and writes the last one again (a retried chunk): the log keeps its length, not its
    records."""

    async def append_many(self, run_id: str, records: Sequence[Record], *, sequence: int) -> None:
        if _size(records) <= 4096 or _fenced(records) or len(records) < 3:
            await super().append_many(run_id, records, sequence=sequence)
            return
        kept = [*records[:1], *records[2:]]
        await super().append_many(run_id, kept, sequence=sequence)
        await super().append(run_id, records[-1], sequence=sequence + len(kept))


class WritesBigBatchesInOne(MemoryStore):
    """The twin: a batch over 4 KiB is written whole, every record in order (its own
    ``append_many``, so the loop awaits it as it does the breaker's)."""

    async def append_many(self, run_id: str, records: Sequence[Record], *, sequence: int) -> None:
        await super().append_many(run_id, records, sequence=sequence)
