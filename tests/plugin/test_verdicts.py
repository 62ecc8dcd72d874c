"""Verdicts that are never wrong (issue #9): each case here was a green or crashing verdict for
an implementation that broke a promise, or a report that vanished, reproduced on a downstream
project in the sandbox."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

import pytest_polyloop
from polyloop.testing import ActionExecutorContract
from tests.plugin._sandbox import ERROR_PROMISE, FIVE_FIELDS, Project

#: The action-executor catalogue grows; the sandbox executors are judged on all of it.
EXECUTOR_PROMISES = len(ActionExecutorContract.promises())

CRASHING = """\
import os
import signal

import pytest
import pytest_polyloop
from polyloop import ActionOutcome, ActionStatus
from sandbox_executors import action_samples


class CrashingExecutor:
    async def execute(self, action):
        # Only in one promise: each death costs a new worker.
        if "test_action_error_is_a_normal" in os.environ.get("PYTEST_CURRENT_TEST", ""):
            {crash}
        return ActionOutcome(status=ActionStatus.EXECUTED, observation="ok")


@pytest.fixture
def samples():
    return action_samples()


@pytest_polyloop.seam("action_executor", samples="samples")
@pytest.fixture
def crashing():
    return CrashingExecutor()
"""


@pytest.mark.parametrize(
    "crash",
    ["os._exit(3)", "os.kill(os.getpid(), signal.SIGSEGV)"],
    ids=["exit", "segfault"],
)
def test_a_promise_whose_worker_died_is_violated_not_held(project: Project, crash: str) -> None:
    project.write("tests/conftest.py", CRASHING.format(crash=crash))
    run = project.run("-p", "xdist", "-n", "2", subprocess=True)
    entry = run.promise("crashing", ERROR_PROMISE)
    assert entry["outcome"] == "violated", run.output
    assert entry["detail"].startswith("the worker running this test died: "), entry["detail"]
    assert run.report is not None
    assert run.report["verdict"] == "violations"
    assert run.ret == 1


HANDWRITTEN_WAIVED = f"""\
import pytest
from polyloop.testing import ActionExecutorContract
from sandbox_executors import SandboxExecutor, action_samples


class TestMine(ActionExecutorContract):
    waive = {{"{FIVE_FIELDS}": "our own test covers it"}}

    @pytest.fixture
    def action_executor(self):
        return SandboxExecutor()

    @pytest.fixture
    def action_samples(self):
        return action_samples()

    def test_returns_all_five_fields(self, action_executor):
        '''Our replacement.'''
        BODY
"""
MINE = "tests/test_mine.py::TestMine"


def test_a_waived_override_that_fails_is_violated(project: Project) -> None:
    project.write(
        "tests/test_mine.py", HANDWRITTEN_WAIVED.replace("BODY", "raise AssertionError('no')")
    )
    run = project.run()
    entry = run.promise(MINE, FIVE_FIELDS)
    assert entry["outcome"] == "violated"
    assert "AssertionError: no" in entry["detail"]
    assert run.ret == 1


def test_a_waived_override_that_passes_is_overridden_and_no_failure(project: Project) -> None:
    project.write("tests/test_mine.py", HANDWRITTEN_WAIVED.replace("BODY", "pass"))
    run = project.run()
    entry = run.promise(MINE, FIVE_FIELDS)
    assert entry["outcome"] == "overridden"
    assert entry["waiver_reason"] == "our own test covers it"
    assert run.ret == 0, run.output
    assert " failed" not in run.result.outlines[-1]
    # Plain pytest, as the subclassing how-to recommends: the replacement is an ordinary test.
    plain = project.pytester.runpytest_inprocess("-p", "no:randomly", "tests/test_mine.py")
    assert plain.ret == 0, plain.outlines
    plain.assert_outcomes(passed=5, skipped=EXECUTOR_PROMISES - 5)


def test_ids_differing_only_in_punctuation_are_a_usage_error(project: Project) -> None:
    project.conftest(
        "tests",
        """\
        @pytest_polyloop.seam("action_executor", samples="samples", id="exec-a")
        @pytest.fixture
        def first():
            return SandboxExecutor(broken=True)


        @pytest_polyloop.seam("action_executor", samples="samples", id="exec_a")
        @pytest.fixture
        def second():
            return SandboxExecutor()
        """,
    )
    run = project.run()
    assert run.ret == 4, run.output
    [line] = [line for line in run.output.splitlines() if ": second: " in line]
    assert line.startswith("tests/conftest.py:")
    assert "'exec_a'" in line
    assert "'exec-a'" in line
    assert "ActionExecutorContract__exec_a" in line
    assert run.report is None


FAILING_TEARDOWN = """\
@pytest_polyloop.seam("action_executor", samples="samples")
@pytest.fixture(scope="{scope}")
def leaky():
    yield SandboxExecutor()
    raise RuntimeError("Attempted to exit cancel scope in a different task")
"""


@pytest.mark.parametrize("scope", ["function", "module"])
def test_a_failing_fixture_teardown_is_the_implementations_not_a_promises(
    project: Project, scope: str
) -> None:
    project.conftest("tests", FAILING_TEARDOWN.format(scope=scope))
    run = project.run()
    counts = run.counts("leaky")
    assert counts["violated"] == 0, run.output
    unverifiable = EXECUTOR_PROMISES - 6
    assert (counts["held"], counts["unverifiable"], counts["not_applicable"]) == (
        5,
        unverifiable,
        1,
    )
    errors = run.implementation("leaky")["teardown_errors"]
    assert errors
    assert all(error.startswith("teardown failed") for error in errors)
    assert "cancel scope in a different task" in errors[0]
    assert run.report is not None
    assert run.report["verdict"] == "incomplete"
    assert "teardown failed" in run.output
    assert run.ret == 1


BROKEN = """\
@pytest_polyloop.seam("action_executor", samples="samples")
@pytest.fixture
def broken():
    return SandboxExecutor(broken=True)
"""


def test_stepwise_writes_an_incomplete_report_and_keeps_pytests_status(project: Project) -> None:
    project.conftest("tests", BROKEN)
    report = project.path / "report.json"
    # Not Project.run: --sw needs the cache, which the sandbox runs switch off.
    result = project.pytester.runpytest_inprocess(
        "--polyloop-conformance", "-p", "no:randomly", "--sw", f"--polyloop-report={report}"
    )
    assert result.ret == pytest.ExitCode.INTERRUPTED  # pytest's status: --sw stopped the run
    loaded = json.loads(report.read_text(encoding="utf-8"))
    jsonschema.validate(loaded, pytest_polyloop.schema())
    [broken] = loaded["implementations"]
    assert broken["missing"]
    assert loaded["verdict"] == "violations"


def test_exitfirst_under_xdist_writes_a_report(project: Project) -> None:
    project.conftest("tests", BROKEN)
    run = project.run("-p", "xdist", "-n", "2", "-x", subprocess=True)
    assert run.report is not None, run.output
    assert run.report["verdict"] in ("violations", "incomplete")
    assert run.ret != 0


@pytest.mark.parametrize("option", ["--polyloop-report", "--polyloop-report-md"])
@pytest.mark.parametrize("where", ["a-directory", "under-a-file"])
def test_a_report_path_that_cannot_be_written_is_a_usage_error_before_the_run(
    project: Project, option: str, where: str
) -> None:
    project.conftest("tests", BROKEN)
    (project.path / "a-file").write_text("", encoding="utf-8")
    target = project.path / ("tests" if where == "a-directory" else "a-file/report.out")
    run = project.run(f"{option}={target}")
    assert run.ret == 4, run.output
    assert f"{option} {target}: " in run.output
    assert "Traceback" not in run.output
    assert "passed" not in run.output  # refused before anything ran


GUIDE = Path(__file__).resolve().parents[2] / "docs/how-to/conformance-by-subclassing.md"
ANYIO_CLIENT = """\
import contextlib

import anyio
import pytest
import pytest_polyloop
from sandbox_executors import SandboxExecutor, action_samples


@contextlib.asynccontextmanager
async def open_client():
    with anyio.CancelScope():  # what every anyio-based client holds open
        yield SandboxExecutor()


@pytest.fixture
def samples():
    return action_samples()

"""
YIELD_INSIDE = """\
import pytest_asyncio


@pytest_asyncio.fixture
async def calculator_client():
    async with open_client() as client:
        yield client
"""
TAGGED_CLIENT = """

@pytest_polyloop.seam("action_executor", samples="samples")
@pytest.fixture
def client_executor(calculator_client):
    return calculator_client
"""


def _guide_fixture() -> str:
    text = GUIDE.read_text(encoding="utf-8")
    marker = "<!-- pitfall: anyio task ownership -->\n```python\n"
    start = text.index(marker) + len(marker)
    return text[start : text.index("```", start)]


@pytest.mark.parametrize("fixture", ["yield-inside", "the-guides-fix"])
def test_the_anyio_task_ownership_pitfall_and_the_guides_fix(
    project: Project, fixture: str
) -> None:
    pytest.importorskip("anyio")
    body = YIELD_INSIDE if fixture == "yield-inside" else _guide_fixture()
    project.write("tests/conftest.py", ANYIO_CLIENT + body + TAGGED_CLIENT)
    run = project.run()
    assert run.counts("client_executor")["violated"] == 0, run.output
    errors = run.implementation("client_executor")["teardown_errors"]
    assert run.report is not None
    if fixture == "yield-inside":
        assert "cancel scope in a different task" in " ".join(errors)
        assert run.report["verdict"] == "incomplete"
    else:
        assert errors == []
        assert run.report["verdict"] == "conformant", run.output
