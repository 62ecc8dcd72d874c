"""``decision_parser.parse_time_is_linear``: parsing time grows at most about linearly.

``parse()`` is synchronous: while it runs, the event loop stalls, and every other run on it
waits. Real parsers go quadratic on replies cut off mid-structure — a regular expression whose
lazy group may start anywhere (``(?:Thought: )?(.*?)\\s*Action:``) scans the rest of the reply
from every position when the closing part never comes, as on a reply cut at ``max_tokens``.

The probe parses replies of several shapes at :data:`BASE` characters and then at twice, four
times … sixty-four times that (up to 64 KiB), and compares the CPU time of the main thread spent in
``parse()`` — not wall-clock time, so a loaded machine does not decide it — with the time at
:data:`BASE` measured in the same run: at ``k`` times the length it may take at most
:data:`FACTOR` × ``k`` times as long (or :data:`FLOOR_S`, whichever is more), and never more
than :data:`CEILING_S` for one parse. A time just over its bound is measured again (the
minimum counts) before it is judged; the ladder stops at the first length over its bound, so a
quadratic parser costs seconds, not minutes.

The verdict on the generic shapes is kept per parser type for the process: the other parser
promises consult it before they parse a reply longer than :data:`LONG_REPLY`, and leave such
replies unparsed for a parser found non-linear (reporting it as a knock-on of this promise),
so a slow parser is reported here, not under another promise's time limit, and no promise
repeats a slow parse hundreds of times.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from polyloop.testing._shared._raised import raised_by_the_implementation
from polyloop.types import ModelReply

__all__ = [
    "BASE",
    "CEILING_S",
    "FACTOR",
    "FLOOR_S",
    "LONG_REPLY",
    "TIME_PROMISE",
    "Shape",
    "SlowParse",
    "generic_shapes",
    "generic_verdict",
    "known_slow",
    "measure",
    "sample_shapes",
]

TIME_PROMISE = "decision_parser.parse_time_is_linear"
#: The base length (characters) every longer parse is compared with; the ladder doubles it up to
#: 64 KiB, so a quadratic parser is caught at a few KiB, before one parse takes seconds.
BASE = 1_024
LADDER = tuple(BASE * 2**k for k in range(1, 7))
#: At k times the length, at most FACTOR × k times the base time (n log n passes easily).
FACTOR = 3.0
#: CPU seconds below which no parse is judged slow: a quarter second at 64 KiB stalls nothing
#: that matters, and below it timer noise, a cache or a fixed cost could decide.
FLOOR_S = 0.25
#: CPU seconds one parse of a reply up to 64 KiB may take, whatever the ratio.
CEILING_S = 2.0
#: Replies at least this long (text and reasoning) are parsed by the other promises only once
#: this parser type's generic shapes were found linear.
LONG_REPLY = 16_384
_BASE_TRIES = 5
_BASE_BUDGET_S = 0.5  # stop repeating the base parse once this much CPU time went into it
_TRIES = 3  # parses at a length over its bound before it is judged
_NOISE = 2.0  # a time over its bound by at most this factor is measured again

_PROSE = "Let me think about this step by step; the answer depends on the query. "


@dataclass(frozen=True)
class Shape:
    """A kind of reply: ``build(n)`` gives one of exactly ``n`` characters."""

    name: str
    build: Callable[[int], str]


def _repeat(head: str, unit: str) -> Callable[[int], str]:
    return lambda n: (head + unit * (n // max(len(unit), 1) + 1))[:n]


def generic_shapes() -> tuple[Shape, ...]:
    """Shapes any parser meets: prose, and replies cut inside a brace, a string or a fence, or
    made of one structure repeated, in JSON, Markdown and ReAct dress."""
    return (
        Shape("of prose", _repeat("", _PROSE)),
        Shape(
            "cut inside a brace",
            _repeat('{"tool": "search", "args": {"query": "x", "notes": [', "1, 2, 3, "),
        ),
        Shape("cut inside a string", _repeat('{"tool": "write", "args": {"text": "', _PROSE)),
        Shape("cut inside a fence", _repeat("```json\n", '{"a": 1, "b": [2, 3]}\n')),
        Shape("of repeated objects", _repeat("", '{"tool": "t", "args": {}} ')),
        Shape(
            "cut after a ReAct thought",
            _repeat("Thought: I should look this up.\nAction: search\nAction Input: {", _PROSE),
        ),
        Shape("of repeated ReAct steps", _repeat("", "Thought: go on\nAction: search\n")),
    )


def sample_shapes(action_text: str) -> tuple[Shape, ...]:
    """Shapes made of the implementer's own action reply: repeated, and cut in its middle
    after prose (its own format's opening, then no closing)."""
    text = action_text or "x"
    half = text[: max(len(text) // 2, 1)]
    return (
        Shape("of parser_samples.action_reply repeated", _repeat("", text + "\n")),
        Shape(
            "of parser_samples.action_reply's first half, then prose",
            _repeat(half, " " + _PROSE),
        ),
    )


@dataclass(frozen=True)
class SlowParse:
    """A parse over its bound: the shape, the length and its CPU time, and the base time."""

    shape: str
    length: int
    seconds: float
    base_seconds: float

    def text(self) -> str:
        ratio = self.seconds / self.base_seconds if self.base_seconds > 0 else float("inf")
        return (
            f"parse() of a reply {self.shape} took {self.seconds * 1000:.0f} ms of CPU time at "
            f"{self.length:,} characters against {self.base_seconds * 1000:.1f} ms at "
            f"{BASE:,}: {ratio:.0f} times as long for {self.length / BASE:g} times the length, "
            f"where at most {FACTOR * self.length / BASE:g} times as long (or "
            f"{FLOOR_S * 1000:.0f} ms), and never over {CEILING_S:g} s, is about linear — "
            "parse() blocks the event loop while it runs"
        )


@contextmanager
def _quiet() -> Iterator[None]:
    """No cyclic collection inside a timed parse: it would charge the collector's time."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _cpu(parse: Callable[[ModelReply], object], reply: ModelReply) -> float:
    """CPU seconds of this thread in one ``parse(reply)``; what it returns or raises is other
    promises' business."""
    with _quiet():
        started = time.thread_time()
        try:
            parse(reply)
        except BaseException as error:  # never_raises judges this; here only its time counts
            if not raised_by_the_implementation(error):
                raise
        return time.thread_time() - started


def _base(parse: Callable[[ModelReply], object], reply: ModelReply) -> float:
    best, spent = float("inf"), 0.0
    for _ in range(_BASE_TRIES):
        took = _cpu(parse, reply)
        best, spent = min(best, took), spent + took
        if spent > _BASE_BUDGET_S:
            break
    return best


def _one_shape(parse: Callable[[ModelReply], object], shape: Shape) -> SlowParse | None:
    base = _base(parse, ModelReply(text=shape.build(BASE)))
    if base > CEILING_S:
        return SlowParse(shape.name, BASE, base, base)
    for length in LADDER:
        bound = min(max(FACTOR * (length / BASE) * base, FLOOR_S), CEILING_S)
        reply = ModelReply(text=shape.build(length))
        took = _cpu(parse, reply)
        tries = 1
        # Near the bound, noise (a cache, a clock) may have decided it: measure again. Far
        # over it, or over the ceiling, no noise in CPU time explains it.
        while bound < took <= min(_NOISE * bound, CEILING_S) and tries < _TRIES:
            took, tries = min(took, _cpu(parse, reply)), tries + 1
        if took > bound:
            return SlowParse(shape.name, length, took, base)
    return None


def measure(parse: Callable[[ModelReply], object], shapes: tuple[Shape, ...]) -> SlowParse | None:
    """The first parse over its bound, shape by shape, or ``None`` if every one is within."""
    for shape in shapes:
        found = _one_shape(parse, shape)
        if found is not None:
            return found
    return None


# The generic shapes' verdict per parser type, for this process.
_VERDICTS: dict[type, SlowParse | None] = {}


def generic_verdict(parser: object, parse: Callable[[ModelReply], object]) -> SlowParse | None:
    """The generic shapes' verdict for ``parser``'s type: measured once per process."""
    key = type(parser)
    if key not in _VERDICTS:
        _VERDICTS[key] = measure(parse, generic_shapes())
    return _VERDICTS[key]


def known_slow(
    parser: object, parse: Callable[[ModelReply], object], reply: ModelReply
) -> SlowParse | None:
    """For a reply longer than :data:`LONG_REPLY`: the slow parse that makes it unparsed here
    (this parser's type is not linear), else ``None``."""
    if len(reply.text) + len(reply.reasoning) < LONG_REPLY:
        return None
    return generic_verdict(parser, parse)
