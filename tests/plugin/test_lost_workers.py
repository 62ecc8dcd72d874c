"""What a crashed or interrupted pytest-xdist worker discovered still reaches the report
(issue #21, class 12).

Before, discovery reached the controller only from workers that finished cleanly: a fixture
that killed its worker, or a Ctrl-C while a fixture hung, gave ``no_implementations`` with an
empty list and told the user to tag the fixture they had tagged.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest

import pytest_polyloop
from pytest_polyloop._worker_discovery import WORKERINPUT_KEY, DiscoveryDrop, write_discovery
from tests.plugin._sandbox import SANDBOX_FLAGS, Project

KILLING = """\
@pytest_polyloop.seam("action_executor", samples="samples")
@pytest.fixture
def killing_executor():
    {kill}


@pytest_polyloop.seam("action_executor", samples="samples")
@pytest.fixture
def good_executor():
    return SandboxExecutor()
"""


@pytest.mark.parametrize(
    "kill",
    ["import os; os._exit(3)", "import ctypes; ctypes.string_at(0)"],
    ids=["os-exit", "segfault"],
)
def test_a_fixture_that_kills_its_worker_is_a_setup_error_not_nothing_found(
    project: Project, kill: str
) -> None:
    project.conftest("tests", KILLING.format(kill=kill))
    # No replacement workers: none of the workers that collected finishes cleanly.
    run = project.run("-p", "xdist", "-n", "2", "--max-worker-restart=0", subprocess=True)
    assert run.report is not None, run.output
    ids = {entry["id"] for entry in run.report["implementations"]}
    assert ids == {"killing_executor", "good_executor"}, run.output
    assert "No seam implementation was found" not in run.output
    killing = run.implementation("killing_executor")
    if "cannot send (already closed?)" in run.output:
        # When its last two workers die together, pytest-xdist itself sometimes ends in an
        # INTERNALERROR (its scheduler sends to a closed channel), at times before it reported
        # which item's worker crashed. What was discovered is still reported, marked
        # interrupted and never conformant; pytest's status 3 stands.
        assert run.ret == pytest.ExitCode.INTERNAL_ERROR
        assert run.report["interrupted"] is True
        assert run.report["verdict"] in ("setup_error", "incomplete")
        if killing["setup_error"] is None:
            assert "setup_error" not in {p["outcome"] for p in killing["promises"]}
            return
    else:
        assert run.ret == 1
    assert killing["setup_error"]["type"] == "WorkerCrashed"
    assert killing["setup_error"]["location"].startswith("tests/conftest.py:")
    assert {promise["outcome"] for promise in killing["promises"]} == {"setup_error"}
    assert run.report["verdict"] == "setup_error"


HANGING = """\
import pathlib
import time


@pytest_polyloop.seam("action_executor", samples="samples")
@pytest.fixture
def hanging_executor():
    pathlib.Path("hanging").write_text("", encoding="utf-8")
    time.sleep(120)
"""


def _ctrl_c_as_at_a_terminal() -> None:
    """In the child before it runs: SIGINT as a terminal's foreground job has it. A job a script
    starts in the background (`cmd &` without job control, as CI runners may) has SIGINT
    ignored, and an ignored signal is inherited by every process it starts: pytest would then
    never see the Ctrl-C this test sends (it sleeps out the hanging fixture, 120 s)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _interrupted_run(project: Project, *args: str) -> tuple[str, dict[str, Any] | None]:
    """Run pytest in a child process, press Ctrl-C (SIGINT) once a fixture hangs."""
    report = project.path / "report.json"
    argv = [sys.executable, "-m", "pytest", "--polyloop-conformance", *SANDBOX_FLAGS]
    argv += [f"--polyloop-report={report}", *args]
    environment = {**os.environ, "PYTHONPATH": str(project.path / "tests")}
    environment.pop("PYTHONDONTWRITEBYTECODE", None)
    with subprocess.Popen(
        argv,
        cwd=project.path,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=_ctrl_c_as_at_a_terminal,
    ) as child:
        deadline = time.monotonic() + 60
        while not (project.path / "hanging").exists():
            assert child.poll() is None, child.communicate()[0]
            assert time.monotonic() < deadline, "the fixture never started"
            time.sleep(0.1)
        child.send_signal(signal.SIGINT)
        output, _ = child.communicate(timeout=60)
    loaded = json.loads(report.read_text(encoding="utf-8")) if report.exists() else None
    if loaded is not None:
        jsonschema.validate(loaded, pytest_polyloop.schema())
    return output, loaded


@pytest.mark.parametrize("workers", [[], ["-p", "xdist", "-n", "2"]], ids=["serial", "xdist"])
def test_ctrl_c_while_a_fixture_hangs_still_writes_the_report_saying_interrupted(
    project: Project, workers: list[str]
) -> None:
    project.conftest("tests", HANGING)
    output, report = _interrupted_run(project, *workers)
    assert report is not None, output
    assert report["interrupted"] is True
    assert [entry["id"] for entry in report["implementations"]] == ["hanging_executor"], output
    assert report["verdict"] != "no_implementations"
    assert "No seam implementation was found" not in output
    assert "interrupted" in output.split("polyloop conformance", 1)[-1]


def test_discovery_written_by_a_worker_is_read_once_and_its_directory_removed() -> None:
    drop = DiscoveryDrop()
    directory = drop.for_worker()
    output = {"implementations": [{"id": "mine"}], "misuses": [], "notes": [], "deselected": []}
    write_discovery({WORKERINPUT_KEY: directory, "workerid": "gw0"}, output)
    write_discovery({"workerid": "gw1"}, output)  # a controller that asked for no file
    assert drop.collect() == [output]
    assert not Path(directory).exists()
    assert drop.collect() == []


def test_a_session_stopped_by_x_says_interrupted_and_a_full_one_does_not(
    project: Project,
) -> None:
    project.conftest(
        "tests",
        '@pytest_polyloop.seam("action_executor", samples="samples")\n@pytest.fixture\n'
        "def broken_executor():\n    return SandboxExecutor(broken=True)\n",
    )
    stopped = project.run("-x")
    assert stopped.report is not None
    assert stopped.report["interrupted"] is True
    full = project.run()
    assert full.report is not None
    assert full.report["interrupted"] is False
