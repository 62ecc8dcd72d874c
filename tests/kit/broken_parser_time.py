"""ReAct decision parsers, one quadratic on a reply cut at ``max_tokens``, beside its linear twin
(issue 37, bounded synchronous work).

Their format::

    Thought: <anything>
    Action: <tool name>
    Action Input: {"arg": ...}

or ``Answer: <text>`` for a final answer. :class:`ReActRegexParser` finds the call with the
regular expression llama-index's ReAct output parser uses: its optional ``Thought:`` lets the
lazy group start at every position, so on a reply without a complete call ``re.search`` scans
the rest of the reply from each one — quadratic in the length, and ``parse()`` blocks the event
loop all that time. :class:`ReActScanParser` finds the same markers with ``str.find``: linear.
Both give the same decision for every reply either can parse; both are total.
"""

from __future__ import annotations

import json
import re
from typing import Any

from polyloop.testing import ParserSamples
from polyloop.types import Action, FinalAnswer, InvalidDecision, ModelReply, ParsedReply

FEEDBACK = (
    "Reply with 'Thought: ...', then 'Action: <tool>' and 'Action Input: {...}' on their own "
    "lines, or with 'Answer: <text>'."
)

_CALL = re.compile(
    r"(?:\s*Thought: (.*?)|(?:\s*Thought: )?(.*?))\s*Action: ([a-zA-Z0-9_]+).*?\s*"
    r"Action Input: .*?(\{.*\})",
    re.DOTALL,
)
_NAME = re.compile(r"[a-zA-Z0-9_]+")


def _action(name: str, raw: str) -> ParsedReply:
    try:
        args: Any = json.JSONDecoder().raw_decode(raw)[0]
    except (ValueError, RecursionError):
        return InvalidDecision(feedback=FEEDBACK)
    if not isinstance(args, dict):
        return InvalidDecision(feedback=FEEDBACK)
    try:
        return Action(text=f"{name} {raw.strip()}", tool_name=name, tool_args=args)
    except ValueError:
        return InvalidDecision(feedback=FEEDBACK)


def _answer(text: str) -> ParsedReply:
    at = text.find("Answer:")
    if at < 0 or not text[at + 7 :].strip():
        return InvalidDecision(feedback=FEEDBACK)
    return FinalAnswer(text=text[at + 7 :].strip())


class ReActScanParser:
    """Correct: the first ``Action:`` line, the ``Action Input:`` after it, and the first JSON
    object there — each found by one scan."""

    def parse(self, reply: ModelReply) -> ParsedReply:
        text = reply.text
        at = text.find("Action: ")
        if at < 0:
            return _answer(text)
        line_end = text.find("\n", at)
        name = text[at + 8 : line_end if line_end >= 0 else len(text)].strip()
        given = text.find("Action Input: ", at)
        if given < 0 or not _NAME.fullmatch(name):
            return InvalidDecision(feedback=FEEDBACK)
        raw = text[given + 14 :]
        brace = raw.find("{")
        return _action(name, raw[brace:]) if brace >= 0 else InvalidDecision(feedback=FEEDBACK)


class ReActRegexParser(ReActScanParser):
    """The same decisions, found with llama-index's ReAct regular expression: quadratic on a
    reply that holds no complete call (a reply cut at ``max_tokens``, or plain prose)."""

    def parse(self, reply: ModelReply) -> ParsedReply:
        found = _CALL.search(reply.text)
        if found is None:
            if "Action: " in reply.text:
                return InvalidDecision(feedback=FEEDBACK)
            return _answer(reply.text)
        return super().parse(reply)


SAMPLES = ParserSamples(
    action_reply=ModelReply(
        text='Thought: I should look it up.\nAction: search\nAction Input: {"query": "polyloop"}'
    ),
    invalid_reply=ModelReply(text="I am not sure what to do."),
    final_reply=ModelReply(text="Thought: I know it now.\nAnswer: a Python agent loop"),
)
