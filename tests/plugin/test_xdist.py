"""Under pytest-xdist the report is merged on the controller and equals the serial one."""

from __future__ import annotations

from typing import Any

from tests.plugin._sandbox import ERROR_PROMISE, HANDWRITTEN, MIXED_PROJECT, Project


def comparable(report: dict[str, Any] | None) -> dict[str, Any]:
    """The report without what legitimately differs between two runs: times, the report id and
    the environment (the xdist worker count)."""
    assert report is not None
    differs = ("created_at", "report_id", "environment")
    stripped = {key: value for key, value in report.items() if key not in differs}
    stripped["implementations"] = [
        {
            **entry,
            "promises": [
                {key: value for key, value in promise.items() if key != "duration_s"}
                for promise in entry["promises"]
            ],
        }
        for entry in report["implementations"]
    ]
    return stripped


def test_two_workers_produce_the_same_report_as_a_serial_run(project: Project) -> None:
    project.conftest("tests", MIXED_PROJECT)
    project.write("tests/test_handwritten.py", HANDWRITTEN)
    serial = project.run(subprocess=True)
    parallel = project.run("-p", "xdist", "-n", "2", subprocess=True)
    assert parallel.ret == serial.ret == 1
    assert "polyloop conformance" in parallel.output
    assert comparable(parallel.report) == comparable(serial.report)
    assert len(comparable(serial.report)["implementations"]) == 7
    assert parallel.report is not None
    assert serial.report is not None
    assert parallel.report["environment"]["xdist_workers"] == 2
    assert serial.report["environment"]["xdist_workers"] == 0
    # A fresh process loaded the plugin from its entry point, and the kit's asserts were
    # rewritten (the compared values appear), although polyloop is an editable install.
    detail = serial.promise("broken_executor", ERROR_PROMISE)["detail"]
    assert "assert <ActionStatus.ENV_ERROR: 'env_error'> is <ActionStatus.EXECUTED" in detail


def test_misuse_found_by_workers_is_a_usage_error_on_the_controller(project: Project) -> None:
    project.conftest(
        "tests", '@pytest_polyloop.seam("nope")\n@pytest.fixture\ndef typo():\n    pass\n'
    )
    run = project.run("-p", "xdist", "-n", "2", subprocess=True)
    assert run.ret == 4
    assert "tests/conftest.py:10: typo: unknown seam 'nope'" in run.output
    assert run.report is None
