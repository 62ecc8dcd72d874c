"""Canonical JSON: the one JSON encoding polyloop uses for records, ``tool_args_json``, tool
descriptions and hashes (sorted keys, no spaces, non-ASCII kept, ``NaN``/``Infinity`` refused).

A leaf module (standard library only): :mod:`polyloop.types` imports :mod:`polyloop.tools`, and
both need the same encoding.
"""

from __future__ import annotations

import json

__all__ = ["canonical_json"]


def canonical_json(value: object) -> str:
    """The one JSON encoding polyloop uses for records, ``tool_args_json`` and hashes."""
    return json.dumps(
        value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False
    )
