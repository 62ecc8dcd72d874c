"""Exit statuses: a violation or a stale waiver fails the run, skips and waivers do not, no
implementation is 5 with a how-to-tag message, misuse is 4 naming the file and the fixture."""

from __future__ import annotations

import re

import pytest

from polyloop.testing import ActionExecutorContract
from tests.plugin._sandbox import ERROR_PROMISE, Project

#: The action-executor catalogue grows; the sandbox executors are judged on all of it.
EXECUTOR_PROMISES = len(ActionExecutorContract.promises())

FIVE_FIELDS = "action_executor.returns_all_five_fields"


def tagged(fixture: str, body: str, **seam_arguments: str) -> str:
    arguments = "".join(f", {name}={value}" for name, value in seam_arguments.items())
    return (
        f'@pytest_polyloop.seam("action_executor"{arguments})\n'
        f"@pytest.fixture\ndef {fixture}():\n    return {body}\n\n\n"
    )


def test_a_violation_exits_1(project: Project) -> None:
    project.conftest("tests", tagged("broken", "SandboxExecutor(broken=True)", samples='"samples"'))
    run = project.run()
    assert run.ret == 1
    assert run.report is not None
    assert run.report["verdict"] == "violations"


def test_a_stale_waiver_exits_1(project: Project) -> None:
    waiver = f'{{"{FIVE_FIELDS}": "flaky in 0.9"}}'
    project.conftest(
        "tests", tagged("good", "SandboxExecutor()", samples='"samples"', waive=waiver)
    )
    run = project.run()
    assert run.outcome("good", FIVE_FIELDS) == "stale_waiver"
    assert run.ret == 1


def test_only_waived_unverifiable_and_not_applicable_promises_exit_0(project: Project) -> None:
    waiver = f'{{"{ERROR_PROMISE}": "known, ticket 7"}}'
    project.conftest(
        "tests", tagged("waived", "SandboxExecutor(broken=True)", samples='"samples"', waive=waiver)
    )
    run = project.run()
    counts = run.counts("waived")
    assert counts["waived"] == 1
    assert counts["unverifiable"] == EXECUTOR_PROMISES - 6
    assert counts["not_applicable"] == 1
    assert counts["violated"] == counts["stale_waiver"] == 0
    assert run.report is not None
    assert run.report["verdict"] == "conformant"
    assert run.ret == 0, run.output


def test_no_implementation_exits_5_and_shows_how_to_tag_a_fixture(project: Project) -> None:
    project.write("tests/test_plain.py", "def test_plain():\n    pass\n")
    run = project.run()
    assert run.ret == 5
    assert run.report is not None
    assert run.report["verdict"] == "no_implementations"
    assert run.report["implementations"] == []
    assert '@pytest_polyloop.seam("action_executor", samples=' in run.output
    assert "polyloop_seams" in run.output


def test_other_tests_are_not_run_in_conformance_mode(project: Project) -> None:
    project.conftest("tests", tagged("good", "SandboxExecutor()", samples='"samples"'))
    project.write("tests/test_plain.py", "def test_plain():\n    raise AssertionError('ran')\n")
    run = project.run()
    assert run.ret == 0, run.output
    run.result.assert_outcomes(passed=5, skipped=EXECUTOR_PROMISES - 5, deselected=1)


def misuse_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if re.match(r"^\S+\.py:\d+: \w+: ", line)]


def test_an_unknown_seam_name_is_a_usage_error_naming_file_and_fixture(project: Project) -> None:
    project.conftest(
        "tests",
        '@pytest_polyloop.seam("action_exec")\n@pytest.fixture\ndef typo():\n    return 1\n',
    )
    run = project.run()
    assert run.ret == 4
    [line] = misuse_lines(run.output)
    assert line.startswith("tests/conftest.py:")
    assert ": typo: unknown seam 'action_exec'" in line
    assert "action_executor" in line  # the registered names are listed
    assert run.report is None


def test_a_missing_samples_fixture_is_a_usage_error(project: Project) -> None:
    project.conftest("tests", tagged("no_samples", "SandboxExecutor()"))
    project.conftest("tests/sub", tagged("wrong_samples", "SandboxExecutor()", samples='"nope"'))
    run = project.run()
    assert run.ret == 4
    lines = misuse_lines(run.output)
    assert any(
        line.startswith("tests/conftest.py:")
        and ": no_samples: the action_executor suite needs samples" in line
        for line in lines
    ), lines
    assert any(
        line.startswith("tests/sub/conftest.py:")
        and ": wrong_samples: samples fixture 'nope' not found" in line
        for line in lines
    ), lines


def test_a_waiver_for_an_unknown_promise_is_a_usage_error(project: Project) -> None:
    waiver = '{"action_executor.no_such_promise": "because"}'
    project.conftest(
        "tests", tagged("good", "SandboxExecutor()", samples='"samples"', waive=waiver)
    )
    run = project.run()
    assert run.ret == 4
    [line] = misuse_lines(run.output)
    assert "good: waiver names unknown promise 'action_executor.no_such_promise'" in line


def test_a_waiver_for_an_unverifiable_promise_is_a_usage_error(project: Project) -> None:
    waiver = '{"action_executor.observation_substitution_happens_in_the_library": "because"}'
    project.conftest(
        "tests", tagged("good", "SandboxExecutor()", samples='"samples"', waive=waiver)
    )
    run = project.run()
    assert run.ret == 4
    [line] = misuse_lines(run.output)
    assert "an unverifiable promise" in line


def test_a_duplicate_implementation_id_is_a_usage_error(project: Project) -> None:
    project.conftest(
        "tests",
        tagged("one", "SandboxExecutor()", samples='"samples"', id='"mine"')
        + tagged("two", "SandboxExecutor()", samples='"samples"', id='"mine"'),
    )
    run = project.run()
    assert run.ret == 4
    [line] = misuse_lines(run.output)
    assert "implementation id 'mine' is already used by tests/conftest.py:" in line


def test_a_seam_tag_on_a_plain_function_is_a_usage_error(project: Project) -> None:
    project.conftest(
        "tests",
        '@pytest_polyloop.seam("action_executor", samples="samples")\ndef plain():\n    pass\n',
    )
    run = project.run()
    assert run.ret == 4
    [line] = misuse_lines(run.output)
    assert ": plain: tagged as a polyloop seam but is not a fixture" in line


SKIPPING_SUITE = '''\
import pytest
import pytest_polyloop
from polyloop.testing import ContractBase


class ClockContract(ContractBase):
    seam = "clock"

    @pytest.fixture
    def clock(self):
        pytest.fail("override the clock fixture")

    def test_reads_seconds(self, clock):
        """now() returns seconds."""
        pytest.skip("this clock has no seconds")


@pytest.hookimpl(optionalhook=True)
def pytest_polyloop_register_seams(registry):
    registry.add("clock", ClockContract, None)


@pytest_polyloop.seam("clock")
@pytest.fixture
def tick_clock():
    return object()
'''


def test_an_implementation_with_no_promise_held_is_incomplete(project: Project) -> None:
    project.write("tests/conftest.py", SKIPPING_SUITE)
    run = project.run()
    assert run.counts("tick_clock")["not_applicable"] == 1
    assert run.report is not None
    assert run.report["verdict"] == "incomplete"  # an empty contract never passes trivially
    assert "no promise held: an empty contract never passes" in run.output
    assert run.ret == 1


def test_an_override_without_a_waiver_reason_is_incomplete(project: Project) -> None:
    project.write(
        "tests/test_mine.py",
        """\
        import pytest
        from polyloop.testing import ActionExecutorContract
        from sandbox_executors import SandboxExecutor, action_samples


        class TestMine(ActionExecutorContract):
            @pytest.fixture
            def action_executor(self):
                return SandboxExecutor()

            @pytest.fixture
            def action_samples(self):
                return action_samples()

            def test_returns_all_five_fields(self, action_executor):
                '''Replaced without saying why.'''
        """,
    )
    run = project.run()
    assert run.outcome("tests/test_mine.py::TestMine", FIVE_FIELDS) == "overridden"
    assert run.report is not None
    assert run.report["verdict"] == "incomplete"
    assert run.ret == 1


def test_an_unknown_seam_for_polyloop_seam_is_a_usage_error(project: Project) -> None:
    project.conftest("tests", tagged("good", "SandboxExecutor()", samples='"samples"'))
    run = project.run("--polyloop-seam", "action_exec")
    assert run.ret == 4
    assert "command line: --polyloop-seam action_exec: unknown seam" in run.output


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (None, "cannot read the report"),
        ("{not json", "not JSON"),
        ('{"schema": "coverage/7"}', "not a polyloop-conformance/2 report (schema: 'coverage/7')"),
        (
            '{"schema": "polyloop-conformance/1", "implementations": "all"}',
            "'implementations' must be a list of objects with 'promises'",
        ),
        (
            '{"schema": "polyloop-conformance/1", "implementations": [{"promises": [{}]}]}',
            "implementations[0]: 'id' must be a string",
        ),
        (
            '{"schema": "polyloop-conformance/1", "implementations": null}',
            "'implementations' must be a list of objects with 'promises'",
        ),
        (
            '{"schema": "polyloop-conformance/1", "implementations": [{"id": "x", '
            '"promises": [{"id": "s.p"}]}]}',
            "implementations[0].promises[0]: 'outcome' must be one of held, violated",
        ),
        (
            '{"schema": "polyloop-conformance/1", "implementations": [{"id": "x", '
            '"promises": [{"id": "s.p", "outcome": "great"}]}]}',
            "implementations[0].promises[0]: 'outcome' must be one of held, violated",
        ),
        (
            '{"schema": "polyloop-conformance/1", "implementations": [{"id": "x", '
            '"promises": {"s.p": "held"}}]}',
            "'implementations' must be a list of objects with 'promises'",
        ),
        (
            '{"schema": "polyloop-conformance/1", "implementations": ["x"]}',
            "'implementations' must be a list of objects with 'promises'",
        ),
        (
            '{"schema": "polyloop-conformance/1", "implementations": [{"id": "x", '
            '"promises": [null]}]}',
            "implementations[0].promises[0]: not an object",
        ),
    ],
    ids=[
        "missing",
        "not-json",
        "other-schema",
        "implementations-not-a-list",
        "promise-no-id",
        "implementations-null",
        "promise-no-outcome",
        "unknown-outcome",
        "promises-not-a-list",
        "implementation-not-an-object",
        "promise-not-an-object",
    ],
)
def test_a_baseline_that_is_not_a_report_is_a_usage_error_naming_it(
    project: Project, content: str | None, reason: str
) -> None:
    project.conftest("tests", tagged("good", "SandboxExecutor()", samples='"samples"'))
    baseline = project.path / "old.json"
    if content is not None:
        baseline.write_text(content, encoding="utf-8")
    run = project.run(f"--polyloop-baseline={baseline}")
    assert run.ret == 4
    assert f"--polyloop-baseline {baseline}: {reason}" in run.output
    assert "Traceback" not in run.output
