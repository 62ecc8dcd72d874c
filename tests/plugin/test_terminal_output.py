"""The conformance section on the terminal: each failure once, prose wrapped at the terminal's
width with node ids whole, the full text kept in the JSON report."""

from __future__ import annotations

import pytest

from tests.plugin._sandbox import Project

# A parser whose feedback changes on every call: `decision_parser.is_deterministic` (a
# Hypothesis promise) fails with an AssertionError, whose message carries the falsifying
# example as a note.
PARSER = """\
import itertools

import pytest
import pytest_polyloop
from polyloop import Action, FinalAnswer, InvalidDecision, ModelReply
from polyloop.testing import ParserSamples

_calls = itertools.count()


class CountingParser:
    def parse(self, reply):
        if reply.text.startswith("ACT "):
            return Action(text=reply.text[4:])
        if reply.text.startswith("FIN "):
            return FinalAnswer(text=reply.text[4:])
        return InvalidDecision(feedback=f"reply ACT or FIN (call {{next(_calls)}})")


@pytest.fixture
def parser_samples_here():
    return ParserSamples(
        action_reply=ModelReply(text="ACT x"),
        invalid_reply=ModelReply(text="?"),
        final_reply=ModelReply(text="FIN y"),
    )


@pytest_polyloop.seam("decision_parser", samples="parser_samples_here", id="{id}")
@pytest.fixture
def counting_parser():
    return CountingParser()
"""
DETERMINISTIC = "decision_parser.is_deterministic"


def _section(output: str) -> list[str]:
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if "polyloop conformance" in line)
    end = next(i for i, line in enumerate(lines) if "short test summary" in line)
    return lines[start + 1 : end]


def test_a_hypothesis_failure_is_printed_once(project: Project) -> None:
    # On main the falsifying example appeared twice in the promise's detail (once inside the
    # assertion's crash message, once more from the traceback, with pytest's location line).
    project.write("tests/conftest.py", PARSER.format(id="counting"))
    run = project.run("-k", "is_deterministic")
    assert run.outcome("counting", DETERMINISTIC) == "violated"
    detail = run.promise("counting", DETERMINISTIC)["detail"]
    # The suite's fixed hard inputs run first, as Hypothesis explicit examples: one fails.
    assert _examples(detail) == 1, detail
    assert detail.count("ModelReply(text='w0x x\\nACT x'") == 1, detail
    assert ": AssertionError" not in detail  # pytest's "path:line: AssertionError" location
    section = "\n".join(_section(run.output))
    assert _examples(section) == 1, section
    assert section.count("ModelReply(text='w0x x\\nACT x'") == 1, section


def _examples(text: str) -> int:
    return sum(text.count(header) for header in ("Failing test case", "Failing explicit example"))


@pytest.mark.parametrize("columns", [60, 100])
def test_prose_wraps_at_the_terminal_width_and_node_ids_stay_whole(
    project: Project, monkeypatch: pytest.MonkeyPatch, columns: int
) -> None:
    # On main the promise lines were printed whole, some over 500 characters.
    long_id = "a_parser_whose_id_is_long_enough_to_matter_and_then_some_more_to_be_sure"
    project.write("tests/conftest.py", PARSER.format(id=long_id))
    monkeypatch.setenv("COLUMNS", str(columns))
    run = project.run()
    section = _section(run.output)
    example_or_command = False
    for line in section:
        if line.strip().startswith(("Failing test case", "Failing explicit example", "rerun: ")):
            example_or_command = True  # left whole from here on within the promise
        elif line.startswith("  ") and not line.startswith("      "):
            example_or_command = False  # the next promise's headline
        if len(line) > columns and not example_or_command:
            assert " " not in line.strip(), f"a prose line over {columns} columns: {line!r}"
    words = " ".join(section).split()
    assert long_id in words  # never split across lines
    assert f"'tests/conftest.py::DecisionParserContract__{long_id}'" in words
    promise = run.promise(long_id, DETERMINISTIC)
    assert promise["promise"] == (
        "Parsing the same reply again gives an equal decision of the same type."
    )
    # The full text stays in the JSON report: one line of the section holds the start of it,
    # and the report holds all of it, unwrapped.
    assert "\n" not in promise["promise"]
    assert "parsing the same reply again gave a different decision" in promise["detail"]
    assert " ".join(promise["promise"].split()) in " ".join(" ".join(section).split())
