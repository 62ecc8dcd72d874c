"""A str→str mapping given to an executor (a child's ``env``, an MCP server's ``headers``):
the one check of its shape, before each option checks its own names and values."""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["checked_str_mapping"]


def checked_str_mapping(option: str, value: object) -> dict[str, str] | None:
    """A copy of ``value`` (``None`` stays ``None``); ``TypeError`` naming ``option`` unless it
    is a mapping whose keys and values are all ``str``."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise TypeError(
            f"{option} must be a mapping of str to str or None, got {type(value).__name__}"
        )
    for key, text in value.items():
        if not isinstance(key, str) or not isinstance(text, str):
            raise TypeError(f"{option} must map str to str, got {key!r}: {type(text).__name__}")
    return dict(value)
