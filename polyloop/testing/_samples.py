"""The inputs a suite needs in the implementation's own language, supplied by the implementer.

A suite never hard-codes inputs: one executor runs Python code, another dispatches tool calls,
and a tool-call action fed to a code executor is correctly ``not_executed`` — a suite that
invented its own inputs would fail correct implementations. So the implementer hands over a
few samples, and the suite checks the promises on those.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from polyloop.types import Action, Message, ModelReply

__all__ = ["ActionSamples", "ModelSamples", "ParserSamples"]


def _require(
    owner: str, name: str, value: object, expected: type, *, optional: bool = False
) -> None:
    if optional and value is None:
        return
    if not isinstance(value, expected):
        allowed = f"{expected.__name__} or None" if optional else expected.__name__
        raise TypeError(f"{owner}.{name} must be a polyloop {allowed}, got {type(value).__name__}")


@dataclass(frozen=True, slots=True, kw_only=True)
class ActionSamples:
    """Two actions in your executor's language; the suite executes each of them, possibly several
    times, and cancels one midway.

    * ``executes_cleanly`` — runs to the end and the action itself does not fail.
    * ``executes_but_errors`` — runs, but the action itself fails (code raises, command exits
      non-zero, the query has a syntax error). Your executor must report it ``executed`` with a
      non-empty observation: an action's own error is something the model can correct.

    Neither may touch a real external side effect (delete files, send requests, spend money):
    the suite really runs them and interrupts one, leaving it half done.
    """

    executes_cleanly: Action
    executes_but_errors: Action

    def __post_init__(self) -> None:
        _require("ActionSamples", "executes_cleanly", self.executes_cleanly, Action)
        _require("ActionSamples", "executes_but_errors", self.executes_but_errors, Action)


@dataclass(frozen=True, slots=True, kw_only=True)
class ParserSamples:
    """Replies in the format your parser reads.

    * ``action_reply`` — a reply your parser turns into an ``Action``.
    * ``invalid_reply`` — a reply it cannot parse (it must return ``InvalidDecision`` with
      feedback for the model).
    * ``final_reply`` — a reply it turns into a ``FinalAnswer``; ``None`` if your parser has no
      final-answer form (the final-answer promise is then ``not_applicable``).
    """

    action_reply: ModelReply
    invalid_reply: ModelReply
    final_reply: ModelReply | None = None

    def __post_init__(self) -> None:
        _require("ParserSamples", "action_reply", self.action_reply, ModelReply)
        _require("ParserSamples", "invalid_reply", self.invalid_reply, ModelReply)
        _require("ParserSamples", "final_reply", self.final_reply, ModelReply, optional=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSamples:
    """A conversation your model client can answer: at least one ``Message``.

    The suite calls ``complete`` with a fresh mutable ``list`` copy of it several times (also
    cancelling one call), so it should be cheap — point the client at a fake or local endpoint.
    Stored as a tuple.
    """

    messages: Sequence[Message]

    def __post_init__(self) -> None:
        messages: object = self.messages
        if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
            raise TypeError(
                "ModelSamples.messages must be a sequence of polyloop Message, "
                f"got {type(self.messages).__name__}"
            )
        if not self.messages:
            raise ValueError("ModelSamples.messages must hold at least one Message")
        for index, message in enumerate(self.messages):
            _require("ModelSamples", f"messages[{index}]", message, Message)
        object.__setattr__(self, "messages", tuple(self.messages))
