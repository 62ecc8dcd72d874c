"""``polyloop runs`` filters and formats, ``stats``, ``export`` and ``migrate`` through
``main(argv)``; every bad input is one line, exit 2, nothing written."""

from __future__ import annotations

import asyncio
import csv
import hashlib
import io
import json
import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from polyloop import Record, StopReason
from polyloop.cli import main
from polyloop.stores import SQLiteStore
from tests.unit._index_runs import run_batches
from tests.unit._pre_index_store import drop_sqlite_index, write_sqlite_1_0

LABEL = "naïve ✓"


def write_store(path: Path, runs: dict[str, list[list[Record]]]) -> None:
    async def go() -> None:
        async with SQLiteStore(path) as store:
            for run_id, batches in runs.items():
                sequence = 0
                for batch in batches:
                    await store.append_many(run_id, batch, sequence=sequence)
                    sequence += len(batch)

    asyncio.run(go())


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "runs.db"
    write_store(
        path,
        {
            "r1": run_batches(
                "r1",
                steps=2,
                reason=StopReason.AGENT_FINISHED,
                at="2026-11-30T10:00:00.000Z",
                batch="exp",
                task_id="t1",
                labels={"model": "small", "lang": LABEL},
                usage={"prompt_tokens": 5},
            ),
            "r2": run_batches(
                "r2",
                steps=4,
                reason=StopReason.STEP_BUDGET,
                at="2026-11-30T11:00:00.000Z",
                batch="exp",
                task_id="t2",
                labels={"model": "large"},
                usage={"prompt_tokens": 7},
            ),
            "r3": run_batches("r3", steps=1, reason=None, at="2026-12-01T08:00:00.000Z"),
        },
    )
    return path


def one_line_error(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("polyloop: error: ")
    return lines[0]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --------------------------------------------------------------------------- runs


def test_runs_json_is_an_array_of_index_rows(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runs", "--store", str(db), "--format", "json"]) == 0

    rows = json.loads(capsys.readouterr().out)
    assert [row["run_id"] for row in rows] == ["r1", "r2", "r3"]
    assert list(rows[0]) == [
        "run_id",
        "batch",
        "task_id",
        "labels",
        "started_at",
        "finished_at",
        "stop_reason",
        "steps",
        "executed_actions",
        "usage",
    ]
    assert rows[0]["labels"] == {"model": "small", "lang": LABEL}
    assert rows[1]["usage"] == {"prompt_tokens": 28}
    assert (rows[1]["stop_reason"], rows[1]["steps"], rows[1]["executed_actions"]) == (
        "step_budget",
        4,
        4,
    )
    assert (rows[2]["stop_reason"], rows[2]["finished_at"], rows[2]["batch"]) == (None,) * 3


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        (["--batch", "exp"], ["r1", "r2"]),
        (["--stop-reason", "step_budget"], ["r2"]),
        (["--stop-reason", "running", "--stop-reason", "agent_finished"], ["r1", "r3"]),
        (["--since", "2026-11-30T10:30"], ["r2", "r3"]),
        (["--since", "2026-12-01"], ["r3"]),
        (["--label", "model=large"], ["r2"]),
        (["--label", f"lang={LABEL}", "--label", "model=small"], ["r1"]),
        (["--label", "model=small", "--batch", "other"], []),
        (["--limit", "1"], ["r3"]),
        (["--limit", "2", "--batch", "exp"], ["r1", "r2"]),
        (["--limit", "9" * 40], ["r1", "r2", "r3"]),
    ],
)
def test_runs_filters_select_the_runs_they_name(
    db: Path, capsys: pytest.CaptureFixture[str], filters: list[str], expected: list[str]
) -> None:
    assert main(["runs", "--store", str(db), "--format", "json", *filters]) == 0

    assert [row["run_id"] for row in json.loads(capsys.readouterr().out)] == expected


def test_runs_csv_has_a_header_and_mappings_as_json(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["runs", "--store", str(db), "--format", "csv", "--batch", "exp"]) == 0

    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [row["run_id"] for row in rows] == ["r1", "r2"]
    assert json.loads(rows[0]["labels"]) == {"model": "small", "lang": LABEL}
    assert rows[1]["steps"] == "4"
    assert rows[0]["finished_at"] == "2026-11-30T10:00:05.000Z"


def test_runs_table_lists_a_filtered_selection(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["runs", "--store", str(db), "--stop-reason", "running"]) == 0

    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2
    assert out[1].split() == ["r3", "2026-12-01T08:00:00.000Z", "running", "1"]


# --------------------------------------------------------------------------- stats


def test_stats_json_counts_runs_running_and_stop_reasons(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["stats", "--store", str(db), "--format", "json"]) == 0

    stats = json.loads(capsys.readouterr().out)
    assert (stats["runs"], stats["running"]) == (3, 1)
    assert stats["stop_reasons"] == {"agent_finished": 1, "step_budget": 1}
    assert stats["steps"] == {"median": 2, "p90": 4, "max": 4}
    assert stats["usage"] == {"prompt_tokens": 38}  # r3 reported none


def test_stats_table_shows_each_stop_reason_with_its_share(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["stats", "--store", str(db), "--batch", "exp"]) == 0

    out = capsys.readouterr().out
    assert "runs: 2 (2 finished, 0 running)" in out
    assert any(line.split() == ["agent_finished", "1", "50.0%"] for line in out.splitlines())
    assert any(line.split() == ["steps", "2", "4", "4"] for line in out.splitlines())
    assert "usage totals: prompt_tokens=38" in out


# --------------------------------------------------------------------------- export


def test_export_writes_one_json_object_per_run_with_its_steps(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "out" / "runs.jsonl"
    target.parent.mkdir()

    assert main(["export", "--store", str(db), "--batch", "exp", "-o", str(target)]) == 0

    assert capsys.readouterr().out == ""
    lines = target.read_text(encoding="utf-8").splitlines()
    runs = [json.loads(line) for line in lines]
    assert [run["run_id"] for run in runs] == ["r1", "r2"]
    assert [len(run["trajectory"]) for run in runs] == [run["steps"] for run in runs] == [2, 4]
    assert runs[0]["trajectory"][1]["step_index"] == 1
    assert runs[0]["goal"] == "goal of r1"
    assert runs[0]["labels"]["lang"] == LABEL
    assert [p.name for p in target.parent.iterdir()] == ["runs.jsonl"]  # no temporary left


def test_export_to_stdout(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", "--store", str(db), "--limit", "1"]) == 0

    (line,) = capsys.readouterr().out.splitlines()
    assert json.loads(line)["run_id"] == "r3"


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["runs", "--stop-reason", "finished"], "unknown stop reason 'finished'"),
        (["stats", "--stop-reason", ""], "unknown stop reason ''"),
        (["runs", "--label", "model"], "invalid --label 'model'"),
        (["export", "--label", "=x"], "invalid --label '=x'"),
        (["stats", "--label", "a=1", "--label", "a=2"], "--label 'a' is given twice"),
        (["runs", "--limit", "-1"], "invalid --limit '-1'"),
        (["runs", "--limit", "0"], "invalid --limit '0'"),
        (["export", "--limit", "ten"], "invalid --limit 'ten'"),
        (["runs", "--limit", "1e3"], "invalid --limit '1e3'"),
        (["runs", "--since", "yesterday"], "invalid --since 'yesterday'"),
        (["stats", "--since", "2026-13-01"], "invalid --since '2026-13-01'"),
        (["runs", "--since", "\udcff"], "invalid --since"),
        (["runs", "--format", "xml"], "invalid choice: 'xml'"),
        (["stats", "--format", "csv"], "invalid choice: 'csv'"),
        (["export", "-o", "missing-dir/out.jsonl"], "does not exist"),
        (["export", "-o", "."], "it is a directory"),
        (["export", "-o", ""], "not a file name"),
        (["export", "-o", "\ud800.jsonl"], "cannot write to"),
        (["migrate", "--batch", "x"], "unrecognized arguments: --batch"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_nothing_written(
    db: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    before = digest(db)
    listing = sorted(os.listdir(tmp_path))

    status = main([*argv, "--store", str(db)])

    captured = capsys.readouterr()
    assert status == 2
    assert message in one_line_error(captured.err)
    assert captured.out == ""
    assert digest(db) == before
    assert sorted(os.listdir(tmp_path)) == listing


def test_export_to_an_unwritable_directory_is_refused_before_reading(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes through directory permissions")
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)

    status = main(["export", "--store", str(db), "-o", str(locked / "x.jsonl")])

    assert status == 2
    assert "permission denied" in one_line_error(capsys.readouterr().err)
    assert list(locked.iterdir()) == []


@pytest.mark.parametrize("command", ["runs", "stats", "export", "migrate"])
def test_a_store_that_cannot_be_opened_is_exit_2_and_not_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    status = main([command, "--store", str(tmp_path / "none.db")])

    assert status == 2
    assert "no store at" in one_line_error(capsys.readouterr().err)
    assert os.listdir(tmp_path) == []


def test_a_label_value_with_any_character_is_a_filter_not_an_error(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["runs", "--store", str(db), "--format", "json", "--label", "k=\udcff=x"]) == 0

    assert json.loads(capsys.readouterr().out) == []


# --------------------------------------------------------------------------- reads


def _count_statements(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every SQL statement the read-only CLI connection runs."""
    statements: list[str] = []
    connect = sqlite3.connect

    def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn: sqlite3.Connection = connect(*args, **kwargs)
        conn.set_trace_callback(statements.append)
        return conn

    monkeypatch.setattr(sqlite3, "connect", traced)  # what the read-only store connects with
    return statements


def _many_runs(path: Path, count: int) -> None:
    runs: dict[str, Sequence[Record]] = {}
    for n in range(count):
        batches = run_batches(
            f"run-{n:05d}",
            steps=7,
            reason=StopReason.AGENT_FINISHED,
            at=f"2026-11-30T10:{n // 60 % 60:02d}:{n % 60:02d}.000Z",
        )
        runs[f"run-{n:05d}"] = [record for batch in batches for record in batch]
    write_sqlite_1_0(path, runs)
    assert main(["migrate", "--store", str(path)]) == 0


def test_runs_with_a_limit_on_3000_runs_reads_no_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "many.db"
    _many_runs(db, 3000)
    statements = _count_statements(monkeypatch)
    capsys.readouterr()

    assert main(["runs", "--store", str(db), "--limit", "5", "--format", "json"]) == 0
    assert main(["stats", "--store", str(db), "--format", "json"]) == 0

    out = capsys.readouterr().out
    assert '"run_id": "run-02999"' in out
    assert '"runs": 3000' in out
    assert statements  # the trace sees the CLI's queries
    assert not [s for s in statements if "FROM polyloop_records" in s]


def test_without_the_index_runs_reads_every_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # What the index saves: the same listing on a store without it reads each run's records.
    db = tmp_path / "many.db"
    _many_runs(db, 300)
    drop_sqlite_index(db)
    statements = _count_statements(monkeypatch)
    capsys.readouterr()

    assert main(["runs", "--store", str(db), "--limit", "5", "--format", "json"]) == 0

    reads = [s for s in statements if "FROM polyloop_records WHERE run_id" in s]
    assert len(reads) == 300


@pytest.mark.parametrize("command", ["stats", "runs"])
def test_a_batch_the_store_does_not_have_is_named_with_the_batches_it_has(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    assert main([command, "--store", str(db), "--batch", "evals"]) == 0

    captured = capsys.readouterr()
    assert one_line_error_or_note(captured.err) == (
        f"polyloop: note: {db} has no batch 'evals'; its batches: 'exp'"
    )
    assert main([command, "--store", str(db), "--batch", "exp", "--since", "2027-01-01"]) == 0
    assert capsys.readouterr().err == ""  # the batch exists: another filter left nothing

    empty = tmp_path / "none.db"
    write_store(empty, {"r9": run_batches("r9", steps=1, reason=None)})
    assert main([command, "--store", str(empty), "--batch", "evals", "--format", "json"]) == 0
    captured = capsys.readouterr()
    json.loads(captured.out)  # standard output stays what the format says
    assert "has no batch 'evals'; it has no batches" in captured.err


def one_line_error_or_note(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1, err
    return lines[0]
