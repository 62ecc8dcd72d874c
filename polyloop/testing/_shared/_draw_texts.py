"""Text, count, timestamp and run-id strategies (public through :mod:`polyloop.testing.strategies`),
and the wild reply text parsers meet."""

from __future__ import annotations

import functools
import re
from datetime import UTC, datetime

from hypothesis import strategies as st

from polyloop._base._run_id import MAX_RUN_ID, RUN_ID_FIRST, RUN_ID_REST
from polyloop.testing._shared._boundaries import (
    BOUNDARY_COUNTS,
    BOUNDARY_NUMBER_TEXTS,
    BOUNDARY_TEXTS,
    BOUNDARY_TIMES,
)

MAX_INT = 2**63 - 1

#: Hand-picked strings that have broken parsers and stores before. ``texts()`` draws from these
#: often, so a bounded run meets each of them.
NASTY_TEXTS: tuple[str, ...] = (
    "",
    " ",
    "\x00",
    "a\x00b",
    "\r\n\t\x0b\x0c",
    "\x1b[31mred\x1b[0m",
    "\x7f\x80\x9f",
    "\u200b\u200d\ufeff",
    "\u202eevil\u202c",
    "\U0001f600\U0001f9ea",
    "\U0001d518\U0001d52b\U0001d526",
    "\U0010fffd",
    "null",
    "None",
    "0",
    '{"tool": "x", "args": {}}',
    "```\ncode\n```",
    "\\",
    '"',
    "'; DROP TABLE runs; --",
    "x" * 10_000,
)

_characters = st.characters(codec="utf-8")  # all of Unicode except lone surrogates


#: The default size of a drawn short text.
SHORT_TEXT = 40


def _has_surrogate(text: str) -> bool:
    return any("\ud800" <= char <= "\udfff" for char in text)


#: The boundary catalogue's texts and numbers written as text (``BOUNDARY_TEXTS``,
#: ``BOUNDARY_NUMBER_TEXTS``) that :func:`texts` draws: all but the lone surrogates and the
#: integers of thousands of digits (a short text stays short; the probes that need those sweep
#: them explicitly).
_BOUNDARY_TEXTS = tuple(
    text
    for text in BOUNDARY_TEXTS + BOUNDARY_NUMBER_TEXTS
    if not _has_surrogate(text) and len(text) <= SHORT_TEXT
)


def texts(*, max_size: int = SHORT_TEXT) -> st.SearchStrategy[str]:
    """Any text: the nasty strings above, the boundary catalogue's texts (no lone surrogate),
    arbitrary Unicode (incl. control and astral chars)."""
    return st.one_of(
        st.sampled_from(NASTY_TEXTS),
        st.sampled_from(_BOUNDARY_TEXTS),
        st.text(_characters, max_size=max_size),
        # A small alphabet of the characters real code breaks on, so short texts mix them:
        # controls, line separators, an astral character and letters whose case mapping
        # changes the length (an offset found in the folded text is wrong in the original).
        st.text(st.sampled_from(_EDGE_CHARACTERS), max_size=8),
    )


_EDGE_CHARACTERS = "\x00\x01\x1b\r\n\t\u2028\u0085 a\U0001f600\u00df\u0130\ufb01"


#: Hand-picked strings a record or an event field carries that :data:`NASTY_TEXTS` leaves out:
#: lone surrogates (alone, between letters, after a backslash or a quote, next to an astral
#: character), CJK, emoji sequences, combining marks, astral planes and control characters.
FIELD_TEXTS: tuple[str, ...] = (
    "\ud800",
    "\udfff",
    "\udcff",
    "bad bytes: \udc80\udcfe",
    "a\udbffb\udc00c",
    "\\\ud800",
    '"\udcff"',
    "\U0001f600\udc00",
    "\u4e2d\u6587\u5b57\u7b26 \u65e5\u672c\u8a9e \ud55c\uad6d\uc5b4",
    "e\u0301\u0327 A\u030a \u0915\u094d\u0937",
    "\U0001f469\u200d\U0001f469\u200d\U0001f467 \U0001f1eb\U0001f1f7 \u270c\ufe0f",
    "\U00020000\U0002a6d6\U000e0001",
    "\x00\x01\x1b\x7f\x85\u2028\u2029\r\n\r\x0b",
)

_SURROGATES = st.integers(min_value=0xD800, max_value=0xDFFF).map(chr)
_WIDE_CHARACTERS = st.one_of(
    _characters,
    _SURROGATES,
    st.sampled_from("\u4e2d\u6587\u0301\u0327\u200d\ufe0f\U0001f600\U00020000\x00\x1b\r\n"),
)
# A high surrogate right before a low one is a UTF-16 pair, not two lone surrogates: JSON reads
# the pair's escapes as the one character they spell, so no store could give both back.
_PAIR = re.compile("([\ud800-\udbff])(?=[\udc00-\udfff])")


def _unpaired(text: str) -> str:
    return _PAIR.sub("\\1 ", text)


def record_texts(*, max_size: int = SHORT_TEXT) -> st.SearchStrategy[str]:
    """Text as a record's or an event's field may hold: everything :func:`texts` draws, plus
    lone surrogates, CJK, emoji sequences, combining marks, astral characters and control
    characters (:data:`FIELD_TEXTS` and arbitrary mixes). Never a high surrogate directly before
    a low one: that is a UTF-16 pair, which JSON reads back as the character it spells."""
    return _record_texts(max_size)


@functools.cache
def _record_texts(max_size: int) -> st.SearchStrategy[str]:
    # One strategy object per size: record strategies ask for it many times, and Hypothesis
    # validates each new strategy object on its first draw.
    return st.one_of(
        texts(max_size=max_size),
        st.sampled_from(FIELD_TEXTS),
        st.sampled_from(BOUNDARY_TEXTS),
        st.text(_WIDE_CHARACTERS, max_size=max_size).map(_unpaired),
    )


#: The largest text :func:`long_texts` builds by default: 1 MiB of UTF-8.
MAX_LONG_TEXT_BYTES = 1 << 20


def _repeated(pieces: list[str], target: int) -> str:
    piece = _unpaired("".join(pieces)) + "\u00b7"  # a separator: never a UTF-16 pair
    size = len(piece.encode("utf-8", "surrogatepass"))
    if size <= target:
        return piece * (target // size)
    kept, used = [], 0  # a piece longer than the bound: as much of it as fits
    for char in piece:
        used += len(char.encode("utf-8", "surrogatepass"))
        if used > target:
            break
        kept.append(char)
    return "".join(kept)


def long_texts(*, max_bytes: int = MAX_LONG_TEXT_BYTES) -> st.SearchStrategy[str]:
    """Long text of up to ``max_bytes`` UTF-8 bytes (default 1 MiB), well past 64 KiB often:
    drawn pieces (:func:`record_texts`: non-ASCII, lone surrogates, control characters)
    _repeated, since Hypothesis caps the size of one draw."""
    sizes = st.one_of(
        st.just(min(64 * 1024 + 1, max_bytes)),  # just past 64 KiB: a common message limit
        st.just(max_bytes),
        st.integers(min_value=1, max_value=max_bytes),
    )
    pieces = st.lists(record_texts(max_size=12).filter(bool), min_size=1, max_size=4)
    return st.builds(_repeated, pieces, sizes)


def non_empty_texts(*, max_size: int = SHORT_TEXT) -> st.SearchStrategy[str]:
    """Like :func:`texts` but never ``""``."""
    return texts(max_size=max_size).filter(bool)


def optional_texts(*, max_size: int = SHORT_TEXT) -> st.SearchStrategy[str | None]:
    """``None``, ``""`` and any text — the pair a lossy store confuses."""
    return st.one_of(st.none(), st.just(""), texts(max_size=max_size))


def counts() -> st.SearchStrategy[int]:
    """Non-negative ints: 0 and 1 often, the boundary catalogue's counts (``BOUNDARY_COUNTS``:
    around 64, 100, 128, 256, 500, 1 000, 1 024, 4 096, 10 000), large values (2**31, 2**53 + 1,
    2**63 - 1) too."""
    return st.one_of(
        st.sampled_from((0, 1, 2**31 - 1, 2**31, 2**53 + 1, MAX_INT)),
        st.sampled_from(BOUNDARY_COUNTS),
        st.integers(min_value=0, max_value=MAX_INT),
    )


def _written(instant: datetime) -> str:
    return instant.isoformat(timespec="milliseconds").replace("+00:00", "Z")


#: The boundary catalogue's instants (``BOUNDARY_TIMES``) from 1970 to 2999, in UTC: either
#: side of daylight-saving changes, a leap day, 2038-01-19 03:14:07 and :08, the epoch.
_BOUNDARY_TIMESTAMPS = tuple(
    _written(instant.astimezone(UTC))
    for instant in BOUNDARY_TIMES
    if datetime(1970, 1, 1, tzinfo=UTC) <= instant < datetime(3000, 1, 1, tzinfo=UTC)
)


def timestamps() -> st.SearchStrategy[str]:
    """UTC ISO-8601 with milliseconds and ``Z``, as the library writes them: the boundary
    catalogue's instants in 1970 … 2999 often, any other too."""
    drawn = st.datetimes(
        min_value=datetime(1970, 1, 1), max_value=datetime(2999, 12, 31), timezones=st.none()
    ).map(lambda d: _written(d.replace(tzinfo=UTC)))
    return st.one_of(st.sampled_from(_BOUNDARY_TIMESTAMPS), drawn)


def run_ids() -> st.SearchStrategy[str]:
    """Valid run ids: ``[A-Za-z0-9][A-Za-z0-9._-]{0,127}``, including the 1- and 128-char edges."""
    return st.builds(
        lambda head, tail: head + tail,
        st.sampled_from(RUN_ID_FIRST),
        st.one_of(
            st.text(st.sampled_from(RUN_ID_REST), max_size=20),
            st.text(st.sampled_from(RUN_ID_REST), min_size=MAX_RUN_ID - 1, max_size=MAX_RUN_ID - 1),
        ),
    )


# --------------------------------------------------------------------------- parser inputs
# What a model really sends a parser: any str (lone surrogates included — a reply decoded with
# errors="surrogateescape" holds them), long, multilingual, with every kind of line ending and
# several tool calls in one reply.

#: Every line ending a reply can mix: Unix, Windows, old Mac, the Unicode line and paragraph
#: separators, NEL, vertical tab, form feed and the file separator (``str.splitlines`` splits on
#: each; ``str.split("\n")`` only on the first two).
LINE_ENDINGS: tuple[str, ...] = (
    "\n",
    "\r\n",
    "\r",
    "\u2028",
    "\u2029",
    "\x85",
    "\x0b",
    "\x0c",
    "\x1c",
)

_WILD_PIECES: tuple[str, ...] = (
    "日本語",  # CJK
    "中文テキスト",
    "한국어",
    "\U0001f600",  # emoji: one, a ZWJ family, a flag, a heart with its variation selector
    "\U0001f468\u200d\U0001f469\u200d\U0001f467",
    "\U0001f1fa\U0001f1f8",
    "\u2764\ufe0f",
    "e\u0301",  # combining marks: on a letter, stacked, alone with nothing to combine with
    "a\u0308\u0323",
    "\u0301",
    "\U0001d518",  # astral: mathematical letter, CJK extension B, plane-16 private use, tag
    "\U00020000",
    "\U0010fffd",
    "\U000e0001",
    "\x00",  # control characters: NUL, bell, an escape sequence, DEL, a C1 control
    "\x07",
    "\x1b[0m",
    "\x7f",
    "\x9b",
    "\ud800",  # lone surrogates: high, low, and a byte as surrogateescape decodes it
    "\udfff",
    "\udc80",
    "\ufeff",  # byte-order mark, zero-width space, right-to-left override
    "\u200b",
    "\u202e",
)

_WILD_PIECE = st.one_of(
    st.sampled_from(_WILD_PIECES),
    st.sampled_from(LINE_ENDINGS),
    st.characters(),  # any code point, lone surrogates included
    st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF),
    st.characters(categories=["Mn", "Me"]),
    st.characters(min_codepoint=0x10000),
    st.characters(categories=["Cc"]),
)

#: Openers a recursive scanner descends into; a long run of one nests deeper than any stack.
_OPENERS: tuple[str, ...] = ("[", "{", "(", '{"a":', '{"a":[', "<a>", "```\n", "\\", '"', "> ")


def wild_texts(*, max_size: int = SHORT_TEXT) -> st.SearchStrategy[str]:
    """Any ``str`` a reply can hold: everything :func:`texts` draws, plus text built from up to
    ``max_size`` pieces — CJK, emoji sequences, combining marks, astral characters, control
    characters, mixed :data:`LINE_ENDINGS` and lone surrogates (``"\\ud800"``), which
    ``str.encode("utf-8")`` refuses."""
    return st.one_of(
        texts(max_size=max_size),
        st.lists(_WILD_PIECE, max_size=max_size).map("".join),
    )


def _with_a_surrogate() -> st.SearchStrategy[str]:
    """Wild text that holds at least one lone surrogate (drawn on purpose in every field: left
    to chance, a bounded run rarely puts one in a short field)."""
    return st.builds(
        lambda head, surrogate, tail: head + surrogate + tail,
        wild_texts(max_size=6),
        st.sampled_from(("\ud800", "\udbff", "\udc80", "\udfff")),
        wild_texts(max_size=6),
    )


def _wild_field() -> st.SearchStrategy[str]:
    return st.one_of(wild_texts(), _with_a_surrogate())


def _repeated_joined(pieces: list[str], separator: str, size: int) -> str:
    unit = separator.join(pieces) + separator
    return (unit * (size // len(unit) + 1))[:size]


def long_reply_texts(*, min_size: int = 70_000) -> st.SearchStrategy[str]:
    """Text of ``min_size`` to ``2 * min_size`` characters (by default well past 64 KiB, and
    two to four times that in UTF-8 bytes when it is not ASCII).

    Hypothesis caps how much one draw can generate, so the text is built from a few drawn
    pieces (:func:`wild_texts` or an opener such as ``[`` or ``{"a":``) _repeated, joined by a
    drawn line ending or by nothing — which also gives many short lines, and runs of one opener
    nested deeper than Python's recursion limit.
    """
    if min_size < 1:
        raise ValueError("long_reply_texts(min_size=...) must be at least 1")
    piece = st.one_of(wild_texts(max_size=12).filter(bool), st.sampled_from(_OPENERS))
    return st.builds(
        _repeated_joined,
        st.lists(piece, min_size=1, max_size=6),
        st.sampled_from(("", *LINE_ENDINGS)),
        st.integers(min_value=min_size, max_value=2 * min_size),
    )
