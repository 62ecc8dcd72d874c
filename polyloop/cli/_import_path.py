"""``MODULE:ATTR`` paths on the command line: the rule lives in :mod:`polyloop._base._import_path`
(the kit reads its store factories by it too)."""

from __future__ import annotations

from polyloop._base._import_path import BadImportPath, load

__all__ = ["BadImportPath", "load"]
