"""Issue #11: seams checked up front, a damaged resume point, delivery failures logged, control
characters in ``polyloop show``, one SQLite finalizer per store."""

from __future__ import annotations

import asyncio
import logging
import weakref
from pathlib import Path
from typing import Any

import pytest

import polyloop
from polyloop import (
    Action,
    ActionIntent,
    ModelCallIntent,
    RunStarted,
    StoreCorrupted,
    parameters_hash,
)
from polyloop.cli import main
from polyloop.events import MemorySink
from polyloop.stores import MemoryStore, SQLiteStore
from polyloop.types import Event
from tests.unit._doubles import act, agent, final, script

# --------------------------------------------------------------------------- seams up front


class _NoMethods:
    pass


_WRONG_SEAMS = [
    ("model", None),
    ("model", _NoMethods()),
    ("parser", None),
    ("parser", _NoMethods()),
    ("executor", object()),
    ("store", _NoMethods()),
    ("events", _NoMethods()),
]


@pytest.mark.parametrize(("name", "seam"), _WRONG_SEAMS)
@pytest.mark.asyncio
async def test_run_with_a_missing_or_wrong_seam_is_a_type_error_and_writes_nothing(
    name: str, seam: Any
) -> None:
    store = MemoryStore()
    seams: dict[str, Any] = {**script(final()).kwargs(), "store": store, "events": None}
    seams[name] = seam

    with pytest.raises(TypeError, match=name):
        await polyloop.run(agent(), "goal", run_id="r", **seams)

    assert await store.run_ids() == []


@pytest.mark.parametrize(("name", "seam"), [*_WRONG_SEAMS, ("store", None)])
@pytest.mark.asyncio
async def test_resume_with_a_missing_or_wrong_seam_is_a_type_error_and_writes_nothing(
    name: str, seam: Any
) -> None:
    store = MemoryStore()
    await _interrupted_log(store, [ModelCallIntent(step_index=0, prompt_chars=1)])
    seams: dict[str, Any] = {**script(final()).kwargs(), "store": store, "events": None}
    seams[name] = seam

    with pytest.raises(TypeError, match=name):
        await polyloop.resume("r", agent(), **seams)

    assert len((await store.read_log("r")).records) == 2


# --------------------------------------------------------------------------- damaged resume point


async def _interrupted_log(store: MemoryStore, tail: list[Any]) -> None:
    parameters = agent().parameters()
    started = RunStarted(
        run_id="r",
        goal="goal",
        parameters=parameters,
        parameters_hash=parameters_hash(parameters),
        started_at="2026-01-01T00:00:00.000Z",
    )
    for sequence, record in enumerate([started, *tail]):
        await store.append("r", record, sequence=sequence)


@pytest.mark.asyncio
async def test_an_action_intent_with_no_model_reply_before_it_is_store_corrupted() -> None:
    store = MemoryStore()
    await _interrupted_log(
        store,
        [
            ModelCallIntent(step_index=0, prompt_chars=1),
            ActionIntent(step_index=0, action=Action(text="x")),
        ],
    )

    with pytest.raises(StoreCorrupted, match=r"run 'r', sequence 2: action_intent"):
        await polyloop.resume("r", agent(replay=True), store=store, **script(act()).kwargs())

    assert (await store.read_log("r")).finished is None


# --------------------------------------------------------------------------- delivery failures


class _DownSink:
    async def emit(self, event: Event) -> None:
        raise ValueError("sink is down")


@pytest.mark.asyncio
async def test_the_first_delivery_failure_of_a_run_is_logged_with_its_exception(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sink = _DownSink()
    caplog.set_level(logging.WARNING, logger="polyloop")

    result = await polyloop.run(
        agent(), "goal", events=sink, run_id="r", **script(final()).kwargs()
    )

    logged = [r for r in caplog.records if r.name == "polyloop"]
    assert result.event_delivery_failures > 1
    assert len(logged) == 1
    assert "run r" in logged[0].getMessage()
    assert logged[0].exc_info is not None
    assert isinstance(logged[0].exc_info[1], ValueError)


@pytest.mark.asyncio
async def test_a_run_whose_events_are_delivered_logs_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="polyloop")

    await polyloop.run(agent(), "goal", events=MemorySink(), **script(final()).kwargs())

    assert [r for r in caplog.records if r.name == "polyloop"] == []


# --------------------------------------------------------------------------- polyloop show


def test_show_escapes_control_characters_from_model_and_tool_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hostile = "A\x1b[2J\rB\x07C\x9bD\x7fE"
    seams = script(act(observation=hostile, reply_text="r0"), final(answer=hostile))

    async def record() -> None:
        async with SQLiteStore(tmp_path / "runs.db") as store:
            await polyloop.run(agent(), hostile, store=store, run_id="r", **seams.kwargs())

    asyncio.run(record())

    status = main(["show", "--store", f"sqlite:///{tmp_path / 'runs.db'}", "r"])

    out = capsys.readouterr().out
    assert status == 0
    escaped = "A\\x1b[2J\\rB\\x07C\\x9bD\\x7fE"
    assert out.count(escaped) == 3  # goal, observation, final answer
    assert not any(c in out for c in "\x1b\r\x07\x9b\x7f")


# --------------------------------------------------------------------------- SQLite finalizers


def _finalizers_of(obj: object) -> int:
    registry: dict[weakref.finalize[Any, Any], object] = weakref.finalize._registry  # type: ignore[attr-defined]
    return len([f for f in registry if f.alive and (f.peek() or (None,))[0] is obj])


@pytest.mark.asyncio
async def test_reopening_a_sqlite_store_keeps_one_finalizer(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")

    for _ in range(200):
        await store.run_ids()
        await store.aclose()
    await store.run_ids()

    assert _finalizers_of(store) == 1
    await store.aclose()


# --------------------------------------------------------------------------- step_wall_ms


class _SlowSink:
    async def emit(self, event: Event) -> None:
        await asyncio.sleep(0.2)


class _SlowStore(MemoryStore):
    async def append(self, run_id: str, record: Any, *, sequence: int) -> None:
        await asyncio.sleep(0.2)
        await super().append(run_id, record, sequence=sequence)


class _SlowModel:
    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def complete(self, messages: Any) -> Any:
        await asyncio.sleep(0.05)
        return await self.inner.complete(messages)


@pytest.mark.asyncio
async def test_step_wall_ms_counts_model_parse_and_execute_not_the_store_or_the_sink() -> None:
    seams = script(act(), final())
    seams_kwargs = {**seams.kwargs(), "model": _SlowModel(seams.model)}

    result = await polyloop.run(
        agent(), "goal", store=_SlowStore(), events=_SlowSink(), **seams_kwargs
    )

    # Each step waited 0.6 s or more on the store and 0.6 s on the sink before it was
    # recorded; what it reports is its 0.05 s model call plus the (instant) parse and action.
    assert [50 <= step.step_wall_ms < 200 for step in result.steps] == [True, True]
