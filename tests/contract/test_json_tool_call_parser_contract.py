"""JsonToolCallParser keeps every DecisionParser promise of the contract kit."""

from __future__ import annotations

from typing import Any

import pytest

from polyloop import Action, FinalAnswer, InvalidDecision, ModelReply, canonical_json
from polyloop.parsers import JsonToolCallParser
from polyloop.testing import DecisionParserContract, ParserSamples

_INVALID = InvalidDecision(feedback="(any)")


def _call(tool: str, args: dict[str, Any]) -> Action:
    """The action JsonToolCallParser gives: its text is the call's canonical JSON."""
    return Action(
        text=canonical_json({"tool": tool, "arguments": args}), tool_name=tool, tool_args=args
    )


# One pair per form the parser reads (its docstring), and the near-misses it must refuse.
GOLDEN: list[tuple[str, Action | FinalAnswer | InvalidDecision]] = [
    (
        '```json\n{"tool": "search", "arguments": {"query": "polyloop"}}\n```',
        _call("search", {"query": "polyloop"}),
    ),
    (
        '{"tool": "search", "arguments": {"query": "polyloop"}}',
        _call("search", {"query": "polyloop"}),
    ),
    ('{"name": "fetch", "args": {"url": "example"}}', _call("fetch", {"url": "example"})),
    (
        '{"tool": "note", "name": "groceries", "text": "milk"}',
        _call("note", {"name": "groceries", "text": "milk"}),
    ),
    (
        '{"arguments": {"x": [1, 2.5, null, true]}, "tool": "plot"}',
        _call("plot", {"x": [1, 2.5, None, True]}),
    ),
    ('{"tool": "now", "arguments": null}', _call("now", {})),
    ('{"tool": "now"}', _call("now", {})),
    (
        'Let me look it up.\n{"tool": "lookup", "arguments": {"word": "loop"}} and then wait.',
        _call("lookup", {"word": "loop"}),
    ),
    (
        '```\n{"tool": "search", "args": {"query": "fences"}}\n```',
        _call("search", {"query": "fences"}),
    ),
    (
        '```python\nx = {"a": 1}\n```\n{"tool": "run", "arguments": {"code": "x"}}',
        _INVALID,  # a brace group in a block of another language counts as prose: two objects
    ),
    (
        '```python\nx = 1\n```\n{"tool": "run", "arguments": {"code": "x"}}',
        _call("run", {"code": "x"}),
    ),
    (  # in prose: braces and escaped quotes inside a string do not end the object
        'Sure {"tool": "echo", "arguments": {"text": "a } and \\" {quote"}} done.',
        _call("echo", {"text": 'a } and " {quote'}),
    ),
    (  # an escaped backslash ends a string like any other character
        'Look: {"tool": "cd", "arguments": {"dir": "C:\\\\"}} ok',
        _call("cd", {"dir": "C:\\"}),
    ),
    (  # a brace group in prose that is not JSON is skipped for the one that is
        'Using {braces} here, then {"tool": "echo", "arguments": {"n": {"deep": [1]}}}',
        _call("echo", {"n": {"deep": [1]}}),
    ),
    ('{"final_answer": "42"}', FinalAnswer(text="42")),
    ('The answer:\n{"final_answer": "forty two"}', FinalAnswer(text="forty two")),
    ('{"tool": "search", "arguments": ', _INVALID),
    ('{"tool": "a"}\n{"tool": "b"}', _INVALID),
    ('```json\n{"tool": "a"}\n```\n```json\n{"tool": "b"}\n```', _INVALID),
    ('{"tool": "a", "final_answer": "x"}', _INVALID),
    ('{"final_answer": ""}', _INVALID),
    ('{"final_answer": 42}', _INVALID),
    ('{"tool": 7}', _INVALID),
    ('{"tool": "  "}', _INVALID),
    ('{"tool": "a", "arguments": [1]}', _INVALID),
    ('{"tool": "a", "arguments": {}, "extra": 1}', _INVALID),
    ('{"query": "no tool"}', _INVALID),
    ('[{"tool": "a"}]', _INVALID),
    ('{"tool": "a", "arguments": {"n": NaN}}', _INVALID),
    ("No JSON here.", _INVALID),
]


class TestJsonToolCallParserContract(DecisionParserContract):
    @pytest.fixture
    def decision_parser(self) -> JsonToolCallParser:
        return JsonToolCallParser()

    @pytest.fixture
    def parser_samples(self) -> ParserSamples:
        return ParserSamples(
            action_reply=ModelReply(
                text='```json\n{"tool": "search", "arguments": {"query": "polyloop"}}\n```'
            ),
            invalid_reply=ModelReply(text='{"tool": "search", "arguments": '),
            final_reply=ModelReply(text='{"final_answer": "42"}'),
            # Built again in child processes for is_deterministic_across_processes.
            factory="polyloop.parsers:JsonToolCallParser",
            # What each form must parse to, and what the format allows around it
            # (parses_golden_samples).
            golden=GOLDEN,
            golden_variations={"whitespace", "prose_before", "prose_after", "argument_text"},
        )
