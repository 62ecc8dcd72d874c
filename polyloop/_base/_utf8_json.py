"""JSON text that is always valid UTF-8: the one home of the rule for a lone surrogate.

Python strings and JSON accept a lone surrogate (``"\\ud800"``, or what
``bytes.decode(errors="surrogateescape")`` makes of a stray byte); UTF-8 cannot encode one. JSON
written with ``ensure_ascii=False`` keeps it raw, so a store that encodes the text as UTF-8
(SQLite, PostgreSQL, a file) fails on it. Written as its JSON escape ``\\udXXX`` instead, the
text is valid UTF-8 and decodes to the identical string; everything else stays as it was.

A leaf module (standard library only) so the record codec, ``parameters_hash`` and the JSON-lines
sink share it without importing each other.
"""

from __future__ import annotations

import re

__all__ = ["has_surrogate", "utf8_json", "utf8_text"]

_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def utf8_json(text: str) -> str:
    """``text`` — JSON written with ``ensure_ascii=False`` — with every surrogate code point
    written as its JSON escape; ``text`` itself whenever it is valid UTF-8 already.

    Only a text that fails the fast UTF-8 encode pays for the escape (ASCII is checked in
    constant time). A surrogate in JSON text can only sit inside a string, where its escape
    means the same code point. A high surrogate directly followed by a low one is a UTF-16 pair:
    JSON reads its two escapes as the one character they spell (RFC 8259 §7), as every JSON
    decoder does; every lone surrogate reads back as itself.
    """
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub(_escape, text)
    return text


def has_surrogate(text: str) -> bool:
    """Whether ``text`` holds a surrogate code point, which UTF-8 cannot encode."""
    return not text.isascii() and _SURROGATE.search(text) is not None


def utf8_text(text: str) -> str:
    """``text`` to show or write as UTF-8 (a report, a terminal line): every surrogate code
    point written as ``\\udXXX``, as :func:`utf8_json` writes it; ``text`` itself otherwise.

    For text a person reads, not for JSON: the escape is not undone when it is read back.
    """
    return _SURROGATE.sub(_escape, text) if has_surrogate(text) else text
