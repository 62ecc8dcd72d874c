"""The decision-parser suite.

A parser sits between free model text and the loop. It is called on whatever the model said —
and again, on resume, on a reply read back from the log — so it must be total, pure and
deterministic. The suite feeds it the implementer's three sample replies, variants of them
(slices, several calls in one reply, words swapped, mixed line endings, lone surrogates in every
field, long non-ASCII padding: near-misses are the inputs parsers get wrong), and arbitrary nasty
text well past 64 KiB. With a factory it also parses the same replies in child processes under
different hash seeds.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from polyloop.ports import DecisionParser
from polyloop.testing._decision_parser._boundary_replies import boundary_replies
from polyloop.testing._decision_parser._calls import Inputs as _Inputs
from polyloop.testing._decision_parser._calls import parse_for_never_raises as _parse
from polyloop.testing._decision_parser._children import (
    cross_process_problems,
    end_children,
    parse_in_children,
    spawn_children,
)
from polyloop.testing._decision_parser._golden import (
    golden_sequences,
    golden_settings,
    run_sequence,
)
from polyloop.testing._decision_parser._parse_time import (
    generic_verdict,
    measure,
    sample_shapes,
)
from polyloop.testing._shared._base import (
    ContractBase,
    bounded_settings,
    missing_fixture,
    require_samples,
    require_seam,
)
from polyloop.testing._shared._draw_replies import replies_around, wild_model_replies
from polyloop.testing._shared._draw_texts import LINE_ENDINGS, NASTY_TEXTS
from polyloop.testing._shared._draw_values import model_replies
from polyloop.testing._shared._samples import ParserSamples
from polyloop.testing._shared._shapes import (
    assert_correctable,
    mismatch,
    short,
)
from polyloop.testing._shared._skips import not_applicable, unverifiable
from polyloop.types import (
    Action,
    ActionIntent,
    FinalAnswer,
    InvalidDecision,
    ModelReply,
    canonical_json,
    record_from_json,
)

__all__ = ["DecisionParserContract"]

_HUGE = "{" * 50_000 + "\x00" + "}" * 50_000


def _sample_replies(samples: ParserSamples) -> list[ModelReply]:
    found = [samples.action_reply, samples.invalid_reply]
    if samples.final_reply is not None:
        found.append(samples.final_reply)
    return found


# Long wild text comes padded around the samples (replies_around) and in the fixed inputs.
_ANY_REPLY = st.one_of(model_replies(), wild_model_replies(long=False))


def _replies_near(samples: ParserSamples, *, long: bool = True) -> st.SearchStrategy[ModelReply]:
    """A sample reply or a variant of one (:func:`polyloop.testing.strategies.replies_around`)."""
    return replies_around(*_sample_replies(samples), long=long)


# The fixed hard inputs every run meets (a bounded Hypothesis run may miss any one of them).
_NON_ASCII = " naïve 日本語 😀 👨\u200d👩\u200d👧 e\u0301 \U0001d518\U00020000"
_LONG_UNIT = (
    "日本語テキスト😀👨\u200d👩\u200d👧 e\u0301\u0323 \U0001d518\U00020000\U0010fffd\u2028"
    "中文\r\n한국어\r\x00\x1b[0m\u202e\u0301\x85"
)
_LONG = _LONG_UNIT * (70_000 // len(_LONG_UNIT) + 1)  # ≥ 70 000 characters, ≈ 200 KB of UTF-8
_MANY_LINES = "".join(f"{n} ü{LINE_ENDINGS[n % len(LINE_ENDINGS)]}" for n in range(6_000))
_WORD = re.compile(r"\w+")
_SHORT_REPLY = 20_000
_DEEP = 30_000  # levels: thirty times Python's default recursion limit


def _text_variants(text: str) -> list[str]:
    """Deterministic near-misses of one sample text."""
    words = list(_WORD.finditer(text))
    swapped = [
        text[: w.start()] + new + text[w.end() :]
        for i, w in enumerate(words[:8])
        for new in (f"w{i}x", f"日本{i}😀")
    ]
    variants = [
        text + "\n" + text,  # several calls in one reply
        text + "\r\n" + text + "\r" + text,
        text + "\u2028" + text + "\n\n" + text,
        *(other + "\n" + text for other in swapped),  # two calls that differ in one word
        *(text + "\n" + other + "\r\n" + text for other in swapped[1::4]),
        *swapped,
        *(text.replace("\n", ending) for ending in ("\r\n", "\r", "\u2028", "\x85")),
        text.replace("\n", "\r\n", 1).replace("\n", "\r"),
        text + "\ud800",  # lone surrogates: high, low, a surrogateescape'd byte
        "\udfff" + text,
        text.replace(" ", " \udc80", 1),
        "\x00\x1b[0m" + text.replace(" ", "\x07 ", 1) + "\x7f\x9b",  # control characters
        text + _NON_ASCII,
        _NON_ASCII + "\n" + text,
        text.replace(" ", _NON_ASCII + " ", 1),
        _LONG + "\n" + text,  # well past 64 KiB, before and after
        text + "\n" + _LONG,
        _MANY_LINES + text,
        "\n".join([text] * (70_000 // (len(text) + 1) + 1)),  # one call after another, 70 000 chars
    ]
    opener = next((m.start() for m in re.finditer(r"[\[{(]", text)), len(text))
    variants += [text[:opener] + "[" * _DEEP, text[:opener] + '{"a":' * (_DEEP // 3)]
    return variants


def _hard_replies(samples: ParserSamples, *, long: bool = True) -> list[ModelReply]:
    """The samples' deterministic variants, and each sample with a lone surrogate in each of its
    other string fields (``reasoning``, ``call_id``, a ``usage`` key); ``long=False`` leaves out
    the ones longer than :data:`_SHORT_REPLY` characters."""
    found: list[ModelReply] = []
    for reply in _sample_replies(samples):
        found += [
            ModelReply(
                text=text, reasoning=reply.reasoning, call_id=reply.call_id, usage=reply.usage
            )
            for text in _text_variants(reply.text)
        ]
        found += [
            ModelReply(text=reply.text, reasoning="\ud800 thinking \udfff" + _NON_ASCII),
            ModelReply(text=reply.text, call_id="call-\udc80" + _NON_ASCII),
            ModelReply(text=reply.text, usage={"tokens\ud800": 1, "日本": 2.5}),
            ModelReply(text=reply.text, reasoning=_LONG, call_id="c\r\n\u2028"),
        ]
    if long:
        return found
    return [r for r in found if len(r.text) + len(r.reasoning) <= _SHORT_REPLY]


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
        text in every field of the reply (control characters, CJK, emoji, combining marks,
        astral characters, lone surrogates, mixed line endings, replies well past 64 KiB and
        nested deeper than any recursion) and on variants of the implementer's own samples
        (slices, several calls in one reply, words swapped, long padding) — among them, every
        run, the samples with each value they carry replaced by each number of the boundary
        catalogue (``NaN``, ``±Infinity``, ``1e309``, integers of more digits than ``int``
        converts to ``str``, …) and nested at each of its depths (1, and just under, at and over
        32, 64, 100, 128, 256, 512, 1 000 and the recursion limit), and with prose whose case
        mapping changes its length (``ß``, ``ﬁ``, ``İ``) around them.
        """
        samples = require_samples(parser_samples, ParserSamples, "parser_samples")
        if data is None:  # the explicit example: the samples, the fixed nasty inputs, every run
            for reply in _sample_replies(samples):
                _parse(decision_parser, reply)
            for text in (*NASTY_TEXTS, _HUGE):
                _parse(decision_parser, ModelReply(text=text, reasoning=text))
            for reply in (*_hard_replies(samples), *boundary_replies(_sample_replies(samples))):
                _parse(decision_parser, reply)
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
        inputs = _Inputs(decision_parser)
        for reply in (*_sample_replies(samples), ModelReply(text=""), ModelReply(text="\x00")):
            inputs.parse(reply)
        for reply in _hard_replies(samples):
            inputs.parse(reply)
        inputs.done()

    @bounded_settings(max_examples=30)
    @given(data=st.data())
    @example(data=None)
    async def test_is_deterministic(
        self,
        decision_parser: DecisionParser,
        parser_samples: ParserSamples,
        data: st.DataObject | None,
    ) -> None:
        """Parsing the same reply again gives an equal decision of the same type.

        A resume parses the logged reply of an interrupted step again instead of calling the
        model twice. If the second parse differs (a counter or timestamp in the feedback, a
        random choice), the resumed run continues from a decision the original run never made.
        """
        samples = require_samples(parser_samples, ParserSamples, "parser_samples")
        if data is None:  # the explicit example: the samples' fixed variants, every run
            replies, attempts = _hard_replies(samples), [2]
        else:
            replies = [data.draw(st.one_of(_replies_near(samples), _ANY_REPLY), label="reply")]
            attempts = [2, 3]
        inputs = _Inputs(decision_parser)
        for reply in replies:
            first = inputs.parse(reply)
            for attempt in attempts:
                again = inputs.parse(reply)
                if first is None or again is None:
                    break
                found = mismatch(first, again, f"parse #{attempt}")
                assert found is None, (
                    f"parsing the same reply again gave a different decision: {found}\n"
                    f"on {short(reply, 300)}"
                )
        inputs.done()

    async def test_recognises_its_action_sample(
        self, decision_parser: DecisionParser, parser_samples: ParserSamples
    ) -> None:
        """``parser_samples.action_reply`` parses to an ``Action``.

        The other promises only mean something if the parser really produces actions; a parser
        that answers ``InvalidDecision`` to everything is total and deterministic but useless.
        """
        samples = require_samples(parser_samples, ParserSamples, "parser_samples")
        _Inputs(decision_parser).sample(samples.action_reply, "action_reply", Action)

    async def test_invalid_reply_gets_feedback(
        self, decision_parser: DecisionParser, parser_samples: ParserSamples
    ) -> None:
        """``parser_samples.invalid_reply`` parses to ``InvalidDecision`` with non-blank feedback.

        The feedback is the next user message the model sees. Blank feedback gives the model
        nothing to correct, so it tends to repeat the same malformed reply until the run stops
        ``parse_failed_repeatedly``.
        """
        samples = require_samples(parser_samples, ParserSamples, "parser_samples")
        decision = _Inputs(decision_parser).sample(
            samples.invalid_reply, "invalid_reply", InvalidDecision
        )
        assert_correctable(decision.feedback, "the feedback for parser_samples.invalid_reply")

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
        _Inputs(decision_parser).sample(samples.final_reply, "final_reply", FinalAnswer)

    async def test_action_is_serialisable(
        self, decision_parser: DecisionParser, parser_samples: ParserSamples
    ) -> None:
        """The ``Action`` parsed from the sample survives the log: canonical JSON and back, equal.

        The action is written into an ``ActionIntent`` before it runs, and a resume rebuilds it
        from there. Arguments that are not JSON data (a set, NaN, bytes, an object patched in
        after construction) make that write fail at the worst moment — with the action about to
        run. Checked on the sample and on every action parsed from its variants (several calls
        in one reply, words swapped for non-ASCII ones, lone surrogates, mixed line endings,
        long padding).
        """
        samples = require_samples(parser_samples, ParserSamples, "parser_samples")
        inputs = _Inputs(decision_parser)
        decision = inputs.sample(samples.action_reply, "action_reply", Action)
        _assert_survives_the_log(decision, samples.action_reply)
        for reply in _hard_replies(samples):
            variant = inputs.parse(reply)
            if isinstance(variant, Action):
                _assert_survives_the_log(variant, reply)
        inputs.done()

    @golden_settings(max_examples=15)
    @given(data=st.data())
    @example(data=None)
    async def test_parses_golden_samples(
        self,
        decision_parser: DecisionParser,
        parser_samples: ParserSamples,
        data: st.DataObject | None,
    ) -> None:
        """Each golden reply, and each variation its format allows, parses to exactly the
        decision the implementer stated — on one parser object, in any order.

        The other promises check the branch of a decision, not its content: an action with
        the wrong tool, an argument cut at 4 096 characters, the last of two tool calls, or a
        decision remembered from the previous reply is total, deterministic and serialisable.
        Checked when ``parser_samples.golden`` gives (reply, decision) pairs: each reply, each
        variation of ``golden_variations`` (whitespace, prose before and after, argument text)
        at 0, 1 and just under, at and over 64, 100, 128, 256, 1 000, 1 024, 4 096, 16 384 and
        65 536 characters, and — with ``argument_text`` — replies holding two actions (the
        first or an ``InvalidDecision``, never the second or a blend — a failure names each
        field that differs from the first, both values with their types, and whose each field
        is), all parsed on one object:
        each back to back twelve times, interleaved in drawn orders, after a reply it could not
        parse and after one it could. An expected ``InvalidDecision`` is matched by branch.
        """
        samples = require_samples(parser_samples, ParserSamples, "parser_samples")
        if not samples.golden:
            unverifiable(
                promise="each golden reply parses to exactly the decision stated for it",
                why="parser_samples.golden is empty: the kit does not know what a reply must give",
                verify_yourself=(
                    "return polyloop.testing.ParserSamples(..., golden=[(reply, decision), ...], "
                    "golden_variations={...}) from the fixture that gives your samples — one "
                    "pair per form your format has — and the kit checks this; or test each "
                    "form's exact decision yourself, at argument sizes past 64 KiB"
                ),
            )
        fixed, pool = golden_sequences(samples)
        if data is None:  # the explicit example: every case at every edge size, every run
            run_sequence(lambda reply: _parse(decision_parser, reply), fixed)
            return
        order = data.draw(
            st.lists(st.integers(0, len(pool) - 1), min_size=1, max_size=40), label="order"
        )
        run_sequence(lambda reply: _parse(decision_parser, reply), [pool[i] for i in order])

    async def test_parse_time_is_linear(
        self, decision_parser: DecisionParser, parser_samples: ParserSamples
    ) -> None:
        """Parsing a reply of up to 64 KiB takes time that grows at most about linearly with
        its length.

        ``parse()`` is synchronous: while it runs the event loop stalls, and every run sharing
        it waits. Parsers go quadratic on replies cut off mid-structure — a regular expression
        whose lazy group may start anywhere scans the rest of a reply cut at ``max_tokens``
        from every position — and a reply of 40 000 characters then blocks the loop for
        seconds. Replies of prose, cut inside a brace, a string or a fence, made of repeated
        objects or ReAct steps, and made of ``parser_samples.action_reply`` are parsed at
        8 KiB and then at 16, 32 and 64 KiB, and the CPU time of each parse (not wall-clock
        time: a loaded machine does not decide it) is compared with the time at 8 KiB
        measured in the same run: at k times the length at most 3 × k times as long (or
        20 ms), and never over 2 s; a time over its bound is measured again and the minimum
        counts. The other parser promises leave replies over 16 KiB unparsed for a parser
        found non-linear here and point at this promise, so its slowness is reported once.
        """
        samples = require_samples(parser_samples, ParserSamples, "parser_samples")
        require_seam(decision_parser, "decision_parser", "parse", "parse(reply) -> ParsedReply")
        slow = generic_verdict(decision_parser, decision_parser.parse)
        if slow is None:
            shapes = sample_shapes(samples.action_reply.text)
            slow = measure(decision_parser.parse, shapes)
        if slow is not None:
            pytest.fail(slow.text(), pytrace=False)

    async def test_is_deterministic_across_processes(
        self, decision_parser: DecisionParser, parser_samples: ParserSamples
    ) -> None:
        """Parsing the same reply in another process gives an equal decision.

        A resume runs in a new process, and every Python process salts ``str`` hashes anew
        (``PYTHONHASHSEED``): a parser that picks the first element of a set of names, or
        builds its arguments from a set or a dict of sets, decides one way in the run and
        another on its resume — while every parse inside one process agrees. Checked when
        ``parser_samples.factory`` names a factory: the samples, their fixed variants and a
        batch of generated ones are parsed in child processes under different hash seeds, and
        every child must reach the same decision for every reply.
        """
        samples = require_samples(parser_samples, ParserSamples, "parser_samples")
        if samples.factory is None:
            unverifiable(
                promise="parsing the same reply in another process gives an equal decision",
                why=(
                    "the suite has no way to build your parser in a child process, where str "
                    "hashes are salted differently"
                ),
                verify_yourself=(
                    "return polyloop.testing.ParserSamples(..., factory='package.module:callable')"
                    ", a callable importable in a child process that takes no arguments and "
                    "returns your parser, from the fixture that gives your samples (your "
                    "`parser_samples` override, or the samples fixture your "
                    "@pytest_polyloop.seam(..., samples=...) tag or polyloop_seams line names), "
                    "and the kit checks this; or parse the same replies under "
                    "PYTHONHASHSEED=1 and PYTHONHASHSEED=2 yourself and compare, and never let "
                    "the iteration order of a set decide"
                ),
            )
        # Started first: the replies are made while the children import and build the parser.
        children = await spawn_children(samples.factory)
        try:
            # Long replies probe scanners, not hash order: they stay in-process.
            replies = [*_sample_replies(samples), *_hard_replies(samples, long=False)]
            replies += _generated_batch(samples)
        except BaseException:
            await end_children(children)
            raise
        results = await parse_in_children(samples.factory, children, replies)
        problems = cross_process_problems(replies, results)
        shown = "\n".join(problems[:3])
        more = f"\n… and {len(problems) - 3} more" if len(problems) > 3 else ""
        assert not problems, (
            f"{len(problems)} of {len(replies)} replies parsed to different decisions in "
            f"processes with different hash seeds (set or dict-of-set iteration order?):\n"
            f"{shown}{more}"
        )


def _assert_survives_the_log(decision: Action, reply: ModelReply) -> None:
    try:
        if decision.tool_args is not None:
            canonical_json(dict(decision.tool_args))
        written = ActionIntent(step_index=0, action=decision).to_json()
    except (TypeError, ValueError) as error:
        pytest.fail(
            f"the action parsed from {short(reply, 200)} cannot be written to the log: "
            f"{error}\n{short(decision)}",
            pytrace=False,
        )
    read_back = record_from_json(written)
    assert isinstance(read_back, ActionIntent)
    found = mismatch(decision, read_back.action, "action")
    assert found is None, (
        f"the action parsed from {short(reply, 200)} does not survive the log unchanged: {found}"
    )


_BATCH = 24


def _generated_batch(samples: ParserSamples) -> list[ModelReply]:
    """A batch of generated variants of the samples (one Hypothesis draw, no shrinking)."""
    batch: list[ModelReply] = []

    # One draw on a busy machine may be slow or large: no health check may fail the promise.
    @settings(bounded_settings(max_examples=1), suppress_health_check=list(HealthCheck))
    @given(st.lists(_replies_near(samples, long=False), min_size=_BATCH, max_size=_BATCH))
    def draw(replies: list[ModelReply]) -> None:
        batch[:] = replies

    draw()
    return batch
