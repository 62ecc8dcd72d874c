"""Message assembly on its own (``polyloop._loop._history``): the parts of the history that no run
can show, because the step that produces them ends the run."""

from __future__ import annotations

from typing import Any

from polyloop import Message, StepCompleted, StepRecord
from polyloop._loop._history import prompt_chars, step_messages


def a_step(**fields: Any) -> StepRecord:
    values: dict[str, Any] = {
        "step_index": 3,
        "raw_output": "",
        "response_chars": 0,
        "reasoning_chars": 0,
        "action": None,
        "parse_ok": False,
        "parse_error": None,
        "observation": "",
        "observation_is_synthetic": False,
        "observation_truncated_chars": 0,
        "prompt_chars": 10,
        "llm_call_id": None,
        "step_wall_ms": 5,
    }
    values.update(fields)
    return StepRecord(**values)


def test_a_failed_model_call_adds_nothing_to_the_history():
    failed = StepCompleted(step=a_step(), model_error="RuntimeError: down")

    assert step_messages(failed) == []


def test_a_final_answer_adds_the_reply_and_an_empty_observation():
    answered = StepCompleted(step=a_step(raw_output="FINAL: 42", parse_ok=True, llm_call_id="c"))

    assert step_messages(answered) == [
        Message(role="assistant", content="FINAL: 42"),
        Message(role="user", content=""),
    ]


def test_prompt_chars_counts_code_points_of_every_message():
    messages = [Message(role="system", content="ü" * 3), Message(role="user", content="🦀")]

    assert prompt_chars(messages) == 4
