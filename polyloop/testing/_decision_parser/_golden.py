"""``decision_parser.parses_golden_samples``: each golden reply gives exactly its decision.

The implementer states what some replies *must* parse to (``ParserSamples.golden``) and which
variations their format allows around them (``ParserSamples.golden_variations``). The kit
builds every declared variation at every boundary size, and replies holding two decisions, and
parses them on one parser object in many orders: back to back, interleaved, after a reply it
could not parse and after one it could. Each parse must give the decision the implementer
stated (an expected ``InvalidDecision`` is matched by branch: feedback wording is free).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import hypothesis
import pytest

from polyloop.testing._shared._shapes import mismatch, parsed_reply_problems, short
from polyloop.types import Action, InvalidDecision, ModelReply, ParsedReply

if TYPE_CHECKING:
    from polyloop.testing._shared._samples import ParserSamples

__all__ = [
    "GOLDEN_SIZES",
    "Case",
    "cases_of",
    "golden_sequences",
    "golden_settings",
    "judge",
    "run_sequence",
    "two_decisions",
]

#: The sizes (characters) the kit gives prose and argument text: 0, 1, and just under, at and
#: over the page, buffer and cap sizes common in real code.
GOLDEN_SIZES: tuple[int, ...] = (
    0,
    1,
    *(n + d for n in (64, 100, 128, 256, 1000, 1024, 4096, 16384, 65536) for d in (-1, 0, 1)),
)
_LARGE = 4_097
_FEW_SIZES = frozenset({0, 1, 64, 65, 1024, 1025, 4096, 4097})
#: Letters, digits, spaces, € and emoji of 1 to 4 UTF-8 bytes each: a size in characters lands on a
#: different size in bytes (and UTF-16 units) for each fill.
_FILLS = ("polyloop ", "naïve Ωж 日本語 한국어 😀 ", "x9 ß€😀𝔘 ")
#: Prose opens with characters whose case mapping changes the length (``ß``, ``ﬁ``, ``İ``): an
#: offset found in ``text.casefold()`` or ``text.lower()`` points elsewhere in ``text``.
_PROSE = (
    "Straße, ﬁle, İstanbul: let me think about this step by step. "
    "Je vais vérifier ça, 日本語で説明します. "
)
#: Before the reply: blank lines (indenting its first line would change it in line-based
#: formats such as Markdown); after it: any whitespace.
_LEADING = ("", "\n", "\r\n", "\n\n", " \t\n", "\n \r\n")
_TRAILING = (" ", "\n", "\r\n", "\t", "  \n\n", "\n \t\r\n ")


@dataclass(frozen=True, slots=True)
class Case:
    """One reply to parse and what it must give: ``expected`` exactly (``InvalidDecision`` by
    branch only), or, when ``first_or_invalid``, ``expected`` or any ``InvalidDecision``."""

    label: str
    reply: ModelReply
    expected: ParsedReply
    first_or_invalid: bool = False
    second: ParsedReply | None = None  # in a reply holding two decisions: the one after


def fill(size: int, which: int = 0) -> str:
    """``size`` characters of letters, digits, spaces, ``€`` and emoji (no quotes, backslashes,
    brackets or line breaks), starting and ending with a letter."""
    if size == 0:
        return ""
    unit = _FILLS[which % len(_FILLS)]
    text = (unit * (size // len(unit) + 2))[:size]
    return "a" + text[1:-1] + "z" if size > 1 else "a"


def _prose(size: int) -> str:
    return (_PROSE * (size // len(_PROSE) + 1))[:size].rstrip() or "Ok."


def _with_text(reply: ModelReply, text: str) -> ModelReply:
    return ModelReply(
        text=text, reasoning=reply.reasoning, call_id=reply.call_id, usage=reply.usage
    )


def _plain(value: object) -> bool:
    """A non-empty str that any text format writes as it is: no quote, backslash or control
    character (replacing an escaped value would leave half its escape behind)."""
    return (
        isinstance(value, str)
        and value != ""
        and not any(c in "\"'\\`" or not c.isprintable() for c in value)
    )


def _slots(reply: ModelReply, action: Action) -> Iterator[tuple[str, str]]:
    """The substitutable places of an action: (argument name or ``""`` for the text, value)."""
    args = action.tool_args
    if args is not None:
        for name, value in args.items():
            if _plain(value) and reply.text.count(value) == 1:
                yield name, value
    elif action.tool_name is None and reply.text.count(action.text) == 1:
        yield "", action.text


def _substituted(
    reply: ModelReply, action: Action, slot: tuple[str, str], new: str
) -> tuple[ModelReply, Action]:
    name, old = slot
    text = reply.text.replace(old, new)
    if name == "":
        return _with_text(reply, text), Action(text=new)
    args = {**(action.tool_args or {}), name: new}
    # The action's text follows the argument where it shows it once (a canonical JSON text).
    shown = action.text.replace(old, new) if action.text.count(old) == 1 else action.text
    return _with_text(reply, text), Action(text=shown, tool_name=action.tool_name, tool_args=args)


def _argument_cases(
    number: int, reply: ModelReply, action: Action, sizes: tuple[int, ...]
) -> Iterator[Case]:
    for slot in _slots(reply, action):
        where = f"argument {slot[0]!r}" if slot[0] else "text"
        for size in sizes:
            if size == 0 and slot[0] == "":
                continue  # an action without text is no action
            # Every fill up to _LARGE (same-size neighbours of other content); one above.
            fills = range(len(_FILLS)) if size <= _LARGE else (size % len(_FILLS),)
            for which in fills:
                new_reply, new_action = _substituted(reply, action, slot, fill(size, which))
                label = f"golden[{number}] with its {where} {size} characters ({_FILLS[which]!r})"
                # An empty argument may be no argument in a format: refusing it is fine.
                yield Case(label, new_reply, new_action, first_or_invalid=size == 0)


def cases_of(
    golden: tuple[tuple[ModelReply, ParsedReply], ...],
    variations: frozenset[str],
    all_sizes: tuple[int, ...] = GOLDEN_SIZES,
) -> list[Case]:
    """Every golden reply and every declared variation of it: the first golden action and
    final answer at every size of ``all_sizes``, the others at :data:`_FEW_SIZES` (a scanner's
    or a cap's size seldom depends on the form, and the suite must stay fast)."""
    found: list[Case] = []
    seen: set[type] = set()
    for number, (reply, expected) in enumerate(golden):
        found.append(Case(f"golden[{number}]", reply, expected))
        if isinstance(expected, InvalidDecision):
            continue
        first = type(expected) not in seen
        seen.add(type(expected))
        sizes = all_sizes if first else tuple(n for n in all_sizes if n in _FEW_SIZES)
        if "whitespace" in variations:
            for n, space in enumerate(_LEADING):
                text = space + reply.text + _TRAILING[n]
                found.append(
                    Case(f"golden[{number}] in whitespace {n}", _with_text(reply, text), expected)
                )
        for kind, before in (("prose_before", True), ("prose_after", False)):
            if kind not in variations or (not before and not isinstance(expected, Action)):
                continue
            for size in sizes[1:]:
                text = (
                    _prose(size) + "\n" + reply.text if before else reply.text + "\n" + _prose(size)
                )
                label = f"golden[{number}] with {size} characters of prose {kind.split('_')[1]}"
                found.append(Case(label, _with_text(reply, text), expected))
        if "argument_text" in variations and isinstance(expected, Action):
            found += _argument_cases(number, reply, expected, sizes)
    return found


def two_decisions(
    golden: tuple[tuple[ModelReply, ParsedReply], ...], sizes: tuple[int, ...] = (1, 64, 4097)
) -> list[Case]:
    """Replies holding two actions of one golden form that differ in one argument (needs
    ``argument_text``): each must give the first action or an ``InvalidDecision``."""
    found: list[Case] = []
    for number, (reply, expected) in enumerate(golden):
        if not isinstance(expected, Action):
            continue
        for slot in _slots(reply, expected):
            for size in sizes:
                other_reply, _ = _substituted(reply, expected, slot, fill(size, 1))
                _, other = _substituted(reply, expected, slot, fill(size, 1))
                for sep in ("\n", "\n\n"):
                    text = reply.text + sep + other_reply.text
                    label = f"golden[{number}] then a second action ({size} characters differ)"
                    found.append(Case(label, _with_text(reply, text), expected, True, other))
                    text = other_reply.text + sep + reply.text
                    label = f"a second action ({size} characters differ) then golden[{number}]"
                    found.append(Case(label, _with_text(reply, text), other, True, expected))
    return found


def judge(parse: Callable[[ModelReply], Any], case: Case) -> str | None:
    """Parse ``case.reply``; a line saying how the decision differs from the expected one."""
    got = parse(case.reply)
    problems = parsed_reply_problems(got, "parse()")
    if problems:
        return "; ".join(problems)
    if isinstance(got, InvalidDecision) and (
        case.first_or_invalid or isinstance(case.expected, InvalidDecision)
    ):
        if not got.feedback.strip():
            return f"{case.label} parsed to an InvalidDecision with blank feedback"
        return None
    if isinstance(case.expected, InvalidDecision):
        return f"{case.label} parsed to {short(got)}, not an InvalidDecision"
    found = mismatch(case.expected, got, "decision")
    if found is None:
        return None
    if case.first_or_invalid and case.second is not None:
        return (
            f"{case.label} parsed to {short(got)}: a reply holding two decisions must give the "
            f"first ({short(case.expected)}) or an InvalidDecision; "
            + _against_both(case, got, found)
        )
    if case.first_or_invalid:
        return (
            f"{case.label} parsed to {short(got)}, not {short(case.expected)} or an InvalidDecision"
        )
    return f"{case.label} parsed to {short(got)}, not {short(case.expected)} ({found})"


_FIELDS = ("text", "tool_name", "tool_args")


def _owned(fields: list[str], whose: str) -> list[str]:
    """``["its text and tool_args are the second's"]``, or nothing for no fields."""
    if not fields:
        return []
    names = ", ".join(fields[:-1]) + " and " + fields[-1] if len(fields) > 1 else fields[0]
    return [f"its {names} {'are' if len(fields) > 1 else 'is'} {whose}"]


def _against_both(case: Case, got: object, found: str) -> str:
    """How ``got`` differs from the first decision of a two-decision reply, field by field: each
    field that differs with both values and their types, and which fields are the first's, which
    the second's — so a whole-reply text is not mistaken for taking the second."""
    first, second = case.expected, case.second
    if not (isinstance(got, Action) and isinstance(first, Action) and isinstance(second, Action)):
        return found
    owner: dict[str, list[str]] = {"both": [], "first": [], "second": [], "neither": []}
    differ = []
    for name in _FIELDS:
        value, want = getattr(got, name), getattr(first, name)
        as_first = mismatch(want, value, name) is None
        as_second = mismatch(getattr(second, name), value, name) is None
        whose = {(True, True): "both", (True, False): "first", (False, True): "second"}
        owner[whose.get((as_first, as_second), "neither")].append(name)
        if not as_first:
            whole = " (the whole reply)" if value == case.reply.text else ""
            differ.append(
                f"{name} differs: {type(value).__name__} {short(value)}{whole} where the first "
                f"has {type(want).__name__} {short(want)}"
            )
    if owner["neither"]:
        verdict = _owned(owner["neither"], "neither decision's")[0]
    elif owner["first"]:
        verdict = "it is a blend of the two"
    else:
        verdict = "it is the second decision"
    owners = [*_owned(owner["second"], "the second's"), *_owned(owner["first"], "the first's")]
    owners += _owned(owner["both"], "the same in both")
    return f"{verdict}: {'; '.join([*owners, *differ])}"


_BACK_TO_BACK = 12
_AGAIN_UP_TO = 4_297  # characters: the cases parsed again, in reverse order
_POOL_SIZE = 1_025  # drawn orders use the cases up to this size: cheap to shrink


def golden_settings(max_examples: int) -> hypothesis.settings:
    """Derandomized (the same orders every run), with a shrink phase: parsing is cheap, and
    the shortest order that fails is the one worth reading."""
    return hypothesis.settings(
        max_examples=max_examples,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(hypothesis.HealthCheck),
    )


def golden_sequences(samples: ParserSamples) -> tuple[list[Case], list[Case]]:
    """The fixed order every run parses, and the pool drawn orders pick from."""
    golden = tuple(  # normalised by ParserSamples; typed as given
        (r if isinstance(r, ModelReply) else ModelReply(text=r), d) for r, d in samples.golden
    )
    variations = samples.golden_variations
    firsts = cases_of(golden, frozenset())  # the golden replies themselves
    labels = {c.label for c in firsts}
    varied = [c for c in cases_of(golden, frozenset(variations)) if c.label not in labels]
    again = [c for c in reversed(varied) if len(c.reply.text) <= _AGAIN_UP_TO]
    several = two_decisions(golden) if "argument_text" in variations else []
    failing = Case("parser_samples.invalid_reply", samples.invalid_reply, _INVALID)
    success = next((c for c in firsts if isinstance(c.expected, Action)), failing)
    fixed = list(firsts)
    for case in firsts:
        fixed += [case] * _BACK_TO_BACK
    for case in reversed(firsts):
        fixed += [failing, case, success, case]
    fixed += varied + several + [failing, *again]
    pool = [*firsts, failing, *several]
    pool += [c for c in varied if len(c.reply.text) <= _POOL_SIZE + 200]
    return fixed, pool


_INVALID = InvalidDecision(feedback="(any feedback)")


def run_sequence(parse: Callable[[ModelReply], Any], cases: Sequence[Case]) -> None:
    """Parse ``cases`` in order on one parser; fail on the first that differs, with the calls
    before it."""
    for index, case in enumerate(cases):
        problem = judge(parse, case)
        if problem is None:
            continue
        before = [c.label for c in cases[max(0, index - 4) : index]]
        history = (
            f"\ncall {index + 1} on one parser object; the calls just before it: "
            + "; ".join(before)
            if before
            else "\nthe first call on this parser object"
        )
        pytest.fail(f"{problem}\non {short(case.reply, 300)}{history}", pytrace=False)
