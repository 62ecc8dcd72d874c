"""Without the `testing` extra (pytest-asyncio, Hypothesis) loading the plugin never breaks
pytest; only --polyloop-conformance fails, with an install hint."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.plugin._sandbox import SANDBOX_FLAGS, Project

SHADOW = 'raise ImportError("No module named {name!r}", name={name!r})\n'
NO_HYPOTHESIS = ("-p", "no:hypothesispytest")  # what an environment without Hypothesis has


def hide(project: Project, module: str) -> None:
    """Make `import <module>` fail in the sandbox's child processes, as if not installed."""
    project.write(f"shadow/{module}/__init__.py", SHADOW.format(name=module))


def run_child(project: Project, *args: str) -> pytest.RunResult:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTHONPATH", str(project.path / "shadow"))
        return project.pytester.runpytest_subprocess(*SANDBOX_FLAGS, *args)


@pytest.fixture
def plain_project(project: Project) -> Project:
    project.write("tests/test_plain.py", "def test_plain():\n    pass\n")
    return project


def test_without_hypothesis_pytest_still_runs_the_users_tests(plain_project: Project) -> None:
    hide(plain_project, "hypothesis")
    result = run_child(plain_project, *NO_HYPOTHESIS)
    result.assert_outcomes(passed=1)


def test_without_hypothesis_conformance_mode_fails_with_an_install_hint(
    plain_project: Project,
) -> None:
    hide(plain_project, "hypothesis")
    result = run_child(plain_project, *NO_HYPOTHESIS, "--polyloop-conformance")
    assert result.ret == 4
    result.stderr.fnmatch_lines(
        ["ERROR: --polyloop-conformance needs polyloop's `testing` extra*hypothesis*"]
    )
    assert result.stderr.str().count("pip install 'polyloop[testing]'") == 1
    assert result.stderr.str().count("testing` extra") == 1
    assert "'hypothesis' cannot be imported" in result.stderr.str()
    assert "Traceback" not in result.stderr.str()


def test_pytest_asyncio_not_loaded_says_how_to_load_it(plain_project: Project) -> None:
    result = plain_project.pytester.runpytest_inprocess(
        *SANDBOX_FLAGS, "-p", "no:asyncio", "--polyloop-conformance"
    )
    assert result.ret == 4
    assert "installed but not loaded" in result.stderr.str()
    assert "Load it with `-p asyncio`" in result.stderr.str()


def test_pytest_asyncio_not_installed_says_what_to_install(plain_project: Project) -> None:
    hide(plain_project, "pytest_asyncio")
    result = run_child(plain_project, "-p", "no:asyncio", "--polyloop-conformance")
    assert result.ret == 4
    assert "needs pytest-asyncio, which is not installed" in result.stderr.str()
    assert "pip install 'polyloop[testing]'" in result.stderr.str()


def test_loading_the_plugin_imports_none_of_the_runtime_until_the_schema_is_asked_for() -> None:
    probe = (
        "import sys, pytest_polyloop.plugin\n"
        "def loaded(): return sorted(m for m in sys.modules if m.split('.')[0] == 'polyloop')\n"
        "print(loaded())\n"
        "print(pytest_polyloop.SCHEMA, 'polyloop.report' in loaded())\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["[]", "polyloop-conformance/2 True"]
