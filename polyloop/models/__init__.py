"""Bundled model clients."""

from __future__ import annotations

from polyloop.models._scripted import ScriptedModel

__all__ = ["ScriptedModel"]
