"""Bundled decision parsers: JSON tool calls and fenced code blocks.

Both are total and deterministic: any reply text gives one of the three decisions, the same
one every time (a resume re-parses a logged reply).
"""

from __future__ import annotations

from polyloop.parsers._code_block import CodeBlockFeedback, CodeBlockParser
from polyloop.parsers._json_tool_call import JsonToolCallParser

__all__ = ["CodeBlockFeedback", "CodeBlockParser", "JsonToolCallParser"]
