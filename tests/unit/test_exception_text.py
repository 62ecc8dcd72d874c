"""``exception_text``: safe for any exception an implementation or a model-written tool raises."""

from __future__ import annotations

import pytest

from polyloop._exception_text import exception_text


class RaisingStr(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no")


class NotAStr(Exception):
    def __str__(self) -> str:
        return 42  # type: ignore[return-value]


def test_type_and_message() -> None:
    assert exception_text(ValueError("bad value")) == "ValueError: bad value"


def test_an_empty_message_is_just_the_type() -> None:
    assert exception_text(KeyboardInterrupt()) == "KeyboardInterrupt"


@pytest.mark.parametrize("error", [RaisingStr("x"), NotAStr("x")])
def test_a_message_that_cannot_be_rendered_still_names_the_type(error: Exception) -> None:
    text = exception_text(error)
    assert text.startswith(f"{type(error).__name__}: <")


def test_a_huge_message_is_cut_and_says_how_much() -> None:
    text = exception_text(ValueError("x" * 1_000_000), limit=100)
    assert len(text) < 140
    assert text.endswith(f"… [{len('ValueError: ') + 1_000_000 - 100} more characters]")


def test_control_characters_are_escaped_tab_and_newline_kept() -> None:
    text = exception_text(ValueError("a\x1b[31mb\x00c\td\ne\x7f\x85"))
    assert text == "ValueError: a\\x1b[31mb\\x00c\td\ne\\x7f\\x85"


def test_an_exception_group_is_shown_by_its_first_leaf() -> None:
    group = ExceptionGroup("outer", [ExceptionGroup("inner", [OSError("gone")]), ValueError()])
    assert exception_text(group) == "OSError: gone"


def test_lone_surrogates_pass_through_as_text() -> None:
    assert exception_text(ValueError("\ud800")) == "ValueError: \ud800"
