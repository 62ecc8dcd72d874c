"""A lone surrogate in what a test prints, logs or fails with never costs the session its report.

The kit now draws lone surrogates into records and events (issue #21), and an implementation
may print, log or raise with them. pytest-xdist's channel refuses a string that is not valid
UTF-8: such a report used to end the whole ``-n 2`` session in an INTERNALERROR, with no
conformance report; serially, the JSON and Markdown writers raised ``UnicodeEncodeError``.
"""

from __future__ import annotations

import json

import pytest

from tests.plugin._sandbox import Project

SINKS = '''
import logging

import pytest
import pytest_polyloop


class ShoutingSink:
    """Logs and prints every event, and refuses one whose goal holds a lone surrogate."""

    async def emit(self, event):
        logging.getLogger("shouting").warning("event %r", event)
        print("event", repr(event.record), "\\ud800")
        goal = getattr(event.record, "goal", "")
        if any("\\ud800" <= c <= "\\udfff" for c in goal):
            raise ValueError(f"cannot ship {goal!r}: {goal}")


@pytest_polyloop.seam("event_sink")
@pytest.fixture
def shouting_sink():
    return ShoutingSink()
'''


@pytest.mark.parametrize("workers", [(), ("-p", "xdist", "-n", "2")], ids=["serial", "xdist"])
def test_printed_logged_and_raised_lone_surrogates_keep_the_report(
    project: Project, workers: tuple[str, ...]
) -> None:
    project.write("tests/conftest.py", SINKS)
    markdown = project.path / "report.md"
    run = project.run(*workers, f"--polyloop-report-md={markdown}", subprocess=True)
    assert "INTERNALERROR" not in run.output, run.output[-3000:]
    assert run.report is not None, run.output[-3000:]
    promise = run.promise("shouting_sink", "event_sink.accepts_every_event_kind")
    assert promise["outcome"] == "violated"
    assert "cannot ship" in promise["detail"]
    # Written as valid UTF-8, the surrogate escaped.
    raw = (project.path / f"report-{1}.json").read_bytes()
    raw.decode("utf-8")
    assert json.loads(raw) == run.report
    markdown.read_bytes().decode("utf-8")
