"""``"ExcType: message"``: how an exception is shown to a model, a user or a report.

One home for the rule, because an exception shown anywhere is untrusted input: its ``__str__``
may raise, return something that is not a ``str``, run for megabytes, or carry control
characters that would garble a terminal or a log line. The text is always a ``str`` of at most
``limit`` characters, never raises, and names the exception's type even when nothing else about
it can be rendered.
"""

from __future__ import annotations

__all__ = ["DEFAULT_LIMIT", "exception_message", "exception_text"]

#: Long enough for a traceback-free message a model can correct itself from; a huge one is cut.
DEFAULT_LIMIT = 2_000
_UNRENDERABLE = "<the exception's message could not be rendered>"
# C0 and C1 controls other than tab and newline, and DEL: shown escaped, never sent raw.
_CONTROLS = {
    code: f"\\x{code:02x}"
    for code in (*range(0x20), 0x7F, *range(0x80, 0xA0))
    if code not in (9, 10)
}


def exception_text(error: BaseException, *, limit: int | None = DEFAULT_LIMIT) -> str:
    """``"ExcType: message"`` — just ``"ExcType"`` when the message is empty.

    An exception group is shown by its first leaf (the one that usually names the cause). A
    ``__str__`` that raises or returns a non-``str`` gives a fixed placeholder; a message longer
    than ``limit`` characters is cut and says how much was cut (``limit=None``: never cut, for a
    caller that cuts the text itself and counts what it cut); control characters other than
    tab and newline are escaped.
    """
    error = _leaf(error)
    name = _type_name(error)
    message = _message(error)
    return _fitted(f"{name}: {message}" if message else name, limit)


def exception_message(error: BaseException, *, limit: int | None = DEFAULT_LIMIT) -> str:
    """The message alone (``""`` when it is empty), by the same rules as :func:`exception_text`:
    for an exception whose type is already said by the context it is shown in."""
    return _fitted(_message(_leaf(error)), limit)


def _leaf(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


def _fitted(text: str, limit: int | None) -> str:
    if limit is not None and len(text) > limit:
        cut = len(text) - limit
        text = f"{text[:limit]}… [{cut} more characters]"
    return text.translate(_CONTROLS)


def _type_name(error: BaseException) -> str:
    try:
        name = type(error).__name__
    except Exception:  # a metaclass with a broken __getattribute__: still name something
        return "Exception"
    return name if isinstance(name, str) else "Exception"


def _message(error: BaseException) -> str:
    try:
        message = str(error)
    except Exception:  # a broken __str__ must not turn a shown error into a crash
        return _UNRENDERABLE
    return message if isinstance(message, str) else _UNRENDERABLE
