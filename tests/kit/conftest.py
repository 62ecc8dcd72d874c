"""The kit's tests run suites in pytester sandboxes.

pytester is loaded in ``pytest_configure`` rather than with ``pytest_plugins = ["pytester"]``:
pytest refuses ``pytest_plugins`` in a conftest below the top level when the whole tree is
collected (``pytest`` from the repository root), and this keeps ``pytest tests/kit`` and
``pytest`` both working.
"""

from __future__ import annotations

import hypothesis  # noqa: F401  (see below)
import pytest

import polyloop.testing  # noqa: F401  (see below)
import tests.kit.broken  # noqa: F401

# Imported once here so every in-process sandbox run reuses them: pytester drops the modules a
# run imported, and re-importing the kit and Hypothesis (rewritten by pytest's assertion hook)
# costs seconds per run.


def pytest_configure(config: pytest.Config) -> None:
    if not config.pluginmanager.has_plugin("pytester"):
        config.pluginmanager.import_plugin("pytester")
