"""Errors that cannot propagate are logged, never dropped without a trace (#24 §4)."""

from __future__ import annotations

import asyncio
import logging
import os
import stat
from pathlib import Path

import pytest

import polyloop
from polyloop import Record, StopReason
from polyloop.stores import SQLiteStore
from tests.unit._doubles import GOAL, FailingStore, GatedModel, act, agent, script

pytestmark = pytest.mark.asyncio


class ParserDown(Exception):
    pass


class BrokenParser:
    def parse(self, reply: polyloop.ModelReply) -> polyloop.ParsedReply:
        raise ParserDown("the parser raised")


def _is_reply(sequence: int, record: Record) -> bool:
    return record.kind == "model_replied"


async def test_a_failed_flush_is_logged_and_the_parsers_error_propagates(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = FailingStore(_is_reply, OSError("disk gone"))
    seams = {**script(act()).kwargs(), "parser": BrokenParser()}

    with caplog.at_level(logging.ERROR, logger="polyloop"), pytest.raises(ParserDown):
        await polyloop.run(agent(), GOAL, store=store, run_id="flushed-run", **seams)

    assert [r.kind for r in (await store.read_log("flushed-run")).records] == [
        "run_started",
        "model_call_intent",
    ]
    (line,) = [r for r in caplog.records if r.name == "polyloop"]
    assert line.levelno == logging.ERROR
    assert "flushed-run" in line.getMessage()
    assert line.exc_info is not None
    assert isinstance(line.exc_info[1], OSError)


async def test_a_failed_directory_fsync_is_logged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise OSError(5, "Input/output error")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    path = tmp_path / "runs.db"
    with caplog.at_level(logging.WARNING, logger="polyloop"):
        async with SQLiteStore(path) as store:
            result = await polyloop.run(
                agent(max_steps=1), GOAL, store=store, run_id="r", **script(act()).kwargs()
            )

    assert result.stop_reason is StopReason.STEP_BUDGET  # the store still works
    (line,) = [r for r in caplog.records if r.name == "polyloop"]
    assert str(tmp_path) in line.getMessage()
    assert line.exc_info is not None
    assert isinstance(line.exc_info[1], OSError)


def _is_finish(sequence: int, record: Record) -> bool:
    return record.kind == "run_finished"


async def test_a_failed_cancelled_finish_is_logged_and_the_cancellation_propagates(
    caplog: pytest.LogCaptureFixture,
) -> None:
    seams = script(act(), act())
    model = GatedModel(seams.model, at_call=1)
    store = FailingStore(_is_finish, OSError("disk gone"))
    run = polyloop.run(
        agent(), GOAL, store=store, run_id="cancelled-run", **{**seams.kwargs(), "model": model}
    )
    with caplog.at_level(logging.ERROR, logger="polyloop"):
        task = asyncio.ensure_future(run)
        await model.gate.entered.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    assert (await store.read_log("cancelled-run")).finished is None
    (line,) = [r for r in caplog.records if r.name == "polyloop"]
    assert "cancelled-run" in line.getMessage()
    assert line.exc_info is not None
    assert isinstance(line.exc_info[1], OSError)
