"""``shown``: the one rule for quoting a value in a message (issue 24: it was written four times,
each with its own cut and its own marker)."""

from __future__ import annotations

from polyloop._base._shown import shown


def test_a_short_value_is_its_repr() -> None:
    assert shown("calc", 10) == "'calc'"
    assert shown(42, 10) == "42"
    assert shown(None, 10) == "None"


def test_a_long_string_is_cut_before_quoting_and_says_its_length() -> None:
    assert shown("x" * 50, 10) == "'xxxxxxxxxx'… (50 characters)"


def test_a_long_other_value_is_its_repr_cut() -> None:
    assert shown(list(range(100)), 10) == "[0, 1, 2, … (390 characters)"


def test_control_characters_and_lone_surrogates_are_escaped() -> None:
    assert shown("a\x1b\ud800", 10) == "'a\\x1b\\ud800'"
    assert "\ud800" not in shown("\ud800" * 100, 5)
