"""The ``polyloop`` CLI through ``main(argv)``: tables, trajectories, and one-line refusals."""

from __future__ import annotations

import asyncio
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from polyloop import (
    ModelCallIntent,
    ModelReplied,
    ModelReply,
    Record,
    RunStarted,
    StepCompleted,
    StepRecord,
)
from polyloop.cli import main
from polyloop.stores import SQLiteStore


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run in an empty directory, so the default store ``sqlite:///polyloop.db`` lands there."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def record_directly(path: Path, run_id: str, records: list[Record]) -> None:
    async def write() -> None:
        async with SQLiteStore(path) as store:
            for sequence, record in enumerate(records):
                await store.append(run_id, record, sequence=sequence)

    asyncio.run(write())


def started(run_id: str, at: str) -> RunStarted:
    return RunStarted(
        run_id=run_id, goal="line one\nline two", parameters={}, parameters_hash="h", started_at=at
    )


def model_failed_step() -> StepCompleted:
    step = StepRecord(
        step_index=0,
        raw_output="",
        response_chars=0,
        reasoning_chars=0,
        action=None,
        parse_ok=False,
        parse_error=None,
        observation="",
        observation_is_synthetic=False,
        observation_truncated_chars=0,
        prompt_chars=10,
        llm_call_id=None,
        step_wall_ms=3,
    )
    return StepCompleted(step=step, model_error="TimeoutError: the model took too long")


def one_line_error(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("polyloop: error: ")
    return lines[0]


# --------------------------------------------------------------------------- demo, runs, show


def test_demo_records_a_run_and_prints_every_step_and_the_stop(
    in_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(["demo", "--run-id", "demo-1"])

    out = capsys.readouterr().out
    assert status == 0
    assert (in_tmp / "polyloop.db").exists()
    lines = out.splitlines()
    assert lines[0] == "run demo-1"
    steps = [line.split()[:2] for line in lines if line[:4].strip().isdigit()]
    assert steps == [
        ["0", "parse_error"],
        ["1", "executed"],
        ["2", "executed"],
        ["3", "not_executed"],
        ["4", "executed"],
        ["5", "final_answer"],
    ]
    assert "CALC: 6 * 7  -> 42" in out
    assert "stop: agent_finished (3 executed actions)  answer: 21" in out


def test_runs_lists_each_run_with_start_stop_reason_and_step_count(
    in_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["demo", "--run-id", "finished-run"])
    record_directly(
        in_tmp / "polyloop.db",
        "open-run",
        [
            started("open-run", "2000-01-01T00:00:00.000Z"),
            ModelCallIntent(step_index=0, prompt_chars=5),
        ],
    )
    capsys.readouterr()

    status = main(["runs"])

    out = capsys.readouterr().out.splitlines()
    assert status == 0
    assert out[0].split() == ["RUN", "ID", "STARTED", "AT", "STOP", "REASON", "STEPS"]
    # Oldest first: the hand-written run started in 2000.
    assert out[1].split() == ["open-run", "2000-01-01T00:00:00.000Z", "running", "0"]
    assert out[2].split()[0::2] == ["finished-run", "agent_finished"]
    assert out[2].split()[3] == "6"


def test_runs_on_an_empty_memory_store_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["--store", "memory:", "runs"])

    assert status == 0
    assert capsys.readouterr().out.startswith("no runs in memory: (a memory: store starts empty")


def test_show_prints_a_model_failure_and_a_run_still_running(
    in_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record_directly(
        in_tmp / "runs.db",
        "r1",
        [
            started("r1", "2026-11-30T10:00:00.000Z"),
            ModelCallIntent(step_index=0, prompt_chars=10),
            model_failed_step(),
            ModelCallIntent(step_index=1, prompt_chars=10),
            ModelReplied(step_index=1, reply=ModelReply(text="thinking")),
        ],
    )

    status = main(["show", "r1", "--store", "sqlite:///runs.db"])

    out = capsys.readouterr().out
    assert status == 0
    assert "goal: line one\\nline two" in out  # one line per item, newlines shown escaped
    assert "   0  llm_error     TimeoutError: the model took too long" in out
    assert out.splitlines()[-1] == "stop: running (no run_finished yet; last record: model_replied)"


@pytest.mark.parametrize(
    "argv",
    [
        ["--store", "sqlite:///elsewhere.db", "runs"],
        ["runs", "--store", "sqlite:///elsewhere.db"],
    ],
)
def test_store_may_be_given_before_or_after_the_command(
    in_tmp: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    main(["demo", "--run-id", "here", "--store", "sqlite:///elsewhere.db"])
    capsys.readouterr()

    status = main(argv)

    assert status == 0
    assert "here" in capsys.readouterr().out
    assert not (in_tmp / "polyloop.db").exists()


# --------------------------------------------------------------------------- refusals


def test_runs_where_no_store_exists_refuses_and_creates_nothing(
    in_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(["runs"])

    line = one_line_error(capsys.readouterr().err)
    assert status == 2
    assert f"no store at {in_tmp / 'polyloop.db'}" in line
    assert os.listdir(in_tmp) == []


def test_show_of_an_unknown_run_refuses(in_tmp: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main(["demo", "--run-id", "known"])
    capsys.readouterr()

    status = main(["show", "unknown"])

    assert status == 1
    assert "no run 'unknown'" in one_line_error(capsys.readouterr().err)


def test_show_of_an_invalid_run_id_refuses(
    in_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["demo", "--run-id", "known"])
    capsys.readouterr()

    status = main(["show", "../etc/passwd"])

    assert status == 2
    assert "invalid run id '../etc/passwd'" in one_line_error(capsys.readouterr().err)


def test_a_bad_store_url_refuses_listing_the_accepted_forms(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status = main(["--store", "mysql://db/runs", "runs"])

    assert status == 2
    line = one_line_error(capsys.readouterr().err)
    assert "unsupported store URL 'mysql://db/runs'" in line
    assert "sqlite:///" in line


def test_a_corrupted_store_refuses_and_is_left_untouched(
    in_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    garbage = in_tmp / "polyloop.db"
    garbage.write_bytes(os.urandom(4096))
    before = hashlib.sha256(garbage.read_bytes()).hexdigest()

    status = main(["runs"])

    assert status == 2
    assert str(garbage) in one_line_error(capsys.readouterr().err)
    assert hashlib.sha256(garbage.read_bytes()).hexdigest() == before


def test_demo_with_a_run_id_already_used_refuses(
    in_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["demo", "--run-id", "taken"])
    capsys.readouterr()

    status = main(["demo", "--run-id", "taken"])

    assert status == 1
    assert "'taken' already has a log" in one_line_error(capsys.readouterr().err)


def test_no_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    status = main([])

    assert status == 2
    assert "no command given" in one_line_error(capsys.readouterr().err)


def test_an_unknown_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["frobnicate"])

    assert status == 2
    assert "invalid choice: 'frobnicate'" in capsys.readouterr().err


# --------------------------------------------------------------------------- as a process


def test_python_dash_m_refuses_a_missing_store_in_one_line(in_tmp: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "polyloop.cli", "runs", "--store", "sqlite:///missing.db"],
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 2
    assert done.stdout == ""
    assert "no store at" in one_line_error(done.stderr)
    assert not (in_tmp / "missing.db").exists()


def test_the_cli_imports_only_the_standard_library() -> None:
    code = (
        "import sys\n"
        "before = set(sys.modules)\n"  # what site.py loaded (.pth hooks) is not ours
        "import polyloop.cli\n"
        "print(sorted({m.split('.')[0] for m in set(sys.modules) - before}"
        " - set(sys.stdlib_module_names) - {'polyloop'}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_report_command_is_dispatched_to_its_module(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    not_a_report = tmp_path / "report.json"
    not_a_report.write_text("[1, 2, 3]", encoding="utf-8")

    status = main(["report", str(not_a_report)])

    assert status == 2
    assert str(not_a_report) in capsys.readouterr().err


def test_a_reader_that_closes_the_pipe_ends_the_command_quietly(in_tmp: Path) -> None:
    """``polyloop runs | head -1``: no "Broken pipe" error, the exit status a shell reports for
    a Unix tool the closed pipe ended (128 + SIGPIPE)."""

    async def write() -> None:
        async with SQLiteStore(in_tmp / "runs.db") as store:
            for n in range(3000):  # far more than a pipe's buffer holds
                run_id = f"run-{n:04d}"
                await store.append(run_id, started(run_id, "2026-11-30T10:00:00.000Z"), sequence=0)

    asyncio.run(write())
    command = f"{sys.executable} -m polyloop.cli runs --store runs.db"
    done = subprocess.run(
        ["bash", "-c", command + ' | head -1; echo "${PIPESTATUS[0]}"'],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=in_tmp,
    )

    lines = done.stdout.splitlines()
    assert lines[0].split()[:2] == ["RUN", "ID"]
    assert lines[-1] == "141", done.stderr
    assert done.stderr == ""
