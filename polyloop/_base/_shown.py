"""How a value is quoted in a message to a model or a user: the one home of the shortening rule.

A value in a message is untrusted input (a tool name the model made up, a field read from a
file): it is quoted with ``repr`` — so control characters and lone surrogates are escaped — and
cut to ``limit`` characters with a count of how long it was. A ``str`` is cut before it is
quoted, so the quote is closed and the count is the string's own length.
"""

from __future__ import annotations

__all__ = ["shown"]


def shown(value: object, limit: int) -> str:
    """``repr(value)``, at most about ``limit`` characters, saying how long the whole was."""
    if isinstance(value, str):
        if len(value) <= limit:
            return repr(value)
        return f"{value[:limit]!r}… ({len(value)} characters)"
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters)"
