"""The child process of ``decision_parser.is_deterministic_across_processes``.

Run as a script (``python _parse_child.py FACTORY``) with ``PYTHONHASHSEED`` set, the way the
crash probe runs its writer: as a script it imports neither pytest nor Hypothesis (the
``polyloop.testing`` package does), so a child starts in a fraction of a second. It builds the
parser through the implementer's factory, reads a JSON list of replies from stdin, parses each
and prints one ``result <JSON>`` line per reply describing the decision (or the type of the
exception: ``never_raises`` judges raising, and a message may hold an address). Whatever the
implementer's code prints goes to stderr. The parent compares the lines printed under
different hash seeds.
"""

from __future__ import annotations

import importlib
import json
import sys
from typing import Any

from polyloop._base._exception_text import exception_text
from polyloop.types import Action, FinalAnswer, InvalidDecision, ModelReply

__all__ = ["describe", "to_wire"]

#: Exit code of a child whose factory cannot be imported, called or used.
FACTORY_FAILED = 3
#: The prefix of each result line on stdout.
RESULT = "result "


def to_wire(reply: ModelReply) -> list[Any]:
    """A reply as JSON data (lone surrogates survive: the parent writes with ``ensure_ascii``)."""
    return [
        reply.text,
        reply.reasoning,
        reply.call_id,
        dict(reply.usage),
        reply.model,
        reply.finish_reason,
    ]


def describe(decision: object) -> dict[str, Any]:
    """What the parent compares: the branch and every field, JSON data compared by equality
    (``tool_args`` key order is not part of a decision: the log writes it sorted)."""
    if isinstance(decision, Action):
        return {
            "branch": "Action",
            "text": decision.text,
            "tool_name": decision.tool_name,
            "tool_args": decision.tool_args,
        }
    if isinstance(decision, FinalAnswer):
        return {"branch": "FinalAnswer", "text": decision.text}
    if isinstance(decision, InvalidDecision):
        return {"branch": "InvalidDecision", "feedback": decision.feedback}
    return {"branch": type(decision).__qualname__}  # returns_one_of_three_branches fails it


def _build(spec: str) -> Any:
    module_name, _, attribute = spec.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            target = getattr(target, part)
        parser = target()
    except Exception as error:
        sys.stderr.write(
            f"parser factory {spec!r} failed in a child process: {exception_text(error)}\n"
        )
        raise SystemExit(FACTORY_FAILED) from None
    if not callable(getattr(parser, "parse", None)):
        sys.stderr.write(
            f"parser factory {spec!r} returned {type(parser).__name__}, which has no parse()\n"
        )
        raise SystemExit(FACTORY_FAILED)
    return parser


def _main(spec: str) -> None:
    results, sys.stdout = sys.stdout, sys.stderr  # a print in the implementer's code
    parser = _build(spec)
    replies = json.loads(sys.stdin.buffer.read().decode("ascii"))
    out = []
    for text, reasoning, call_id, usage, model, finish_reason in replies:
        reply = ModelReply(
            text=text,
            reasoning=reasoning,
            call_id=call_id,
            usage=usage,
            model=model,
            finish_reason=finish_reason,
        )
        try:
            found = describe(parser.parse(reply))
        except Exception as error:  # the same exception type everywhere is deterministic too
            found = {"raised": type(error).__name__}
        out.append(RESULT + json.dumps(found, sort_keys=True, ensure_ascii=True, default=repr))
    results.write("\n".join(out) + "\n")
    results.flush()


if __name__ == "__main__":
    _main(sys.argv[1])
