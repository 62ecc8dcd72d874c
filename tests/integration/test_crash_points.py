"""Crash-point enumeration: SIGKILL a run at every write point, resume it in a fresh process.

A scripted run (an invalid reply, two actions — one per tool — then a final answer or a
completion-marker tool) is first driven once without interruption in a child process, which
reports every write point it passed: before and after each commit (two per action step: the
model intent with what preceded it, the reply with the action intent), inside each commit on
SQLite (at each record's INSERT and at the COMMIT: the transaction is open, nothing durable),
inside each model call, inside each action right after its side effect (a line fsynced to a
journal). On SQLite the points are put on the store object itself, so the loop commits in the
run's own task as for any ``SQLiteStore`` (docs/design/0003); on PostgreSQL a wrapper carries
them and each commit is a task, the path of every other store. Then, for every
point k, a child drives the same script and SIGKILLs itself at k, and a fresh child resumes the
run with fresh seam objects. For every k:

* the log left by the crash holds exactly the records whose commit returned before the kill —
  a prefix of the uninterrupted log made of whole commits (atomic batches, durable on return);
* the resumed run ends with the uninterrupted run's trajectory, stop reason, final answer and
  executed count — or ``resume_state_unknown`` exactly where the crash left an action intent
  without a result and the tool may not be replayed;
* the resumed process emits one event per record it appended, continuing the log's sequence;
* the journal shows each action once, plus one re-execution exactly where a replayable action was
  interrupted after its side effect; a never-replay action never appears twice.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from polyloop import ModelCallIntent, RunQuery, RunStarted
from polyloop._base._run_index import summarize_log
from polyloop.stores import open_store
from tests.integration._scenario import (
    CHILD_TIMEOUT_S,
    NEVER_REPLAY,
    REPLAYABLE,
    REPO_ROOT,
    Scenario,
    child_command,
    child_report,
    normalised,
    opened,
    read_journal,
    run_child,
)
from tests.integration.group_crash_child import batch_records

pytestmark = pytest.mark.slow

# Two children at a time: each is mostly interpreter start-up, CPU-bound on a 2-core machine.
PARALLEL_CHILDREN = 2


def crash_and_resume(url: str, scenario: Scenario, work: Path, k: int) -> dict[str, Any]:
    """Kill a run at point k in one child, resume it in another; the resume child's report."""
    run_id, journal = f"{scenario.name}-k{k}", str(work / f"k{k}.journal")
    crashed = run_child("crash_child", "run", url, scenario.name, run_id, journal, f"--kill-at={k}")
    assert crashed.returncode == -signal.SIGKILL, (
        f"point {k}: the child was supposed to SIGKILL itself there, but exited "
        f"{crashed.returncode}:\n{crashed.stdout}\n{crashed.stderr}"
    )
    report = child_report(run_child("crash_child", "resume", url, scenario.name, run_id, journal))
    report["journal"] = read_journal(Path(journal))
    return report


async def index_disagreements(url: str) -> list[str]:
    """The runs whose index row differs from the row their log gives."""
    store: Any = open_store(url)
    try:
        rows = {row.run_id: row for row in await store.query_runs(RunQuery())}
        return [
            f"{run_id}: index {rows.get(run_id)!r}, log {expected!r}"
            for run_id in await store.run_ids()
            if rows.get(run_id) != (expected := summarize_log(run_id, await store.read_log(run_id)))
        ]
    finally:
        await store.aclose()


def replay_allowed(scenario: Scenario, tool: str) -> bool:
    """SPEC §4: the tool's own flag wins; ``None`` follows the agent's default."""
    flag = scenario.replayable[tool]
    return scenario.replay_interrupted_actions if flag is None else flag


def check_crash_point(
    scenario: Scenario, baseline: dict[str, Any], k: int, resumed: dict[str, Any]
) -> None:
    labels: list[str] = baseline["points"]
    base_log = [normalised(r) for r in baseline["log"]]
    crash_log = [normalised(r) for r in resumed["crash_log"]]
    where = f"point {k} ({labels[k - 1]})"

    # Exactly the commits that returned before the kill are durable, each whole: a kill inside
    # a commit (between its records' writes, or at its COMMIT) leaves none of that batch.
    durable = sum(
        len(label.split(":")[2].split("+"))
        for label in labels[:k]
        if label.startswith("after_commit:")
    )
    assert crash_log == base_log[:durable], f"{where}: the log is not the expected prefix"
    assert resumed["outcome"] == ("resumed" if crash_log else "run_not_found"), where

    last: dict[str, Any] = crash_log[-1] if crash_log else {"kind": None}
    interrupted_tool = last["action"]["tool_name"] if last["kind"] == "action_intent" else None
    unknown = interrupted_tool is not None and not replay_allowed(scenario, interrupted_tool)
    result = resumed["result"]
    final_log = [normalised(r) for r in resumed["log"]]
    crash_steps = [r["step"] for r in crash_log if r["kind"] == "step_completed"]
    if unknown:
        assert result["stop_reason"] == "resume_state_unknown", where
        assert result["final_answer"] is None, where
        assert [normalised(s) for s in result["steps"]] == crash_steps, where
        executed = sum(1 for s in crash_steps if s["action_status"] == "executed")
        assert result["executed_actions"] == executed, where
        assert final_log[:-1] == crash_log, where
        assert final_log[-1]["stop_reason"] == "resume_state_unknown", where
    else:
        expected = baseline["result"]
        assert [normalised(s) for s in result["steps"]] == [
            normalised(s) for s in expected["steps"]
        ], f"{where}: the resumed trajectory differs"
        assert result["stop_reason"] == expected["stop_reason"], where
        assert result["final_answer"] == expected["final_answer"], where
        assert result["executed_actions"] == expected["executed_actions"], where
        # An interrupted intent (model call, or replayed action) is appended once more.
        retried = 1 if last["kind"] in ("model_call_intent", "action_intent") else 0
        at = len(crash_log) - retried
        assert final_log == base_log[: at + retried] + base_log[at:], f"{where}: final log"

    # Events continue the log's sequence; records from before the crash are not emitted again.
    assert resumed["events"] == [[n, r["kind"]] for n, r in enumerate(final_log)][len(crash_log) :]

    # Each action ran once before the crash (if its side effect preceded the kill) and once
    # in the resumed run (if that run had to execute it); nothing else may appear.
    completed = {s["step_index"] for s in crash_steps}
    expected_runs: Counter[str] = Counter()
    for step in baseline["result"]["steps"]:
        if step["action_status"] is None:
            continue
        tool, token = step["tool_name"], json.loads(step["tool_args_json"])["token"]
        line = f"{tool} {token}"
        expected_runs[line] += f"action:{tool}:{token}" in labels[:k]
        expected_runs[line] += not unknown and step["step_index"] not in completed
    journal = Counter(resumed["journal"])
    assert journal == +expected_runs, f"{where}: journal {resumed['journal']}"
    for line, count in journal.items():
        tool = line.split(" ")[0]
        assert count == 1 or replay_allowed(scenario, tool), f"{where}: {line!r} ran {count}x"


@pytest.mark.parametrize("scenario", [REPLAYABLE, NEVER_REPLAY], ids=lambda s: s.name)
def test_a_run_killed_at_any_write_point_resumes_without_repeating_a_never_replay_action(
    store_url: str, scenario: Scenario, tmp_path: Path
) -> None:
    baseline = child_report(
        run_child(
            "crash_child", "run", store_url, scenario.name, "baseline", str(tmp_path / "b.journal")
        )
    )
    assert baseline["result"]["stop_reason"] == scenario.expected_stop
    assert baseline["result"]["final_answer"] == scenario.expected_final_answer
    assert baseline["result"]["executed_actions"] == scenario.actions()
    assert baseline["events"] == [[n, r["kind"]] for n, r in enumerate(baseline["log"])]
    points = len(baseline["points"])
    # 2 per commit (+ 1 per record and 1 per COMMIT inside SQLite's) + 1 per model call + 1 per
    # action, derived from the script: a harness that stops counting (or a loop that commits
    # more often than at its durability points) is caught here.
    inside = baseline["inside_commits"]
    assert points == scenario.crash_points(inside_commits=inside)
    commits = [label.split(":")[2].split("+") for label in baseline["points"]
               if label.startswith("after_commit:")]  # fmt: skip
    assert commits == scenario.commits()
    if inside:  # SQLite: every commit made in the run's own task, none awaited as a task
        assert baseline["commits"] == [len(commits), 0]
    assert {label.split(":")[0] for label in baseline["points"]} == {
        "before_commit",
        "after_commit",
        "model_call",
        "action",
        *(["inside_commit"] if inside else []),
    }

    with ThreadPoolExecutor(PARALLEL_CHILDREN) as pool:
        reports = list(
            pool.map(
                lambda k: crash_and_resume(store_url, scenario, tmp_path, k),
                range(1, points + 1),
            )
        )
    for k, resumed in enumerate(reports, start=1):
        check_crash_point(scenario, baseline, k, resumed)

    # After a kill at every point — inside the commits too — each run's row in the run index
    # still agrees with its log: the row is written in the records' transaction (issue 22).
    assert asyncio.run(index_disagreements(store_url)) == []

    outcomes = Counter(r["result"]["stop_reason"] for r in reports)
    store = store_url.split(":")[0]
    print(f"\n{store}/{scenario.name}: {len(reports)} crash points covered, resumes: {outcomes}")
    assert len(reports) == points >= 15
    # Both resume outcomes are exercised where the policy allows them.
    if scenario is NEVER_REPLAY:
        assert outcomes["resume_state_unknown"] > 0
    else:
        assert outcomes == {scenario.expected_stop: points}


# --------------------------------------------------------------------------- group commit

WRITERS, BATCH = 24, 3


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def logs_after_crash(url: str) -> dict[str, list[Any]]:
    """Every writer's log, and then one more batch appended to each at its end: the store the
    crash left is usable, its fence intact."""
    async with opened(url) as store:
        logs = {f"gw{n}": list((await store.read_log(f"gw{n}")).records) for n in range(WRITERS)}
        for run_id, log in logs.items():
            await store.append_many(  # type: ignore[attr-defined]
                run_id, batch_records(len(log), 999, BATCH), sequence=len(log)
            )
    return logs


@pytest.mark.parametrize("kill", ["inside_a_group", "from_outside"])
def test_concurrent_writers_killed_lose_no_acknowledged_batch_and_leave_no_partial_one(
    store_url: str, kill: str, tmp_path: Path
) -> None:
    """Group commit (docs/design/0005) under SIGKILL: every ``append_many`` that returned is in
    the log, every batch in the log is whole, and a group killed before its ``COMMIT`` left
    nothing of any of its batches."""
    acks, groups = tmp_path / "acks", tmp_path / "groups"
    args = [store_url, str(acks), str(groups), "--writers", str(WRITERS)]
    args += ["--batch-size", str(BATCH)]
    if kill == "inside_a_group":
        proc = run_child("group_crash_child", *args, "--batches", "60", "--kill-in-group", "5")
        returncode, output = proc.returncode, proc.stdout + proc.stderr
    else:  # wherever it is when 400 batches were acknowledged: inside a group or between two
        child = subprocess.Popen(
            child_command("group_crash_child", *args, "--batches", "100000"),
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + CHILD_TIMEOUT_S
        while len(lines(acks)) < 400 and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        child.kill()
        out, err = child.communicate(timeout=CHILD_TIMEOUT_S)
        returncode, output = child.returncode, out + err
    assert returncode == -signal.SIGKILL, f"the child exited {returncode}:\n{output}"

    acked: dict[str, int] = {}  # run -> the log length its acknowledged appends promise
    for line in lines(acks):
        run_id, sequence, count = line.split()
        acked[run_id] = max(acked.get(run_id, 1), int(sequence) + int(count))
    marked = [line.split() for line in lines(groups)]
    seen = [line[1:] for line in marked]
    assert max(len(group) for group in seen) >= 2, "the writers' commits were never grouped"
    logs = asyncio.run(logs_after_crash(store_url))

    for run_id, log in logs.items():
        assert isinstance(log[0], RunStarted), run_id
        body = log[1:]
        # Whole batches only: the records of batch b are b*100+0 .. b*100+BATCH-1, in order.
        assert len(body) % BATCH == 0, f"{run_id}: a partial batch ({len(body)} records)"
        for n, record in enumerate(body):
            assert isinstance(record, ModelCallIntent), (run_id, n)
            assert record.step_index == n + 1, (run_id, n)
            assert record.prompt_chars == (n // BATCH) * 100 + n % BATCH, (run_id, n)
        # No acknowledged batch is lost.
        assert len(log) >= acked.get(run_id, 1), f"{run_id}: lost acknowledged records"
    assert sum(acked.values()) - len(acked) >= (400 if kill == "from_outside" else 1)

    if kill == "inside_a_group":
        # The group the child died in: two or more batches, none acknowledged, none written. It
        # is the fifth such group of batches after the runs' starts (groups can overlap).
        (died,) = [n for n, line in enumerate(marked) if line[0] == "K"]
        killed = [item.split(":") for item in seen[died]]
        assert len(killed) >= 2
        before = [g for g in seen[:died] if len(g) >= 2 and all(i.split(":")[1] != "0" for i in g)]
        assert len(before) == 4
        for run_id, sequence in killed:
            assert acked.get(run_id, 1) <= int(sequence), (run_id, sequence)
            assert len(logs[run_id]) == int(sequence), (run_id, sequence, len(logs[run_id]))
