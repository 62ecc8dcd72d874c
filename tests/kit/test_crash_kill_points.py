"""The crash probe's kill points are chosen by what was written, not by a clock (issue 37 §4.3).

The probe killed its writers with timers: 0.02 s and 0.09 s after a round's first call, at
fractions of a big call's measured duration, or when a polling thread saw the store's files grow.
Where such a kill lands moves with the machine's load, so ``atomic_append`` and
``prefix_durability`` came out held in one run and violated in the next for the same store. Here
the probe runs twice on each store and must find exactly the same — the same problems, at the
same rounds and record counts, and the same number of acknowledged appends.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest

from polyloop.testing._run_store._durability import CrashFindings, run_crash_probe

_RUN_ID = re.compile(r"[A-Za-z0-9._-]{128}")


async def _probe(store: str) -> tuple[object, ...]:
    with tempfile.TemporaryDirectory(prefix="polyloop-kills-") as directory:
        findings: CrashFindings = await run_crash_probe(
            f"tests.kit.broken_stores:{store}", Path(directory)
        )

    def same(texts: list[str]) -> list[str]:  # run ids are fresh in every probe
        return [_RUN_ID.sub("<run id>", text) for text in texts]

    return (
        same(findings.atomicity),
        same(findings.durability),
        findings.acknowledged,
        findings.rounds,
    )


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "store", ["LineFileStore", "BatchOneRecordAtATime", "ChunkedSkipsTornLines"]
)
async def test_two_probes_of_one_store_find_exactly_the_same(store: str) -> None:
    first = await _probe(store)
    second = await _probe(store)
    assert first == second
