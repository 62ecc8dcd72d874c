"""Load: many concurrent runs on one durable store lose and duplicate nothing.

200 runs interleave in one event loop; then 4 processes × 50 runs share one store, released
together by a start barrier. Every run's log is read back and compared with what ``run()``
returned and with the records its script implies.
"""

from __future__ import annotations

import asyncio
import subprocess
from typing import Any

import pytest

from tests.integration._scenario import (
    CHILD_TIMEOUT_S,
    REPO_ROOT,
    check_load_runs,
    child_command,
    child_report,
    drive_load_runs,
    load_script,
    opened,
)

pytestmark = pytest.mark.slow


@pytest.mark.asyncio
async def test_200_concurrent_runs_in_one_event_loop_keep_every_record(store_url: str) -> None:
    async with opened(store_url) as store:
        assert await store.run_ids() == []
        results = await drive_load_runs(store, "loop", range(200))

    assert len(results) == 200
    await check_load_runs(store_url, "loop", results)


def test_4_processes_x_50_runs_on_one_store_keep_every_record(store_url: str) -> None:
    processes, per_process = 4, 50
    children = [
        subprocess.Popen(
            child_command("load_child", store_url, "proc", str(n * per_process), str(per_process)),
            cwd=REPO_ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(processes)
    ]
    try:
        for proc in children:  # the start barrier: every child is connected and waiting
            assert proc.stdout is not None
            ready = proc.stdout.readline()
            assert ready == "READY\n", f"{ready!r}: {proc.stderr.read() if proc.stderr else ''}"
        for proc in children:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        results: list[dict[str, Any]] = []
        for proc in children:
            stdout, stderr = proc.communicate(timeout=CHILD_TIMEOUT_S)
            report = child_report(
                subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
            )
            results += report["results"]
    finally:
        for proc in children:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    assert len(results) == processes * per_process
    assert sum(load_script(i).actions() for i in range(200)) > 0
    asyncio.run(check_load_runs(store_url, "proc", results))
