"""Bundled event sinks."""

from __future__ import annotations

from polyloop.types import Event

__all__ = ["MemorySink", "NullSink"]


class NullSink:
    """Discards every event (the default when ``run()`` gets ``events=None``)."""

    async def emit(self, event: Event) -> None:
        return None


class MemorySink:
    """Keeps every event in ``events``, in emission order."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    async def emit(self, event: Event) -> None:
        self.events.append(event)

    def __repr__(self) -> str:
        return f"MemorySink(events={len(self.events)})"
