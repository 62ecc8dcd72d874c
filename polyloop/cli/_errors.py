"""How the ``polyloop`` command says an error: one line on stderr, ``polyloop: error: ...``,
the message with its white space folded (its type's name when it has none), shown by the rule
of :mod:`polyloop._base._exception_text` (control characters escaped, never raising); and which
exceptions are a database driver's (a failure at run time, never a crash trace)."""

from __future__ import annotations

import sys

from polyloop._base._exception_text import exception_message

__all__ = ["is_driver_error", "one_line", "refuse"]


def one_line(exc: BaseException) -> str:
    """The error's message on one line (its type's name when it has none)."""
    return " ".join(exception_message(exc, limit=None).split()) or type(exc).__name__


def refuse(exc: BaseException, status: int) -> int:
    """Say ``exc`` on stderr as the command's one error line; return the exit ``status``."""
    text = f"polyloop: error: {one_line(exc)}\n"
    sys.stderr.write(text.encode("utf-8", "backslashreplace").decode("utf-8"))
    return status


def is_driver_error(exc: BaseException) -> bool:
    """Whether ``exc`` is a database driver's error (psycopg's, when it is loaded)."""
    psycopg = sys.modules.get("psycopg")
    return psycopg is not None and isinstance(exc, psycopg.Error)
