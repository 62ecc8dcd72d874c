"""What ``polyloop batch`` prints: the progress line (terminal or log) and the summary."""

from __future__ import annotations

import io

from polyloop import StopReason, TaskOutcome
from polyloop._batch import BatchSummary
from polyloop._batch._summary import Spread, nearest_rank
from polyloop.cli._batch_display import ProgressLine, render_summary


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def finished(
    task_id: str, stop: StopReason, *, steps: int = 1, what: str = "started"
) -> TaskOutcome:
    return TaskOutcome(task_id=task_id, run_id=f"b.{task_id}", what=what,  # type: ignore[arg-type]
                       stop_reason=stop, steps=steps, executed_actions=steps - 1,
                       usage={"prompt_tokens": 10})  # fmt: skip


def failed(task_id: str) -> TaskOutcome:
    return TaskOutcome(task_id=task_id, run_id=f"b.{task_id}", what="failed",
                       error="RuntimeError: line one\nline two")  # fmt: skip


def test_a_log_gets_a_plain_line_every_few_seconds_not_one_per_run() -> None:
    stream, clock = io.StringIO(), Clock()
    progress = ProgressLine(10, stream, terminal=False, every_s=5.0, clock=clock)
    for n in range(4):
        clock.now += 1
        progress.update(finished(f"t{n}", StopReason.AGENT_FINISHED))
        progress.tick()
    assert stream.getvalue() == ""  # 4 s: not yet
    clock.now += 1
    progress.tick()
    assert stream.getvalue() == ("4/10 (40%) | agent_finished 4 | 0.8 runs/s | ETA 8s\n")
    progress.close()
    assert stream.getvalue().count("\n") == 1


def test_a_terminal_line_is_redrawn_in_place_with_failures_rate_and_eta() -> None:
    stream, clock = io.StringIO(), Clock()
    progress = ProgressLine(200, stream, terminal=True, clock=clock)
    clock.now += 2
    progress.update(finished("a", StopReason.STEP_BUDGET))
    progress.update(failed("b"))
    progress.update(finished("c", StopReason.AGENT_FINISHED, what="skipped"))
    text = stream.getvalue()
    assert text.startswith("\r1/200 (0%)")
    assert text.endswith("\r3/200 (2%) | step_budget 1, agent_finished 1 | failed 1 | "
                         "1.0 runs/s | ETA 3m17s")  # fmt: skip
    progress.close()
    assert stream.getvalue().endswith("\n")


def test_a_terminal_line_is_cut_to_the_terminal_width() -> None:
    stream = io.StringIO()
    progress = ProgressLine(10, stream, terminal=True, width=20, clock=Clock())
    progress.update(finished("a", StopReason.AGENT_FINISHED))
    assert stream.getvalue() == "\r1/10 (10%) | agent…"


def test_the_summary_shows_shares_spreads_usage_and_where_each_failure_is() -> None:
    outcomes = (
        *(finished(f"s{n}", StopReason.AGENT_FINISHED, steps=n + 1) for n in range(7)),
        finished("x", StopReason.LLM_ERROR, steps=9),
        *(failed(f"f{n}") for n in range(12)),
    )
    summary = BatchSummary(batch="b", tasks=25, outcomes=outcomes, wall_s=3.25, interrupted=True)
    lines = render_summary(summary, {"f0": 4}, "tasks.jsonl")
    assert lines[0] == (
        "batch b: interrupted in 3.2s, 25 tasks: 8 started, 12 failed, 5 not started"
    )
    assert lines[1:4] == [
        "stop reasons (8 finished runs):",
        "  agent_finished       7   87.5%",
        "  llm_error            1   12.5%",
    ]
    assert lines[4] == "steps             median 4  p90 9  max 9"
    assert lines[6] == "usage             prompt_tokens 80"
    assert lines[7] == "failed (12):"
    assert lines[8] == "  tasks.jsonl:4: task 'f0' (run b.f0): RuntimeError: line one line two"
    assert lines[18] == "  … and 2 more"
    assert lines[-1] == "17 tasks unfinished: run the same command again to resume"


def test_nearest_rank_percentiles() -> None:
    assert nearest_rank([1], 0.9) == 1
    assert nearest_rank([1, 2], 0.5) == 1
    assert nearest_rank(list(range(1, 11)), 0.9) == 9
    assert nearest_rank(list(range(1, 101)), 0.9) == 90
    assert Spread.of([]) == Spread(0, 0, 0)
    assert Spread.of([5, 1, 3]) == Spread(3, 5, 5)
