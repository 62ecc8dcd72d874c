"""``polyloop batch`` interrupted in-process: its summary is what ``polyloop stats`` says of the
same store, at 20 interrupt points; a rerun names the runs it ended ``resume_state_unknown``
and ``polyloop show`` names the action in doubt.

The signal is real: an executor sends SIGINT to this process at its k-th call, and the batch
command's own handler drains the batch.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from polyloop import Action, ActionOutcome, FinalAnswer, ModelReply, ParsedReply, RunSeams, Task
from polyloop.cli import main
from tests import batch_doubles
from tests.batch_doubles import CountingExecutor, StepModel

AT = {"k": 0}  # the executor call at which SIGINT is sent (0: never)
SLOW = {"s": 0.0}  # seconds each action of the interrupting seams takes


@pytest.fixture(autouse=True)
def restored() -> Iterator[None]:
    previous = {n: signal.getsignal(n) for n in (signal.SIGINT, signal.SIGTERM)}
    batch_doubles.reset()
    yield
    AT["k"], SLOW["s"] = 0, 0.0
    for number, handler in previous.items():
        signal.signal(number, handler)


class Interrupting(CountingExecutor):
    async def execute(self, action: Action) -> ActionOutcome:
        outcome = await super().execute(action)
        if sum(batch_doubles.CALLS.values()) == AT["k"]:
            os.kill(os.getpid(), signal.SIGINT)
        if SLOW["s"]:
            await asyncio.sleep(SLOW["s"])
        return outcome


class SearchParser:
    """Every reply but DONE is a call of the tool ``search`` with arguments."""

    def parse(self, reply: ModelReply) -> ParsedReply:
        text = reply.text
        if text == "DONE":
            return FinalAnswer(text="done")
        return Action(text=f"search {text}", tool_name="search", tool_args={"q": text, "n": 3})


def interrupting_seams(task: Task) -> RunSeams:
    return RunSeams(model=StepModel(task), parser=SearchParser(), executor=Interrupting(task))


def write_tasks(path: Path, count: int, goal: str) -> None:
    with path.open("w", encoding="utf-8") as lines:
        for n in range(count):
            lines.write(json.dumps({"id": f"t{n:03d}", "goal": goal}) + "\n")


def batch(tmp_path: Path, *more: str) -> list[str]:
    return [
        "batch", str(tmp_path / "tasks.jsonl"), "--agent", "tests.batch_doubles:AGENT",
        "--seams", "tests.unit.test_cli_batch_drain:interrupting_seams",
        "--store", f"sqlite:///{tmp_path / 'runs.db'}", "--batch", "b", *more,
    ]  # fmt: skip


def counts(head: str) -> dict[str, int]:
    """``batch b: interrupted in 0.3s, 80 tasks: 12 started, 8 interrupted, 60 not started``."""
    listed = head.split(" tasks: ", 1)[1]
    return {m[2]: int(m[1]) for m in re.finditer(r"(\d+) ([a-z ]+?)(?:,|$)", listed)}


@pytest.mark.parametrize("k", [1, 2, 3, 5, 8, 13, 21, 34, 55, 89, *range(100, 160, 6)])
def test_the_summary_after_ctrl_c_is_what_stats_says(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], k: int
) -> None:
    write_tasks(tmp_path / "tasks.jsonl", 80, "steps=2")
    AT["k"] = k
    assert main(batch(tmp_path)) == 130
    out = capsys.readouterr().out
    said = counts(out.splitlines()[0])
    assert main(["stats", "--store", f"sqlite:///{tmp_path / 'runs.db'}", "--batch", "b",
                 "--format", "json"]) == 0  # fmt: skip
    stats = json.loads(capsys.readouterr().out)
    assert said.get("started", 0) == stats["finished"], (out, stats)
    assert said.get("interrupted", 0) == stats["running"], (out, stats)
    assert said.get("started", 0) + said.get("interrupted", 0) == stats["runs"]
    assert sum(said.values()) == 80
    finished = re.search(r"stop reasons \((\d+) finished", out)
    assert finished is not None
    assert int(finished[1]) == stats["finished"]


def test_a_rerun_names_the_runs_it_ended_resume_state_unknown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_tasks(tmp_path / "tasks.jsonl", 2, "steps=1")
    AT["k"], SLOW["s"] = 2, 30.0
    assert main(batch(tmp_path, "--grace", "0")) == 130  # no drain: the actions are cut
    capsys.readouterr()
    AT["k"], SLOW["s"] = 0, 0.0
    assert main(batch(tmp_path)) == 0
    out = capsys.readouterr().out
    assert "resume_state_unknown (2): the runs below were cut while an action ran" in out
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    for n in (0, 1):
        assert f"tasks.jsonl:{n + 1}: polyloop show b.t00{n} --store {url}" in out

    assert main(["show", "b.t000", "--store", url]) == 0
    shown = capsys.readouterr().out
    assert "   0  in doubt      search DO t000-0" in shown
    assert "tool: search" in shown
    assert 'arguments: {"n":3,"q":"DO t000-0"}' in shown
    assert "stop: resume_state_unknown" in shown


def test_the_drain_leaves_nothing_in_doubt_so_the_rerun_ends_none_unknown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_tasks(tmp_path / "tasks.jsonl", 6, "steps=2")
    AT["k"], SLOW["s"] = 3, 0.3
    assert main(batch(tmp_path, "--concurrency", "3")) == 130
    first = capsys.readouterr().out
    assert "3 interrupted" in first.splitlines()[0]
    assert main(batch(tmp_path)) == 0
    out = capsys.readouterr().out
    assert "resume_state_unknown" not in out
    assert "agent_finished" in out


@pytest.mark.parametrize("grace", ["-1", "nan", "inf", "soon", ""])
def test_a_bad_grace_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], grace: str
) -> None:
    write_tasks(tmp_path / "tasks.jsonl", 1, "steps=1")
    assert main(batch(tmp_path, "--grace", grace)) == 2
    assert "--grace must be a number of seconds >= 0" in capsys.readouterr().err
    assert not (tmp_path / "runs.db").exists()
