"""The decision-parser suite.

A parser sits between free model text and the loop. It is called on whatever the model said —
and again, on resume, on a reply read back from the log — so it must be total, pure and
deterministic. The suite feeds it the implementer's three sample replies, slices of them
(near-misses are the inputs parsers get wrong), and arbitrary nasty text.
"""

from __future__ import annotations

from typing import TypeVar

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from polyloop._exception_text import exception_text
from polyloop.ports import DecisionParser
from polyloop.testing import strategies as pst
from polyloop.testing._base import (
    ContractBase,
    bounded_settings,
    missing_fixture,
    require_samples,
    require_seam,
)
from polyloop.testing._samples import ParserSamples
from polyloop.testing._shapes import SHORT, mismatch, parsed_reply_problems, short
from polyloop.testing._skips import not_applicable
from polyloop.types import (
    Action,
    ActionIntent,
    FinalAnswer,
    InvalidDecision,
    ModelReply,
    ParsedReply,
    canonical_json,
    record_from_json,
)

__all__ = ["DecisionParserContract"]

_B = TypeVar("_B", Action, FinalAnswer, InvalidDecision)

_HUGE = "{" * 50_000 + "\x00" + "}" * 50_000


def _parse(parser: DecisionParser, reply: ModelReply) -> ParsedReply:
    require_seam(parser, "decision_parser", "parse", "parse(reply) -> ParsedReply")
    try:
        decision = parser.parse(reply)
    except Exception as error:  # the promise is exactly "never raises": report, do not crash
        pytest.fail(
            f"parse() raised {exception_text(error, limit=SHORT)}\n"
            f"on {short(reply, 400)}\n"
            "a parser must return InvalidDecision(feedback=...) for input it cannot parse",
            pytrace=False,
        )
    problems = parsed_reply_problems(decision, f"parse({short(reply.text, 60)})")
    assert not problems, "\n".join(problems)
    return decision


def _parse_sample(parser: DecisionParser, reply: ModelReply, name: str, branch: type[_B]) -> _B:
    """Parse the sample ``parser_samples.<name>`` and demand the ``branch`` it stands for."""
    decision = _parse(parser, reply)
    assert isinstance(decision, branch), (
        f"parser_samples.{name} parsed to {short(decision)}, not {_article(branch)} "
        f"{branch.__name__}"
    )
    return decision


def _article(branch: type) -> str:
    return "an" if branch.__name__[0] in "AEIOU" else "a"


def _sample_replies(samples: ParserSamples) -> list[ModelReply]:
    found = [samples.action_reply, samples.invalid_reply]
    if samples.final_reply is not None:
        found.append(samples.final_reply)
    return found


_ANY_REPLY = pst.model_replies()
_ANY_TEXT = pst.texts()
_HOW = st.sampled_from(("as_is", "slice", "splice", "other"))


@st.composite
def _replies_near(draw: st.DrawFn, samples: ParserSamples) -> ModelReply:
    """A sample reply, a slice of one, or one with nasty text spliced in; or any reply."""
    base = draw(st.sampled_from(_sample_replies(samples)))
    text = base.text
    how = draw(_HOW)
    if how == "other":
        return draw(_ANY_REPLY)
    if how == "slice" and text:
        start = draw(st.integers(0, len(text)))
        end = draw(st.integers(start, len(text)))
        text = text[start:end]
    elif how == "splice":
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(_ANY_TEXT) + text[at:]
    return ModelReply(
        text=text,
        reasoning=draw(st.one_of(st.just(base.reasoning), _ANY_TEXT)),
        call_id=base.call_id,
        usage=dict(base.usage),
    )


class DecisionParserContract(ContractBase):
    """Inherit this, override ``decision_parser`` and ``parser_samples``.

    ``parser_samples`` returns :class:`~polyloop.testing.ParserSamples`: a reply your parser
    turns into an ``Action``, one it cannot parse, and (optionally) one it turns into a
    ``FinalAnswer``.
    """

    seam = "decision_parser"
    samples_fixture = "parser_samples"

    @pytest.fixture
    def decision_parser(self) -> DecisionParser:
        """Your parser. Override this fixture and return an instance."""
        missing_fixture(
            "DecisionParserContract",
            "decision_parser",
            "an instance of your parser (any object with `parse(reply: ModelReply) -> "
            "Action | FinalAnswer | InvalidDecision`)",
        )

    @pytest.fixture
    def parser_samples(self) -> ParserSamples:
        """Replies in your parser's format. Override this fixture."""
        missing_fixture(
            "DecisionParserContract",
            "parser_samples",
            "polyloop.testing.ParserSamples(action_reply=ModelReply(text=...), "
            "invalid_reply=ModelReply(text=...), final_reply=ModelReply(text=...) or None) — "
            "replies in your parser's own format: one it parses to an Action, one it cannot "
            "parse, and one it parses to a FinalAnswer (None if it has no final-answer form)",
        )

    @bounded_settings(max_examples=60)
    @given(data=st.data())
    @example(data=None)
    async def test_never_raises(
        self,
        decision_parser: DecisionParser,
        parser_samples: ParserSamples,
        data: st.DataObject | None,
    ) -> None:
        """``parse`` returns a decision for *any* reply and never raises.

        "Cannot parse" is the normal path, not an exception: the model gets feedback and tries
        again. An exception is not caught by the library, so it ends the run — and since a resume
        parses the logged reply again, the run can never be resumed either. Checked on arbitrary
        text and reasoning (control characters, astral characters, a 100 000-character reply)
        and on slices of the implementer's own samples.
        """
        samples = require_samples(parser_samples, ParserSamples, "parser_samples")
        if data is None:  # the explicit example: the fixed nasty inputs, every run
            for text in (*pst.NASTY_TEXTS, _HUGE):
                _parse(decision_parser, ModelReply(text=text, reasoning=text))
            return
        reply = data.draw(st.one_of(_ANY_REPLY, _replies_near(samples)), label="reply")
        _parse(decision_parser, reply)

    async def test_returns_one_of_three_branches(
        self, decision_parser: DecisionParser, parser_samples: ParserSamples
    ) -> None:
        """``parse`` returns exactly an ``Action``, ``FinalAnswer`` or ``InvalidDecision``, each
        field of its declared type.

        The loop branches on the type of the decision; anything else (a dict, ``None``, a
        duck-typed object, a decision patched after construction) is a ``TypeError`` mid-run or,
        worse, a wrong type written into the log.
        """
        samples = require_samples(parser_samples, ParserSamples, "parser_samples")
        for reply in (*_sample_replies(samples), ModelReply(text=""), ModelReply(text="\x00")):
            _parse(decision_parser, reply)

    @bounded_settings(max_examples=30)
    @given(data=st.data())
    async def test_is_deterministic(
        self, decision_parser: DecisionParser, parser_samples: ParserSamples, data: st.DataObject
    ) -> None:
        """Parsing the same reply again gives an equal decision of the same type.

        A resume parses the logged reply of an interrupted step again instead of calling the
        model twice. If the second parse differs (a counter or timestamp in the feedback, a
        random choice), the resumed run continues from a decision the original run never made.
        """
        samples = require_samples(parser_samples, ParserSamples, "parser_samples")
        reply = data.draw(_replies_near(samples), label="reply")
        first = _parse(decision_parser, reply)
        for attempt in (2, 3):
            again = _parse(decision_parser, reply)
            found = mismatch(first, again, f"parse #{attempt}")
            assert found is None, f"parsing the same reply again gave a different decision: {found}"

    async def test_recognises_its_action_sample(
        self, decision_parser: DecisionParser, parser_samples: ParserSamples
    ) -> None:
        """``parser_samples.action_reply`` parses to an ``Action``.

        The other promises only mean something if the parser really produces actions; a parser
        that answers ``InvalidDecision`` to everything is total and deterministic but useless.
        """
        samples = require_samples(parser_samples, ParserSamples, "parser_samples")
        _parse_sample(decision_parser, samples.action_reply, "action_reply", Action)

    async def test_invalid_reply_gets_feedback(
        self, decision_parser: DecisionParser, parser_samples: ParserSamples
    ) -> None:
        """``parser_samples.invalid_reply`` parses to ``InvalidDecision`` with non-blank feedback.

        The feedback is the next user message the model sees. Blank feedback gives the model
        nothing to correct, so it tends to repeat the same malformed reply until the run stops
        ``parse_failed_repeatedly``.
        """
        samples = require_samples(parser_samples, ParserSamples, "parser_samples")
        decision = _parse_sample(
            decision_parser, samples.invalid_reply, "invalid_reply", InvalidDecision
        )
        assert decision.feedback.strip() != "", (
            f"the feedback for an invalid reply is blank ({decision.feedback!r}): the model "
            "would get nothing to correct itself from"
        )

    async def test_recognises_its_final_answer_sample(
        self, decision_parser: DecisionParser, parser_samples: ParserSamples
    ) -> None:
        """``parser_samples.final_reply`` parses to a ``FinalAnswer``.

        A final answer is how an agent ends a run ``agent_finished`` with a result; a parser that
        misses it makes every run end on a budget instead. ``not_applicable`` when the
        implementer declares no final-answer form (``final_reply=None``).
        """
        samples = require_samples(parser_samples, ParserSamples, "parser_samples")
        if samples.final_reply is None:
            not_applicable(
                promise="the parser turns its final-answer sample into a FinalAnswer",
                why="parser_samples.final_reply is None: this parser declares no final-answer form",
                verify_yourself=(
                    "make sure your runs can end another way (a completion-marker tool or an "
                    "environment completion signal), or give the parser a final-answer form"
                ),
            )
        _parse_sample(decision_parser, samples.final_reply, "final_reply", FinalAnswer)

    async def test_action_is_serialisable(
        self, decision_parser: DecisionParser, parser_samples: ParserSamples
    ) -> None:
        """The ``Action`` parsed from the sample survives the log: canonical JSON and back, equal.

        The action is written into an ``ActionIntent`` before it runs, and a resume rebuilds it
        from there. Arguments that are not JSON data (a set, NaN, an object patched in after
        construction) make that write fail at the worst moment — with the action about to run.
        """
        samples = require_samples(parser_samples, ParserSamples, "parser_samples")
        decision = _parse_sample(decision_parser, samples.action_reply, "action_reply", Action)
        try:
            if decision.tool_args is not None:
                canonical_json(dict(decision.tool_args))
            written = ActionIntent(step_index=0, action=decision).to_json()
        except (TypeError, ValueError) as error:
            pytest.fail(
                f"the parsed action cannot be written to the log: {error}\n{short(decision)}",
                pytrace=False,
            )
        read_back = record_from_json(written)
        assert isinstance(read_back, ActionIntent)
        found = mismatch(decision, read_back.action, "action")
        assert found is None, f"the parsed action does not survive the log unchanged: {found}"
