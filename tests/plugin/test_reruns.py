"""Promises that needed a rerun (pytest-rerunfailures) are marked in the report (issue #9): a
flaky promise that held on a rerun is still ``held``, one that failed every attempt is
``violated``; both carry ``reruns: N``, and the terminal, Markdown and ``polyloop report FILE``
say so — also under pytest-xdist, where the rerun reports reach the controller."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from polyloop.cli import main
from tests.plugin._sandbox import ERROR_PROMISE, FIVE_FIELDS, Project

pytest.importorskip("pytest_rerunfailures")  # in the dev extra; optional for users

RERUNS = ("-p", "rerunfailures", "--reruns", "2")

# The error promise's executor is broken for its first `failures` attempts (counted in a file,
# so the count survives the rerun and the xdist worker), every other promise's is good.
FLAKY = """\
@pytest_polyloop.seam("action_executor", samples="samples")
@pytest.fixture
def flaky_executor(request):
    if request.node.originalname != "test_{test}":
        return SandboxExecutor()
    counter = pathlib.Path({counter!r})
    attempts = int(counter.read_text()) if counter.exists() else 0
    counter.write_text(str(attempts + 1))
    return SandboxExecutor(broken=attempts < {failures})
"""


def flaky_project(project: Project, failures: int) -> Path:
    counter = project.path / "attempts.txt"
    test = ERROR_PROMISE.split(".", 1)[1]
    body = "import pathlib\n\n\n" + FLAKY.format(test=test, counter=str(counter), failures=failures)
    project.conftest("tests", body)
    return counter


@pytest.mark.parametrize("workers", [(), ("-p", "xdist", "-n", "2")], ids=["serial", "xdist"])
def test_a_promise_that_held_after_two_reruns_is_held_and_marked(
    project: Project, workers: tuple[str, ...]
) -> None:
    counter = flaky_project(project, failures=2)
    run = project.run(*RERUNS, *workers, subprocess=bool(workers))
    assert counter.read_text() == "3"  # it really failed twice
    promise = run.promise("flaky_executor", ERROR_PROMISE)
    assert promise["outcome"] == "held"
    assert promise["reruns"] == 2
    assert "reruns" not in run.promise("flaky_executor", FIVE_FIELDS)
    assert run.ret == 0, run.output
    assert "needed reruns (1 promise):" in run.output
    assert f"flaky_executor  {ERROR_PROMISE} — held (after 2 reruns)" in run.output


@pytest.mark.parametrize("workers", [(), ("-p", "xdist", "-n", "2")], ids=["serial", "xdist"])
def test_a_promise_that_failed_every_rerun_is_violated_and_marked(
    project: Project, workers: tuple[str, ...]
) -> None:
    counter = flaky_project(project, failures=5)
    run = project.run(*RERUNS, *workers, subprocess=bool(workers))
    assert counter.read_text() == "3"
    promise = run.promise("flaky_executor", ERROR_PROMISE)
    assert promise["outcome"] == "violated"
    assert promise["reruns"] == 2
    assert "env_error" in promise["detail"]
    assert run.ret == 1
    assert f"flaky_executor  {ERROR_PROMISE} — violated (after 2 reruns)" in run.output


def test_a_promise_that_held_at_once_has_no_reruns_field(project: Project) -> None:
    flaky_project(project, failures=0)
    run = project.run(*RERUNS)
    assert run.ret == 0, run.output
    assert run.report is not None
    promises = [p for item in run.report["implementations"] for p in item["promises"]]
    assert promises
    assert all("reruns" not in promise for promise in promises)
    assert "needed reruns" not in run.output


def test_markdown_report_and_polyloop_report_file_mark_the_reruns(project: Project) -> None:
    flaky_project(project, failures=1)
    markdown = project.path / "report.md"
    run = project.run(*RERUNS, f"--polyloop-report-md={markdown}")
    assert run.promise("flaky_executor", ERROR_PROMISE)["reruns"] == 1
    text = markdown.read_text(encoding="utf-8")
    assert "### needed reruns (1 promise)\n" in text
    assert f"- `flaky_executor` `{ERROR_PROMISE}` — held (after 1 rerun)" in text
    report = project.path / "report.json"
    report.write_text(json.dumps(run.report), encoding="utf-8")
    completed = subprocess.run(
        [sys.executable, "-m", "polyloop.cli", "report", str(report)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert f"flaky_executor  {ERROR_PROMISE} — held (after 1 rerun)" in completed.stdout


def test_report_diff_reads_reports_with_reruns(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    counter = flaky_project(project, failures=1)
    flaky = project.path / "flaky.json"
    flaky.write_text(json.dumps(project.run(*RERUNS).report), encoding="utf-8")
    counter.write_text("9")  # no more failures: the next run holds at once
    steady = project.path / "steady.json"
    steady.write_text(json.dumps(project.run(*RERUNS).report), encoding="utf-8")
    assert main(["report", "diff", str(flaky), str(steady)]) == 0
    out = capsys.readouterr().out
    assert "verdict: conformant → conformant" in out
    assert "changed (not a regression): 0" in out
    assert out.endswith("\nno regression\n")
    assert main(["report", "diff", str(steady), str(flaky)]) == 0


@pytest.mark.parametrize("reruns", ["0", "2.5", '"two"', "true"])
def test_a_report_with_a_malformed_reruns_field_is_refused_in_one_line(
    project: Project, capsys: pytest.CaptureFixture[str], reruns: str
) -> None:
    flaky_project(project, failures=1)
    report = project.run(*RERUNS).report
    assert report is not None
    text = json.dumps(report).replace('"reruns": 1', f'"reruns": {reruns}')
    assert f'"reruns": {reruns}' in text
    path = project.path / "bad.json"
    path.write_text(text, encoding="utf-8")
    assert main(["report", str(path)]) == 2
    err = capsys.readouterr().err
    assert "'reruns' must be a whole number of at least 1" in err
    assert len(err.strip().splitlines()) == 1
