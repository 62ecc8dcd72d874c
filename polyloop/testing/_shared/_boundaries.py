"""The catalogue of values real code breaks on (public through :mod:`polyloop.testing.strategies`).

One home for the edges every probe that feeds content, sizes or counts to an implementation
sweeps explicitly — numbers, text, structure, counts and sizes, times — and for the strategies
that lean on them while Hypothesis draws the rest. A bounded Hypothesis run may miss any single
value, so a probe that must meet one loops over the tuple (or gives it as an ``@example``); the
strategies only make each value likely.

Each value is here because some real parser, store or client broke on it: an integer of more
digits than ``int`` converts to ``str`` (``ValueError``, not ``json.JSONDecodeError``), ``NaN`` and
``Infinity`` (valid for Python's ``json``, refused by strict readers), nesting past a library's own
limit (often 100 or 512, long before the recursion limit), characters whose case mapping changes
the length (an offset found in ``text.lower()`` is wrong in ``text``), a page of 100 runs, a
buffer of 4 KiB, a clock around a daylight-saving change.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from hypothesis import strategies as st

__all__ = [
    "BOUNDARY_BYTE_SIZES",
    "BOUNDARY_COUNTS",
    "BOUNDARY_NUMBERS",
    "BOUNDARY_NUMBER_TEXTS",
    "BOUNDARY_TEXTS",
    "BOUNDARY_TIMES",
    "CASE_CHANGING_TEXT",
    "DUPLICATE_KEYS_JSON",
    "EMPTY_CONTAINERS",
    "INT_DIGIT_LIMIT",
    "boundary_byte_sizes",
    "boundary_counts",
    "boundary_numbers",
    "boundary_texts",
    "boundary_times",
    "digits",
    "many_keys",
    "nested_json",
    "nested_value",
    "nesting_depths",
]

# --------------------------------------------------------------------------------- numbers

#: The interpreter's int↔str digit limit (``sys.get_int_max_str_digits()``; 4 300 by default,
#: and 4 300 too when the limit is switched off, since other interpreters keep it).
INT_DIGIT_LIMIT: int = sys.get_int_max_str_digits() or 4300


def digits(count: int, first: str = "1") -> str:
    """A decimal integer written with exactly ``count`` digits (``first`` then nines)."""
    return first + "9" * (count - 1) if count > 0 else ""


#: Number values: zero and minus zero, ±1, the edges of 32-, 53- (the doubles' exact
#: integers), 63- and 64-bit integers, integers just under and over :data:`INT_DIGIT_LIMIT`
#: digits (``str()`` of the second raises ``ValueError``), NaN, ±Infinity, the largest and the
#: smallest positive double, ``True``/``False`` beside ``1``/``0``, and an int beside the float
#: of equal value.
BOUNDARY_NUMBERS: tuple[Any, ...] = (
    0,
    -0.0,
    0.0,
    1,
    -1,
    1.0,
    True,
    False,
    2**31 - 1,
    2**31,
    2**31 + 1,
    -(2**31) - 1,
    2**53 - 1,
    2**53,
    2**53 + 1,
    float(2**53),
    2**63 - 1,
    2**63,
    2**63 + 1,
    -(2**63),
    -(2**63) - 1,
    2**64,
    10 ** (INT_DIGIT_LIMIT - 1),  # INT_DIGIT_LIMIT digits: converts
    10**INT_DIGIT_LIMIT,  # one digit more: str() raises ValueError
    float("nan"),
    float("inf"),
    float("-inf"),
    1e308,
    -1e308,
    5e-324,
    1.7976931348623157e308,
    2.2250738585072014e-308,
)

#: Numbers as text a model or a file writes them: exponents, leading zeros, signs, ``NaN`` and
#: ``Infinity`` (Python's ``json`` reads them, strict readers refuse them), overflowing doubles,
#: integers just under and over :data:`INT_DIGIT_LIMIT` digits, numbers written as strings,
#: ``true``/``false`` beside ``1``/``0``.
BOUNDARY_NUMBER_TEXTS: tuple[str, ...] = (
    "0",
    "-0",
    "-0.0",
    "0.0",
    "1",
    "-1",
    "1.0",
    "1e5",
    "1E+308",
    "1e309",
    "-1e309",
    "5e-324",
    "1e-400",
    "007",
    "+1",
    ".5",
    "5.",
    "0x1F",
    "1_000",
    "NaN",
    "Infinity",
    "-Infinity",
    "true",
    "false",
    '"42"',
    '"1e5"',
    str(2**53 + 1),
    str(2**63),
    str(2**64),
    digits(INT_DIGIT_LIMIT),
    digits(INT_DIGIT_LIMIT + 1),
    "-" + digits(INT_DIGIT_LIMIT + 1),
    digits(INT_DIGIT_LIMIT + 1) + ".5",
)

# ------------------------------------------------------------------------------------ text

#: Characters whose case-folded, lower- or upper-cased form is longer than they are: an offset
#: found in ``text.casefold()`` (or ``text.lower()``, for ``İ``) points elsewhere in ``text``.
CASE_CHANGING_TEXT = "Straße ﬁle İstanbul ŉ ǰ ΐ"

#: Text values: empty and whitespace only, lone surrogates, case mapping that changes the
#: length, combining sequences and an NFC/NFD pair, zero-width and bidi marks, NUL and control
#: characters, every line ending, a BOM, astral characters, words other formats read as
#: keywords, dates and numbers, and format and template characters.
BOUNDARY_TEXTS: tuple[str, ...] = (
    "",
    " ",
    "\t \u00a0\u3000",
    "\ud800",
    "\udfff",
    "a\udc80b",
    "ß",
    "ﬁ",
    "İ",
    CASE_CHANGING_TEXT,
    "e\u0301",  # NFD of é
    "\u00e9",  # NFC of é
    "a\u0308\u0323\u0301",
    "\u0301",
    "\u200b\u200c\u200d\u2060",
    "\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069",
    "\x00",
    "a\x00b",
    "\x01\x07\x1b[0m\x7f\x85\x9b",
    "\r",
    "\n",
    "\r\n",
    "\n\r",
    "\u2028",
    "\u2029",
    "\ufeff",
    "\ufeffx",
    "\U0001f600",
    "\U0001f468\u200d\U0001f469\u200d\U0001f467",
    "\U0001d518\U00020000\U0010fffd",
    "yes",
    "no",
    "on",
    "off",
    "Y",
    "N",
    "null",
    "None",
    "~",
    "NaN",
    "true",
    "False",
    "2024-02-29",
    "12:30:00",
    "2038-01-19T03:14:08Z",
    "0x1F",
    "1_000",
    "1e5",
    "007",
    "{}",
    "{0}",
    "{name}",
    "{{",
    "%s",
    "%(x)s",
    "%",
    "$x",
    "${x}",
    "{{x}}",
    "\\",
    '"',
    "'",
)

# ------------------------------------------------------------------------------- structure

#: The nesting depths every library picks as its own limit (a ``json`` reader, a YAML loader,
#: a serializer): just under, at and over each.
_DEPTH_LIMITS = (32, 64, 100, 128, 256, 512, 1000)


def nesting_depths(*, recursion: bool = True) -> tuple[int, ...]:
    """Depths 1, and just under, at and over 32, 64, 100, 128, 256, 512 and 1 000 — and (with
    ``recursion=True``) over the interpreter's recursion limit as it is now."""
    found = {1}
    for limit in _DEPTH_LIMITS:
        found.update((limit - 1, limit, limit + 1))
    if recursion:
        limit = sys.getrecursionlimit()
        found.update((limit - 1, limit, limit + 1))
    return tuple(sorted(found))


def nested_json(depth: int, leaf: str = "1", *, kind: str = "list") -> str:
    """JSON text nested ``depth`` levels around ``leaf``: ``[[…1…]]`` (``kind="list"``) or
    ``{"a": {"a": … 1 …}}`` (``kind="object"``). Built without recursion."""
    if kind == "list":
        return "[" * depth + leaf + "]" * depth
    return '{"a": ' * depth + leaf + "}" * depth


def nested_value(depth: int, leaf: Any = 1) -> Any:
    """A list nested ``depth`` levels around ``leaf``, built without recursion."""
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


#: Containers with nothing, or one thing, in them; and an object written with a key twice.
EMPTY_CONTAINERS: tuple[Any, ...] = ({}, [], {"": None}, [[]], [{}], {"a": {}})
DUPLICATE_KEYS_JSON = '{"a": 1, "a": 2}'


def many_keys(count: int = 10_000) -> dict[str, int]:
    """An object with ``count`` keys (thousands, by default), in no sorted order."""
    return {f"k{(n * 7919) % count}": n for n in range(count)}


# ---------------------------------------------------------------------------- counts, sizes

_COUNT_EDGES = (64, 100, 128, 256, 500, 1000, 1024, 4096, 10_000)

#: Counts of runs, records, events, calls, lines: 0, 1, and just under, at and over 64, 100,
#: 128, 256, 500, 1 000, 1 024, 4 096 and 10 000 — a page, a buffer, a batch limit.
BOUNDARY_COUNTS: tuple[int, ...] = (
    0,
    1,
    *(n for edge in _COUNT_EDGES for n in (edge - 1, edge, edge + 1)),
)

_BYTE_EDGES = (2048, 4096, 8192, 16_384, 65_536, 1 << 20)

#: Byte sizes just under, at and over 2, 4, 8, 16 and 64 KiB and 1 MiB: pipe and socket
#: buffers, pages, line-reader limits, message caps.
BOUNDARY_BYTE_SIZES: tuple[int, ...] = tuple(
    n for edge in _BYTE_EDGES for n in (edge - 1, edge, edge + 1)
)

# ------------------------------------------------------------------------------------- time

_EAST_14 = timezone(timedelta(hours=14))
_WEST_14 = timezone(timedelta(hours=-14))
_NEW_YORK_WINTER = timezone(timedelta(hours=-5))
_NEW_YORK_SUMMER = timezone(timedelta(hours=-4))
_BERLIN_WINTER = timezone(timedelta(hours=1))
_BERLIN_SUMMER = timezone(timedelta(hours=2))

#: Aware instants: either side of daylight-saving changes (New York and Berlin, spring and
#: autumn — an autumn wall-clock time happens twice), a leap day, the last second of signed
#: 32-bit Unix time and the one after, the epoch and before it, the far past and future, and
#: offsets of ±14 h (the same instant on two dates).
BOUNDARY_TIMES: tuple[datetime, ...] = (
    datetime(2021, 3, 14, 1, 59, 59, 999_000, _NEW_YORK_WINTER),
    datetime(2021, 3, 14, 3, 0, 0, 0, _NEW_YORK_SUMMER),
    datetime(2021, 11, 7, 1, 30, 0, 0, _NEW_YORK_SUMMER),
    datetime(2021, 11, 7, 1, 30, 0, 0, _NEW_YORK_WINTER),
    datetime(2024, 3, 31, 1, 59, 59, 999_000, _BERLIN_WINTER),
    datetime(2024, 10, 27, 2, 30, 0, 0, _BERLIN_SUMMER),
    datetime(2024, 10, 27, 2, 30, 0, 0, _BERLIN_WINTER),
    datetime(2024, 2, 29, 12, 0, 0, 0, UTC),
    datetime(2024, 2, 29, 23, 59, 59, 999_000, _WEST_14),
    datetime(2038, 1, 19, 3, 14, 7, 0, UTC),
    datetime(2038, 1, 19, 3, 14, 8, 0, UTC),
    datetime(1970, 1, 1, 0, 0, 0, 0, UTC),
    datetime(1969, 12, 31, 23, 59, 59, 999_000, UTC),
    datetime(1, 1, 1, 0, 0, 0, 0, UTC),
    datetime(9999, 12, 31, 23, 59, 59, 999_000, UTC),
    datetime(2025, 1, 1, 0, 0, 0, 0, _EAST_14),
    datetime(2024, 12, 31, 0, 0, 0, 0, _WEST_14),
)

# ------------------------------------------------------------------------------ strategies


def boundary_numbers() -> st.SearchStrategy[Any]:
    """:data:`BOUNDARY_NUMBERS` often, and any int, float (NaN and infinities included) or bool."""
    return st.one_of(st.sampled_from(BOUNDARY_NUMBERS), st.integers(), st.floats(), st.booleans())


def boundary_texts(*, max_size: int = 40) -> st.SearchStrategy[str]:
    """:data:`BOUNDARY_TEXTS` and :data:`BOUNDARY_NUMBER_TEXTS` often, and any ``str`` (lone
    surrogates included) of up to ``max_size`` characters, or two catalogue texts joined."""
    catalogue = st.sampled_from(BOUNDARY_TEXTS + BOUNDARY_NUMBER_TEXTS)
    return st.one_of(
        catalogue,
        st.text(st.characters(), max_size=max_size),
        st.builds(lambda a, b: a + b, catalogue, catalogue),
    )


def boundary_counts(*, max_value: int = 10_001) -> st.SearchStrategy[int]:
    """:data:`BOUNDARY_COUNTS` up to ``max_value`` often, and any count in ``0 … max_value``."""
    kept = tuple(n for n in BOUNDARY_COUNTS if n <= max_value)
    return st.one_of(st.sampled_from(kept), st.integers(min_value=0, max_value=max_value))


def boundary_byte_sizes(*, max_value: int = (1 << 20) + 1) -> st.SearchStrategy[int]:
    """:data:`BOUNDARY_BYTE_SIZES` up to ``max_value`` often, and any size in ``0 … max_value``."""
    kept = tuple(n for n in BOUNDARY_BYTE_SIZES if n <= max_value)
    return st.one_of(st.sampled_from(kept), st.integers(min_value=0, max_value=max_value))


def boundary_times() -> st.SearchStrategy[datetime]:
    """:data:`BOUNDARY_TIMES` often, and any aware instant at an offset within ±14 h."""
    offsets = st.integers(min_value=-14 * 60, max_value=14 * 60).map(
        lambda minutes: timezone(timedelta(minutes=minutes))
    )
    any_instant = st.datetimes(
        min_value=datetime(2, 1, 1), max_value=datetime(9998, 12, 31), timezones=offsets
    )
    return st.one_of(st.sampled_from(BOUNDARY_TIMES), any_instant)
