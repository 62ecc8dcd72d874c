"""Child process of the crash-point test: drive one scripted run, maybe SIGKILL itself.

``python -m tests.integration.crash_child run URL SCENARIO RUN_ID JOURNAL [--kill-at K]``
    runs the scenario from the start. Every write point it passes is counted (before and after
    each commit, inside it on SQLite — each record's INSERT and the COMMIT —, inside each model
    call, inside each action after its side effect; on SQLite the points are put on the store
    itself, so the loop commits as it does for any SQLiteStore, in the run's own task); with
    ``--kill-at K`` the process SIGKILLs itself at point K, else it prints one ``RESULT <json>``
    line with the run's result, its log and the labels of every point it passed.

``python -m tests.integration.crash_child resume URL SCENARIO RUN_ID JOURNAL``
    in a fresh process with fresh seam objects: reads the log the crash left, then
    ``polyloop.resume``; a run whose log is empty (the crash came before ``RunStarted``) raises
    ``RunNotFound`` and is started again with ``polyloop.run`` under the same id. Prints one
    ``RESULT <json>`` line (with the events this process emitted).
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

import polyloop
from polyloop.events import MemorySink
from polyloop.models import ScriptedModel
from polyloop.ports import RunStore
from polyloop.stores import SQLiteStore
from polyloop.stores import _sqlite as sqlite_module
from tests.integration._scenario import (
    SCENARIOS,
    CrashPoints,
    LineParser,
    PointedBatchStore,
    PointedModel,
    ToolRunner,
    log_data,
    make_agent,
    opened,
    pointed_in_place,
    result_data,
    watch_inside_commits,
)

# A steady disk, as the other inline-commit tests pin it: on a loaded machine one fsync over
# 10 ms would send the next commits to the worker, and the test's count of commits made in the
# run's own task would depend on the machine's load instead of on the loop.
sqlite_module._SLOW_INLINE_COMMIT_S = 3600.0


async def main(args: argparse.Namespace) -> dict[str, Any]:
    scenario = SCENARIOS[args.scenario]
    points = CrashPoints(kill_at=args.kill_at)
    agent = make_agent(scenario, Path(args.journal))
    events = MemorySink()
    seams: dict[str, Any] = {
        "model": PointedModel(ScriptedModel(scenario.replies), points),
        "parser": LineParser(),
        "executor": ToolRunner(agent, hook=points.passed),
        "events": events,
    }
    report: dict[str, Any] = {}
    async with opened(args.url) as real_store:
        # SQLite: the points on the store itself, so the loop commits in the run's own task
        # as it does for any SQLiteStore; other stores: a wrapper, whose commits are tasks.
        store: RunStore = real_store
        in_place = None
        if isinstance(real_store, SQLiteStore):
            in_place = pointed_in_place(real_store, points)
        else:
            store = PointedBatchStore(real_store, points)
        report["inside_commits"] = await watch_inside_commits(real_store, points)
        if args.mode == "run":
            result = await polyloop.run(
                agent, "follow the script", run_id=args.run_id, store=store, **seams
            )
        else:
            report["crash_log"] = log_data(await real_store.read_log(args.run_id))
            try:
                result = await polyloop.resume(args.run_id, agent, store=store, **seams)
                report["outcome"] = "resumed"
            except polyloop.RunNotFound:
                report["outcome"] = "run_not_found"
                result = await polyloop.run(
                    agent, "follow the script", run_id=args.run_id, store=store, **seams
                )
        report["result"] = result_data(result)
        report["log"] = log_data(await real_store.read_log(args.run_id))
    report["points"] = points.labels
    report["commits"] = None if in_place is None else [in_place.inline, in_place.awaited]
    report["events"] = [[event.sequence, event.record.kind] for event in events.events]
    return report


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["run", "resume"])
    parser.add_argument("url")
    parser.add_argument("scenario", choices=sorted(SCENARIOS))
    parser.add_argument("run_id")
    parser.add_argument("journal")
    parser.add_argument("--kill-at", type=int, default=None)
    return parser.parse_args()


if __name__ == "__main__":
    print("RESULT " + json.dumps(asyncio.run(main(parse_args()))), flush=True)
