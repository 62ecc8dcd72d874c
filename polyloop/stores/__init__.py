"""Bundled run stores."""

from __future__ import annotations

from polyloop.stores._memory import MemoryStore

__all__ = ["MemoryStore"]
