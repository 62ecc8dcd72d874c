"""``polyloop report FILE`` / ``polyloop report diff OLD NEW`` on real reports, and the
Markdown report (also appended to ``$GITHUB_STEP_SUMMARY``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from polyloop.cli import main
from polyloop.cli._report import add_report_commands
from polyloop.testing import ActionExecutorContract
from tests.plugin._sandbox import ERROR_PROMISE, Project

#: The action-executor catalogue grows; the sandbox executors are judged on all of it.
EXECUTOR_PROMISES = len(ActionExecutorContract.promises())

EXECUTOR = """\
@pytest_polyloop.seam("action_executor", samples="samples", id="executor")
@pytest.fixture
def my_executor():
    return SandboxExecutor(broken={broken})
"""
EXTRA = """

@pytest_polyloop.seam("action_executor", samples="samples")
@pytest.fixture
def extra_executor():
    return SandboxExecutor()
"""


def save(project: Project, name: str, report: object) -> Path:
    path = project.path / name
    path.write_text(json.dumps(report), encoding="utf-8")
    return path


@pytest.fixture
def before_and_after(project: Project) -> tuple[Path, Path]:
    """A report where `executor` keeps every promise, and one where it broke and an extra
    implementation appeared."""
    project.conftest("tests", EXECUTOR.format(broken=False))
    before = save(project, "before.json", project.run().report)
    project.conftest("tests", EXECUTOR.format(broken=True) + EXTRA)
    after = save(project, "after.json", project.run().report)
    return before, after


def test_diff_lists_a_regression_and_exits_1(
    before_and_after: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    before, after = before_and_after
    status = main(["report", "diff", str(before), str(after)])
    out = capsys.readouterr().out
    assert status == 1
    regressed = "regressed (held → anything but held, waived or overridden)"
    assert f"{regressed}: 1\n  executor  {ERROR_PROMISE}  held → violated\n" in out
    assert "implementations new in NEW: 1\n  extra_executor\n" in out
    assert out.endswith("\n1 regression\n")


def test_diff_the_other_way_lists_recoveries_and_the_lost_implementation(
    before_and_after: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    before, after = before_and_after
    status = main(["report", "diff", str(after), str(before)])
    out = capsys.readouterr().out
    assert status == 1  # extra_executor is in OLD and missing from NEW: a regression
    assert f"recovered (now held): 1\n  executor  {ERROR_PROMISE}  violated → held\n" in out
    assert "implementations missing from NEW (regressed): 1\n  extra_executor\n" in out
    assert "regressed (held → anything but held, waived or overridden): 0" in out


def test_report_file_renders_the_verdict_and_the_violation(
    before_and_after: tuple[Path, Path],
) -> None:
    _, after = before_and_after
    completed = subprocess.run(
        [sys.executable, "-m", "polyloop.cli", "report", str(after)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.startswith("verdict: VIOLATIONS\n")
    assert f"violated:\n  executor  {ERROR_PROMISE} — " in completed.stdout
    assert "env_error" in completed.stdout


def test_a_file_that_is_not_a_report_exits_2_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    not_report = tmp_path / "coverage.json"
    not_report.write_text('{"meta": {}}', encoding="utf-8")
    assert main(["report", str(not_report)]) == 2
    assert f"{not_report}: not a polyloop-conformance/2 report" in capsys.readouterr().err
    assert main(["report", str(tmp_path / "missing.json")]) == 2
    assert "missing.json: cannot read the report" in capsys.readouterr().err
    assert main(["report", "diff", str(not_report)]) == 2


def test_the_report_format_imports_only_the_standard_library() -> None:
    probe = (
        "import sys; import polyloop.report, polyloop.cli; "
        "print(sorted(m for m in ('pytest', 'hypothesis', 'pytest_polyloop', "
        "'polyloop.testing', 'jsonschema') if m in sys.modules))"
    )
    completed = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    )
    assert completed.stdout.strip() == "[]"


def test_add_report_commands_plugs_into_another_parser(
    before_and_after: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="polyloop")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("runs")
    add_report_commands(commands)
    args = parser.parse_args(["report", "--markdown", str(before_and_after[1])])
    assert args.func(args) == 0
    assert "## polyloop conformance" in capsys.readouterr().out


def test_markdown_report_is_written_and_appended_to_the_step_summary(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = project.path / "step-summary.md"
    summary.write_text("earlier step\n", encoding="utf-8")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    project.conftest("tests", EXECUTOR.format(broken=True))
    run = project.run(f"--polyloop-report-md={project.path / 'report.md'}")
    markdown = (project.path / "report.md").read_text(encoding="utf-8")
    assert "**Verdict: VIOLATIONS**" in markdown
    n = EXECUTOR_PROMISES  # the three opt-ins of issue 21 are unverifiable without their samples
    assert (
        f"| `executor` | action_executor | {n}/{n} | 4 | 1 | 0 | {n - 6} | 1 | 0 | 0 | 0 | 0 |"
        in markdown
    )
    assert f"- `executor` `{ERROR_PROMISE}`" in markdown
    assert summary.read_text(encoding="utf-8") == "earlier step\n" + markdown
    assert run.ret == 1


@pytest.mark.parametrize(
    "implementations",
    ['"all"', '[{"promises": [{}]}]', '[{"id": "x", "promises": [{"id": 1, "outcome": "held"}]}]'],
)
def test_a_report_with_malformed_implementations_exits_2_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], implementations: str
) -> None:
    report = tmp_path / "report.json"
    text = f'{{"schema": "polyloop-conformance/1", "implementations": {implementations}}}'
    report.write_text(text, encoding="utf-8")
    assert main(["report", "diff", str(report), str(report)]) == 2
    assert f"polyloop: error: {report}: " in capsys.readouterr().err


def _report_with(implementation: dict[str, object], **top: object) -> dict[str, object]:
    return {
        "schema": "polyloop-conformance/1",
        "verdict": "conformant",
        **top,
        "implementations": [implementation],
    }


GOOD_IMPLEMENTATION: dict[str, object] = {
    "id": "x",
    "seam": "action_executor",
    "collected": 1,
    "catalogue": 1,
    "counts": {"held": 1},
    "promises": [
        {
            "id": "action_executor.p",
            "outcome": "held",
            "nodeid": "t.py::T::test_p",
            "promise": "it holds",
        }
    ],
}


@pytest.mark.parametrize(
    ("report", "reason"),
    [
        (
            {"schema": "polyloop-conformance/1", "implementations": None},
            "'implementations' must be a list of objects with 'promises'",
        ),
        ({**_report_with(GOOD_IMPLEMENTATION), "verdict": None}, "'verdict' must be one of"),
        (_report_with({**GOOD_IMPLEMENTATION, "seam": None}), "implementations[0]: 'seam'"),
        (_report_with({**GOOD_IMPLEMENTATION, "counts": []}), "implementations[0]: 'counts'"),
        (
            _report_with({**GOOD_IMPLEMENTATION, "collected": "1"}),
            "implementations[0]: 'collected'",
        ),
        (
            _report_with({**GOOD_IMPLEMENTATION, "promises": [{"id": "a.b", "outcome": "great"}]}),
            "implementations[0].promises[0]: 'outcome' must be one of held, violated",
        ),
        (
            _report_with(
                {
                    **GOOD_IMPLEMENTATION,
                    "promises": [
                        {
                            "id": "a.b",
                            "outcome": "violated",
                            "nodeid": "n",
                            "promise": "p",
                            "detail": 3,
                        }
                    ],
                }
            ),
            "implementations[0].promises[0]: 'detail'",
        ),
        (_report_with({**GOOD_IMPLEMENTATION, "missing": "all"}), "implementations[0]: 'missing'"),
    ],
    ids=[
        "null-implementations",
        "no-verdict",
        "no-seam",
        "counts-not-an-object",
        "collected-not-a-number",
        "unknown-outcome",
        "detail-not-text",
        "missing-not-a-list",
    ],
)
def test_a_report_the_renderer_cannot_read_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], report: object, reason: str
) -> None:
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report), encoding="utf-8")
    for markdown in ([], ["--markdown"]):
        assert main(["report", str(path), *markdown]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"polyloop: error: {path}: ")
        assert reason in err
        assert err.count("\n") == 1


def test_a_minimal_well_formed_report_renders(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "report.json"
    path.write_text(json.dumps(_report_with(GOOD_IMPLEMENTATION)), encoding="utf-8")
    assert main(["report", str(path)]) == 0
    assert "x  action_executor  1/1  held 1" in capsys.readouterr().out
