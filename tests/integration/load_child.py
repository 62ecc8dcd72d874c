"""Child process of the load test: many concurrent runs in one event loop, on a shared store.

``python -m tests.integration.load_child URL PREFIX FIRST COUNT``

Opens the store, prints ``READY`` and waits for a ``go`` line on stdin (the start barrier that
makes the processes' runs overlap), then drives runs ``FIRST .. FIRST+COUNT-1`` concurrently
(run id ``PREFIX-<index>``, script :func:`~tests.integration._scenario.load_script`) and prints
one ``RESULT <json>`` line: what every ``run()`` returned.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from tests.integration._scenario import drive_load_runs, opened


async def main(url: str, prefix: str, first: int, count: int) -> dict[str, Any]:
    async with opened(url) as store:
        await store.run_ids()  # connect (and create the schema) before the barrier
        print("READY", flush=True)
        go = await asyncio.to_thread(sys.stdin.readline)
        assert go.strip() == "go", f"expected 'go' on stdin, got {go!r}"
        results = await drive_load_runs(store, prefix, range(first, first + count))
    return {"results": results}


if __name__ == "__main__":
    url, prefix, first, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    print("RESULT " + json.dumps(asyncio.run(main(url, prefix, first, count))), flush=True)
