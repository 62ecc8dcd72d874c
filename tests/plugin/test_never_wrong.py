"""Verdicts that are never wrong (issue #9): warnings under ``-W error``, the baseline rule,
and the smaller misreports — each reproduced on a sandbox project."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from polyloop.cli import main
from tests.plugin._sandbox import ERROR_PROMISE, SANDBOX_FLAGS, Project

GOOD = """\
@pytest_polyloop.seam("action_executor", samples="samples")
@pytest.fixture
def good_executor():
    return SandboxExecutor()
"""

BROKEN = """\
@pytest_polyloop.seam("action_executor", samples="samples")
@pytest.fixture
def broken_executor():
    return SandboxExecutor(broken=True)
"""

TYPO_WAIVER = f'polyloop_waive = ["godo {ERROR_PROMISE}: typo in the implementation id"]\n'


def pyproject(project: Project, extra: str, *, loop_scope: bool = True) -> None:
    header = "[tool.pytest.ini_options]\n"
    if loop_scope:
        header += 'asyncio_default_fixture_loop_scope = "function"\n'
    project.write("pyproject.toml", header + extra)


# -- warnings under -W error ----------------------------------------------------------------


@pytest.mark.parametrize("route", ["command line", "ini"])
def test_the_plugins_own_warning_is_no_internal_error_under_w_error(
    project: Project, route: str
) -> None:
    project.conftest("tests", GOOD)
    if route == "ini":
        pyproject(project, TYPO_WAIVER + 'filterwarnings = ["error"]\n')
        run = project.run()
    else:
        pyproject(project, TYPO_WAIVER)
        run = project.run("-W", "error")
    assert "INTERNALERROR" not in run.output
    assert run.ret == 0, run.output
    assert "polyloop_waive names 'godo'" in run.output


def test_no_asyncio_loop_scope_deprecation_without_asyncio_configuration(
    project: Project,
) -> None:
    project.conftest("tests", GOOD)
    pyproject(project, 'filterwarnings = ["error"]\n', loop_scope=False)
    run = project.run()
    assert "is unset" not in run.output
    assert "asyncio_default_fixture_loop_scope=function" in run.output  # pytest-asyncio's header
    assert run.ret == 0, run.output


# -- the baseline rule ----------------------------------------------------------------------


def write_baseline(project: Project, report: dict[str, object] | None) -> str:
    assert report is not None
    path = project.path / "baseline.json"
    path.write_text(json.dumps(report), encoding="utf-8")
    return f"--polyloop-baseline={path}"


def test_a_new_implementation_absent_from_the_baseline_fails_on_its_violations(
    project: Project,
) -> None:
    project.conftest("tests", GOOD)
    baseline = write_baseline(project, project.run().report)
    project.conftest("tests", GOOD + "\n\n" + BROKEN)
    run = project.run(baseline)
    assert run.outcome("broken_executor", ERROR_PROMISE) == "violated"
    assert run.ret == 1


def test_a_promise_absent_from_the_baseline_catalogue_is_pending(project: Project) -> None:
    project.conftest("tests", BROKEN)
    report = project.run().report
    assert report is not None
    for implementation in report["implementations"]:  # as an older kit without the promise
        implementation["promises"] = [
            p for p in implementation["promises"] if p["id"] != ERROR_PROMISE
        ]
    run = project.run(write_baseline(project, report))
    assert run.outcome("broken_executor", ERROR_PROMISE) == "pending"
    assert run.ret == 0, run.output


def test_a_promise_pending_in_the_baseline_stays_pending(project: Project) -> None:
    project.conftest("tests", BROKEN)
    report = project.run().report
    assert report is not None
    for implementation in report["implementations"]:
        for promise in implementation["promises"]:
            if promise["id"] == ERROR_PROMISE:
                promise["outcome"] = "pending"
    run = project.run(write_baseline(project, report))
    assert run.outcome("broken_executor", ERROR_PROMISE) == "pending"
    assert run.ret == 0, run.output


def test_a_promise_violated_in_the_baseline_is_still_violated(project: Project) -> None:
    project.conftest("tests", BROKEN)
    baseline = write_baseline(project, project.run().report)
    run = project.run(baseline)
    assert run.outcome("broken_executor", ERROR_PROMISE) == "violated"
    assert run.ret == 1


# -- smaller ---------------------------------------------------------------------------------


def test_deselecting_every_implementation_says_they_were_deselected(project: Project) -> None:
    project.conftest("tests", GOOD)
    run = project.run("-k", "nothing_matches_this")
    assert run.ret == 5
    assert "deselected" in run.output
    assert "No seam implementation was found" not in run.output


def test_the_printed_rerun_command_can_pass_after_the_fix(project: Project) -> None:
    project.conftest("tests", BROKEN)
    run = project.run()
    assert run.ret == 1
    lines = [line.strip() for line in run.output.splitlines() if "rerun: " in line]
    assert lines, run.output
    command = shlex.split(lines[0].split("rerun: ", 1)[1])
    assert command[:2] == ["pytest", "--polyloop-conformance"]
    project.conftest("tests", BROKEN.replace("broken=True", "broken=False"))
    rerun = project.pytester.runpytest_inprocess(*SANDBOX_FLAGS, *command[1:])
    assert rerun.ret == 0, rerun.stdout.str()


def test_the_junit_property_is_json(project: Project) -> None:
    project.conftest("tests", GOOD)
    junit = project.path / "junit.xml"
    project.run(f"--junitxml={junit}")
    text = junit.read_text(encoding="utf-8")
    import xml.etree.ElementTree as ElementTree

    values = [
        prop.get("value") or ""
        for prop in ElementTree.fromstring(text).iter("property")
        if prop.get("name") == "polyloop"
    ]
    assert values
    for value in values:
        assert set(json.loads(value)) == {"implementation", "promise"}


def test_an_ini_waiver_for_an_unknown_promise_blames_the_ini_file(project: Project) -> None:
    project.conftest("tests", GOOD)
    pyproject(project, 'polyloop_waive = [\n  "good_executor action_executor.no_such: why",\n]\n')
    run = project.run()
    assert run.ret == 4
    assert "pyproject.toml:4: good_executor: waiver names unknown promise" in run.output
    assert "conftest.py" not in run.output


def test_one_tagged_fixture_imported_into_two_modules_is_no_duplicate(project: Project) -> None:
    project.write(
        "tests/shared_fixtures.py",
        "import pytest\nimport pytest_polyloop\n"
        "from sandbox_executors import SandboxExecutor, action_samples\n\n\n"
        "@pytest.fixture\ndef samples():\n    return action_samples()\n\n\n" + GOOD,
    )
    importing = "from shared_fixtures import good_executor, samples  # noqa: F401\n"
    project.write("tests/test_a.py", importing)
    project.write("tests/test_b.py", importing)
    run = project.run()
    assert "already used" not in run.output
    assert run.ret == 0, run.output
    assert [entry["id"] for entry in run.report["implementations"]] == ["good_executor"]  # type: ignore[index]


@pytest.mark.skipif(int(pytest.__version__.split(".")[0]) < 9, reason="pytest >= 9 refuses it")
def test_the_marker_on_a_fixture_names_the_decorator_to_use(project: Project) -> None:
    project.conftest(
        "tests",
        """\
        @pytest.fixture
        @pytest.mark.polyloop_seam("action_executor", samples="samples")
        def marked_executor():
            return SandboxExecutor()
        """,
    )
    run = project.run(subprocess=True)  # pytest prints a failing conftest only from main()
    assert "marks cannot be applied to fixtures on pytest >= 9" in run.output
    assert "tag the fixture with @pytest_polyloop.seam(...) instead" in run.output
    assert run.ret == 4


# -- promises polyloop keeps itself (issue #10) ---------------------------------------------

KEPT = "event_sink.delivery_failure_is_isolated_by_the_library"
SINK = """\
from polyloop.events import MemorySink


@pytest_polyloop.seam("event_sink")
@pytest.fixture
def memory_sink():
    return MemorySink()
"""


def test_a_promise_polyloop_keeps_is_reported_as_kept_by_polyloop(project: Project) -> None:
    project.conftest("tests", SINK)
    markdown = project.path / "report.md"
    run = project.run(f"--polyloop-report-md={markdown}", "--polyloop-verbose")
    promise = run.promise("memory_sink", KEPT)
    assert promise["outcome"] == "unverifiable"
    assert promise["kept_by"] == "docs/reference/runtime.md#events"  # on main: tests/unit/...
    assert "kept by polyloop (nothing to verify yourself):" in run.output
    section = run.output.split("kept by polyloop (nothing to verify yourself):", 1)[1]
    assert KEPT in section
    assert (
        KEPT
        not in run.output.split("unverifiable here (verify it yourself):", 1)[-1].split(
            "kept by polyloop", 1
        )[0]
    )
    assert "### kept by polyloop" in markdown.read_text(encoding="utf-8")


# -- polyloop report FILE on a malformed report (issue #11) ---------------------------------


@pytest.mark.parametrize(
    "body",
    [
        '"implementations": []',  # no verdict
        '"verdict": "conformant", "implementations": [{"id": "x", "promises": []}]',
        '"verdict": "conformant", "implementations": [{"id": "x", "seam": "s", "collected": 1, '
        '"catalogue": 1, "counts": [], "promises": []}]',
        '"verdict": "violations", "implementations": [{"id": "x", "seam": "s", "collected": 1, '
        '"catalogue": 1, "counts": {}, "promises": [{"id": "p", "outcome": "violated"}]}]',
    ],
)
@pytest.mark.parametrize("markdown", [False, True])
def test_report_file_on_a_malformed_report_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str, markdown: bool
) -> None:
    report = tmp_path / "report.json"
    report.write_text(f'{{"schema": "polyloop-conformance/1", {body}}}', encoding="utf-8")
    assert main(["report", str(report), *(["--markdown"] if markdown else [])]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"polyloop: error: {report}: ")
    assert len(err.strip().splitlines()) == 1
