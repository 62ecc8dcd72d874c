"""The samples with the catalogue's boundary values put where a decision carries its values.

The kit does not know a parser's format, so it takes the places a value sits in the sample
text — each run of digits and each quoted string after a ``:`` or ``=`` — and puts there, one at
a time, every number of :data:`~polyloop.testing.strategies.BOUNDARY_NUMBER_TEXTS` (``NaN``,
``Infinity``, an integer of more digits than ``int`` converts to ``str``, …) and a list or an
object nested at every depth of :func:`~polyloop.testing.strategies.nesting_depths` around the
value that was there. A reply in the sample's own format then carries the value into the parser's
reading of the decision, where a scanner of the surrounding text never looks. Prose with
characters whose case mapping changes the length comes before and after each sample too.
"""

from __future__ import annotations

import re

from polyloop.testing._shared._boundaries import (
    BOUNDARY_NUMBER_TEXTS,
    CASE_CHANGING_TEXT,
    nested_json,
    nesting_depths,
)
from polyloop.types import ModelReply

__all__ = ["boundary_replies"]

#: A value in the sample: a run of digits, or a quoted string after ``:`` or ``=``.
_SLOT = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])|(?<=[:=])\s*\"[^\"\\\n]*\"")
#: Values replaced per sample: the first few places are enough to reach the decision's
#: arguments in any format the kit has seen, and keep the probe cheap.
_SLOTS = 4


def _slots(text: str) -> list[tuple[int, int]]:
    found = [(m.start(), m.end()) for m in _SLOT.finditer(text)]
    return found[-_SLOTS:]  # the last ones: arguments come after the tool's name


def _texts(text: str) -> list[str]:
    variants = [
        CASE_CHANGING_TEXT + "\n" + text,
        text + "\n" + CASE_CHANGING_TEXT,
        "ß" * 64 + " İ" * 64 + "\n" + text,
    ]
    depths = nesting_depths()
    for start, end in _slots(text):
        head, value, tail = text[:start], text[start:end].strip(), text[end:]
        variants += [head + number + tail for number in BOUNDARY_NUMBER_TEXTS]
        for depth in depths:
            variants.append(head + nested_json(depth, value) + tail)
            variants.append(head + nested_json(depth, value, kind="object") + tail)
    return variants


def boundary_replies(replies: list[ModelReply]) -> list[ModelReply]:
    """Each reply's text with the catalogue's values in each place a value sits (its other
    fields kept)."""
    return [
        ModelReply(text=text, reasoning=reply.reasoning, call_id=reply.call_id, usage=reply.usage)
        for reply in replies
        for text in _texts(reply.text)
    ]
