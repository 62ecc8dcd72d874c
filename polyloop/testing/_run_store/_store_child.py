"""The second process of the store promises' place probe: open the store through the factory,
append one record at a given sequence, close it, say so.

It runs as ``python -c CHILD_SOURCE FACTORY DIRECTORY RUN_ID SEQUENCE``: the source imports only
the standard library, polyloop's records and the factory's module — importing
``polyloop.testing`` would drag pytest and Hypothesis into a process that needs neither. Prints
``appended`` on success; anything else (an exception on stderr, a non-zero exit) is reported by
the parent with what the child said.
"""

from __future__ import annotations

from polyloop.types import ModelCallIntent

__all__ = ["CHILD_RECORD", "CHILD_SOURCE"]

#: The record the second process appends (the parent checks it reads back).
CHILD_RECORD = ModelCallIntent(step_index=7, prompt_chars=77)

CHILD_SOURCE = """
import asyncio, importlib, sys
from pathlib import Path
from polyloop.types import ModelCallIntent

async def main(spec, directory, run_id, sequence):
    module, _, attribute = spec.partition(":")
    factory = importlib.import_module(module)
    for part in attribute.split("."):
        factory = getattr(factory, part)
    store = factory(Path(directory))
    if hasattr(store, "__aenter__"):
        store = (await store.__aenter__()) or store
    try:
        await store.read_log(run_id)
        record = ModelCallIntent(step_index=7, prompt_chars=77)
        await store.append(run_id, record, sequence=int(sequence))
    finally:
        if hasattr(store, "__aexit__"):
            await store.__aexit__(None, None, None)
        elif callable(getattr(store, "aclose", None)):
            await store.aclose()

asyncio.run(main(*sys.argv[1:]))
print("appended", flush=True)
"""
