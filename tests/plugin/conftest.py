"""Fixtures for the plugin's tests (the sandbox helpers are in ``_sandbox.py``).

pytester is loaded in ``pytest_configure`` rather than with ``pytest_plugins``: pytest refuses
``pytest_plugins`` in a conftest below the top level when the whole tree is collected
(``pytest tests``), and this keeps ``pytest tests/plugin`` and ``pytest tests`` both working.
"""

from __future__ import annotations

import hypothesis  # noqa: F401  (see below)
import pytest

import polyloop.testing  # noqa: F401  (see below)
from tests.plugin._sandbox import Project

# Imported once here so each in-process sandbox run reuses them: pytester drops the modules a
# run imported, and re-importing the kit and Hypothesis (both rewritten by pytest's assertion
# hook, uncached under PYTHONDONTWRITEBYTECODE) costs seconds per run.


def pytest_configure(config: pytest.Config) -> None:
    if not config.pluginmanager.has_plugin("pytester"):
        config.pluginmanager.import_plugin("pytester")


@pytest.fixture(autouse=True)
def _no_step_summary(monkeypatch: pytest.MonkeyPatch) -> None:
    """A sandbox run must not append to the real CI step summary of this repository."""
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Project:
    # The conformance section wraps prose at the terminal's width: a wide one keeps each
    # sandbox's lines whole whatever terminal runs this suite (tests of the wrapping set
    # their own COLUMNS after this).
    monkeypatch.setenv("COLUMNS", "1000")
    pytester.syspathinsert(pytester.path / "tests")
    return Project(pytester)
