"""CodeBlockParser keeps every DecisionParser promise of the contract kit."""

from __future__ import annotations

import pytest

from polyloop import Action, FinalAnswer, InvalidDecision, ModelReply
from polyloop.parsers import CodeBlockParser
from polyloop.testing import DecisionParserContract, ParserSamples

_INVALID = InvalidDecision(feedback="(any)")

# One pair per form the parser reads (its docstring), and the near-misses it must refuse.
GOLDEN: list[tuple[str, Action | FinalAnswer | InvalidDecision]] = [
    ("Let me check.\n```python\nprint(6 * 7)\n```", Action(text="print(6 * 7)")),
    ("```\nx = 1\nprint(x)\n```", Action(text="x = 1\nprint(x)")),
    ("```py\nimport math\n```\nThat is all.", Action(text="import math")),
    ("```Python3\nprint('日本語 😀')\n```", Action(text="print('日本語 😀')")),
    ("```python\n    indented = True\n```", Action(text="    indented = True")),
    ("FINAL ANSWER: 42", FinalAnswer(text="42")),
    ("I am done.\n  FINAL ANSWER:  forty\ntwo  ", FinalAnswer(text="forty\ntwo")),
    ("```python\nprint(1)\n```\n```python\nprint(2)\n```", _INVALID),
    ("```bash\nls\n```", _INVALID),
    ("```python\n   \n```", _INVALID),
    ("```python\nprint(1)", _INVALID),
    ("```python\nprint(1)\n```\nFINAL ANSWER: 1", _INVALID),
    ("FINAL ANSWER:   ", _INVALID),
    ("final answer: 42", _INVALID),
    ("I would print 6 * 7, I think.", _INVALID),
]


class TestCodeBlockParserContract(DecisionParserContract):
    @pytest.fixture
    def decision_parser(self) -> CodeBlockParser:
        return CodeBlockParser()

    @pytest.fixture
    def parser_samples(self) -> ParserSamples:
        return ParserSamples(
            action_reply=ModelReply(text="Let me check.\n```python\nprint(6 * 7)\n```"),
            invalid_reply=ModelReply(text="I would print 6 * 7, I think."),
            final_reply=ModelReply(text="FINAL ANSWER: 42"),
            # Built again in child processes for is_deterministic_across_processes.
            factory="polyloop.parsers:CodeBlockParser",
            # What each form must parse to, and what the format allows around it
            # (parses_golden_samples).
            golden=GOLDEN,
            golden_variations={"whitespace", "prose_before", "prose_after", "argument_text"},
        )
