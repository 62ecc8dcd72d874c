"""Decision parsers with a bug on one axis of issue 30 — sequence, composition, size — each
written the way a downstream team writes a JSON tool-call parser, each beside its correct twin.

Their format: one JSON object ``{"tool": "<name>", "args": {...}}`` anywhere in the reply
(prose around it is fine), or ``{"final": "<answer>"}``. Each breaker keeps every promise the
kit had before ``decision_parser.parses_golden_samples``: it is total, deterministic on a
repeated reply, serialisable, and gives the right branch for each sample. Only the golden
samples (what a reply must give) and the variations around them show the bug.
"""

from __future__ import annotations

import json
from typing import Any

from polyloop.types import Action, FinalAnswer, InvalidDecision, ModelReply, ParsedReply

FEEDBACK = 'Reply with one JSON object: {"tool": "<name>", "args": {...}} or {"final": "..."}.'


class JsonCallParser:
    """The correct parser: the text from the first ``{`` to the last ``}`` is the object."""

    def _span(self, text: str) -> str | None:
        start, end = text.find("{"), text.rfind("}")
        return text[start : end + 1] if 0 <= start < end else None

    def _objects(self, text: str) -> list[dict[str, Any]]:
        span = self._span(text)
        if span is None:
            return []
        try:
            value = json.loads(span)
        except (ValueError, RecursionError):
            return []
        return [value] if isinstance(value, dict) else []

    def decide(self, obj: dict[str, Any]) -> ParsedReply:
        if set(obj) == {"final"} and isinstance(obj["final"], str) and obj["final"].strip():
            return FinalAnswer(text=obj["final"])
        tool, args = obj.get("tool"), obj.get("args", {})
        if not isinstance(tool, str) or not tool.strip() or not isinstance(args, dict):
            return InvalidDecision(feedback=FEEDBACK)
        if set(obj) - {"tool", "args"}:
            return InvalidDecision(feedback=FEEDBACK)
        try:
            return Action(
                text=json.dumps(obj, sort_keys=True, ensure_ascii=False),
                tool_name=tool,
                tool_args=args,
            )
        except ValueError:
            return InvalidDecision(feedback=FEEDBACK)

    def parse(self, reply: ModelReply) -> ParsedReply:
        objects = self._objects(reply.text)
        if len(objects) != 1:
            return InvalidDecision(feedback=FEEDBACK)
        return self.decide(objects[0])


# --------------------------------------------------------------------------- sequence


class MemoisesByLength(JsonCallParser):
    """Skips re-parsing a retried reply — recognised by its length, which a different reply of
    the same length shares: the parser answers it with the previous decision."""

    def __init__(self) -> None:
        self._last: tuple[int, ParsedReply] | None = None

    def parse(self, reply: ModelReply) -> ParsedReply:
        if self._last is not None and self._last[0] == len(reply.text):
            return self._last[1]
        decision = super().parse(reply)
        self._last = (len(reply.text), decision)
        return decision


class MemoisesByText(JsonCallParser):
    """The twin: the memo is keyed by the whole reply."""

    def __init__(self) -> None:
        self._last: tuple[str, ParsedReply] | None = None

    def parse(self, reply: ModelReply) -> ParsedReply:
        if self._last is not None and self._last[0] == reply.text:
            return self._last[1]
        decision = super().parse(reply)
        self._last = (reply.text, decision)
        return decision


class CarriesArgumentsOver(JsonCallParser):
    """Fills in arguments a call leaves out from the previous call of the same tool ("the
    model forgets the defaults") — so the arguments of one action leak into the next."""

    def __init__(self) -> None:
        self._previous: dict[str, dict[str, Any]] = {}

    def decide(self, obj: dict[str, Any]) -> ParsedReply:
        decision = super().decide(obj)
        if not isinstance(decision, Action) or decision.tool_name is None:
            return decision
        merged = {**self._previous.get(decision.tool_name, {}), **(decision.tool_args or {})}
        self._previous[decision.tool_name] = merged
        obj = {"tool": decision.tool_name, "args": merged}
        return Action(
            text=json.dumps(obj, sort_keys=True, ensure_ascii=False),
            tool_name=obj["tool"],
            tool_args=merged,
        )


class RemembersArgumentsForFeedback(JsonCallParser):
    """The twin: it remembers the previous arguments (for its feedback), never adds them."""

    def __init__(self) -> None:
        self._previous: dict[str, dict[str, Any]] = {}

    def decide(self, obj: dict[str, Any]) -> ParsedReply:
        decision = super().decide(obj)
        if isinstance(decision, Action) and decision.tool_name is not None:
            self._previous[decision.tool_name] = dict(decision.tool_args or {})
        return decision


# --------------------------------------------------------------------------- composition


def _line_objects(text: str) -> list[dict[str, Any]]:
    """Every line that holds a JSON object, decoded (a reply may hold several calls)."""
    found = []
    for line in text.splitlines():
        start, end = line.find("{"), line.rfind("}")
        if 0 <= start < end:
            try:
                value = json.loads(line[start : end + 1])
            except (ValueError, RecursionError):
                continue
            if isinstance(value, dict):
                found.append(value)
    return found


class TakesTheLastCall(JsonCallParser):
    """Reads the calls line by line and acts on the last one ("the model corrects itself")."""

    def parse(self, reply: ModelReply) -> ParsedReply:
        objects = _line_objects(reply.text) or self._objects(reply.text)
        return self.decide(objects[-1]) if objects else InvalidDecision(feedback=FEEDBACK)


class TakesTheFirstCall(JsonCallParser):
    """The twin: the first call counts."""

    def parse(self, reply: ModelReply) -> ParsedReply:
        objects = _line_objects(reply.text) or self._objects(reply.text)
        return self.decide(objects[0]) if objects else InvalidDecision(feedback=FEEDBACK)


class MergesEveryCall(JsonCallParser):
    """Merges the calls of one reply into one ("the model split its arguments"): a blend of
    two decisions that the model made neither of."""

    def parse(self, reply: ModelReply) -> ParsedReply:
        objects = _line_objects(reply.text) or self._objects(reply.text)
        if not objects:
            return InvalidDecision(feedback=FEEDBACK)
        merged: dict[str, Any] = {}
        for obj in objects:
            if isinstance(obj.get("args"), dict):
                merged.update(obj["args"])
        return self.decide({**objects[0], "args": merged} if "tool" in objects[0] else objects[0])


class RefusesSeveralCalls(JsonCallParser):
    """The twin: several calls in one reply are refused."""

    def parse(self, reply: ModelReply) -> ParsedReply:
        objects = _line_objects(reply.text) or self._objects(reply.text)
        if len(objects) != 1:
            return InvalidDecision(feedback=FEEDBACK)
        return self.decide(objects[0])


# --------------------------------------------------------------------------- size

_LOG_CAP = 4_096


class CapsArgumentsAt4096(JsonCallParser):
    """Cuts each string argument to 4 096 characters "to keep the log small" — the tool then
    runs with an argument the model never wrote."""

    def decide(self, obj: dict[str, Any]) -> ParsedReply:
        decision = super().decide(obj)
        if not isinstance(decision, Action) or not decision.tool_args:
            return decision
        args = {k: v[:_LOG_CAP] if isinstance(v, str) else v for k, v in decision.tool_args.items()}
        return Action(text=decision.text, tool_name=decision.tool_name, tool_args=args)


class RefusesArgumentsOver1MiB(JsonCallParser):
    """The twin: a cap far past any sample, and a refusal (with feedback), not a cut."""

    def decide(self, obj: dict[str, Any]) -> ParsedReply:
        args = obj.get("args")
        if isinstance(args, dict) and any(
            isinstance(v, str) and len(v) > 1 << 20 for v in args.values()
        ):
            return InvalidDecision(feedback="An argument is over 1 MiB. " + FEEDBACK)
        return super().decide(obj)


_SCAN_WINDOW = 16_384


class ScansTheFirst16KiB(JsonCallParser):
    """Looks for the object's ``{`` in the first 16 KiB only ("a runaway reply must not cost
    us"): a call after a long preamble is lost."""

    def _span(self, text: str) -> str | None:
        start, end = text.find("{", 0, _SCAN_WINDOW), text.rfind("}")
        return text[start : end + 1] if 0 <= start < end else None


class ScansTheWholeReply(JsonCallParser):
    """The twin: ``str.find`` over the whole reply is linear anyway."""


GOLDEN: list[tuple[str, Action | FinalAnswer | InvalidDecision]] = [
    (
        '{"tool": "note", "args": {"text": "buy milk", "tag": "home"}}',
        Action(
            text='{"args": {"tag": "home", "text": "buy milk"}, "tool": "note"}',
            tool_name="note",
            tool_args={"text": "buy milk", "tag": "home"},
        ),
    ),
    (
        '{"tool": "note", "args": {"title": "todo"}}',
        Action(
            text='{"args": {"title": "todo"}, "tool": "note"}',
            tool_name="note",
            tool_args={"title": "todo"},
        ),
    ),
    ('{"final": "done"}', FinalAnswer(text="done")),
    ("no call here", InvalidDecision(feedback="")),
]
