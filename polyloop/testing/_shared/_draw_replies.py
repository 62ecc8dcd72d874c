"""Model replies with wild text, and variants of a parser's own replies (public through
:mod:`polyloop.testing.strategies`)."""

from __future__ import annotations

import re
import string

from hypothesis import strategies as st

from polyloop.testing._shared._draw_texts import (
    LINE_ENDINGS,
    _wild_field,
    long_reply_texts,
    wild_texts,
)
from polyloop.testing._shared._draw_values import usage_numbers
from polyloop.types import (
    ModelReply,
)


def wild_model_replies(*, long: bool = True) -> st.SearchStrategy[ModelReply]:
    """Replies with :func:`wild_texts` in every string field: ``text``, ``reasoning``,
    ``call_id`` (``None`` or non-empty) and the ``usage`` keys; with ``long=True`` the text or
    reasoning is sometimes a :func:`long_reply_texts` one."""
    text = st.one_of(_wild_field(), long_reply_texts()) if long else _wild_field()
    return st.builds(
        ModelReply,
        text=text,
        reasoning=text,
        call_id=st.one_of(st.none(), _wild_field().filter(bool)),
        usage=st.dictionaries(_wild_field(), usage_numbers(), max_size=3),
    )


# Built once: a composite that builds strategies on every draw spends its time validating them.
_WILD_FIELD = _wild_field()
_ID_FIELD = _WILD_FIELD.filter(bool)
# Spliced into a reply with long=False: no 10 000-character nasty text (a short reply stays short).
_SHORT_FIELD = _WILD_FIELD.filter(lambda text: len(text) <= 200)
_LONG_TEXT = long_reply_texts()
_USAGE = st.dictionaries(_WILD_FIELD, usage_numbers(), min_size=1, max_size=2)
_ENDING_RUNS = st.lists(st.sampled_from(LINE_ENDINGS), min_size=1, max_size=4)
_KEEP = st.booleans()

_WORD = re.compile(r"\w+")
_JOINS = st.one_of(st.sampled_from(LINE_ENDINGS), st.sampled_from(("", " ", "\n\n", "\nThen:\n")))
_NEW_WORD = st.one_of(
    st.text(st.sampled_from(string.ascii_letters + "_"), min_size=1, max_size=10),
    st.sampled_from(("naïve", "日本語", "x\U0001f600", "e\u0301", "\U0001d518")),
    wild_texts(max_size=4).filter(lambda text: 0 < len(text) <= 40),  # a word, not a page
)


def _swap_word(draw: st.DrawFn, text: str) -> str:
    words = list(_WORD.finditer(text))
    if not words:
        return text
    word = words[draw(st.integers(0, len(words) - 1))]
    return text[: word.start()] + draw(_NEW_WORD) + text[word.end() :]


def _with_endings(draw: st.DrawFn, text: str) -> str:
    endings = iter(draw(_ENDING_RUNS) * len(text))
    return re.sub(r"\r\n|\n", lambda _: next(endings), text)


_HOWS = ("as_is", "slice", "splice", "several", "word", "line_endings", "padded")


_LONG_HOWS = st.sampled_from(_HOWS)
_SHORT_HOWS = st.sampled_from(_HOWS[:-1])
_PAD_WHERE = st.integers(0, 2)


@st.composite
def _around(
    draw: st.DrawFn, texts: st.SearchStrategy[int], replies: tuple[ModelReply, ...], long: bool
) -> ModelReply:
    base = replies[draw(texts)]
    text = base.text
    how = draw(_LONG_HOWS if long else _SHORT_HOWS)
    if how == "slice" and text:
        start = draw(st.integers(0, len(text)))
        text = text[start : draw(st.integers(start, len(text)))]
    elif how == "splice":
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(_WILD_FIELD if long else _SHORT_FIELD) + text[at:]
    elif how == "several":  # several tool calls in one reply, some with a word changed
        for _ in range(draw(st.integers(1, 3))):
            other = replies[draw(texts)].text
            text = text + draw(_JOINS) + (_swap_word(draw, other) if draw(_KEEP) else other)
    elif how == "word":
        text = _swap_word(draw, text)
    elif how == "line_endings":
        text = _with_endings(draw, text)
    elif how == "padded":
        pad = draw(_LONG_TEXT)
        text = (pad + text, text + pad, pad + text + pad)[draw(_PAD_WHERE)]
    return ModelReply(
        text=text,
        reasoning=base.reasoning if draw(_KEEP) else draw(_WILD_FIELD),
        call_id=(base.call_id if draw(_KEEP) else None) if draw(_KEEP) else draw(_ID_FIELD),
        usage=dict(base.usage) if draw(_KEEP) else draw(_USAGE),
    )


def replies_around(*replies: ModelReply, long: bool = True) -> st.SearchStrategy[ModelReply]:
    """Variants of replies in *your* parser's format — the inputs parsers get wrong.

    One of ``replies`` as it is, a slice of it, :func:`wild_texts` spliced in, several of them
    in one reply (several tool calls, some with a word changed, joined by any line ending), a
    word swapped for another (ASCII or not), its line endings swapped for mixed ones, or (with
    ``long=True``) padded with :func:`long_reply_texts` before, after or both. ``reasoning``,
    ``call_id`` and the ``usage`` keys are kept or replaced by wild text.
    """
    if not replies:
        raise ValueError("replies_around() needs at least one ModelReply")
    for reply in replies:
        if not isinstance(reply, ModelReply):
            raise TypeError(f"replies_around() takes ModelReply values, got {type(reply).__name__}")
    return _around(st.integers(0, len(replies) - 1), tuple(replies), long)
