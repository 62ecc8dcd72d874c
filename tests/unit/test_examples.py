"""The examples run as documented: ``python examples/tool_agent/run.py``."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

from polyloop import RunLog, StopReason
from polyloop.stores import SQLiteStore

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tool_agent" / "run.py"


def run_example(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(EXAMPLE), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_tool_agent_example_completes_its_task_through_the_submit_marker():
    proc = run_example()
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[-1] == "stop reason: task_completed"
    assert "executed actions: 3" in lines
    # every path of a step is shown: an error observation, an invalid decision, a refusal
    assert any(line.startswith("  observation: ZeroDivisionError: ") for line in lines)
    assert any(line.startswith("  invalid decision -> No JSON tool call found") for line in lines)
    assert any(line.startswith("  observation (synthetic): ") for line in lines)


def test_the_tool_agent_example_writes_its_run_to_the_given_sqlite_file(tmp_path):
    db = tmp_path / "runs.db"
    proc = run_example("--db", str(db))
    assert proc.returncode == 0, proc.stderr
    run_id = proc.stdout.splitlines()[0].removeprefix("run ")
    log = asyncio.run(read_log(db, run_id))
    assert log.finished is not None
    assert log.finished.stop_reason is StopReason.TASK_COMPLETED
    assert len(log.steps) == 5


async def read_log(db: Path, run_id: str) -> RunLog:
    async with SQLiteStore(db) as store:
        return await store.read_log(run_id)
