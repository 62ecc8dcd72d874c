"""The conformance section reads at a glance (issue #32): implementations a conftest leaves out
are in the report, the long "verify it yourself" texts only with ``-v``/``--polyloop-verbose``."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_polyloop import SeamRegistry
from tests.plugin._sandbox import Project

LEAVES_OUT = """\
@pytest_polyloop.seam("action_executor", samples="samples")
@pytest.fixture
def good_executor():
    return SandboxExecutor()


def pytest_polyloop_register_seams(registry):
    registry.leave_out(
        "PostgresStore",
        seam="run_store",
        extra="postgres",
        hint="the `postgres` extra (pip install 'polyloop[postgres]')",
        ids=["tests/test_pg.py::TestPostgres"],
    )
    registry.leave_out("FancySink", hint="the fancy binaries")
"""

PG_LINE = (
    "PostgresStore is not judged in this conformance run: it needs the `postgres` extra "
    "(pip install 'polyloop[postgres]')"
)


def test_a_left_out_implementation_is_in_the_report_and_the_terminal_once(
    project: Project,
) -> None:
    project.conftest("tests", LEAVES_OUT)
    run = project.run()
    assert run.report is not None
    assert run.report["left_out"] == [
        {
            "implementation": "FancySink",
            "seam": None,
            "extra": None,
            "hint": "the fancy binaries",
            "ids": [],
        },
        {
            "implementation": "PostgresStore",
            "seam": "run_store",
            "extra": "postgres",
            "hint": "the `postgres` extra (pip install 'polyloop[postgres]')",
            "ids": ["tests/test_pg.py::TestPostgres"],
        },
    ]
    assert run.report["verdict"] == "conformant"  # not judged: not in the verdict
    assert run.ret == 0
    assert run.output.count(PG_LINE) == 1, run.output
    assert run.output.count("FancySink is not judged in this conformance run") == 1


def test_a_seam_filter_leaves_out_only_that_seams_implementations(project: Project) -> None:
    project.conftest("tests", LEAVES_OUT)
    run = project.run("--polyloop-seam", "action_executor")
    assert run.report is not None
    assert [entry["implementation"] for entry in run.report["left_out"]] == ["FancySink"]


def test_left_out_reaches_the_report_from_xdist_workers(project: Project) -> None:
    project.conftest("tests", LEAVES_OUT)
    run = project.run("-n", "2", subprocess=True)
    assert run.report is not None
    assert [e["implementation"] for e in run.report["left_out"]] == ["FancySink", "PostgresStore"]
    assert run.output.count(PG_LINE) == 1, run.output


SINK = """\
from polyloop.events import MemorySink


@pytest_polyloop.seam("event_sink")
@pytest.fixture
def memory_sink():
    return MemorySink()
"""


@pytest.mark.parametrize("flag", [None, "-v", "--polyloop-verbose"])
def test_the_verify_it_yourself_texts_are_printed_only_when_asked(
    project: Project, flag: str | None
) -> None:
    project.conftest("tests", SINK)
    markdown = project.path / "report.md"
    run = project.run(f"--polyloop-report-md={markdown}", *([flag] if flag else []))
    assert run.report is not None
    unverifiable = [
        promise
        for promise in run.report["implementations"][0]["promises"]
        if promise["outcome"] == "unverifiable" and not promise.get("kept_by")
    ]
    assert unverifiable, run.output
    section = run.output.split("polyloop conformance", 1)[1]
    long_text = f"verify it yourself: {unverifiable[0]['verify_yourself']}"
    if flag is None:
        assert " ".join(long_text.split()) not in " ".join(section.split())
        assert "unverifiable here (verify it yourself):" not in section
        assert "rerun with -v (or --polyloop-verbose)" in section
    else:
        assert "unverifiable here (verify it yourself):" in section
        assert " ".join(long_text.split()) in " ".join(section.split())
    assert "\nnext: " in section
    # The Markdown view always has them.
    assert "verify it yourself" in markdown.read_text(encoding="utf-8")


def _registry() -> SeamRegistry:
    return SeamRegistry(object)


@pytest.mark.parametrize(
    ("args", "keywords", "problem"),
    [
        (("",), {"hint": "x"}, "needs an implementation name"),
        ((None,), {"hint": "x"}, "needs an implementation name"),
        (("X",), {"hint": ""}, "needs a hint"),
        (("X",), {"hint": None}, "needs a hint"),
        (("X",), {"hint": "h", "extra": ""}, "extra must be a name or None"),
        (("X",), {"hint": "h", "seam": 3}, "seam must be a name or None"),
        (("X",), {"hint": "h", "ids": "abc"}, "ids must be a list of ids"),
        (("X",), {"hint": "h", "ids": ["a", ""]}, "ids must be a list of ids"),
    ],
)
def test_leave_out_refuses_what_it_cannot_report(
    args: tuple[Any, ...], keywords: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ValueError, match=problem):
        _registry().leave_out(*args, **keywords)


def test_leaving_one_implementation_out_twice_differently_is_an_error() -> None:
    registry = _registry()
    registry.leave_out("X", hint="h")
    registry.leave_out("X", hint="h")  # the same: once
    assert registry.left_out() == [
        {"implementation": "X", "seam": None, "extra": None, "hint": "h", "ids": []}
    ]
    with pytest.raises(ValueError, match="already left out with other details"):
        registry.leave_out("X", hint="other")
