"""``run_many`` on the durable stores (a SQLite file, a PostgreSQL database): many runs at once,
each finished once, a rerun writes nothing, and one failed run is resumed by the next call — in
this process (the default backend) and in two worker processes (``ProcessBackend``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from polyloop import ProcessBackend, RunFinished, Task, run_many
from polyloop._batch import Backend
from polyloop.stores import open_store
from tests import batch_doubles
from tests.batch_doubles import AGENT, CALLS, seams, tasks

pytestmark = pytest.mark.asyncio


async def records(url: str) -> dict[str, Any]:
    store = open_store(url)
    try:
        return {run_id: (await store.read_log(run_id)).records for run_id in await store.run_ids()}
    finally:
        aclose = getattr(store, "aclose", None)
        if aclose is not None:
            await aclose()


@pytest.fixture(params=["asyncio", "processes"])
def backend(request: pytest.FixtureRequest) -> Backend | None:
    """The default backend, or two worker processes."""
    return None if request.param == "asyncio" else ProcessBackend(workers=2)


async def test_a_batch_on_a_durable_store_finishes_once_and_reruns_write_nothing(
    store_url: str, backend: Backend | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    batch_doubles.reset()
    calls_file = tmp_path / "calls.txt"  # counts the calls of every process
    monkeypatch.setenv("BATCH_CALLS", str(calls_file))
    given = [*tasks(60, "steps=2"), Task("flaky", "steps=2 fail")]
    first = await run_many(AGENT, given, seams=seams, store=store_url, batch="b", concurrency=16,
                           backend=backend)  # fmt: skip
    assert first.what == {"started": 60, "failed": 1}
    before = await records(store_url)
    assert len(before) == 61
    for run_id, logged in before.items():
        finishes = [r for r in logged if isinstance(r, RunFinished)]
        assert len(finishes) == (0 if run_id == "b.flaky" else 1), run_id

    again = await run_many(AGENT, tasks(60, "steps=2"), seams=seams, store=store_url, batch="b",
                           backend=backend)  # fmt: skip
    assert again.what == {"skipped": 60}
    assert await records(store_url) == before

    resumed = await run_many(AGENT, [Task("flaky", "steps=2 fail")], seams=seams,
                             store=store_url, batch="b", backend=backend)  # fmt: skip
    assert resumed.what == {"resumed": 1}
    assert resumed.stop_reasons == {"resume_state_unknown": 1}  # never a replay
    assert max(batch_doubles.calls_in(str(calls_file)).values()) == 1
    if backend is None:
        assert max(CALLS.values()) == 1
