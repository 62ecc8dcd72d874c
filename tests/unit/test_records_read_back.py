"""Whatever the library writes, it can read back: usage numbers, on every bundled store.

Issue #11, "Records": a float in ``ModelReply.usage`` (a cost) was written, then every read of
the run — and ``polyloop runs`` for the whole store — failed. ``MemoryStore`` hid it.
"""

from __future__ import annotations

import asyncio
import importlib
import math
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import polyloop
from polyloop import (
    FinalAnswer,
    ModelCallIntent,
    ModelReplied,
    ModelReply,
    Record,
    RunLog,
    RunResult,
    RunStarted,
    StopReason,
    parameters_hash,
)
from polyloop.cli import main
from polyloop.errors import StoreCorrupted
from polyloop.models import ScriptedModel
from polyloop.ports import RunStore
from polyloop.stores import MemoryStore, SQLiteStore, open_store
from tests.unit._doubles import ForbiddenExecutor, ScriptedParser, agent
from tests.unit._pre_index_store import drop_sqlite_index

USAGE = {"prompt_tokens": 7, "completion_tokens": 3, "cost": 0.000123}
REPLY = ModelReply(text="done", call_id="call-0", usage=USAGE)


# --------------------------------------------------------------------------- ModelReply.usage


@pytest.mark.parametrize(
    "usage",
    [{"cost": 0.000123}, {"tokens": 2**63 - 1}, {"cost": -0.0, "n": 0}, {}],
)
def test_usage_accepts_ints_and_finite_floats(usage: dict[str, Any]) -> None:
    assert ModelReply(text="", usage=usage).usage == usage


@pytest.mark.parametrize(
    ("usage", "named"),
    [
        ({"cost": math.nan}, "'cost'"),
        ({"cost": math.inf}, "'cost'"),
        ({"cached": True}, "'cached'"),
        ({"tokens": "7"}, "'tokens'"),
        ({"tokens": None}, "'tokens'"),
        ({1: 2}, "keys must be str"),
        ([("tokens", 1)], "mapping"),
        ("tokens", "mapping"),
    ],
)
def test_usage_that_cannot_round_trip_is_a_value_error_naming_the_field(
    usage: Any, named: str
) -> None:
    with pytest.raises(ValueError, match=r"ModelReply\.usage") as caught:
        ModelReply(text="", usage=usage)
    assert named in str(caught.value)


# --------------------------------------------------------------------------- every bundled store


@pytest.fixture(params=["memory", "sqlite", "postgres", "example-jsonl"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "memory":
        yield "memory:"
    elif request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'runs.db'}"
    elif request.param == "example-jsonl":  # the store the subclassing example writes
        yield f"jsonl:{tmp_path}"
    else:
        yield request.getfixturevalue("postgres_database_dsn")


async def _with_store(url: str, memory: dict[str, RunStore]) -> RunStore:
    # memory: has no shared state between open_store calls; keep one per test.
    if url == "memory:":
        return memory.setdefault(url, MemoryStore())
    if url.startswith("jsonl:"):
        # By name: mypy knows the example as the top-level module its own test imports.
        example = importlib.import_module("examples.conformance_by_subclassing.calculator")
        store: RunStore = example.JsonLinesStore(Path(url.removeprefix("jsonl:")))
        return store
    return open_store(url)


async def _close(store: RunStore) -> None:
    aclose = getattr(store, "aclose", None)  # the example store holds nothing open
    if aclose is not None:
        await aclose()


def test_a_cost_in_usage_finishes_reads_back_and_resumes_on_every_store(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    result, log, rebuilt = asyncio.run(_run_read_resume(store_url))

    assert result.stop_reason is StopReason.AGENT_FINISHED
    assert log.replies[0].reply.usage == USAGE
    assert rebuilt.final_answer == "42"
    if "://" in store_url:  # the CLI opens a store by URL: memory: would be a new one
        assert main(["runs", "--store", store_url]) == 0
        out = capsys.readouterr().out
        assert "with-cost" in out
        assert "agent_finished" in out


async def _run_read_resume(url: str) -> tuple[RunResult, RunLog, RunResult]:
    definition = agent()
    parser = ScriptedParser({"done": FinalAnswer(text="42")})
    store = await _with_store(url, {})
    try:
        result = await polyloop.run(
            definition,
            "goal",
            model=ScriptedModel([REPLY]),
            parser=parser,
            executor=ForbiddenExecutor(),
            store=store,
            run_id="with-cost",
        )
        log = await store.read_log("with-cost")
        rebuilt = await polyloop.resume(
            "with-cost",
            definition,
            model=ScriptedModel([]),
            parser=parser,
            executor=ForbiddenExecutor(),
            store=store,
        )
    finally:
        await _close(store)
    return result, log, rebuilt


@pytest.mark.asyncio
async def test_an_interrupted_run_whose_logged_reply_has_a_cost_resumes_on_every_store(
    store_url: str,
) -> None:
    memory: dict[str, RunStore] = {}
    definition = agent()
    parameters = definition.parameters()
    store = await _with_store(store_url, memory)
    try:
        records: list[Record] = [
            RunStarted(
                run_id="cut",
                goal="goal",
                parameters=parameters,
                parameters_hash=parameters_hash(parameters),
                started_at="2026-01-01T00:00:00.000Z",
            ),
            ModelCallIntent(step_index=0, prompt_chars=10),
            ModelReplied(step_index=0, reply=REPLY),
        ]
        for sequence, record in enumerate(records):
            await store.append("cut", record, sequence=sequence)
        result = await polyloop.resume(
            "cut",
            definition,
            model=ScriptedModel([]),
            parser=ScriptedParser({"done": FinalAnswer(text="42")}),
            executor=ForbiddenExecutor(),
            store=store,
        )
        log = await store.read_log("cut")
    finally:
        await _close(store)

    assert result.final_answer == "42"
    assert log.finished is not None
    assert log.finished.stop_reason is StopReason.AGENT_FINISHED


# --------------------------------------------------------------------------- MemoryStore = disk


@pytest.mark.asyncio
async def test_memory_store_gives_back_what_sqlite_gives_back(tmp_path: Path) -> None:
    started = RunStarted(
        run_id="r",
        goal="g",
        parameters={"pair": (1, 2)},  # a tuple comes back from JSON as a list
        parameters_hash="h",
        started_at="t",
    )
    memory = MemoryStore()
    await memory.append("r", started, sequence=0)
    async with SQLiteStore(tmp_path / "runs.db") as disk:
        await disk.append("r", started, sequence=0)
        from_disk = await disk.read_log("r")

    from_memory = await memory.read_log("r")

    assert from_memory == from_disk
    assert from_memory.records[0].parameters == {"pair": [1, 2]}  # type: ignore[union-attr]


@pytest.mark.asyncio
async def test_memory_store_refuses_a_record_the_durable_stores_cannot_encode() -> None:
    started = RunStarted(
        run_id="r", goal="g", parameters={"x": object()}, parameters_hash="h", started_at="t"
    )
    store = MemoryStore()

    with pytest.raises(TypeError):
        await store.append("r", started, sequence=0)

    assert await store.run_ids() == []


# --------------------------------------------------------------------------- polyloop runs


def test_runs_lists_every_other_run_and_shows_an_unreadable_one_as_such(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "runs.db"
    url = f"sqlite:///{db}"
    for run_id in ("good-a", "damaged", "good-b"):
        assert main(["demo", "--store", url, "--run-id", run_id]) == 0
    with sqlite3.connect(db) as conn:
        conn.execute(
            "UPDATE polyloop_records SET body = '{\"kind\": 1}' "
            "WHERE run_id = 'damaged' AND sequence = 3"
        )
    # Only a store without the run index has its logs read to list runs (an index row is not
    # damaged by a damaged record: `show` finds that).
    drop_sqlite_index(db)
    capsys.readouterr()

    status = main(["runs", "--store", url])

    captured = capsys.readouterr()
    rows = {line.split()[0]: line.split() for line in captured.out.splitlines()[1:]}
    assert status == 0
    assert rows["damaged"] == ["damaged", "?", "unreadable", "?"]
    assert rows["good-a"][2] == rows["good-b"][2] == "agent_finished"
    assert captured.err.splitlines()[0].startswith("polyloop: note: ")
    assert captured.err.splitlines()[1].startswith("polyloop: warning: run damaged is unreadable: ")
    assert "sequence 3" in captured.err
    with pytest.raises(StoreCorrupted):  # the damage is real, not hidden
        asyncio.run(_read(db, "damaged"))


async def _read(db: Path, run_id: str) -> None:
    async with SQLiteStore(db) as store:
        await store.read_log(run_id)
