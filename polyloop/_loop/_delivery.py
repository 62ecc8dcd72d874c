"""How the loop delivers events: best effort, failures counted, the first one logged.

One reason to change: what a run does when its event sink fails. A delivery failure never
interrupts the run (SPEC §2); ``CancelledError`` passes, except on the cancellation path, where
nothing the sink does may replace the ``CancelledError`` being handled.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from polyloop.ports import EventSink
from polyloop.types import Event, Record

__all__ = ["Delivery"]

_log = logging.getLogger("polyloop")


class Delivery:
    """One run's events: one per committed record, in the log's order."""

    def __init__(self, run_id: str, sink: EventSink) -> None:
        self.run_id = run_id
        self.sink = sink
        self.failures = 0

    def events(self, sequence: int, records: Sequence[Record]) -> list[Event]:
        """The events of ``records``, committed from ``sequence`` on."""
        return [
            Event(run_id=self.run_id, sequence=sequence + n, record=r)
            for n, r in enumerate(records)
        ]

    async def emit(self, event: Event) -> None:
        try:
            await self.sink.emit(event)
        except Exception:  # a delivery failure never interrupts the run; CancelledError passes
            self._failed(event)

    async def emit_best_effort(self, event: Event) -> None:
        """On the cancellation path: nothing the sink does may replace the CancelledError."""
        try:
            await self.sink.emit(event)
        except BaseException:
            self._failed(event)

    def _failed(self, event: Event) -> None:
        """Count a failed delivery; the first of a run is logged with its exception."""
        if self.failures == 0:
            _log.warning(
                "run %s: delivering event %d (%s) failed; later failures of this run are "
                "only counted (RunResult.event_delivery_failures)",
                self.run_id,
                event.sequence,
                event.record.kind,
                exc_info=True,
            )
        self.failures += 1
