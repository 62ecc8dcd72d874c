"""The run-index promise's probe: a run of every step path, appended as the loop commits it,
with a refused batch in the middle, and the checks of a store's row against its log."""

from __future__ import annotations

import uuid
from typing import Any, NoReturn

from polyloop._base._run_index import RunQuery, RunSummary, summarize_log
from polyloop.ports import BatchRunStore, IndexedRunStore, RunStore
from polyloop.testing._shared._sample_records import started
from polyloop.testing._shared._shapes import mismatch
from polyloop.testing._shared._skips import not_applicable
from polyloop.types import (
    Action,
    ActionIntent,
    ActionStatus,
    ModelCallIntent,
    ModelReplied,
    ModelReply,
    Record,
    RunFinished,
    RunLog,
    StepCompleted,
    StepRecord,
    StopReason,
)

__all__ = ["index_or_skip", "probe_calls", "row_problems", "the_row"]


def index_or_skip(store: object) -> IndexedRunStore:
    if isinstance(store, IndexedRunStore):
        return store
    _no_index()


def _no_index() -> NoReturn:
    not_applicable(
        promise="the run index's row of a finished run agrees with its log",
        why="this store offers no run index (no query_runs and run_stats)",
        verify_yourself=(
            "add async query_runs(query) and run_stats(query) (polyloop.ports.IndexedRunStore) "
            "that read rows kept in the same transaction as the records"
        ),
    )


def _step(index: int, status: ActionStatus | None, *, parse_ok: bool = True) -> StepRecord:
    return StepRecord(
        step_index=index,
        raw_output=f"reply {index}",
        response_chars=7,
        reasoning_chars=0,
        action=None if status is None else f"act {index}",
        parse_ok=parse_ok,
        parse_error=None if parse_ok else "try again",
        observation="seen" if status is not None else "",
        observation_is_synthetic=status not in (None, ActionStatus.EXECUTED),
        observation_truncated_chars=0,
        prompt_chars=40 + index,
        llm_call_id=f"call-{index}",
        step_wall_ms=3,
        tool_name=None,
        tool_args_json=None,
        action_status=status,
    )


def _reply(index: int, usage: dict[str, int | float]) -> ModelReplied:
    return ModelReplied(
        step_index=index,
        reply=ModelReply(text=f"reply {index}", call_id=f"call-{index}", usage=usage),
    )


def probe_calls(run_id: str) -> tuple[list[list[Record]], list[Record], RunFinished]:
    """The run's calls before the finish (batches as the loop commits them), a batch the
    append rules refuse (a finish after a record at a stale sequence), and the finish."""
    start = started(run_id)
    labels = {"split": "test", "ключ": "värde ✓", "empty": ""}
    start = type(start)(
        run_id=run_id,
        goal=start.goal,
        parameters=dict(start.parameters),
        parameters_hash=start.parameters_hash,
        started_at=start.started_at,
        batch=f"contract-batch-{uuid.uuid4().hex}",
        task_id="task ✓ 7",
        labels=labels,
    )
    calls: list[list[Record]] = [[start]]
    statuses = (ActionStatus.EXECUTED, ActionStatus.NOT_EXECUTED, ActionStatus.EXECUTED, None)
    for index, status in enumerate(statuses):
        usage: dict[str, int | float] = {"prompt_tokens": 100 + index, "completion_tokens": 7}
        if index == 1:
            usage["cost"] = 0.25
        calls.append([ModelCallIntent(step_index=index, prompt_chars=40 + index)])
        if index == 2:  # a retried model call: two intents, one step
            calls.append([ModelCallIntent(step_index=index, prompt_chars=40 + index)])
        calls.append([_reply(index, usage)])
        if status is not None:
            calls.append([ActionIntent(step_index=index, action=Action(text=f"act {index}"))])
        calls.append([StepCompleted(step=_step(index, status))])
    # A step the parser refused, with no usage at all.
    calls.append([ModelCallIntent(step_index=4, prompt_chars=50), _reply(4, {})])
    calls.append([StepCompleted(step=_step(4, None, parse_ok=False))])
    finish = RunFinished(
        stop_reason=StopReason.STEP_BUDGET,
        final_answer=None,
        executed_actions=2,
        finished_at="2026-01-01T00:00:09.000Z",
    )
    refused: list[Record] = [ModelCallIntent(step_index=5, prompt_chars=1), finish]
    return calls, refused, finish


async def append_call(store: RunStore, run_id: str, batch: list[Record], sequence: int) -> None:
    """One call: ``append`` for one record, ``append_many`` for more when the store has it."""
    if len(batch) > 1 and isinstance(store, BatchRunStore):
        await store.append_many(run_id, batch, sequence=sequence)
        return
    for offset, record in enumerate(batch):
        await store.append(run_id, record, sequence=sequence + offset)


async def the_row(store: IndexedRunStore, run_id: str, query: RunQuery) -> RunSummary | None:
    rows = [row for row in await store.query_runs(query) if row.run_id == run_id]
    assert len(rows) <= 1, f"query_runs({query}) lists run {run_id!r} {len(rows)} times"
    return rows[0] if rows else None


_FIELDS = (
    "batch",
    "task_id",
    "labels",
    "started_at",
    "finished_at",
    "stop_reason",
    "steps",
    "executed_actions",
    "usage",
)


def row_problems(row: RunSummary | None, log: RunLog, run_id: str, when: str) -> list[str]:
    """How ``row`` differs from the row ``log`` gives (empty: it agrees)."""
    expected = summarize_log(run_id, log)
    if row is None:
        return [f"{when}: query_runs does not list run {run_id!r}"]
    assert expected is not None
    problems = []
    for name in _FIELDS:
        got: Any = getattr(row, name)
        want: Any = getattr(expected, name)
        found = mismatch(want, got, name)  # type by type, inside usage and labels too
        if found is not None:
            problems.append(f"{when}: {name} is {got!r}, its log says {want!r} ({found})")
    return problems
