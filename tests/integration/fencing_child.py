"""Child process of the fencing test: interrupt a run, or race another process to resume it.

``python -m tests.integration.fencing_child seed URL SCENARIO RUN_ID JOURNAL LABEL``
    drives the scenario and SIGKILLs itself at the first write point whose label starts with
    ``LABEL`` (see :class:`~tests.integration._scenario.CrashPoints`).

``python -m tests.integration.fencing_child resume URL SCENARIO RUN_ID JOURNAL``
    resumes the run, pausing at two handshakes so the test can force an interleaving with
    another resumer (no timing involved):

    * after reading the log it prints ``READ <length>`` and waits for ``go`` on stdin;
    * in its first action, *before* the side effect, it prints ``ACTING <tool> <token>`` and
      waits for ``go``.

    It ends with ``RESULT <json>`` (exit 0), or, if the store fenced it off, prints
    ``RUN_CONFLICT <message>`` and exits with :data:`RUN_CONFLICT_EXIT`.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polyloop
from polyloop.models import ScriptedModel
from polyloop.ports import RunStore
from polyloop.types import Record, RunLog
from tests.integration._scenario import (
    SCENARIOS,
    CrashPoints,
    LineParser,
    PointedModel,
    PointedStore,
    ToolRunner,
    log_data,
    make_agent,
    opened,
    result_data,
)

RUN_CONFLICT_EXIT = 3


def handshake(message: str) -> None:
    """Tell the test where we are, then block until it says ``go``."""
    print(message, flush=True)
    go = sys.stdin.readline()
    if go.strip() != "go":
        raise SystemExit(f"expected 'go' on stdin after {message!r}, got {go!r}")


class PausingStore:
    """Pauses after the first ``read_log``: both resumers have then read the same log length."""

    def __init__(self, inner: RunStore) -> None:
        self.inner = inner
        self.paused = False

    async def append(self, run_id: str, record: Record, *, sequence: int) -> None:
        await self.inner.append(run_id, record, sequence=sequence)

    async def append_many(self, run_id: str, records: Sequence[Record], *, sequence: int) -> None:
        """The resumers commit in batches: the race is fenced on ``append_many``."""
        await self.inner.append_many(run_id, records, sequence=sequence)  # type: ignore[attr-defined]

    async def read_log(self, run_id: str) -> RunLog:
        log = await self.inner.read_log(run_id)
        if not self.paused:
            self.paused = True
            await asyncio.to_thread(handshake, f"READ {len(log)}")
        return log

    async def run_ids(self) -> list[str]:
        return await self.inner.run_ids()


async def main(
    mode: str, url: str, scenario_name: str, run_id: str, journal: str, *rest: str
) -> dict[str, Any]:
    scenario = SCENARIOS[scenario_name]
    agent = make_agent(scenario, Path(journal))
    async with opened(url) as real_store:
        if mode == "seed":
            points = CrashPoints(kill_at_label=rest[0])
            await polyloop.run(
                agent,
                "follow the script",
                model=PointedModel(ScriptedModel(scenario.replies), points),
                parser=LineParser(),
                executor=ToolRunner(agent, hook=points.passed),
                store=PointedStore(real_store, points),
                run_id=run_id,
            )
            raise SystemExit(f"the run was not killed at {rest[0]!r}")

        actions: list[str] = []

        def before_side_effect(label: str) -> None:
            actions.append(label)
            if len(actions) == 1:
                handshake("ACTING " + label.replace(":", " "))

        try:
            result = await polyloop.resume(
                run_id,
                agent,
                model=ScriptedModel(scenario.replies),
                parser=LineParser(),
                executor=ToolRunner(agent, before=before_side_effect),
                store=PausingStore(real_store),
            )
        except polyloop.RunConflict as exc:
            print(f"RUN_CONFLICT {exc}", flush=True)
            raise SystemExit(RUN_CONFLICT_EXIT) from None
        log = await real_store.read_log(run_id)
    report: dict[str, Any] = {"result": result_data(result), "log": log_data(log)}
    return report


if __name__ == "__main__":
    print("RESULT " + json.dumps(asyncio.run(main(*sys.argv[1:]))), flush=True)
