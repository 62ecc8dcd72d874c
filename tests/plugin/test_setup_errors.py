"""An implementation that cannot be built is a setup error, reported once (issue #20).

Before ``polyloop-conformance/2`` a fixture with a typo was reported as that implementation
violating every promise: nine "violated" for code that never ran.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema

from polyloop.cli import main
from polyloop.report import OUTCOMES, SCHEMA, load_report, render_text, schema
from tests.plugin._sandbox import ERROR_PROMISE, FIVE_FIELDS, Project

TYPO = """\
@pytest_polyloop.seam("action_executor", samples="samples")
@pytest.fixture
def typo_executor():
    return SandboxExecutr()


@pytest_polyloop.seam("action_executor", samples="samples")
@pytest.fixture
def good_executor():
    return SandboxExecutor()
"""


def test_a_fixture_that_raises_is_one_setup_error_not_nine_violations(project: Project) -> None:
    conftest = project.conftest("tests", TYPO)
    run = project.run()
    entry = run.implementation("typo_executor")
    assert {promise["outcome"] for promise in entry["promises"]} == {"setup_error"}
    assert len(entry["promises"]) == entry["catalogue"]
    assert entry["counts"]["setup_error"] == 1  # one error, counted once
    assert entry["counts"]["violated"] == 0
    line = next(
        n for n, text in enumerate(conftest.read_text().splitlines(), 1) if "Executr" in text
    )
    assert entry["setup_error"] == {
        "type": "NameError",
        "message": "name 'SandboxExecutr' is not defined",
        "location": f"tests/conftest.py:{line}",
    }
    assert run.implementation("good_executor")["setup_error"] is None
    assert run.report is not None
    assert run.report["verdict"] == "setup_error"
    assert run.ret == 1
    # The conformance section names the error once, with its location.
    section = run.output.split("polyloop conformance", 1)[1].split("short test summary", 1)[0]
    assert section.count("NameError: name 'SandboxExecutr' is not defined") == 1, section
    assert f"tests/conftest.py:{line}" in section
    assert "VIOLATIONS" not in section


SAMPLES_PROBLEMS = """\
@pytest.fixture
def raising_samples():
    raise RuntimeError("samples server unreachable")


@pytest.fixture
def wrong_samples():
    return {"executes_cleanly": "print(1)"}


@pytest_polyloop.seam("action_executor", samples="raising_samples")
@pytest.fixture
def raising_samples_executor():
    return SandboxExecutor()


@pytest_polyloop.seam("action_executor", samples="wrong_samples")
@pytest.fixture
def wrong_samples_executor():
    return SandboxExecutor()
"""


def test_samples_that_raise_or_cannot_be_used_are_setup_errors(project: Project) -> None:
    project.conftest("tests", SAMPLES_PROBLEMS)
    run = project.run()
    raising = run.implementation("raising_samples_executor")
    # Promises that need no samples ran and held; they are folded into the setup error.
    assert {promise["outcome"] for promise in raising["promises"]} == {"setup_error"}
    assert raising["setup_error"]["type"] == "RuntimeError"
    assert raising["setup_error"]["message"] == "samples server unreachable"
    wrong = run.implementation("wrong_samples_executor")
    assert {promise["outcome"] for promise in wrong["promises"]} == {"setup_error"}
    assert wrong["setup_error"]["type"] == "UnusableSamples"
    assert (
        "must return a polyloop.testing.ActionSamples, got dict"
        in (wrong["setup_error"]["message"])
    )
    assert run.report is not None
    assert run.report["verdict"] == "setup_error"
    assert run.ret == 1


HIDDEN = f"""\
@pytest_polyloop.seam(
    "action_executor", samples="samples", waive={{"{ERROR_PROMISE}": "known (ticket 7)"}}
)
@pytest.fixture
def waived_executor():
    raise OSError("no sandbox")
"""

OVERRIDDEN = """\
import pytest
from polyloop.testing import ActionExecutorContract


class TestRaising(ActionExecutorContract):
    @pytest.fixture
    def action_executor(self):
        raise OSError("no sandbox")

    @pytest.fixture
    def action_samples(self):
        raise OSError("no samples")

    def test_returns_all_five_fields(self, action_executor):
        '''Our own version.'''
"""


def test_a_setup_error_is_never_hidden_by_a_waiver_an_override_or_a_baseline(
    project: Project, tmp_path: Path
) -> None:
    project.conftest("tests", HIDDEN)
    project.write("tests/test_mine.py", OVERRIDDEN)
    baseline = tmp_path / "baseline.json"
    first = project.run()
    assert first.report is not None
    # A baseline in which every promise was pending: a violation would be pending again.
    for entry in first.report["implementations"]:
        for promise in entry["promises"]:
            promise["outcome"] = "pending"
    baseline.write_text(json.dumps(first.report), encoding="utf-8")
    run = project.run(f"--polyloop-baseline={baseline}")
    assert run.outcome("waived_executor", ERROR_PROMISE) == "setup_error"
    handwritten = "tests/test_mine.py::TestRaising"
    assert run.outcome(handwritten, FIVE_FIELDS) == "setup_error"  # overridden, never ran
    assert run.implementation(handwritten)["setup_error"]["message"] == "no sandbox"
    assert run.report is not None
    for entry in run.report["implementations"]:
        assert {promise["outcome"] for promise in entry["promises"]} == {"setup_error"}
    assert run.report["verdict"] == "setup_error"
    assert run.ret == 1


# The outcomes of polyloop-conformance/1: everything but setup_error.
V1_OUTCOMES = tuple(outcome for outcome in OUTCOMES if outcome != "setup_error")


def test_report_commands_read_a_version_1_report(tmp_path: Path) -> None:
    old = {
        "schema": "polyloop-conformance/1",
        "kit_version": "0.1.0",
        "suite_hash": "sha256:" + "0" * 64,
        "pytest_version": "8.4.0",
        "python_version": "3.11.9",
        "created_at": "2026-01-01T00:00:00.000Z",
        "verdict": "violations",
        "implementations": [
            {
                "id": "mine",
                "seam": "action_executor",
                "fixture": "mine",
                "source": "tests/conftest.py:3",
                "suite_hash": "sha256:" + "0" * 64,
                "counts": {**dict.fromkeys(V1_OUTCOMES, 0), "violated": 1},
                "collected": 1,
                "catalogue": 1,
                "promises": [
                    {
                        "id": FIVE_FIELDS,
                        "outcome": "violated",
                        "nodeid": "tests/conftest.py::X::test_returns_all_five_fields",
                        "duration_s": 0.1,
                        "promise": "five fields",
                        "why": None,
                        "verify_yourself": None,
                        "detail": "assert False",
                        "waiver_reason": None,
                    }
                ],
            }
        ],
    }
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old), encoding="utf-8")
    report = load_report(path)
    assert report["schema"] == "polyloop-conformance/1"
    assert "verdict: VIOLATIONS" in render_text(report)
    jsonschema.validate(report, schema("polyloop-conformance/1"))
    assert main(["report", str(path)]) == 0
    new = tmp_path / "new.json"
    new.write_text(json.dumps({**old, "schema": SCHEMA, "interrupted": False}), encoding="utf-8")
    assert main(["report", "diff", str(path), str(new)]) == 0


UNPRINTABLE = """\
class Unprintable(Exception):
    def __str__(self):
        raise RuntimeError("no message today")


@pytest_polyloop.seam("action_executor", samples="samples")
@pytest.fixture
def unprintable_executor():
    raise Unprintable()
"""


def test_a_fixture_error_whose_message_cannot_be_rendered_is_still_one_setup_error(
    project: Project,
) -> None:
    """Issue 24: the report took ``str()`` of the error itself, so an exception whose
    ``__str__`` raises crashed the session's report instead of becoming a setup error."""
    project.conftest("tests", UNPRINTABLE)
    run = project.run()
    entry = run.implementation("unprintable_executor")
    assert {promise["outcome"] for promise in entry["promises"]} == {"setup_error"}
    assert entry["setup_error"]["type"] == "Unprintable"
    assert entry["setup_error"]["message"] == "<the exception's message could not be rendered>"
    assert run.report is not None
    assert run.report["verdict"] == "setup_error"
