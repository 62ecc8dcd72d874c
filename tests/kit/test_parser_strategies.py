"""The public parser-input strategies reach what models really send: several calls in one
reply, text well past 64 KiB, every kind of line ending, non-ASCII of every sort, control
characters and lone surrogates in every string field of a reply."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polyloop.testing import strategies as pst
from polyloop.testing._shared._shapes import model_reply_problems
from polyloop.types import ModelReply

SAMPLES = (ModelReply(text="ACT ls -la", call_id="c1"), ModelReply(text="FINAL 42"))
KIB_64 = 64 * 1024


_SURROGATE = re.compile("[\ud800-\udfff]")
_KINDS = {
    "lone surrogate": _SURROGATE,
    "CJK": re.compile("[\u4e00-\u9fff]"),
    "astral": re.compile("[\U00010000-\U0010ffff]"),
    "combining mark": re.compile("[\u0300-\u036f\u1ab0-\u1dff]"),
    "control character": re.compile("[\x00-\x09\x0b\x0c\x0e-\x1f]"),
    "CRLF": re.compile("\r\n"),
    "LS": re.compile("\u2028"),
    "NEL": re.compile("\x85"),
    "lone CR": re.compile("\r(?!\n)"),
}


def _surrogate(text: str | None) -> bool:
    return text is not None and _SURROGATE.search(text) is not None


def _kinds(text: str) -> set[str]:
    return {kind for kind, pattern in _KINDS.items() if pattern.search(text)}


def test_wild_texts_reach_every_kind_of_character() -> None:
    seen: set[str] = set()

    @settings(max_examples=300, deadline=None, database=None, derandomize=True)
    @given(text=pst.wild_texts())
    def collect(text: str) -> None:
        seen.update(_kinds(text))

    collect()
    assert seen == {
        "lone surrogate",
        "CJK",
        "astral",
        "combining mark",
        "control character",
        "CRLF",
        "LS",
        "NEL",
        "lone CR",
    }


@settings(max_examples=20, deadline=None, database=None)
@given(text=pst.long_reply_texts())
def test_long_texts_are_well_past_64_kib(text: str) -> None:
    assert 70_000 <= len(text) <= 140_000
    assert len(text.encode("utf-8", "surrogatepass")) > KIB_64


def test_long_texts_reach_non_ascii_many_lines_and_deep_nesting() -> None:
    seen: set[str] = set()

    @settings(max_examples=120, deadline=None, database=None, derandomize=True)
    @given(text=pst.long_reply_texts())
    def collect(text: str) -> None:
        if not text.isascii():
            seen.add("non-ASCII")
        if len(text.splitlines()) > 5_000:
            seen.add("many lines")
        if text.startswith("[" * 2_000) or text.startswith('{"a":' * 1_000):
            seen.add("nested deeper than the recursion limit")

    collect()
    assert seen == {"non-ASCII", "many lines", "nested deeper than the recursion limit"}


def test_replies_around_reach_several_calls_long_replies_and_wild_fields() -> None:
    seen: set[str] = set()

    @settings(max_examples=300, deadline=None, database=None, derandomize=True)
    @given(reply=pst.replies_around(*SAMPLES))
    def collect(reply: ModelReply) -> None:
        assert model_reply_problems(reply) == []
        if reply.text.count("ACT ") + reply.text.count("FINAL ") >= 2:
            seen.add("several calls")
        if len(reply.text) > KIB_64:
            seen.add("long")
        seen.update(f"text: {kind}" for kind in _kinds(reply.text) & {"lone CR", "LS"})
        if _surrogate(reply.text):
            seen.add("text: lone surrogate")
        if _surrogate(reply.reasoning):
            seen.add("reasoning: lone surrogate")
        if _surrogate(reply.call_id):
            seen.add("call_id: lone surrogate")
        if any(_surrogate(key) for key in reply.usage):
            seen.add("usage: lone surrogate")
        if reply.text.startswith("ACT ") and not reply.text.isascii():
            seen.add("non-ASCII action")

    collect()
    assert seen == {
        "several calls",
        "long",
        "text: lone CR",
        "text: LS",
        "text: lone surrogate",
        "reasoning: lone surrogate",
        "call_id: lone surrogate",
        "usage: lone surrogate",
        "non-ASCII action",
    }


@settings(max_examples=30, deadline=None, database=None)
@given(reply=pst.wild_model_replies(long=False))
def test_wild_model_replies_are_valid_replies(reply: ModelReply) -> None:
    assert model_reply_problems(reply) == []
    assert reply.call_id != ""


@given(data=st.data())
@settings(max_examples=5, deadline=None, database=None)
def test_replies_around_without_long_stays_short(data: st.DataObject) -> None:
    reply = data.draw(pst.replies_around(*SAMPLES, long=False))
    assert len(reply.text) < 1_000


def test_replies_around_needs_replies() -> None:
    with pytest.raises(ValueError, match="at least one ModelReply"):
        pst.replies_around()
    with pytest.raises(TypeError, match="ModelReply values"):
        pst.replies_around("ACT ls")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least 1"):
        pst.long_reply_texts(min_size=0)
