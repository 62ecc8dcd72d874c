"""The agent and the seams of the Ray backend's tests, built inside Ray workers.

Ray workers of a local cluster start in the driver's working directory (the repository root, as
for every test run), so this module is importable there as ``tests.integration.ray_seams``;
the factory below is shipped to them by value (its fields) with its class by reference.

Every action writes one row to the ``executions`` table of the test's PostgreSQL database —
that row *is* the side effect — so the table shows exactly which action ran how many times, in
which worker process. One chosen task can be made to stop in the middle of its run (inside an
action, right after its side effect, or inside a model call) and wait there to be killed or
released: it writes its process id to a file first, so the test knows whom to kill.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from polyloop import (
    Action,
    ActionOutcome,
    ActionStatus,
    AgentDefinition,
    Budget,
    Message,
    ModelReply,
    RunSeams,
    SyntheticObservations,
    Task,
    Tool,
    ToolRegistry,
)
from polyloop.models import ScriptedModel
from tests.integration._scenario import LineParser, call

EXECUTIONS_TABLE = """
CREATE TABLE IF NOT EXISTS executions (
    token text NOT NULL,
    pid integer NOT NULL,
    executed_at timestamptz NOT NULL DEFAULT clock_timestamp()
)
"""

# A stopped task waits this long for its kill or release; past it, it goes on (the test then
# fails on its own assertions instead of hanging).
STOPPED_WAIT_S = 120.0


def agent() -> AgentDefinition:
    """The agent of every task: one ``note`` tool, never replayed after an interruption."""
    tools = ToolRegistry(
        [
            Tool(
                name="note",
                description="writes a note",
                parameters={"type": "object", "properties": {"token": {"type": "string"}}},
                func=None,
            )
        ]
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
        replay_interrupted_actions=False,
    )


AGENT = agent()


def task_index(task_id: str) -> int:
    """``t-0042`` → 42."""
    return int(task_id.rsplit("-", 1)[1])


def script(task_id: str) -> list[str]:
    """One to three actions, each with a token unique in the batch, then a final answer."""
    index = task_index(task_id)
    replies = [call("note", f"{task_id}.{n}") for n in range(1 + index % 3)]
    return [*replies, f"FINAL done {task_id}"]


def actions_of(task_id: str) -> int:
    return len(script(task_id)) - 1


Where = Literal["action", "model"]


@dataclass(frozen=True)
class Stop:
    """Where the chosen task stops to wait for its kill: in its ``step``-th step (0-based),
    inside the action right after its side effect, or inside the model call."""

    task_id: str
    where: Where
    step: int
    directory: str

    @property
    def pid_file(self) -> Path:
        """Where the stopped task writes its process id."""
        return Path(self.directory) / "stopped.pid"

    @property
    def release_file(self) -> Path:
        """Once this exists, the stopped task goes on (if it was not killed)."""
        return Path(self.directory) / "release"

    async def here(self, task_id: str, step: int, where: Where) -> None:
        """Stop if this is the place, the first time only (a resumed run passes through)."""
        if (task_id, step, where) != (self.task_id, self.step, self.where):
            return
        try:
            fd = os.open(self.pid_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return  # the second time: the run is resumed in another worker
        try:
            os.write(fd, str(os.getpid()).encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        deadline = time.monotonic() + STOPPED_WAIT_S
        # Another process releases it, by a file: no event of this loop can say so.
        while time.monotonic() < deadline and not self.release_file.exists():  # noqa: ASYNC110
            await asyncio.sleep(0.05)


class CountingExecutor:
    """Runs ``note`` by inserting one row into ``executions``: the side effect to count."""

    def __init__(self, dsn: str, task_id: str, stop: Stop | None) -> None:
        self.dsn = dsn
        self.task_id = task_id
        self.stop = stop

    async def execute(self, action: Action) -> ActionOutcome:
        import psycopg

        token = str((action.tool_args or {}).get("token"))
        async with await psycopg.AsyncConnection.connect(self.dsn, autocommit=True) as conn:
            await conn.execute(
                "INSERT INTO executions (token, pid) VALUES (%s, %s)", (token, os.getpid())
            )
        if self.stop is not None:
            await self.stop.here(self.task_id, int(token.rsplit(".", 1)[1]), "action")
        return ActionOutcome(status=ActionStatus.EXECUTED, observation=f"noted {token}")


class StoppingModel:
    """The task's script, with the chosen task's stop inside a model call."""

    def __init__(self, task_id: str, stop: Stop | None) -> None:
        self.task_id = task_id
        self.inner = ScriptedModel(script(task_id))
        self.stop = stop

    async def complete(self, messages: Sequence[Message]) -> ModelReply:
        if self.stop is not None:
            step = sum(1 for m in messages if m.role == "assistant")
            await self.stop.here(self.task_id, step, "model")
        return await self.inner.complete(messages)


@dataclass(frozen=True)
class Seams:
    """The seams factory: a fresh model, parser and counting executor for each task."""

    dsn: str
    stop: Stop | None = None

    def __call__(self, task: Task) -> RunSeams:
        return RunSeams(
            model=StoppingModel(task.id, self.stop),
            parser=LineParser(),
            executor=CountingExecutor(self.dsn, task.id, self.stop),
        )
