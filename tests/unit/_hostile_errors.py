"""Exceptions as hostile as code a model wrote can raise: one whose ``__str__`` (and
``__repr__``) raise, and one whose message is huge and carries control characters. Every place
that shows an exception is tested with both."""

from __future__ import annotations

from polyloop._base._exception_text import DEFAULT_LIMIT

#: What ``exception_text`` shows for a message that cannot be rendered.
UNRENDERABLE = "<the exception's message could not be rendered>"
#: A message far over the cap, with a terminal escape and a NUL in it.
HUGE_MESSAGE = "\x1b[31m" + "x" * 100_000 + "\x00"
#: Longer than any text ``exception_text`` gives with the default cap (the cut says how much).
CAPPED = DEFAULT_LIMIT + 60


class Unprintable(Exception):
    """An exception that cannot be put into words: its ``__str__`` and ``__repr__`` raise."""

    def __str__(self) -> str:
        raise RuntimeError("__str__ raised")

    def __repr__(self) -> str:
        raise RuntimeError("__repr__ raised")


class UnprintableTimeout(Unprintable, TimeoutError):
    """One a model client may raise: the loop turns a model's timeout into llm_error."""


def unprintable_text(error: Unprintable) -> str:
    return f"{type(error).__name__}: {UNRENDERABLE}"


def is_capped_and_clean(text: str, around: int = 0) -> bool:
    """Cut to the cap (plus ``around`` characters of the text it stands in), and no control
    character left raw."""
    capped = len(text) <= CAPPED + around and "… [" in text
    return capped and "\x1b" not in text and "\x00" not in text
