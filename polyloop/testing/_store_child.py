"""The second process of the store promises' place probe: open the store through the factory,
append one record at a given sequence, close it, say so.

    python -m polyloop.testing._store_child FACTORY DIRECTORY RUN_ID SEQUENCE

Prints ``appended`` on success; anything else (an exception's text on stderr, a non-zero exit)
is reported by the parent with what the child said.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from polyloop.testing._crash_writer import close_store, load_factory, open_store
from polyloop.types import ModelCallIntent

#: The record the second process appends (the parent checks it reads back).
CHILD_RECORD = ModelCallIntent(step_index=7, prompt_chars=77)


async def _append(factory: str, directory: Path, run_id: str, sequence: int) -> None:
    store = await open_store(load_factory(factory), directory)
    try:
        await store.read_log(run_id)
        await store.append(run_id, CHILD_RECORD, sequence=sequence)
    finally:
        await close_store(store)


def main(argv: list[str]) -> int:
    factory, directory, run_id, sequence = argv
    asyncio.run(_append(factory, Path(directory), run_id, int(sequence)))
    print("appended", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
