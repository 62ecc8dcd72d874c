"""What the model sees: message assembly and prompt size (characters, never tokens)."""

from __future__ import annotations

from collections.abc import Sequence

from polyloop.types import AgentDefinition, Message, StepCompleted


def opening(agent: AgentDefinition, goal: str) -> list[Message]:
    """The two messages every prompt starts with. Tools are never injected by the library."""
    return [
        Message(role="system", content=agent.system_prompt),
        Message(role="user", content=goal),
    ]


def step_messages(completed: StepCompleted) -> list[Message]:
    """What one recorded step adds to the history.

    A failed model call adds nothing (there was no reply). Otherwise the reply text, then what
    the model is told back: the observation for a parsed reply, the feedback for an invalid one.
    Reasoning never enters the history.
    """
    if completed.model_error is not None:
        return []
    step = completed.step
    told = step.observation if step.parse_ok else (step.parse_error or "")
    return [
        Message(role="assistant", content=step.raw_output),
        Message(role="user", content=told),
    ]


def prompt_chars(messages: Sequence[Message]) -> int:
    """The prompt's size: the sum of ``len(content)``. Used in B, the intent and the step."""
    return sum(len(m.content) for m in messages)
