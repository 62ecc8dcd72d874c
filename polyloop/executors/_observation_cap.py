"""The one definition of a valid ``max_observation_chars``, shared by the bundled executors."""

from __future__ import annotations

__all__ = ["checked_max_observation_chars"]


def checked_max_observation_chars(value: int | None) -> int | None:
    """``value`` if it is ``None`` or an int >= 1 (not a bool), else ``ValueError``."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"max_observation_chars must be an int >= 1 or None, got {value!r}")
    return value
