"""The one rule for a timeout argument (``timeout_s``, ``read_timeout_s``, ``deadline_s``…).

A timeout is a finite number of seconds greater than 0 (an ``int`` or a ``float``, never a
``bool``), or ``None`` for no limit. ``inf`` is refused rather than read as "no limit": one way
to say it, and the same error text from every executor.
"""

from __future__ import annotations

import math

__all__ = ["checked_timeout_s", "shown_timeout"]


def checked_timeout_s(name: str, value: object) -> float | None:
    """``value`` as a ``float`` (``None`` stays ``None``), else ``ValueError`` naming ``name``."""
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not value > 0
    ):
        raise ValueError(f"{name} must be a finite number > 0 or None (no limit), got {value!r}")
    return float(value)


def shown_timeout(value: float | None) -> str:
    """A checked timeout as it appears in a message or a ``repr``: ``30`` or ``none``."""
    return "none" if value is None else f"{value:g}"
