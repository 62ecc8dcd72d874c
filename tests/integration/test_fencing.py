"""Fencing: two processes racing to resume one interrupted run.

SPEC §3/§5: a scheduler may retry a job whose first attempt is still alive; the two resumers
must end with one of them getting ``RunConflict``, never with a never-replay action run twice.

The race is forced, not timed. A run is interrupted (SIGKILL) in a seed child. Two resumer
children then both read the log — each stops right after reading it, so both hold the same log
length. The first is released: it appends its action intent and stops inside the action, before
the side effect. The second is released while the first is still in there: its own intent append
must be refused with ``RunConflict``, and it must never reach its action. Then the first
finishes the run.
"""

from __future__ import annotations

import asyncio
import json
import queue
import signal
import subprocess
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pytest

import polyloop
from polyloop._base._run_index import summarize_log
from polyloop.models import ScriptedModel
from polyloop.ports import IndexedRunStore
from polyloop.stores import MemoryStore
from tests.integration._scenario import (
    CHILD_TIMEOUT_S,
    NEVER_REPLAY,
    REPLAYABLE,
    REPO_ROOT,
    LineParser,
    Scenario,
    ToolRunner,
    child_command,
    child_report,
    make_agent,
    normalised,
    opened,
    read_journal,
    result_data,
    run_child,
)
from tests.integration.fencing_child import RUN_CONFLICT_EXIT

pytestmark = pytest.mark.slow


class Resumer:
    """A resumer child driven line by line over its stdin/stdout."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            child_command("fencing_child", "resume", *args),
            cwd=REPO_ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.reader = threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True)
        self.reader.start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.put(line.rstrip("\n"))
        self.lines.put("")  # EOF

    def expect(self, prefix: str) -> str:
        """The child's next line, which must start with ``prefix``."""
        try:
            line = self.lines.get(timeout=CHILD_TIMEOUT_S)  # a hang is a bug, not a wait
        except queue.Empty:
            pytest.fail(f"no line from the child, expected {prefix!r}")
        if not line.startswith(prefix):
            self.proc.kill()
            stderr = self.proc.stderr.read() if self.proc.stderr else ""
            pytest.fail(f"expected {prefix!r} from the child, got {line!r}\n{stderr}")
        return line

    def go(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def finish(self) -> subprocess.CompletedProcess[str]:
        self.proc.wait(timeout=CHILD_TIMEOUT_S)
        self.reader.join(timeout=CHILD_TIMEOUT_S)
        stdout = []
        while not self.lines.empty():
            stdout.append(self.lines.get())
        stderr = self.proc.stderr.read() if self.proc.stderr else ""
        return subprocess.CompletedProcess(
            self.proc.args, self.proc.returncode, "\n".join(stdout), stderr
        )

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@dataclass(frozen=True)
class Interruption:
    """Where the seed run is killed, and what the resumers then race to append."""

    scenario: Scenario
    kill_label: str
    log_length: int  # records left by the crash
    action_intents: dict[int, int]  # step index → intents in the final log
    journal: dict[str, int]  # journal line → executions, over seed and resumers


INTERRUPTIONS = {
    # The reply of step 1 (a never-replay action) is logged, the action not yet decided: each
    # resumer parses it again and tries to append the action intent at sequence 6.
    "never_replay_action_pending": Interruption(
        scenario=NEVER_REPLAY,
        kill_label="after_append:5:model_replied",
        log_length=6,
        action_intents={1: 1, 2: 1},
        journal={"note note-1": 1, "send send-2": 1},
    ),
    # A replayable action was interrupted after its side effect: each resumer tries to append
    # the replay's intent at sequence 7. Only one replay may happen.
    "replayable_action_interrupted": Interruption(
        scenario=REPLAYABLE,
        kill_label="action:note:note-1",
        log_length=7,
        action_intents={1: 2, 2: 1},
        journal={"note note-1": 2, "complete complete-2": 1},
    ),
}


async def uninterrupted(scenario: Scenario) -> dict[str, Any]:
    """What the scenario returns when nothing goes wrong (in memory, no journal)."""
    agent = make_agent(scenario, None)
    result = await polyloop.run(
        agent,
        "follow the script",
        model=ScriptedModel(scenario.replies),
        parser=LineParser(),
        executor=ToolRunner(agent),
        store=MemoryStore(),
    )
    return result_data(result)


async def read_log(url: str, run_id: str) -> polyloop.RunLog:
    async with opened(url) as store:
        return await store.read_log(run_id)


async def index_row(url: str, run_id: str) -> polyloop.RunSummary | None:
    async with opened(url) as store:
        assert isinstance(store, IndexedRunStore)
        rows = await store.query_runs(polyloop.RunQuery())
        return next((row for row in rows if row.run_id == run_id), None)


@pytest.fixture
def resumers() -> Iterator[list[Resumer]]:
    """Resumer children started by a test; any still alive at the end is killed."""
    started: list[Resumer] = []
    yield started
    for resumer in started:
        resumer.kill()


@pytest.mark.parametrize("case", sorted(INTERRUPTIONS))
def test_two_processes_resuming_one_run_one_gets_run_conflict_and_nothing_runs_twice(
    store_url: str, case: str, tmp_path: Path, resumers: list[Resumer]
) -> None:
    interruption = INTERRUPTIONS[case]
    scenario = interruption.scenario
    run_id, journal = "contested", tmp_path / "journal"
    args = (store_url, scenario.name, run_id, str(journal))
    seed = run_child("fencing_child", "seed", *args, interruption.kill_label)
    assert seed.returncode == -signal.SIGKILL, (
        f"the seed run was not killed: {seed.stdout}\n{seed.stderr}"
    )
    before = Counter(read_journal(journal))

    first, second = Resumer(*args), Resumer(*args)
    resumers += [first, second]
    # Barrier: both have read the log, so both will append at the same sequence.
    assert first.expect("READ ") == second.expect("READ ") == f"READ {interruption.log_length}"
    first.go()
    # Its intent is durable; it waits inside the action, before the side effect.
    assert first.expect("ACTING ") == "ACTING note note-1"
    second.go()
    # Its own intent append must be refused: reaching its action (ACTING) is the failure.
    second.expect("RUN_CONFLICT ")
    loser = second.finish()
    assert loser.returncode == RUN_CONFLICT_EXIT, loser.stderr
    assert Counter(read_journal(journal)) == before  # nothing ran while the first was paused
    first.go()
    report = child_report(first.finish())
    expected = asyncio.run(uninterrupted(scenario))
    assert [normalised(s) for s in report["result"]["steps"]] == [
        normalised(s) for s in expected["steps"]
    ]
    for key in ("stop_reason", "final_answer", "executed_actions"):
        assert report["result"][key] == expected[key], key

    log = asyncio.run(read_log(store_url, run_id))
    intents = Counter(
        record.step_index for record in log.records if isinstance(record, polyloop.ActionIntent)
    )
    assert dict(intents) == interruption.action_intents
    assert sum(isinstance(record, polyloop.RunFinished) for record in log.records) == 1
    assert [json.loads(r.to_json()) for r in log.records] == report["log"]
    # The loser's refused commit left the run index as the winner's commits made it.
    assert asyncio.run(index_row(store_url, run_id)) == summarize_log(run_id, log)
    assert Counter(read_journal(journal)) == interruption.journal
