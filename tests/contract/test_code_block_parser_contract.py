"""CodeBlockParser keeps every DecisionParser promise of the contract kit."""

from __future__ import annotations

import pytest

from polyloop import ModelReply
from polyloop.parsers import CodeBlockParser
from polyloop.testing import DecisionParserContract, ParserSamples


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
        )
