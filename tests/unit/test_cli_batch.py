"""``polyloop batch`` through ``main(argv)``: runs, reruns, the summary, and every refusal as
one line, exit 2, nothing written."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from polyloop.cli import main
from polyloop.stores import SQLiteStore
from tests import batch_doubles

AGENT = "tests.batch_doubles:AGENT"
SEAMS = "tests.batch_doubles:seams"


@pytest.fixture(autouse=True)
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty current directory (the default store lands there); sys.path restored after."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    batch_doubles.reset()
    return tmp_path


def write_tasks(path: Path, lines: list[Any]) -> Path:
    text = "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)
    path.write_text(text, encoding="utf-8")
    return path


def tasks_file(count: int = 3, goal: str = "steps=2", name: str = "tasks.jsonl") -> Path:
    lines = [{"id": f"t{i}", "goal": goal, "labels": {"n": str(i)}} for i in range(count)]
    return write_tasks(Path(name), lines)


def batch(*args: str) -> list[str]:
    return ["batch", *args]


def rows(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT count(*) FROM polyloop_records").fetchone()[0])


def logs(db: Path) -> dict[str, Any]:
    async def read() -> dict[str, Any]:
        async with SQLiteStore(db) as store:
            return {run_id: await store.read_log(run_id) for run_id in await store.run_ids()}

    return asyncio.run(read())


# --------------------------------------------------------------------------- running


def test_a_batch_runs_every_task_into_the_default_store(
    in_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks_file(5)
    assert main(batch("tasks.jsonl", "--agent", AGENT, "--seams", SEAMS)) == 0
    found = logs(in_tmp / "polyloop.db")
    assert sorted(found) == [f"tasks.t{i}" for i in range(5)]  # batch id: the file's stem
    for log in found.values():
        assert log.finished is not None
        assert log.started.batch == "tasks"
    out = capsys.readouterr().out
    assert "batch tasks: done in" in out
    assert "5 tasks: 5 started" in out
    assert "agent_finished       5  100.0%" in out
    assert "steps             median 3  p90 3  max 3" in out
    assert "executed actions  median 2  p90 2  max 2" in out
    assert "usage             completion_tokens 15" in out


def test_running_the_same_command_again_writes_nothing(
    in_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks_file(5)
    args = batch("tasks.jsonl", "--agent", AGENT, "--seams", SEAMS)
    assert main(args) == 0
    before = rows(in_tmp / "polyloop.db")
    capsys.readouterr()
    assert main(args) == 0
    assert rows(in_tmp / "polyloop.db") == before
    assert "5 tasks: 5 skipped" in capsys.readouterr().out


def test_batch_store_and_concurrency_options_are_used(in_tmp: Path) -> None:
    tasks_file(4)
    args = ["--store", "sqlite:///other.db", "--batch", "b7", "--concurrency", "1"]
    assert main(batch("tasks.jsonl", "--agent", AGENT, "--seams", SEAMS, *args)) == 0
    assert sorted(logs(in_tmp / "other.db")) == [f"b7.t{i}" for i in range(4)]
    assert not (in_tmp / "polyloop.db").exists()


def test_modules_are_imported_from_the_current_directory(in_tmp: Path) -> None:
    name = f"agent_{uuid.uuid4().hex}"
    source = Path(batch_doubles.__file__).read_text(encoding="utf-8")
    (in_tmp / f"{name}.py").write_text(source, encoding="utf-8")
    tasks_file(2)
    assert main(batch("tasks.jsonl", "--agent", f"{name}:AGENT", "--seams", f"{name}:seams")) == 0
    assert len(logs(in_tmp / "polyloop.db")) == 2


def test_a_failed_run_exits_1_and_is_listed_with_its_line(
    in_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_tasks(Path("tasks.jsonl"), [{"id": "ok", "goal": "steps=1"},
                                      {"id": "bad", "goal": "steps=1 fail"}])  # fmt: skip
    assert main(batch("tasks.jsonl", "--agent", AGENT, "--seams", SEAMS)) == 1
    out = capsys.readouterr().out
    assert (
        "tasks.jsonl:2: task 'bad' (run tasks.bad): RuntimeError: the executor of bad broke" in out
    )
    assert "1 task unfinished: run the same command again to resume" in out


@pytest.mark.parametrize(
    ("rule", "status"),
    [
        ("agent_finished", 1),
        ("llm_error", 0),
        ("agent_finished:3", 0),
        ("agent_finished:2", 1),
        ("agent_finished:100%", 0),
        ("agent_finished:99.9%", 1),
        ("llm_error:0%,agent_finished:5", 0),
    ],
)
def test_fail_on_makes_the_exit_status_1_past_its_threshold(
    rule: str, status: int, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks_file(3)
    args = batch("tasks.jsonl", "--agent", AGENT, "--seams", SEAMS, "--fail-on", rule)
    assert main(args) == status
    out = capsys.readouterr().out
    assert ("fail-on: agent_finished" in out) == bool(status)


def test_a_time_limit_ends_a_slow_run_time_limit(
    in_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_tasks(Path("tasks.jsonl"), [{"id": "slow", "goal": "steps=3 slow=1"}])
    args = batch("tasks.jsonl", "--agent", AGENT, "--seams", SEAMS, "--time-limit", "0.2")
    assert main(args) == 0
    assert "  time_limit       1  100.0%" in capsys.readouterr().out


# --------------------------------------------------------------------------- refusals


def refused(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run; assert exit 2 and one line on stderr; return that line."""
    assert main(args) == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("polyloop: error: ")
    return lines[0].removeprefix("polyloop: error: ")


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ([{"id": "a", "goal": "g"}, {"id": "has space", "goal": "g"}],
         "tasks.jsonl:2: task id 'has space' in batch 'tasks' makes no valid run id"),
        ([{"id": "a", "goal": "g"}, {"id": "../x", "goal": "g"}],
         "tasks.jsonl:2: task id '../x' in batch 'tasks' makes no valid run id"),
        ([{"id": "a", "goal": "g"}, '{"id": "\\ud800", "goal": "g"}'],
         "tasks.jsonl:2: task id '\\ud800' in batch 'tasks' makes no valid run id"),
        ([{"id": "x" * 130, "goal": "g"}], "tasks.jsonl:1: task id 'xxxxx"),
        ([{"id": "a", "goal": "g"}, "", {"id": "a", "goal": "h"}],
         "tasks.jsonl:3: duplicate task id 'a' (first on line 1)"),
        ([{"id": "a", "goal": "g"}, "[1, 2]"],
         "tasks.jsonl:2: not a JSON object (got an array)"),
        (['"just a string"'], "tasks.jsonl:1: not a JSON object (got a string)"),
        (["null"], "tasks.jsonl:1: not a JSON object (got null)"),
        (["{id: 1}"], "tasks.jsonl:1: not JSON (Expecting property name enclosed in double"),
        (['{"id": "a", "goal": "g"'], "tasks.jsonl:1: not JSON ("),
        ([{"id": "a"}], 'tasks.jsonl:1: no "goal"'),
        ([{"goal": "g"}], 'tasks.jsonl:1: no "id"'),
        ([{"id": "a", "goal": None}], 'tasks.jsonl:1: "goal" must be a string, got null'),
        ([{"id": "", "goal": "g"}], 'tasks.jsonl:1: "id" must be a non-empty string'),
        ([{"id": 7, "goal": "g"}], 'tasks.jsonl:1: "id" must be a non-empty string, got a number'),
        ([{"id": "a", "goal": "g", "labels": ["x"]}],
         'tasks.jsonl:1: "labels" must be an object, got an array'),
        ([{"id": "a", "goal": "g", "labels": {"k": 1}}],
         "tasks.jsonl:1: \"labels\" must map strings to strings; 'k' is a number (1)"),
        ([{"id": "a", "goal": "g", "labels": {"k": None}}],
         "tasks.jsonl:1: \"labels\" must map strings to strings; 'k' is null"),
        ([{"id": "a", "goal": "g", "golas": "x"}], "tasks.jsonl:1: unknown key 'golas'"),
        (['{"id": "a", "goal": "g", "goal": "h"}'], "tasks.jsonl:1: key 'goal' given twice"),
        (["[" * 100_000], "tasks.jsonl:1: not JSON (nested too deeply)"),
    ],
)  # fmt: skip
def test_a_bad_task_line_is_refused_with_its_line_number(
    in_tmp: Path, lines: list[Any], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    write_tasks(in_tmp / "tasks.jsonl", lines)
    line = refused(batch("tasks.jsonl", "--agent", AGENT, "--seams", SEAMS), capsys)
    assert line.startswith(message)
    assert not (in_tmp / "polyloop.db").exists()


def test_a_line_that_is_not_utf8_is_named(in_tmp: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (in_tmp / "tasks.jsonl").write_bytes(b'{"id": "a", "goal": "g"}\n{"id": "\xff"}\n')
    line = refused(batch("tasks.jsonl", "--agent", AGENT, "--seams", SEAMS), capsys)
    assert line == "tasks.jsonl:2: not UTF-8 text (byte 9)"
    assert not (in_tmp / "polyloop.db").exists()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "missing.jsonl: no such file"),
        ("", "missing.jsonl: no tasks"),
        ("\n  \n\n", "missing.jsonl: no tasks"),
    ],
)
def test_a_missing_or_empty_tasks_file_is_refused(
    in_tmp: Path, content: str | None, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    if content is not None:
        (in_tmp / "missing.jsonl").write_text(content, encoding="utf-8")
    line = refused(batch("missing.jsonl", "--agent", AGENT, "--seams", SEAMS), capsys)
    assert line.startswith(message)
    assert not (in_tmp / "polyloop.db").exists()


def test_a_directory_as_the_tasks_file_is_refused(
    in_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (in_tmp / "dir.jsonl").mkdir()
    line = refused(batch("dir.jsonl", "--agent", AGENT, "--seams", SEAMS), capsys)
    assert line == "dir.jsonl: a directory, not a tasks file"


@pytest.mark.parametrize(
    ("agent", "seams", "message"),
    [
        ("tests.batch_doubles", SEAMS, "--agent 'tests.batch_doubles': expected MODULE:ATTR"),
        ("no_such_module_zz:AGENT", SEAMS, "--agent 'no_such_module_zz:AGENT': no module named "
         "'no_such_module_zz'"),
        ("tests.batch_doubles:NOPE", SEAMS, "--agent 'tests.batch_doubles:NOPE': "
         "tests.batch_doubles has no attribute 'NOPE'"),
        ("tests.batch_doubles:seams", SEAMS, "--agent tests.batch_doubles:seams: not an "
         "AgentDefinition (got function)"),
        (AGENT, "tests.batch_doubles:AGENT", "--seams tests.batch_doubles:AGENT: not callable "
         "(got AgentDefinition)"),
        (AGENT, "tests.batch_doubles:", "--seams 'tests.batch_doubles:': expected MODULE:ATTR"),
        (AGENT, ":seams", "--seams ':seams': expected MODULE:ATTR"),
    ],
)  # fmt: skip
def test_a_factory_path_that_names_nothing_usable_is_refused(
    in_tmp: Path, agent: str, seams: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks_file(2)
    line = refused(batch("tasks.jsonl", "--agent", agent, "--seams", seams), capsys)
    assert line.startswith(message)
    assert not (in_tmp / "polyloop.db").exists()


def test_a_module_that_raises_on_import_is_refused(
    in_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = f"broken_{uuid.uuid4().hex}"
    (in_tmp / f"{name}.py").write_text("raise ZeroDivisionError('at import')\n")
    tasks_file(2)
    line = refused(batch("tasks.jsonl", "--agent", f"{name}:A", "--seams", SEAMS), capsys)
    assert line == f"--agent '{name}:A': importing {name} raised ZeroDivisionError: at import"


def test_a_module_whose_own_import_fails_names_that_import(
    in_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = f"needs_{uuid.uuid4().hex}"
    (in_tmp / f"{name}.py").write_text("import not_installed_zz\n")
    tasks_file(2)
    line = refused(batch("tasks.jsonl", "--agent", f"{name}:A", "--seams", SEAMS), capsys)
    assert line == (
        f"--agent '{name}:A': importing {name} failed: ModuleNotFoundError: No module named "
        "'not_installed_zz'"
    )


@pytest.mark.parametrize(
    ("store", "message"),
    [
        ("sqlite:///not_a_db.db", "--store: the store cannot be opened: "),
        ("sqlite:///a_dir", "--store: the store cannot be opened: "),
        ("sqlite:///no/such/dir/x.db", "--store: the store cannot be opened: "),
        ("mysql://x", "unsupported store URL 'mysql://x'"),
        ("sqlite:///", "store URL 'sqlite:///' names no database file"),
    ],
)
def test_a_store_that_cannot_be_opened_is_refused_and_left_untouched(
    in_tmp: Path, store: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (in_tmp / "not_a_db.db").write_bytes(b"not sqlite at all\n" * 64)
    (in_tmp / "a_dir").mkdir()
    tasks_file(2)
    line = refused(batch("tasks.jsonl", "--agent", AGENT, "--seams", SEAMS, "--store", store),
                   capsys)  # fmt: skip
    assert line.startswith(message)
    assert (in_tmp / "not_a_db.db").read_bytes() == b"not sqlite at all\n" * 64
    assert sorted(p.name for p in in_tmp.iterdir()) == ["a_dir", "not_a_db.db", "tasks.jsonl"]


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--concurrency", "0"], "--concurrency must be an integer >= 1, got '0'"),
        (["--concurrency", "-2"], "--concurrency must be an integer >= 1, got '-2'"),
        (["--concurrency", "1.5"], "--concurrency must be an integer >= 1, got '1.5'"),
        (["--concurrency", "٣"], "--concurrency must be an integer >= 1, got '٣'"),
        (["--time-limit", "0"], "--time-limit must be a number of seconds > 0, got '0'"),
        (["--time-limit", "-1"], "--time-limit must be a number of seconds > 0, got '-1'"),
        (["--time-limit", "inf"], "--time-limit must be a number of seconds > 0, got 'inf'"),
        (["--time-limit", "nan"], "--time-limit must be a number of seconds > 0, got 'nan'"),
        (["--time-limit", "soon"], "--time-limit must be a number of seconds > 0, got 'soon'"),
        (["--fail-on", "llm_eror"], "--fail-on: unknown stop reason 'llm_eror' (one of"),
        (["--fail-on", "LLM_ERROR"], "--fail-on: unknown stop reason 'LLM_ERROR'"),
        (["--fail-on", "llm_error:"], "--fail-on 'llm_error:': the threshold is a count"),
        (["--fail-on", "llm_error:-1"], "--fail-on 'llm_error:-1': the threshold is a count"),
        (["--fail-on", "llm_error:101%"], "--fail-on 'llm_error:101%': a share is a number"),
        (["--fail-on", "llm_error:nan%"], "--fail-on 'llm_error:nan%': a share is a number"),
        (["--fail-on", "llm_error,,env_error"], "--fail-on 'llm_error,,env_error': an empty rule"),
        (["--fail-on", "llm_error", "--fail-on", "llm_error:3"],
         "--fail-on names llm_error twice"),
        (["--batch", "a/b"], "batch id 'a/b': batch id 'a/b' cannot start a run id"),
        (["--batch", ""], "batch id '': batch id must not be empty"),
    ],
)  # fmt: skip
def test_a_bad_option_is_refused(
    in_tmp: Path, option: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks_file(2)
    line = refused(batch("tasks.jsonl", "--agent", AGENT, "--seams", SEAMS, *option), capsys)
    assert line.startswith(message)
    assert not (in_tmp / "polyloop.db").exists()


def test_a_file_name_that_makes_no_batch_id_asks_for_one(
    in_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks_file(2, name="my tasks.jsonl")
    line = refused(batch("my tasks.jsonl", "--agent", AGENT, "--seams", SEAMS), capsys)
    assert line.startswith(
        "batch id 'my tasks' (from the file name 'my tasks.jsonl'; give one with --batch)"
    )


def test_a_changed_goal_is_refused_with_its_line_and_nothing_is_started(
    in_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks_file(3)
    assert main(batch("tasks.jsonl", "--agent", AGENT, "--seams", SEAMS)) == 0
    before = rows(in_tmp / "polyloop.db")
    capsys.readouterr()
    write_tasks(Path("tasks.jsonl"), [
        {"id": "t0", "goal": "steps=2", "labels": {"n": "0"}},
        {"id": "new", "goal": "steps=1"},
        {"id": "t2", "goal": "steps=5", "labels": {"n": "2"}},
    ])  # fmt: skip
    line = refused(batch("tasks.jsonl", "--agent", AGENT, "--seams", SEAMS), capsys)
    assert line == (
        "tasks.jsonl:3: task 't2': run tasks.t2 was started with another goal ('steps=2', now "
        "'steps=5'); give the changed task a new id, or use a new batch id"
    )
    assert rows(in_tmp / "polyloop.db") == before
    assert "tasks.new" not in logs(in_tmp / "polyloop.db")


def test_batch_without_its_required_options_is_a_usage_error(
    in_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks_file(1)
    line = refused(["batch", "tasks.jsonl"], capsys)
    assert "the following arguments are required: --agent, --seams" in line


def test_batch_help_prints_the_usage_and_every_option(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["batch", "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(
        "usage: polyloop batch TASKS.jsonl --agent MODULE:ATTR --seams MODULE:FUNC [--store URL]"
    )
    assert "[--fail-on STOP_REASON[:N|:P%],...]" in out
    for option in ("--agent", "--seams", "--store", "--batch", "--concurrency", "--time-limit"):
        assert f"  {option} " in out
    assert "--fail-on STOP_REASON[:N|:P%],..." in out


def test_an_unreachable_postgres_store_is_refused_without_its_password(
    in_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("psycopg")
    tasks_file(1)
    url = "postgresql://me:s3cret@127.0.0.1:1/runs"  # port 1: nothing listens there
    line = refused(batch("tasks.jsonl", "--agent", AGENT, "--seams", SEAMS, "--store", url),
                   capsys)  # fmt: skip
    assert line.startswith("--store: the store cannot be opened: ")
    assert "s3cret" not in line
