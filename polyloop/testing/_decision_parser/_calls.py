"""How the decision-parser suite calls ``parse()``: checked for its shape, an exception turned
into ``never_raises``'s violation (or a pointer to it), and a long reply left unparsed for a
parser whose parse time is not linear (a pointer to ``parse_time_is_linear``)."""

from __future__ import annotations

from typing import TypeVar

import pytest

from polyloop._base._exception_text import exception_text
from polyloop.ports import DecisionParser
from polyloop.testing._decision_parser._parse_time import TIME_PROMISE, SlowParse, known_slow
from polyloop.testing._shared._base import require_seam
from polyloop.testing._shared._raised import raised_by_the_implementation
from polyloop.testing._shared._shapes import SHORT, parsed_reply_problems, short
from polyloop.types import Action, FinalAnswer, InvalidDecision, ModelReply, ParsedReply

__all__ = ["Inputs", "call", "parse_for_never_raises"]

_B = TypeVar("_B", Action, FinalAnswer, InvalidDecision)


class _Raised(Exception):
    """``parse()`` raised on ``reply``: judged by ``never_raises``, which says so first."""

    def __init__(self, error: BaseException, reply: ModelReply) -> None:
        super().__init__(exception_text(error, limit=SHORT))
        self.reply = reply

    def detail(self) -> str:
        return f"parse() raised {self} on {short(self.reply, 400)}"


class _Slow(Exception):
    """``reply`` is long and this parser's parse time is not linear: it was not parsed, so that
    no promise but ``parse_time_is_linear`` pays for the slow parse (or times out on it)."""

    def __init__(self, slow: SlowParse, reply: ModelReply) -> None:
        super().__init__(slow.text())
        self.slow = slow
        self.reply = reply

    def detail(self) -> str:
        length = len(self.reply.text) + len(self.reply.reasoning)
        return (
            f"same cause as {TIME_PROMISE}: {self.slow.text()}; so a reply of {length:,} "
            f"characters ({short(self.reply.text, 80)}) was not parsed here"
        )


def call(parser: DecisionParser, reply: ModelReply) -> ParsedReply:
    """``parse(reply)``, checked for its shape; :class:`_Raised` if it raised anything but an
    interrupt (a ``SystemExit`` too: the detail must name the reply); :class:`_Slow`, without
    parsing, for a long reply when this parser's parse time is not linear."""
    require_seam(parser, "decision_parser", "parse", "parse(reply) -> ParsedReply")
    slow = known_slow(parser, parser.parse, reply)
    if slow is not None:
        raise _Slow(slow, reply)
    try:
        decision = parser.parse(reply)
    except BaseException as error:
        if not raised_by_the_implementation(error):
            raise
        raise _Raised(error, reply) from error
    problems = parsed_reply_problems(decision, f"parse({short(reply.text, 60)})")
    assert not problems, "\n".join(problems)
    return decision


def parse_for_never_raises(parser: DecisionParser, reply: ModelReply) -> ParsedReply:
    """``parse(reply)`` for ``never_raises``: an exception is this promise's own violation."""
    try:
        return call(parser, reply)
    except _Raised as raised:  # the promise is exactly "never raises": report, do not crash
        detail = (
            f"{raised.detail()}\na parser must return InvalidDecision(feedback=...) for input "
            "it cannot parse"
        )
    except _Slow as slow:  # not judged here: reported under the promise that bounds it
        detail = slow.detail()
    pytest.fail(detail, pytrace=False)  # outside the handler: the detail alone, not the chain


_SAME_CAUSE = "same cause as decision_parser.never_raises"


class Inputs:
    """Parses for a promise other than ``never_raises``. An input that makes ``parse()`` raise
    breaks ``never_raises`` first; this promise is judged on every other input, and then, if
    any raised, reported violated with a detail that points at ``never_raises`` — one cause
    shown as one cause, never a pass over inputs it could not judge. A long input left unparsed
    for a parser whose parse time is not linear points at ``parse_time_is_linear`` the same
    way."""

    def __init__(self, parser: DecisionParser) -> None:
        self.parser = parser
        self.raised: list[_Raised] = []
        self.slow: list[_Slow] = []
        self.judged = 0

    def parse(self, reply: ModelReply) -> ParsedReply | None:
        try:
            decision = call(self.parser, reply)
        except _Raised as raised:
            self.raised.append(raised)
            return None
        except _Slow as slow:
            self.slow.append(slow)
            return None
        self.judged += 1
        return decision

    def sample(self, reply: ModelReply, name: str, branch: type[_B]) -> _B:
        """Parse ``parser_samples.<name>``; it must give the ``branch`` it stands for."""
        decision = self.parse(reply)
        if decision is None:
            self.done()
        assert isinstance(decision, branch), (
            f"parser_samples.{name} parsed to {short(decision)}, not {_article(branch)} "
            f"{branch.__name__}"
        )
        return decision

    def done(self) -> None:
        """Fail with the pointer to ``never_raises`` when any input raised, or to
        ``parse_time_is_linear`` when any was left unparsed as too slow."""
        if self.raised:
            pytest.fail(
                f"{_SAME_CAUSE}: {self.raised[0].detail()}\n({len(self.raised)} input(s) "
                f"raised and could not be judged here; on the {self.judged} that did not, "
                "this promise held)",
                pytrace=False,
            )
        if self.slow:
            pytest.fail(
                f"{self.slow[0].detail()}\n({len(self.slow)} long input(s) were not parsed "
                f"here; on the {self.judged} that were, this promise held)",
                pytrace=False,
            )


def _article(branch: type) -> str:
    return "an" if branch.__name__[0] in "AEIOU" else "a"
