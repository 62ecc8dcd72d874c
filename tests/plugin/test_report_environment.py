"""What a conformance run records about where it ran (the report's environment and id, schema
``polyloop-conformance/2``), and the matrix on the terminal (``--polyloop-matrix``)."""

from __future__ import annotations

import platform

import pytest

import polyloop
from polyloop._base._extras import EXTRAS, extra_installed
from tests.plugin._sandbox import Project

EXECUTOR = """\
@pytest_polyloop.seam("action_executor", samples="samples", id="executor")
@pytest.fixture
def my_executor():
    return SandboxExecutor(broken={broken})
"""


def test_the_report_records_its_environment_and_a_report_id(project: Project) -> None:
    project.conftest("tests", EXECUTOR.format(broken=False))
    first = project.run("--polyloop-job", "py311-shard-1").report  # checked against the schema
    second = project.run().report
    assert first is not None
    assert second is not None
    assert first["environment"] == {
        "python": platform.python_version(),
        "pytest": pytest.__version__,
        "polyloop": polyloop.__version__,
        "os": platform.platform(terse=True),
        "extras": sorted(extra for extra in EXTRAS if extra_installed(extra)),
        "xdist_workers": 0,
        "job": "py311-shard-1",
        "search": {"mode": "seeded", "budget": 10, "examples": ".polyloop/examples"},
    }
    assert second["environment"]["job"] is None
    assert first["report_id"] != second["report_id"]  # each run is its own job in a merge


def test_the_matrix_is_printed_on_the_terminal_when_asked(project: Project) -> None:
    project.conftest("tests", EXECUTOR.format(broken=True))
    plain = project.run()
    assert "promise × implementation matrix" not in plain.output
    run = project.run("--polyloop-matrix")
    assert "promise × implementation matrix" in run.output
    assert "  1  action_executor  executor\n" in run.output
    assert "✗  action_executor." in run.output
