"""The crash probe says in plain words what happened when a store cannot be reopened after a
writer was killed (issue #32 §4): "after a writer was killed in the middle of an append, reopening
the store failed: `JSONDecodeError: …` at …", never "a writer failed before it was killed (end 3
17920, exit code -9)"."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from polyloop.testing._run_store._durability import run_crash_probe

FACTORY = "tests.kit.broken_stores:TornManifestOnOpen"


@pytest.mark.asyncio
async def test_a_store_that_cannot_be_reopened_after_a_kill_is_explained_in_plain_words() -> None:
    with tempfile.TemporaryDirectory(prefix="polyloop-words-") as directory:
        try:
            findings = await run_crash_probe(FACTORY, Path(directory))
        except RuntimeError as error:  # the next round's writer met it first
            said = [str(error)]
        else:  # the probe's own reopening met it first
            said = findings.durability
    assert said, "the probe found nothing wrong with a store that cannot be reopened"
    first = said[0]
    assert first.startswith("after a writer was killed "), first
    assert "reopening the store failed" in first, first
    assert "`JSONDecodeError: " in first, first
    assert "broken_stores.py:" in first.split("\n")[0], first  # where, in the store's code
    assert "end " not in first.split("\n")[0], first
    assert "exit code" not in first, first
