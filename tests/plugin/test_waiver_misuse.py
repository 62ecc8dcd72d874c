"""A malformed waiver or class setting is a usage error naming ``path:line``, never a traceback
(issue #9): in a hand-written subclass (its ``waive`` and ``loop_scope`` class attributes, checked
when the class is created), in a seam tag (in a conftest pytest loads at startup or one it finds
while collecting), and in the ``polyloop_waive`` ini key — with and without
``--polyloop-conformance``."""

from __future__ import annotations

import pytest

from tests.plugin._sandbox import SANDBOX_FLAGS, Project

FIVE_FIELDS = "action_executor.returns_all_five_fields"
UNVERIFIABLE = "action_executor.observation_substitution_happens_in_the_library"

SUBCLASS = """\
import pytest
from polyloop.testing import ActionExecutorContract
from sandbox_executors import SandboxExecutor, action_samples


class TestMine(ActionExecutorContract):
    {setting}

    @pytest.fixture
    def action_executor(self):
        return SandboxExecutor()

    @pytest.fixture
    def action_samples(self):
        return action_samples()
"""

# A class setting, and what the one line must say about it.
BAD_SETTINGS = {
    "empty-reason": (
        f'waive = {{"{FIVE_FIELDS}": ""}}',
        f"waive['{FIVE_FIELDS}']: a waiver needs a reason",
    ),
    "blank-reason": (
        f'waive = {{"{FIVE_FIELDS}": " \\t "}}',
        f"waive['{FIVE_FIELDS}']: a waiver needs a reason",
    ),
    "reason-not-a-str": (
        f'waive = {{"{FIVE_FIELDS}": None}}',
        f"waive['{FIVE_FIELDS}']: a waiver needs a reason",
    ),
    "unknown-promise": (
        'waive = {"action_executor.no_such_promise": "why"}',
        "waive names unknown promise 'action_executor.no_such_promise'",
    ),
    "unverifiable-promise": (
        f'waive = {{"{UNVERIFIABLE}": "why"}}',
        f"waive names '{UNVERIFIABLE}', an unverifiable promise",
    ),
    "not-a-mapping": (
        f'waive = ["{FIVE_FIELDS}"]',
        "waive must map promise ids to reasons, got list",
    ),
    "unknown-loop-scope": (
        'loop_scope = "forever"',
        "loop_scope must be one of function, class, module, package, session, got 'forever'",
    ),
    "loop-scope-not-a-str": (
        "loop_scope = None",
        "loop_scope must be one of function, class, module, package, session, got None",
    ),
}


def no_traceback(output: str) -> None:
    assert "Traceback" not in output
    assert "_base.py" not in output  # the kit's frames
    assert "raise " not in output


def lines_naming(output: str, location: str) -> list[str]:
    return [
        line for line in output.splitlines() if line.removeprefix("ERROR: ").startswith(location)
    ]


@pytest.mark.parametrize("case", list(BAD_SETTINGS))
def test_a_bad_setting_in_a_subclass_is_a_usage_error_naming_path_and_line(
    project: Project, case: str
) -> None:
    setting, problem = BAD_SETTINGS[case]
    project.write("tests/test_mine.py", SUBCLASS.format(setting=setting))
    run = project.run()
    assert run.ret == 4, run.output
    [line] = lines_naming(run.output, "tests/test_mine.py:6:")
    assert line.startswith(f"tests/test_mine.py:6: TestMine: {problem}"), line
    no_traceback(run.output)
    assert "error during collection" not in run.output
    assert run.report is None


@pytest.mark.parametrize("case", ["empty-reason", "unknown-promise", "unknown-loop-scope"])
def test_a_bad_setting_in_a_subclass_under_plain_pytest_is_a_one_line_collection_error(
    project: Project, case: str
) -> None:
    setting, problem = BAD_SETTINGS[case]
    project.write("tests/test_mine.py", SUBCLASS.format(setting=setting))
    result = project.pytester.runpytest_inprocess(*SANDBOX_FLAGS)
    output = "\n".join(result.outlines + result.errlines)
    assert result.ret == pytest.ExitCode.INTERRUPTED, output  # pytest's status for it
    assert "ERROR collecting tests/test_mine.py" in output
    [line] = lines_naming(output, "tests/test_mine.py:6:")
    assert line.startswith(f"tests/test_mine.py:6: TestMine: {problem}"), line
    no_traceback(output)


def test_a_bad_waiver_in_a_subclass_under_xdist_is_a_usage_error(project: Project) -> None:
    setting, problem = BAD_SETTINGS["empty-reason"]
    project.write("tests/test_mine.py", SUBCLASS.format(setting=setting))
    run = project.run("-p", "xdist", "-n", "2", subprocess=True)
    assert run.ret == 4, run.output
    assert f"tests/test_mine.py:6: TestMine: {problem}" in run.output
    no_traceback(run.output)


# -- the other spellings: a seam tag's waive=, the polyloop_waive ini key ------------------

TAGGED = f"""\
@pytest_polyloop.seam(
    "action_executor", samples="samples", waive={{"{FIVE_FIELDS}": "  "}}
)
@pytest.fixture
def good():
    return SandboxExecutor()
"""


@pytest.mark.parametrize("conformance", [True, False], ids=["conformance", "plain"])
def test_a_blank_reason_in_a_seam_tag_is_one_line_naming_the_conftest(
    project: Project, conformance: bool
) -> None:
    project.conftest("tests", TAGGED)
    if conformance:
        run = project.run(subprocess=True)  # pytest reports a failing conftest from main()
        ret, output = run.ret, run.output
    else:
        result = project.pytester.runpytest_subprocess(*SANDBOX_FLAGS)
        ret, output = int(result.ret), "\n".join(result.outlines + result.errlines)
    assert ret == 4, output
    [line] = lines_naming(output, "tests/conftest.py:10:")
    assert f"waive['{FIVE_FIELDS}']: a waiver needs a reason" in line
    assert "Traceback" not in output
    assert "_tagging.py" not in output
    assert "ImportError while loading conftest" not in output


# A conftest below the startup ones (tests/sub/conftest.py) is imported while pytest collects.
DEEPER_TAGGED = """\
@pytest_polyloop.seam(
    "action_executor", samples="samples", {argument}
)
@pytest.fixture
def good():
    return SandboxExecutor()
"""

# seam(...)'s argument, and what the one line must say after `path:line: `.
BAD_SEAM_ARGUMENTS = {
    "empty-reason": (
        f'waive={{"{FIVE_FIELDS}": ""}}',
        f"waive['{FIVE_FIELDS}']: a waiver needs a reason, got ''",
    ),
    "blank-reason": (
        f'waive={{"{FIVE_FIELDS}": " \\t "}}',
        f"waive['{FIVE_FIELDS}']: a waiver needs a reason, got ' \\t '",
    ),
    "waive-not-a-mapping": (
        f'waive=["{FIVE_FIELDS}"]',
        "waive must map promise ids to reasons, e.g. {'action_executor.some_promise': 'why'}",
    ),
    "id-not-a-str": ("id=3", "id must be a non-empty str without '::' or '[', got 3"),
    "unknown-loop-scope": ('loop_scope="forever"', "loop_scope must be one of function, class"),
    "unknown-promise": (  # checked by the conformance session, when it reads the tag
        'waive={"action_executor.no_such_promise": "why"}',
        "good: waiver names unknown promise 'action_executor.no_such_promise'",
    ),
}


def deeper_conftest(project: Project, case: str) -> str:
    """Write tests/sub/ with the bad tag; return what its one line must start with."""
    argument, problem = BAD_SEAM_ARGUMENTS[case]
    project.write("tests/conftest.py", "")  # at startup; puts tests/ on sys.path in a subprocess
    project.conftest("tests/sub", DEEPER_TAGGED.format(argument=argument))
    project.write("tests/sub/test_sub.py", "def test_sub():\n    pass\n")
    return f"tests/sub/conftest.py:10: {problem}"


def no_conftest_traceback(output: str) -> None:
    no_traceback(output)
    assert "_tagging.py" not in output  # seam()'s frames
    assert "importlib" not in output  # the conftest import's frames


@pytest.mark.parametrize("case", list(BAD_SEAM_ARGUMENTS))
def test_a_bad_seam_argument_in_a_deeper_conftest_is_a_usage_error_naming_its_line(
    project: Project, case: str
) -> None:
    expected = deeper_conftest(project, case)
    run = project.run()
    assert run.ret == 4, run.output
    [line] = lines_naming(run.output, "tests/sub/conftest.py:")
    assert line.startswith(expected), line
    no_conftest_traceback(run.output)
    assert "ERROR collecting" not in run.output
    assert run.report is None


@pytest.mark.parametrize("case", ["empty-reason", "waive-not-a-mapping", "unknown-loop-scope"])
def test_a_bad_seam_argument_in_a_deeper_conftest_under_plain_pytest_is_one_line(
    project: Project, case: str
) -> None:
    expected = deeper_conftest(project, case)
    result = project.pytester.runpytest_inprocess(*SANDBOX_FLAGS)
    output = "\n".join(result.outlines + result.errlines)
    assert result.ret == pytest.ExitCode.INTERRUPTED, output  # pytest's status for it
    assert "ERROR collecting tests/sub" in output
    [line] = lines_naming(output, "tests/sub/conftest.py:")
    assert line.startswith(expected), line
    no_conftest_traceback(output)


def test_a_bad_seam_argument_in_a_deeper_conftest_under_xdist_is_a_usage_error(
    project: Project,
) -> None:
    expected = deeper_conftest(project, "blank-reason")
    run = project.run("-p", "xdist", "-n", "2", subprocess=True)
    assert run.ret == 4, run.output
    [line] = lines_naming(run.output, "tests/sub/conftest.py:")
    assert line.startswith(expected), line
    no_conftest_traceback(run.output)


def test_a_deeper_conftest_failing_on_its_own_keeps_pytest_s_traceback(project: Project) -> None:
    project.write("tests/conftest.py", "")
    project.write("tests/sub/conftest.py", 'raise ValueError("the conftest\'s own bug")\n')
    project.write("tests/sub/test_sub.py", "def test_sub():\n    pass\n")
    run = project.run()
    assert run.ret == pytest.ExitCode.INTERRUPTED, run.output
    assert "ERROR collecting tests/sub" in run.output
    assert "tests/sub/conftest.py:1: in <module>" in run.output  # the trace, not a misuse line
    assert "ValueError: the conftest's own bug" in run.output
    assert "misuse" not in run.output


def test_a_blank_reason_in_the_ini_is_blamed_on_its_line(project: Project) -> None:
    project.conftest(
        "tests",
        '@pytest_polyloop.seam("action_executor", samples="samples")\n'
        "@pytest.fixture\ndef good():\n    return SandboxExecutor()\n",
    )
    project.write(
        "pyproject.toml",
        '[tool.pytest.ini_options]\nasyncio_default_fixture_loop_scope = "function"\n'
        f'polyloop_waive = [\n  "good {FIVE_FIELDS}:   ",\n]\n',
    )
    run = project.run()
    assert run.ret == 4, run.output
    [line] = lines_naming(run.output, "pyproject.toml:4:")
    assert line == f"pyproject.toml:4: polyloop_waive: good {FIVE_FIELDS}: a waiver needs a reason"


@pytest.mark.skipif(int(pytest.__version__.split(".")[0]) >= 9, reason="pytest >= 9 refuses it")
def test_a_blank_reason_in_the_pytest_8_marker_is_a_usage_error_naming_the_conftest(
    project: Project,
) -> None:
    project.conftest(
        "tests",
        f"""\
        @pytest.fixture
        @pytest.mark.polyloop_seam(
            "action_executor", samples="samples", waive={{"{FIVE_FIELDS}": ""}}
        )
        def marked():
            return SandboxExecutor()
        """,
    )
    run = project.run()
    assert run.ret == 4, run.output
    [line] = lines_naming(run.output, "tests/conftest.py:")
    assert f"marked: waive['{FIVE_FIELDS}']: a waiver needs a reason" in line
    no_traceback(run.output)
