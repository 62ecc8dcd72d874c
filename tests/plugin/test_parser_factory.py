"""``ParserSamples.factory`` reaches ``decision_parser.is_deterministic_across_processes`` through
every discovery route: without it the promise is ``unverifiable`` with a hint, and following the
hint (adding the factory to the samples the tag or the ``polyloop_seams`` line names) turns it
into a verdict — ``violated`` for a parser that follows a set's order, ``held`` for its twin."""

from __future__ import annotations

from tests.plugin._sandbox import Project

ACROSS = "decision_parser.is_deterministic_across_processes"

PARSERS = """\
from polyloop import ModelReply
from polyloop.testing import ParserSamples
from tests.kit import broken_parsers


def replies(factory=None):
    return ParserSamples(
        action_reply=ModelReply(text="ACT ls -la"),
        invalid_reply=ModelReply(text="I think I will look around."),
        final_reply=ModelReply(text="FINAL 42"),
        factory=factory,
    )


@pytest_polyloop.seam("decision_parser", samples="plain_replies")
@pytest.fixture
def tagged_parser():
    return broken_parsers.PicksTheFirstDistinct()


@pytest.fixture
def plain_replies():
    return replies({tagged_factory})


@pytest_polyloop.seam("decision_parser", samples="set_replies")
@pytest.fixture
def set_parser():
    return broken_parsers.PicksAnyOfASet()


@pytest.fixture
def set_replies():
    return replies("tests.kit.broken_parsers:PicksAnyOfASet")
"""

PLUGIN = """\
import pytest
from polyloop import ModelReply
from polyloop.testing import ParserSamples
from tests.kit import broken_parsers


@pytest.fixture
def ini_parser():
    return broken_parsers.ArgumentsFromSortedSets()


@pytest.fixture
def ini_replies():
    return ParserSamples(
        action_reply=ModelReply(text="ACT ls -la"),
        invalid_reply=ModelReply(text="I think I will look around."),
        factory={ini_factory},
    )
"""

INI = """\
[tool.pytest.ini_options]
asyncio_default_fixture_loop_scope = "function"
polyloop_seams = ["decision_parser:ini_parser:ini_replies"]
"""


def _write(project: Project, *, factories: bool) -> None:
    tagged = repr("tests.kit.broken_parsers:PicksTheFirstDistinct") if factories else "None"
    ini = repr("tests.kit.broken_parsers:ArgumentsFromSortedSets") if factories else "None"
    project.conftest("tests", PARSERS.replace("{tagged_factory}", tagged))
    project.write("sandbox_plugin.py", PLUGIN.replace("{ini_factory}", ini))
    project.write("pyproject.toml", INI)


def test_the_parser_factory_turns_the_cross_process_promise_on_for_every_route(
    project: Project,
) -> None:
    project.pytester.syspathinsert(project.path)
    _write(project, factories=False)
    run = project.run("-p", "sandbox_plugin", "-k", "across_processes")
    assert run.outcome("set_parser", ACROSS) == "violated", run.output
    assert "different hash seeds" in run.output
    for implementation in ("tagged_parser", "ini_parser"):
        entry = run.promise(implementation, ACROSS)
        assert entry["outcome"] == "unverifiable", run.output
        hint = entry["verify_yourself"]
        assert "ParserSamples(..., factory='package.module:callable')" in hint
        assert "`parser_samples` override" in hint
        assert "@pytest_polyloop.seam(..., samples=...)" in hint
        assert "polyloop_seams" in hint

    _write(project, factories=True)  # the hint, followed
    run = project.run("-p", "sandbox_plugin", "-k", "across_processes")
    for implementation in ("tagged_parser", "ini_parser"):
        assert run.outcome(implementation, ACROSS) == "held", run.output
    assert run.outcome("set_parser", ACROSS) == "violated", run.output
