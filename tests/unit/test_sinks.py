"""LoggingSink and JsonlSink."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import pytest

from polyloop import (
    Action,
    ActionIntent,
    ActionStatus,
    Event,
    ModelCallIntent,
    ModelReplied,
    ModelReply,
    Record,
    RunFinished,
    RunStarted,
    StepCompleted,
    StepRecord,
    StopReason,
    record_from_json,
)
from polyloop.events import JsonlSink, LoggingSink

pytestmark = pytest.mark.asyncio

STEP = StepRecord(
    step_index=0,
    raw_output="reply",
    response_chars=5,
    reasoning_chars=0,
    action="ls",
    parse_ok=True,
    parse_error=None,
    observation="out",
    observation_is_synthetic=False,
    observation_truncated_chars=0,
    prompt_chars=10,
    llm_call_id="c-1",
    step_wall_ms=3,
    tool_name="shell",
    tool_args_json='{"cmd":"ls"}',
    action_status=ActionStatus.EXECUTED,
)

RECORDS: list[Record] = [
    RunStarted(
        run_id="r1",
        goal="find\nthe answer",
        parameters={"k": [1, "é"]},
        parameters_hash="sha256:00",
        started_at="2026-01-01T00:00:00.000Z",
    ),
    ModelCallIntent(step_index=0, prompt_chars=10),
    ModelReplied(step_index=0, reply=ModelReply(text="reply", call_id="c-1", usage={"in": 3})),
    ActionIntent(
        step_index=0, action=Action(text="ls", tool_name="shell", tool_args={"cmd": "ls"})
    ),
    StepCompleted(step=STEP, executor_observation=None),
    RunFinished(
        stop_reason=StopReason.TASK_COMPLETED,
        final_answer=None,
        executed_actions=1,
        finished_at="2026-01-01T00:00:01.000Z",
    ),
]
EVENTS = [Event(run_id="r1", sequence=i, record=r) for i, r in enumerate(RECORDS)]


# --------------------------------------------------------------------------- LoggingSink


async def test_logging_sink_logs_one_line_per_event_with_run_sequence_kind_and_summary(caplog):
    caplog.set_level(logging.INFO, logger="polyloop.events")
    sink = LoggingSink()
    for event in EVENTS:
        await sink.emit(event)
    messages = [r.getMessage() for r in caplog.records if r.name == "polyloop.events"]
    assert messages == [
        "run=r1 seq=0 run_started goal='find\\nthe answer'",
        "run=r1 seq=1 model_call_intent step=0 prompt_chars=10",
        "run=r1 seq=2 model_replied step=0 call_id=c-1 response_chars=5",
        "run=r1 seq=3 action_intent step=0 tool='shell'",
        "run=r1 seq=4 step_completed step=0 action_status=executed",
        "run=r1 seq=5 run_finished stop_reason=task_completed executed_actions=1",
    ]
    assert all("\n" not in m for m in messages)


async def test_logging_sink_uses_the_given_logger_and_level(caplog):
    logger = logging.getLogger("tests.sinks.custom")
    caplog.set_level(logging.DEBUG, logger="tests.sinks.custom")
    await LoggingSink(logger, level=logging.DEBUG).emit(EVENTS[1])
    [record] = [r for r in caplog.records if r.name == "tests.sinks.custom"]
    assert record.levelno == logging.DEBUG


async def test_logging_sink_cuts_long_model_texts(caplog):
    caplog.set_level(logging.INFO, logger="polyloop.events")
    step = StepCompleted(step=STEP, model_error="RuntimeError: " + "x" * 10_000)
    failed = Event(run_id="r1", sequence=4, record=step)
    intent = ActionIntent(step_index=1, action=Action(text="\udcff" + "y" * 10_000))
    await LoggingSink().emit(failed)
    await LoggingSink().emit(Event(run_id="r1", sequence=5, record=intent))
    lengths = [len(r.getMessage()) for r in caplog.records if r.name == "polyloop.events"]
    assert len(lengths) == 2
    assert max(lengths) < 200


# --------------------------------------------------------------------------- JsonlSink


def read_lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


async def test_jsonl_sink_opens_the_file_lazily(tmp_path):
    path = tmp_path / "events.jsonl"
    sink = JsonlSink(path)
    assert not path.exists()
    await sink.emit(EVENTS[0])
    await sink.aclose()
    assert path.exists()


async def test_jsonl_sink_writes_one_canonical_line_per_event_that_round_trips(tmp_path):
    path = tmp_path / "events.jsonl"
    async with JsonlSink(path) as sink:
        for event in EVENTS:
            await sink.emit(event)
    raw_lines = path.read_text(encoding="utf-8").splitlines()
    assert len(raw_lines) == len(EVENTS)
    for raw, event in zip(raw_lines, EVENTS, strict=True):
        line = json.loads(raw)
        assert raw == json.dumps(line, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        assert (line["run_id"], line["sequence"]) == (event.run_id, event.sequence)
        assert record_from_json(json.dumps(line["record"])) == event.record


async def test_concurrent_emits_never_interleave(tmp_path):
    path = tmp_path / "events.jsonl"
    big = RunStarted(
        run_id="r",
        goal="g" * 100_000,
        parameters={},
        parameters_hash="sha256:00",
        started_at="2026-01-01T00:00:00.000Z",
    )
    async with JsonlSink(path) as sink:
        await asyncio.gather(
            *(sink.emit(Event(run_id=f"r{i}", sequence=i, record=big)) for i in range(50))
        )
    lines = read_lines(path)
    assert sorted(line["sequence"] for line in lines) == list(range(50))  # type: ignore[type-var]


async def test_jsonl_sink_appends_to_an_existing_file_and_reopens_after_aclose(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_text('{"earlier":true}\n', encoding="utf-8")
    sink = JsonlSink(path)
    await sink.emit(EVENTS[0])
    await sink.aclose()
    await sink.emit(EVENTS[1])
    await sink.aclose()
    lines = read_lines(path)
    assert [line.get("sequence") for line in lines] == [None, 0, 1]


async def test_a_lone_surrogate_is_written_as_its_json_escape_and_reads_back(tmp_path):
    path = tmp_path / "events.jsonl"
    intent = ActionIntent(step_index=0, action=Action(text="bad \udcff text"))
    async with JsonlSink(path) as sink:
        await sink.emit(Event(run_id="r", sequence=0, record=intent))
    raw = path.read_bytes()
    assert b"\\udcff" in raw
    [line] = read_lines(path)
    assert record_from_json(json.dumps(line["record"])) == intent


async def test_an_unwritable_path_fails_the_emit_not_the_constructor(tmp_path):
    sink = JsonlSink(tmp_path / "missing-dir" / "events.jsonl")
    with pytest.raises(FileNotFoundError):
        await sink.emit(EVENTS[0])
