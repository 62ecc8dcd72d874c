"""Bundled decision parsers: JSON tool calls and fenced code blocks.

Both are total and deterministic: any reply text gives one of the three decisions, the same
one every time (a resume re-parses a logged reply). A parser of your own builds its actions
with :func:`action_or_feedback` (re-exported here from :mod:`polyloop.types`), so that a
model's value the types refuse (``NaN``, ``Infinity``, arguments nested too deeply) becomes an
``InvalidDecision`` the model is told about, never an exception that stops the run.
"""

from __future__ import annotations

from polyloop.parsers._code_block import CodeBlockFeedback, CodeBlockParser
from polyloop.parsers._json_tool_call import JsonToolCallParser
from polyloop.types import action_or_feedback

__all__ = ["CodeBlockFeedback", "CodeBlockParser", "JsonToolCallParser", "action_or_feedback"]
