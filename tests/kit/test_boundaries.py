"""The boundary catalogue holds the values issue 37 §1 lists, and its strategies reach them."""

from __future__ import annotations

import json
import math
import sys

import pytest
from hypothesis import given, settings

from polyloop.testing import strategies as pst


def test_numbers_hold_every_edge_and_the_digit_limit_is_the_interpreters() -> None:
    numbers = pst.BOUNDARY_NUMBERS
    for edge in (0, 1, -1, 2**31 - 1, 2**31 + 1, 2**53 - 1, 2**53 + 1, 2**63 - 1, 2**63 + 1, 2**64):
        assert any(type(n) is int and n == edge for n in numbers), edge
    assert any(isinstance(n, float) and math.isnan(n) for n in numbers)
    assert {math.inf, -math.inf, 1e308, 5e-324} <= {n for n in numbers if isinstance(n, float)}
    assert any(str(n) == "-0.0" for n in numbers)
    # Type-exact: `True in numbers` would hold for a 1 or a 1.0 alone (True == 1 == 1.0).
    assert any(n is True for n in numbers)
    assert any(n is False for n in numbers)
    assert any(type(n) is int and n == 1 for n in numbers)
    assert any(type(n) is float and n == 1 for n in numbers)
    assert (sys.get_int_max_str_digits() or 4300) == pst.INT_DIGIT_LIMIT
    under, over = (n for n in numbers if type(n) is int and n > 2**64)
    assert len(str(under)) == pst.INT_DIGIT_LIMIT
    with pytest.raises(ValueError, match="digits"):
        str(over)
    texts = pst.BOUNDARY_NUMBER_TEXTS
    assert {"NaN", "Infinity", "-Infinity", "007", "1e5", '"42"', "true", "0"} <= set(texts)
    with pytest.raises(ValueError, match="digits"):
        json.loads(pst.digits(pst.INT_DIGIT_LIMIT + 1))


def test_texts_hold_every_kind_the_issue_lists() -> None:
    texts = set(pst.BOUNDARY_TEXTS)
    assert {"", " ", "\r", "\n", "\r\n", "\u2028", "\u2029", "\ufeff", "\x00"} <= texts
    assert {
        "yes",
        "no",
        "on",
        "off",
        "null",
        "NaN",
        "0x1F",
        "1_000",
        "{}",
        "{0}",
        "%s",
        "$x",
    } <= texts
    assert any(0xD800 <= ord(c) <= 0xDFFF for t in texts for c in t)
    assert any(ord(c) > 0xFFFF for t in texts for c in t)
    for char in "ßﬁİ":
        assert char in texts
        assert len(char.casefold()) > 1
    assert len(pst.CASE_CHANGING_TEXT.casefold()) > len(pst.CASE_CHANGING_TEXT)


def test_structure_counts_sizes_and_times() -> None:
    depths = pst.nesting_depths()
    for limit in (32, 64, 100, 128, 256, 512, 1000, sys.getrecursionlimit()):
        assert {limit - 1, limit, limit + 1} <= set(depths), limit
    assert any(type(d) is int and d == 1 for d in depths)
    deep = max(depths)
    assert json.loads(pst.nested_json(5)) == pst.nested_value(5)
    assert json.loads(pst.nested_json(3, kind="object")) == {"a": {"a": {"a": 1}}}
    assert pst.nested_json(deep).count("[") == deep  # built without recursion
    assert len(pst.many_keys()) == 10_000
    for edge in (64, 100, 128, 256, 500, 1000, 1024, 4096, 10_000):
        assert {edge - 1, edge, edge + 1} <= set(pst.BOUNDARY_COUNTS), edge
    assert {0, 1} <= set(pst.BOUNDARY_COUNTS)
    for edge in (2048, 4096, 8192, 16_384, 65_536, 1 << 20):
        assert {edge - 1, edge, edge + 1} <= set(pst.BOUNDARY_BYTE_SIZES), edge
    times = pst.BOUNDARY_TIMES
    assert all(t.tzinfo is not None for t in times)
    assert {(2024, 2, 29), (2038, 1, 19), (1, 1, 1), (9999, 12, 31)} <= {
        (t.year, t.month, t.day) for t in times
    }
    offsets = {t.utcoffset() for t in times}
    assert {h * 3600 for h in (14, -14)} <= {o.total_seconds() for o in offsets if o is not None}


@settings(max_examples=50, deadline=None)
@given(
    number=pst.boundary_numbers(),
    text=pst.boundary_texts(),
    count=pst.boundary_counts(max_value=300),
    size=pst.boundary_byte_sizes(max_value=70_000),
    instant=pst.boundary_times(),
)
def test_the_strategies_draw_their_types_within_their_bounds(
    number: object, text: str, count: int, size: int, instant: object
) -> None:
    assert isinstance(number, int | float)
    assert isinstance(text, str)
    assert 0 <= count <= 300
    assert 0 <= size <= 70_000
    assert getattr(instant, "tzinfo", None) is not None


def test_the_strategies_reach_the_catalogue() -> None:
    seen: set[object] = set()

    @settings(max_examples=200, deadline=None, database=None, derandomize=True)
    @given(count=pst.boundary_counts(), text=pst.boundary_texts())
    def collect(count: int, text: str) -> None:
        seen.add(count)
        seen.add(text)

    collect()
    assert seen & {99, 100, 101, 1023, 1024, 1025}
    assert seen & set(pst.BOUNDARY_TEXTS)


def test_draw_strategies_carry_the_catalogue() -> None:
    from polyloop.testing._shared import _draw_texts

    assert "ß" in _draw_texts._BOUNDARY_TEXTS
    assert not any("\ud800" <= c <= "\udfff" for t in _draw_texts._BOUNDARY_TEXTS for c in t)
    assert "2038-01-19T03:14:08.000Z" in _draw_texts._BOUNDARY_TIMESTAMPS
