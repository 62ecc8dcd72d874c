"""A tool agent end to end: ScriptedModel + JsonToolCallParser + ToolExecutor, on SQLite.

Run it with ``python examples/tool_agent/run.py [--db PATH]``. Without ``--db`` the run is
stored in a temporary SQLite database that is deleted afterwards. The scripted model shows
every path a step can take: a tool call in a code fence, a tool that raises (``executed``: the
model can correct it), a reply that is not a tool call (``InvalidDecision``), arguments that
fail the schema (``not_executed``: the library shows its synthetic observation), and finally
the ``submit`` completion marker (``task_completed``).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path
from typing import TextIO

from tool_agent import SCRIPT, build_agent

import polyloop
from polyloop import RunResult
from polyloop.executors import ToolExecutor
from polyloop.models import ScriptedModel
from polyloop.parsers import JsonToolCallParser
from polyloop.stores import SQLiteStore


async def run_example(db: Path) -> RunResult:
    agent = build_agent()
    assert agent.tools is not None
    async with SQLiteStore(db) as store:
        return await polyloop.run(
            agent,
            "What is 6 times 7?",
            model=ScriptedModel(SCRIPT),
            parser=JsonToolCallParser(),
            executor=ToolExecutor(agent.tools),
            store=store,
        )


def print_trajectory(result: RunResult, out: TextIO = sys.stdout) -> None:
    def say(text: str) -> None:
        print(text, file=out)

    say(f"run {result.run_id}")
    for step in result.steps:
        say(f"step {step.step_index}: {step.raw_output!r}")
        if not step.parse_ok:
            say(f"  invalid decision -> {step.parse_error}")
            continue
        say(f"  action {step.action} -> {step.action_status}")
        marker = " (synthetic)" if step.observation_is_synthetic else ""
        say(f"  observation{marker}: {step.observation}")
    say(f"executed actions: {result.executed_actions}")
    say(f"stop reason: {result.stop_reason}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--db", type=Path, help="SQLite database file (default: a temporary one)")
    args = parser.parse_args(argv)
    if args.db is not None:
        result = asyncio.run(run_example(args.db))
    else:
        with tempfile.TemporaryDirectory(prefix="polyloop-example-") as tmp:
            result = asyncio.run(run_example(Path(tmp) / "runs.db"))
    print_trajectory(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
