"""Runs for the run-index tests: records as the loop writes them, with the batch fields."""

from __future__ import annotations

from polyloop import (
    Action,
    ActionIntent,
    ActionStatus,
    ModelCallIntent,
    ModelReplied,
    ModelReply,
    Record,
    RunFinished,
    RunStarted,
    StepCompleted,
    StepRecord,
    StopReason,
)


def started(
    run_id: str,
    at: str = "2026-11-30T10:00:00.000Z",
    *,
    batch: str | None = None,
    task_id: str | None = None,
    labels: dict[str, str] | None = None,
) -> RunStarted:
    return RunStarted(
        run_id=run_id,
        goal=f"goal of {run_id}",
        parameters={},
        parameters_hash="sha256:" + "0" * 64,
        started_at=at,
        batch=batch,
        task_id=task_id,
        labels=labels or {},
    )


def step(index: int, status: ActionStatus | None) -> StepCompleted:
    record = StepRecord(
        step_index=index,
        raw_output=f"reply {index}",
        response_chars=7,
        reasoning_chars=0,
        action=None if status is None else f"act {index}",
        parse_ok=True,
        parse_error=None,
        observation="seen" if status is not None else "",
        observation_is_synthetic=False,
        observation_truncated_chars=0,
        prompt_chars=10,
        llm_call_id=None,
        step_wall_ms=1,
        action_status=status,
    )
    return StepCompleted(step=record)


def step_batches(count: int, *, usage: dict[str, int | float] | None = None) -> list[list[Record]]:
    """``count`` executed steps, each as the loop commits it: intent; reply + action intent;
    the step."""
    batches: list[list[Record]] = []
    for index in range(count):
        reply = ModelReply(text=f"reply {index}", usage=dict(usage or {}))
        batches.append([ModelCallIntent(step_index=index, prompt_chars=10)])
        batches.append(
            [
                ModelReplied(step_index=index, reply=reply),
                ActionIntent(step_index=index, action=Action(text=f"act {index}")),
            ]
        )
        batches.append([step(index, ActionStatus.EXECUTED)])
    return batches


def finished(
    reason: StopReason = StopReason.AGENT_FINISHED,
    executed: int = 0,
    at: str = "2026-11-30T10:00:05.000Z",
) -> RunFinished:
    return RunFinished(
        stop_reason=reason,
        final_answer="done" if reason is StopReason.AGENT_FINISHED else None,
        executed_actions=executed,
        finished_at=at,
    )


def run_batches(
    run_id: str,
    *,
    steps: int,
    reason: StopReason | None,
    at: str = "2026-11-30T10:00:00.000Z",
    batch: str | None = None,
    task_id: str | None = None,
    labels: dict[str, str] | None = None,
    usage: dict[str, int | float] | None = None,
) -> list[list[Record]]:
    """A whole run's commits; ``reason=None`` leaves it unfinished."""
    batches: list[list[Record]] = [
        [started(run_id, at, batch=batch, task_id=task_id, labels=labels)]
    ]
    batches.extend(step_batches(steps, usage=usage))
    if reason is not None:
        batches.append([finished(reason, executed=steps)])
    return batches
