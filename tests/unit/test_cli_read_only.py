"""``polyloop runs`` and ``polyloop show`` only read: whatever file ``--store`` names is left
byte-identical (content and modification time), and each bad input is one clear line with the
exit status of a failure at run time (1); a usage error is 2."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from polyloop import RunFinished, RunStarted, StopReason
from polyloop.cli import main
from tests.unit.test_cli import record_directly

Make = Callable[[Path], None]


def _zero_bytes(path: Path) -> None:
    path.write_bytes(b"")


def _directory(path: Path) -> None:
    path.mkdir()
    (path / "inside").write_text("kept", encoding="utf-8")


def _not_sqlite(path: Path) -> None:
    path.write_bytes(b"name,score\nada,3\n" * 200)


def _other_application(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    conn.execute("INSERT INTO notes (body) VALUES ('mine')")
    conn.commit()
    conn.close()


def _empty_sqlite(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 7")  # a valid SQLite file with no table at all
    conn.close()


def _truncated_store(path: Path) -> None:
    assert main(["demo", "--store", str(path), "--run-id", "r"]) == 0
    data = path.read_bytes()
    for companion in (path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        companion.unlink(missing_ok=True)
    path.write_bytes(data[: len(data) // 2 + 1])


BAD_INPUTS: dict[str, tuple[Make | None, str]] = {
    "missing": (None, "no store at"),
    "zero-bytes": (_zero_bytes, "an empty file, not a polyloop store"),
    "directory": (_directory, "is a directory"),
    "not-sqlite": (_not_sqlite, "not a polyloop database (no SQLite header)"),
    "another-application": (_other_application, "an SQLite database but not a polyloop store"),
    "sqlite-without-tables": (_empty_sqlite, "no polyloop store in it"),
    "truncated": (_truncated_store, "truncated database"),
}


def _snapshot(root: Path) -> dict[str, tuple[bytes | None, int]]:
    """Every path under ``root`` with its bytes (None for a directory) and mtime in ns."""
    found = {}
    for path in sorted([root, *root.rglob("*")]):
        info = path.stat()
        content = None if path.is_dir() else path.read_bytes()
        found[str(path.relative_to(root))] = (content, info.st_mtime_ns)
    return found


@pytest.mark.parametrize(
    "command",
    [["runs"], ["show", "r"], ["stats"], ["export"], ["migrate"]],
    ids=["runs", "show", "stats", "export", "migrate"],
)
@pytest.mark.parametrize("form", ["plain", "url"])
@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_a_bad_store_file_is_one_line_exit_2_and_left_byte_identical(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: list[str],
    form: str,
    case: str,
) -> None:
    # On main `polyloop runs --store sqlite:///zero.db` turned the 0-byte file into a 3 KiB
    # store (and a plain path was refused as an unsupported URL).
    make, message = BAD_INPUTS[case]
    monkeypatch.chdir(tmp_path)
    place = tmp_path / "area"
    place.mkdir()
    target = place / "runs.db"
    if make is not None:
        make(target)
    capsys.readouterr()
    before = _snapshot(place)

    given = "area/runs.db" if form == "plain" else "sqlite:///area/runs.db"
    status = main([*command, "--store", given])

    err = capsys.readouterr().err
    assert status == 2, err  # a store that cannot be opened is bad input
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("polyloop: error: ")
    assert message in lines[0]
    assert str(target) in lines[0]
    assert _snapshot(place) == before  # nothing created, truncated, changed or touched


def test_reading_a_store_whose_last_writes_are_only_in_its_wal_changes_no_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A writer that died before checkpointing leaves its records in the -wal file. On main,
    # `runs` opened the store read-write and its close checkpointed them into the main file.
    target = tmp_path / "runs.db"
    writer = (
        "import asyncio, os, sys\n"
        "from polyloop.cli._demo import run_demo\n"
        "from polyloop.stores import SQLiteStore\n"
        "async def go():\n"
        "    store = SQLiteStore(sys.argv[1])\n"
        "    await run_demo(store, 'died')\n"
        "    os._exit(0)\n"  # no close: nothing checkpointed
        "asyncio.run(go())\n"
    )
    subprocess.run([sys.executable, "-c", writer, str(target)], check=True, timeout=120)
    assert target.with_name("runs.db-wal").stat().st_size > 0
    before = _snapshot(tmp_path)

    assert main(["runs", "--store", f"sqlite:///{target}"]) == 0
    assert main(["show", "died", "--store", f"sqlite:///{target}"]) == 0

    out = capsys.readouterr().out
    assert "died" in out
    assert "stop: agent_finished (3 executed actions)" in out
    after = _snapshot(tmp_path)
    assert after["runs.db"] == before["runs.db"]
    assert after["runs.db-wal"] == before["runs.db-wal"]


def test_runs_and_show_on_a_good_store_leave_it_byte_identical(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "runs.db"
    assert main(["demo", "--store", str(target), "--run-id", "good"]) == 0
    before = _snapshot(tmp_path)

    assert main(["runs", "--store", f"sqlite:///{target}"]) == 0
    assert main(["show", "good", "--store", f"sqlite:///{target}"]) == 0
    assert main(["show", "other", "--store", str(target)]) == 1

    assert _snapshot(tmp_path)["runs.db"] == before["runs.db"]
    assert "no run 'other'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["runs", "--store", "mysql://db/runs"], "unsupported store URL 'mysql://db/runs'"),
        (["runs", "--store", ""], "unsupported store URL ''"),
        (["runs", "--store", "dir/"], "names no database file"),
        (["show", "../etc/passwd", "--store", "x.db"], "invalid run id '../etc/passwd'"),
        (["show"], "the following arguments are required: RUN_ID"),
        (["runs", "--bogus"], "unrecognized arguments: --bogus"),
        (["runs", "extra"], "unrecognized arguments: extra"),
        (["demo", "--run-id"], "argument --run-id: expected one argument"),
        ([], "no command given"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
    ],
)
def test_usage_errors_are_one_line_exit_2_and_touch_nothing(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    # On main these were argparse's two-line "usage: … / polyloop …: error: …" or started
    # differently from the store errors.
    monkeypatch.chdir(tmp_path)
    status = main(argv)
    captured = capsys.readouterr()
    assert status == 2
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("polyloop: error: ")
    assert message in lines[0]
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    ("executed", "shown"),
    [(0, "0 executed actions"), (1, "1 executed action"), (2, "2 executed actions")],
)
def test_the_stop_line_counts_executed_actions_in_the_right_number(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], executed: int, shown: str
) -> None:
    # On main: "(1 executed actions)".
    target = tmp_path / "runs.db"
    record_directly(
        target,
        "one",
        [
            RunStarted(run_id="one", goal="g", parameters={}, parameters_hash="h", started_at="t"),
            RunFinished(
                stop_reason=StopReason.AGENT_FINISHED,
                final_answer="done",
                executed_actions=executed,
                finished_at="t",
            ),
        ],
    )
    assert main(["show", "one", "--store", str(target)]) == 0
    assert f"stop: agent_finished ({shown})  answer: done\n" in capsys.readouterr().out


def test_every_usage_line_names_the_command_and_its_arguments() -> None:
    # On main `report` read "FILE | diff OLD NEW [FILE | diff OLD NEW ...]" and the top usage
    # line listed -h: each usage now reads as the command is typed.
    expected = {
        (): "usage: polyloop [--store URL] COMMAND ...",
        ("runs",): (
            "usage: polyloop runs [--store URL] [FILTERS] [--limit N] [--format table|json|csv]"
        ),
        ("show",): "usage: polyloop show [--store URL] RUN_ID",
        ("demo",): "usage: polyloop demo [--store URL] [--run-id ID]",
        ("report",): (
            "usage: polyloop report [--markdown | --matrix] FILE\n"
            "       polyloop report diff OLD NEW\n"
            "       polyloop report html REPORT -o conformance.html [--baseline OLD ...]\n"
            "       polyloop report merge A.json B.json ... -o merged.json [--allow-mixed-suites]\n"
            "       polyloop report badge REPORT -o badge.json"
        ),
    }
    for words, usage in expected.items():
        done = subprocess.run(
            [sys.executable, "-m", "polyloop.cli", *words, "--help"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.split("\n\n")[0] == usage


def test_counts_in_refusals_use_the_singular_for_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # On main: "invalid run id '-' (1 chars)" and "already has a log (1 records)".
    target = tmp_path / "runs.db"
    started = RunStarted(run_id="one", goal="g", parameters={}, parameters_hash="h", started_at="t")
    record_directly(target, "one", [started])

    assert main(["show", "-", "--store", str(target)]) == 2
    assert "invalid run id '-' (1 char):" in capsys.readouterr().err
    assert main(["demo", "--run-id", "one", "--store", str(target)]) == 1
    assert "'one' already has a log (1 record)" in capsys.readouterr().err


def test_a_store_path_that_is_not_text_is_printed_escaped(tmp_path: Path) -> None:
    # On main, with a UTF-8 stdout, `demo` recorded the run and then failed printing the path
    # ("'utf-8' codec can't encode character '\udcff'"), exit 2.
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    for argv in (["demo", "--run-id", "r"], ["runs"], ["show", "r"]):
        done = subprocess.run(
            [sys.executable, "-m", "polyloop.cli", *argv, "--store", b"\xff.db"],
            cwd=tmp_path,
            capture_output=True,
            env=env,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert done.stderr == b""
    assert (
        b"recorded in \\udcff.db"
        in subprocess.run(
            [sys.executable, "-m", "polyloop.cli", "demo", "--store", b"\xff.db"],
            cwd=tmp_path,
            capture_output=True,
            env=env,
            timeout=60,
        ).stdout
    )


def test_reading_a_memory_store_says_it_is_empty_in_every_command(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["runs", "--store", "memory:"]) == 0
    assert "a memory: store starts empty in every command" in capsys.readouterr().out
    assert main(["show", "r", "--store", "memory:"]) == 1
    assert "a memory: store starts empty in every command" in capsys.readouterr().err
