"""The two hooks: a third party registers a sixth seam (from a conftest loaded during
collection, which only a historic hook still reaches) and receives the finished report."""

from __future__ import annotations

import json

from tests.plugin._sandbox import Project

CLOCK_CONFTEST = '''\
import json
import time

import pytest
import pytest_polyloop
from polyloop.testing import ContractBase


class ClockContract(ContractBase):
    seam = "clock"

    @pytest.fixture
    def clock(self):
        pytest.fail("override the clock fixture")

    def test_reads_seconds_as_a_float(self, clock):
        """now() returns seconds as a float."""
        assert isinstance(clock.now(), float)

    def test_never_goes_backwards(self, clock):
        """A later reading is never smaller than an earlier one."""
        first = clock.now()
        assert clock.now() >= first


@pytest.hookimpl(optionalhook=True)
def pytest_polyloop_register_seams(registry):
    registry.add("clock", ClockContract, None)


@pytest.hookimpl(optionalhook=True)
def pytest_polyloop_report(report, config):
    seen = {"verdict": report["verdict"], "ids": [i["id"] for i in report["implementations"]]}
    (config.rootpath / "hook-saw.json").write_text(json.dumps(seen))


class WallClock:
    def now(self):
        return time.time()


class IntegerClock:
    def now(self):
        return 3


@pytest_polyloop.seam("clock")
@pytest.fixture
def wall_clock():
    return WallClock()


@pytest_polyloop.seam("clock")
@pytest.fixture
def integer_clock():
    return IntegerClock()
'''


def test_a_sixth_seam_from_a_late_conftest_gets_its_suite_generated_and_reported(
    project: Project,
) -> None:
    project.write("tests/clocks/conftest.py", CLOCK_CONFTEST)
    run = project.run()
    assert run.outcome("wall_clock", "clock.reads_seconds_as_a_float") == "held"
    assert run.outcome("integer_clock", "clock.reads_seconds_as_a_float") == "violated"
    entry = run.implementation("wall_clock")
    assert entry["seam"] == "clock"
    assert entry["catalogue"] == entry["collected"] == 2
    assert run.promise("wall_clock", "clock.never_goes_backwards")["nodeid"] == (
        "tests/clocks/conftest.py::ClockContract__wall_clock::test_never_goes_backwards"
    )
    assert run.ret == 1


def test_a_report_hook_receives_the_report_object(project: Project) -> None:
    project.write("tests/clocks/conftest.py", CLOCK_CONFTEST)
    run = project.run()
    seen = json.loads((project.path / "hook-saw.json").read_text())
    assert run.report is not None
    assert seen == {
        "verdict": run.report["verdict"],
        "ids": [entry["id"] for entry in run.report["implementations"]],
    }
    assert seen["ids"] == ["integer_clock", "wall_clock"]


def test_a_hookimpl_with_optionalhook_does_not_break_a_session_without_the_plugin(
    project: Project,
) -> None:
    project.write("tests/clocks/conftest.py", CLOCK_CONFTEST)
    project.write("tests/clocks/test_plain.py", "def test_plain():\n    pass\n")
    result = project.pytester.runpytest_inprocess(
        "-p", "no:randomly", "-p", "no:cacheprovider", "-p", "no:polyloop"
    )
    result.assert_outcomes(passed=1)
