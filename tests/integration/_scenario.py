"""The scripted runs the integration tests drive in child processes, and the seams they use.

Shared by the test modules and the child scripts (``crash_child``, ``fencing_child``,
``load_child``), which run as ``python -m tests.integration.<name>`` from the repository root so
that this module is importable in a fresh interpreter.

A script is a list of model replies in a tiny language the :class:`LineParser` reads::

    CALL <tool> <json arguments>   → Action (the tool writes its ``token`` to the journal)
    FINAL <answer>                  → FinalAnswer
    anything else                   → InvalidDecision

Every action carries a ``token`` unique within its run, so a side-effect journal shows exactly
which action ran how many times.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polyloop
from polyloop import (
    Action,
    ActionOutcome,
    ActionStatus,
    AgentDefinition,
    Budget,
    FinalAnswer,
    InvalidDecision,
    ModelReply,
    ParsedReply,
    Record,
    RunLog,
    RunQuery,
    RunResult,
    StepCompleted,
    StepRecord,
    SyntheticObservations,
    Tool,
    ToolRegistry,
)
from polyloop._base._run_index import summarize_log
from polyloop.models import ScriptedModel
from polyloop.ports import IndexedRunStore, ModelClient, RunStore
from polyloop.stores import SQLiteStore, open_store

REPO_ROOT = Path(__file__).resolve().parents[2]

INVALID_FEEDBACK = "Reply with `CALL <tool> <json>` or `FINAL <answer>`."


def call(tool: str, token: str) -> str:
    """A reply that calls ``tool`` with a unique ``token``."""
    return f"CALL {tool} " + json.dumps({"token": token})


# --------------------------------------------------------------------------- scenarios


@dataclass(frozen=True, kw_only=True)
class Scenario:
    """One scripted run: the replies, the tools' replay policy and what the run must end with."""

    name: str
    replies: tuple[str, ...]
    replayable: dict[str, bool | None]  # tool name → Tool.replayable
    completion_marker: str | None = None
    replay_interrupted_actions: bool = False
    expected_stop: str = "agent_finished"
    expected_final_answer: str | None = None

    def kinds(self) -> list[str]:
        """The record kinds an uninterrupted run appends, in order."""
        kinds = ["run_started"]
        for reply in self.replies:
            kinds += ["model_call_intent", "model_replied"]
            if reply.startswith("CALL "):
                kinds.append("action_intent")
            kinds.append("step_completed")
        return [*kinds, "run_finished"]

    def actions(self) -> int:
        return sum(1 for reply in self.replies if reply.startswith("CALL "))

    def commits(self) -> list[list[str]]:
        """The record kinds of each durable commit an uninterrupted run makes (SPEC §4): one
        before each model call, one before each action, one before ``run()`` returns."""
        commits: list[list[str]] = []
        held = ["run_started"]
        for reply in self.replies:
            commits.append([*held, "model_call_intent"])
            held = ["model_replied"]
            if reply.startswith("CALL "):
                commits.append([*held, "action_intent"])
                held = []
            held.append("step_completed")
        return [*commits, [*held, "run_finished"]]

    def crash_points(self, *, inside_commits: bool) -> int:
        """Before and after every commit, one inside each model call, one inside each action;
        ``inside_commits``: also one at each record's write and one at the commit statement."""
        commits = self.commits()
        inside = sum(len(c) + 1 for c in commits) if inside_commits else 0
        return 2 * len(commits) + inside + len(self.replies) + self.actions()


# Every tool may be re-executed on resume: a resumed run must end exactly as an uninterrupted
# one, and the journal may show a second execution of an interrupted action.
REPLAYABLE = Scenario(
    name="replayable",
    replies=(
        "I am not sure what to do yet.",
        call("note", "note-1"),
        call("complete", "complete-2"),
    ),
    replayable={"note": True, "complete": True},
    completion_marker="complete",
    expected_stop="task_completed",
)

# No tool may be re-executed, even though the agent's default says replay: a tool's own
# ``replayable=False`` wins. An interrupted action ends the resumed run ``resume_state_unknown``.
NEVER_REPLAY = Scenario(
    name="never_replay",
    replies=(
        "Let me think about this first.",
        call("note", "note-1"),
        call("send", "send-2"),
        "FINAL both done",
    ),
    replayable={"note": False, "send": False},
    replay_interrupted_actions=True,
    expected_stop="agent_finished",
    expected_final_answer="both done",
)

SCENARIOS = {s.name: s for s in (REPLAYABLE, NEVER_REPLAY)}


def load_script(index: int) -> Scenario:
    """The script of load-test run ``index``: 0–3 actions, an invalid reply every third run."""
    replies: list[str] = []
    if index % 3 == 0:
        replies.append("no idea")
    replies += [call("note", f"note-{index}-{n}") for n in range(index % 4)]
    replies.append(f"FINAL answer {index}")
    return Scenario(
        name=f"load-{index}",
        replies=tuple(replies),
        replayable={"note": None},
        expected_final_answer=f"answer {index}",
    )


# --------------------------------------------------------------------------- seams


@asynccontextmanager
async def opened(url: str) -> AsyncIterator[RunStore]:
    """``open_store(url)``, closed on exit (every bundled store has ``aclose()``)."""
    store = open_store(url)
    try:
        yield store
    finally:
        await store.aclose()  # type: ignore[attr-defined]


class LineParser:
    """Reads the script language above; total and deterministic."""

    def parse(self, reply: ModelReply) -> ParsedReply:
        text = reply.text
        if text.startswith("FINAL "):
            return FinalAnswer(text=text.removeprefix("FINAL "))
        if text.startswith("CALL "):
            tool, _, args = text.removeprefix("CALL ").partition(" ")
            try:
                tool_args = json.loads(args)
            except ValueError:
                return InvalidDecision(feedback=f"arguments of {tool} are not JSON")
            if isinstance(tool_args, dict):
                return Action(text=f"{tool}({args})", tool_name=tool, tool_args=tool_args)
        return InvalidDecision(feedback=INVALID_FEEDBACK)


def append_journal(journal: Path, line: str) -> None:
    """Append one line and fsync it: once this returns, the side effect has durably happened."""
    fd = os.open(journal, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def read_journal(journal: Path) -> list[str]:
    return journal.read_text().splitlines() if journal.exists() else []


def make_agent(scenario: Scenario, journal: Path | None) -> AgentDefinition:
    """The agent of ``scenario``; its tools write ``<tool> <token>`` to ``journal``."""

    def tool_func(name: str) -> Callable[..., str]:
        def func(token: str) -> str:
            if journal is not None:
                append_journal(journal, f"{name} {token}")
            return f"{name} done: {token}"

        return func

    tools = ToolRegistry(
        Tool(
            name=name,
            description=f"the {name} tool",
            parameters={"type": "object", "properties": {"token": {"type": "string"}}},
            func=tool_func(name),
            completion_marker=name == scenario.completion_marker,
            replayable=replayable,
        )
        for name, replayable in scenario.replayable.items()
    )
    return AgentDefinition(
        system_prompt="You are a scripted agent.\n" + tools.describe(),
        budget=Budget(
            max_steps=10,
            max_executed_actions=10,
            max_consecutive_parse_failures=3,
            max_prompt_chars=100_000,
        ),
        synthetic_observations=SyntheticObservations(
            not_executed="(the action was not executed)", env_error="(the environment failed)"
        ),
        tools=tools,
        replay_interrupted_actions=scenario.replay_interrupted_actions,
    )


Hook = Callable[[str], None]


def _no_hook(label: str) -> None:
    return None


class ToolRunner:
    """Runs the agent's tool functions; ``hook("action:<tool>:<token>")`` fires right after the
    side effect, ``before("<tool>:<token>")`` right before it."""

    def __init__(
        self, agent: AgentDefinition, *, hook: Hook = _no_hook, before: Hook = _no_hook
    ) -> None:
        assert agent.tools is not None
        self.tools = agent.tools
        self.hook = hook
        self.before = before

    async def execute(self, action: Action) -> ActionOutcome:
        tool = self.tools.lookup(action.tool_name)
        if tool is None or tool.func is None:
            return ActionOutcome(status=ActionStatus.NOT_EXECUTED, observation="no such tool")
        args = dict(action.tool_args or {})
        self.before(f"{tool.name}:{args.get('token')}")
        observation = tool.func(**args)
        self.hook(f"action:{tool.name}:{args.get('token')}")
        return ActionOutcome(status=ActionStatus.EXECUTED, observation=str(observation))


# --------------------------------------------------------------------------- fault injection


@dataclass
class CrashPoints:
    """Counts the write points a run passes and SIGKILLs this process at point ``kill_at``
    (1-based) or at the first point whose label starts with ``kill_at_label``."""

    kill_at: int | None = None
    kill_at_label: str | None = None
    labels: list[str] = field(default_factory=list)

    def passed(self, label: str) -> None:
        self.labels.append(label)
        if len(self.labels) == self.kill_at or (
            self.kill_at_label is not None and label.startswith(self.kill_at_label)
        ):
            os.kill(os.getpid(), signal.SIGKILL)


class PointedStore:
    """A store wrapper with a point before and after every append."""

    def __init__(self, inner: RunStore, points: CrashPoints) -> None:
        self.inner = inner
        self.points = points

    async def append(self, run_id: str, record: Record, *, sequence: int) -> None:
        self.points.passed(f"before_append:{sequence}:{record.kind}")
        await self.inner.append(run_id, record, sequence=sequence)
        self.points.passed(f"after_append:{sequence}:{record.kind}")

    async def read_log(self, run_id: str) -> RunLog:
        return await self.inner.read_log(run_id)

    async def run_ids(self) -> list[str]:
        return await self.inner.run_ids()


class PointedBatchStore(PointedStore):
    """A store wrapper with a point before and after every commit of a batch (``append_many``).
    The loop runs a wrapper's commits as tasks (docs/design/0003)."""

    async def append_many(self, run_id: str, records: Sequence[Record], *, sequence: int) -> None:
        kinds = "+".join(record.kind for record in records)
        self.points.passed(f"before_commit:{sequence}:{kinds}")
        await self.inner.append_many(run_id, records, sequence=sequence)  # type: ignore[attr-defined]
        self.points.passed(f"after_commit:{sequence}:{kinds}")


@dataclass
class InPlaceCommits:
    """How the commits of an :func:`pointed_in_place` store went: ``inline`` in the run's own
    task (``commit_now``), or through ``append_many``."""

    inline: int = 0
    awaited: int = 0


def pointed_in_place(store: SQLiteStore, points: CrashPoints) -> InPlaceCommits:
    """The same points as :class:`PointedBatchStore`, put on ``store`` itself: the loop still
    sees an ``SQLiteStore`` whose ``commit_now`` and ``append_many`` are both the instance's own
    (so the fast-path rule of ``InlineCommitRunStore`` keeps the inline commit) and commits
    through ``commit_now`` with no task, so the crash points cover that path. A commit
    ``commit_now`` declines is awaited through ``append_many``; its "before" point is passed
    once."""
    commit_now, append_many = store.commit_now, store.append_many
    counts = InPlaceCommits()
    begun: set[int] = set()

    def before(sequence: int, records: Sequence[Record]) -> str:
        kinds = "+".join(record.kind for record in records)
        if sequence not in begun:
            begun.add(sequence)
            points.passed(f"before_commit:{sequence}:{kinds}")
        return f"after_commit:{sequence}:{kinds}"

    def pointed_commit_now(run_id: str, records: Sequence[Record], *, sequence: int) -> bool:
        after = before(sequence, records)
        done = commit_now(run_id, records, sequence=sequence)
        if done:
            counts.inline += 1
            points.passed(after)
        return done

    async def pointed_append_many(run_id: str, records: Sequence[Record], *, sequence: int) -> None:
        after = before(sequence, records)
        await append_many(run_id, records, sequence=sequence)
        counts.awaited += 1
        points.passed(after)

    store.commit_now = pointed_commit_now  # type: ignore[method-assign]
    store.append_many = pointed_append_many  # type: ignore[method-assign]
    return counts


async def watch_inside_commits(store: RunStore, points: CrashPoints) -> bool:
    """Points inside SQLite's transaction, at every record's ``INSERT`` and at the ``COMMIT``
    (via the connection's statement trace); ``False`` for any other store."""
    if not isinstance(store, SQLiteStore):
        return False

    def traced(statement: str) -> None:
        if statement.startswith("INSERT INTO polyloop_records"):
            points.passed("inside_commit:insert")
        elif statement == "COMMIT" and points.labels[-1:] == ["inside_commit:insert"]:
            points.passed("inside_commit:commit")

    def install(conn: sqlite3.Connection) -> None:
        conn.set_trace_callback(traced)

    await store._in_worker(store._with_connection, install)
    return True


class PointedModel:
    """A model wrapper with a point inside the call (the reply exists, nothing logged it)."""

    def __init__(self, inner: ModelClient, points: CrashPoints) -> None:
        self.inner = inner
        self.points = points

    async def complete(self, messages: Sequence[Any]) -> ModelReply:
        reply = await self.inner.complete(messages)
        self.points.passed(f"model_call:{reply.call_id}")
        return reply


# --------------------------------------------------------------------------- comparison


def record_data(record: Record) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(record.to_json())
    return data


def normalised(data: dict[str, Any]) -> dict[str, Any]:
    """A record's JSON with what legitimately differs between two runs of one script blanked:
    wall-clock timestamps, ``step_wall_ms`` and the run id."""
    data = dict(data)
    for key in ("started_at", "finished_at", "run_id"):
        if key in data:
            data[key] = "*"
    if "step" in data:
        data["step"] = {**data["step"], "step_wall_ms": 0}
    if "step_wall_ms" in data:
        data["step_wall_ms"] = 0
    return data


def step_data(step: StepRecord) -> dict[str, Any]:
    data: dict[str, Any] = record_data(StepCompleted(step=step))["step"]
    return data


def result_data(result: RunResult) -> dict[str, Any]:
    """A ``RunResult`` as JSON data, for a child to report it to the test."""
    return {
        "run_id": result.run_id,
        "stop_reason": str(result.stop_reason),
        "final_answer": result.final_answer,
        "executed_actions": result.executed_actions,
        "steps": [step_data(s) for s in result.steps],
    }


def log_data(log: RunLog) -> list[dict[str, Any]]:
    return [record_data(r) for r in log.records]


# --------------------------------------------------------------------------- child processes

# A child that has not finished after this long is hung (each one takes well under a second);
# it is a safety net against a deadlock bug, never a means of ordering anything.
CHILD_TIMEOUT_S = 120


def child_command(module: str, *args: str) -> list[str]:
    """The command line of child script ``tests/integration/<module>.py``: run as a module from
    the repository root, so that it can import this module."""
    return [sys.executable, "-m", f"tests.integration.{module}", *args]


def run_child(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        child_command(module, *args),
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        check=False,
    )


def child_report(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The one ``RESULT <json>`` line a child printed; fails with its stderr if there is none."""
    assert proc.returncode == 0, f"child exited {proc.returncode}:\n{proc.stderr}"
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert len(lines) == 1, f"expected one RESULT line, got:\n{proc.stdout}\n{proc.stderr}"
    report: dict[str, Any] = json.loads(lines[0].removeprefix("RESULT "))
    return report


# --------------------------------------------------------------------------- load


def load_run_id(prefix: str, index: int) -> str:
    return f"{prefix}-{index}"


async def drive_load_runs(
    store: RunStore, prefix: str, indices: Iterable[int]
) -> list[dict[str, Any]]:
    """Run every load script in ``indices`` concurrently on ``store``; what each returned."""

    async def one(index: int) -> RunResult:
        script = load_script(index)
        return await polyloop.run(
            make_agent(script, None),
            f"load run {index}",
            model=ScriptedModel(script.replies),
            parser=LineParser(),
            executor=ToolRunner(make_agent(script, None)),
            store=store,
            run_id=load_run_id(prefix, index),
        )

    results = await asyncio.gather(*(one(index) for index in indices))
    return [result_data(result) for result in results]


async def check_load_runs(url: str, prefix: str, results: Sequence[dict[str, Any]]) -> None:
    """Read every run back: each log holds exactly the records its script implies (none lost,
    none duplicated, in order), its steps are the ones ``run()`` returned, and ``run_ids()``
    lists every run once."""
    expected_ids = sorted(result["run_id"] for result in results)
    async with opened(url) as store:
        listed = await store.run_ids()
        assert len(listed) == len(set(listed)), "run_ids() lists a run twice"
        assert sorted(listed) == expected_ids
        # The run index, written by every process in each commit, agrees with every log.
        assert isinstance(store, IndexedRunStore)
        rows = {row.run_id: row for row in await store.query_runs(RunQuery())}
        stats = await store.run_stats(RunQuery())
        assert (stats.runs, stats.stop_reasons) == (len(results), {"agent_finished": len(results)})
        for result in results:
            run_id = result["run_id"]
            script = load_script(int(run_id.removeprefix(f"{prefix}-")))
            log = await store.read_log(run_id)
            assert rows[run_id] == summarize_log(run_id, log), f"{run_id}: index row"
            kinds = [record.kind for record in log.records]
            assert kinds == script.kinds(), f"{run_id}: records {kinds}"
            assert [step_data(c.step) for c in log.steps] == result["steps"], run_id
            assert [i.step_index for i in log.intents] == sorted(i.step_index for i in log.intents)
            finished = log.finished
            assert finished is not None, run_id
            assert result["stop_reason"] == finished.stop_reason == "agent_finished", run_id
            assert result["final_answer"] == finished.final_answer == script.expected_final_answer
            assert result["executed_actions"] == finished.executed_actions == script.actions()
