"""JsonToolCallParser keeps every DecisionParser promise of the contract kit."""

from __future__ import annotations

import pytest

from polyloop import ModelReply
from polyloop.parsers import JsonToolCallParser
from polyloop.testing import DecisionParserContract, ParserSamples


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
        )
