"""JsonToolCallParser: one JSON object naming a tool (or giving the final answer)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from polyloop._base._shown import shown
from polyloop.parsers._fences import scan_fences
from polyloop.types import (
    MAX_NESTING,
    FinalAnswer,
    InvalidDecision,
    ModelReply,
    ParsedReply,
    action_or_feedback,
    canonical_json,
    nested_deeper_than,
)

__all__ = ["JsonToolCallParser"]

_FORMAT = 'Reply with exactly one JSON object: {"tool": "<tool name>", "arguments": {...}}'
_TOOL_KEYS = ("tool", "name")
_ARGUMENT_KEYS = ("arguments", "args")
_MAX_SPANS = 64  # brace groups examined in prose; bounds the work on hostile input
_TOKEN = re.compile(r'["\\{}]')
_SHOWN = 60


def _shown(value: object) -> str:
    return shown(value, _SHOWN)


class _NonFinite(ValueError):
    """``NaN``/``Infinity``: Python's json accepts them, JSON (and canonical JSON) does not."""


def _reject_constant(name: str) -> Any:
    raise _NonFinite(name)


@dataclass(frozen=True, slots=True)
class _Decoded:
    value: Any = None
    error: str | None = None


def _writable(args: Any) -> bool:
    """Whether the action's text can be written: the arguments are what Action keeps (it says
    why not, as feedback, when they are not)."""
    if nested_deeper_than(args, MAX_NESTING):
        return False
    try:
        canonical_json(args)
    except (TypeError, ValueError):
        return False
    return True


def _position(text: str, pos: int) -> str:
    line = text.count("\n", 0, pos) + 1
    column = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return f"line {line} column {column}"


def _decode(document: str, text: str, offset: int) -> _Decoded:
    """Decode ``document`` (found at ``offset`` in ``text``); an error names the position."""
    try:
        return _Decoded(value=json.loads(document, parse_constant=_reject_constant))
    except _NonFinite as exc:
        return _Decoded(error=f"{exc} is not allowed in JSON (use a number or a string)")
    except json.JSONDecodeError as exc:
        return _Decoded(error=f"{exc.msg} at {_position(text, offset + exc.pos)}")
    except RecursionError:
        return _Decoded(error=f"the JSON is nested deeper than {MAX_NESTING} levels")
    except ValueError as exc:  # e.g. an integer longer than Python's digit limit
        return _Decoded(error=str(exc))


def _brace_spans(text: str) -> Iterator[tuple[int, int | None]]:
    """Top-level ``{…}`` groups of ``text`` as (start, end); ``end`` is None if unclosed.

    Quotes are tracked only inside a group, so prose apostrophes and quotes cannot hide one.
    Linear: the scanner jumps from one ``{ } " \\`` to the next.
    """
    pos = 0
    while True:
        start = text.find("{", pos)
        if start < 0:
            return
        depth = 0
        in_string = False
        index = start
        end: int | None = None
        while True:
            match = _TOKEN.search(text, index)
            if match is None:
                break
            char, index = match.group(), match.start()
            if in_string:
                if char == "\\":
                    index += 2
                    continue
                if char == '"':
                    in_string = False
            elif char == '"':
                in_string = True
            elif char == "{":
                depth += 1
            elif char == "}":
                depth -= 1
                if depth == 0:
                    end = index + 1
                    break
            index += 1
        yield start, end
        if end is None:
            return
        pos = end


class JsonToolCallParser:
    """Turns a reply holding one JSON tool call into an ``Action``.

    Accepted forms (``reply.reasoning`` is ignored):

    * ``{"tool": "<name>", "arguments": {...}}``; ``"name"`` may replace ``"tool"`` and
      ``"args"`` may replace ``"arguments"``. When ``"tool"`` is present, ``"name"`` is an
      ordinary key (a flattened argument), so a tool may take a ``name`` argument.
    * flattened: ``{"tool": "<name>", "a": 1}`` — every key other than the tool key is an
      argument (a tool argument literally called ``arguments`` or ``args`` needs the nested
      form). ``"arguments": null`` means no arguments.
    * ``{"final_answer": "<text>"}`` (key configurable, ``final_answer_key=None`` disables it)
      → ``FinalAnswer``. A non-empty string is required; a ``"tool"`` key next to it is
      ambiguous and rejected.

    Where the object is looked for: inside a fenced code block labelled ``json`` or unlabelled
    if the reply has one (a block in another language is not a JSON block; an unterminated
    fence runs to the end);
    else the whole reply; else the top-level ``{…}`` groups in the prose, of which exactly one
    must decode to a JSON object.

    The action is ``Action(text=canonical_json({"tool": name, "arguments": args}),
    tool_name=name, tool_args=args)``. Every other reply is an ``InvalidDecision`` with
    feedback specific to the failure: no JSON found, invalid JSON (with line and column),
    not an object, several objects, missing or non-string tool name, arguments not an object,
    unexpected keys next to ``arguments``, a bad final answer. Total and deterministic.
    """

    def __init__(self, *, final_answer_key: str | None = "final_answer") -> None:
        if final_answer_key is not None and (
            not isinstance(final_answer_key, str) or not final_answer_key
        ):
            raise ValueError("final_answer_key must be a non-empty str or None")
        self.final_answer_key = final_answer_key
        finish = (
            f' — or {{{json.dumps(final_answer_key)}: "<your answer>"}} when you are done.'
            if final_answer_key is not None
            else "."
        )
        self._format = _FORMAT + finish

    def parse(self, reply: ModelReply) -> ParsedReply:
        text = reply.text
        found = self._find_object(text)
        if isinstance(found, InvalidDecision):
            return found
        return self._interpret(found)

    # ------------------------------------------------------------------ finding the object

    def _find_object(self, text: str) -> dict[str, Any] | InvalidDecision:
        blocks = [b for b in scan_fences(text).blocks if b.language in ("", "json")]
        if len(blocks) > 1:
            return self._invalid(
                f"Found {len(blocks)} JSON code blocks; send one tool call per reply."
            )
        if blocks:
            body = blocks[0].body
            decoded = _decode(body, body, 0)
            if decoded.error is not None:
                return self._invalid(
                    f"The JSON in your code block is invalid: {decoded.error} of the block."
                )
            return self._as_object(decoded.value, "your code block")
        stripped = text.strip()
        if stripped:
            whole = _decode(stripped, stripped, 0)
            if whole.error is None:
                return self._as_object(whole.value, "your reply")
        return self._from_prose(text)

    def _from_prose(self, text: str) -> dict[str, Any] | InvalidDecision:
        objects: list[dict[str, Any]] = []
        first_error: str | None = None
        for examined, (start, end) in enumerate(_brace_spans(text)):
            if examined == _MAX_SPANS:
                return self._invalid(
                    f"Your reply has more than {_MAX_SPANS} {{...}} groups; "
                    "send the tool call on its own."
                )
            decoded = _decode(text[start:end], text, start)
            if decoded.error is not None:
                first_error = first_error or decoded.error
                continue
            if isinstance(decoded.value, dict):
                objects.append(decoded.value)
                if len(objects) > 1:
                    return self._invalid(
                        "Found several JSON objects in your reply; send exactly one tool call "
                        "per reply."
                    )
        if objects:
            return objects[0]
        if first_error is not None:
            return self._invalid(f"Your JSON is invalid: {first_error}.")
        return self._invalid("No JSON tool call found in your reply.")

    def _as_object(self, value: Any, where: str) -> dict[str, Any] | InvalidDecision:
        if isinstance(value, dict):
            return value
        kind = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
            type(value), "a number"
        )
        return self._invalid(f"The JSON in {where} is {kind}, not an object.")

    # ------------------------------------------------------------------ reading the object

    def _interpret(self, obj: dict[str, Any]) -> ParsedReply:
        key = self.final_answer_key
        if key is not None and key in obj:
            if "tool" in obj:
                return self._invalid(
                    f'Your JSON has both "tool" and "{key}"; either call a tool or give the '
                    "final answer, not both."
                )
            answer = obj[key]
            if not isinstance(answer, str):
                return self._invalid(f'"{key}" must be a string, got {_shown(answer)}.')
            if not answer.strip():
                return self._invalid(f'"{key}" is empty; write your answer there.')
            return FinalAnswer(text=answer)
        tool_key = next((k for k in _TOOL_KEYS if k in obj), None)
        if tool_key is None:
            return self._invalid('Your JSON object has no "tool" key naming the tool to call.')
        name = obj[tool_key]
        if not isinstance(name, str):
            return self._invalid(
                f'"{tool_key}" must be a string naming a tool, got {_shown(name)}.'
            )
        if not name.strip():
            return self._invalid(f'"{tool_key}" is empty; name the tool to call.')
        rest = {k: v for k, v in obj.items() if k != tool_key}
        present = [k for k in _ARGUMENT_KEYS if k in rest]
        if not present:
            args: Any = rest
        else:
            args = rest.pop(present[0])
            if rest:
                extra = ", ".join(_shown(k) for k in sorted(rest)[:5])
                return self._invalid(
                    f'Unexpected keys next to "{present[0]}": {extra}. Put every argument '
                    f'inside "{present[0]}".'
                )
            if args is None:
                args = {}
            if not isinstance(args, dict):
                return self._invalid(
                    f'"{present[0]}" must be a JSON object of named arguments, got {_shown(args)}.'
                )
        decision = action_or_feedback(
            canonical_json({"tool": name, "arguments": args}) if _writable(args) else "",
            tool_name=name,
            tool_args=args,
        )
        if isinstance(decision, InvalidDecision):
            return self._invalid(decision.feedback)
        return decision

    def _invalid(self, problem: str) -> InvalidDecision:
        return InvalidDecision(feedback=f"{problem} {self._format}")

    def __repr__(self) -> str:
        return f"JsonToolCallParser(final_answer_key={self.final_answer_key!r})"
