"""Samples reach the kit the same way whichever route found the implementation (issue #20).

The three routes are a hand-written suite subclass, ``@pytest_polyloop.seam(...)`` and the
``polyloop_seams`` ini option. Before, the run-store hint said "override the `store_samples`
fixture", which silently did nothing for a ``seam(...)``-discovered store: the suite's own
``store_samples`` shadowed the user's. Each test here follows a hint or a route and checks the
promise is then verified.
"""

from __future__ import annotations

import pytest

from tests.plugin._sandbox import Project

DURABLE = "run_store.prefix_durability"

STORES = """\
from polyloop.stores import SQLiteStore


def open_store_at(directory):
    return SQLiteStore(directory / "runs.db")
"""

SAMPLES = """\
@pytest.fixture
def {name}():
    return StoreSamples(factory="sandbox_stores:open_store_at")
"""

TAGGED = """\
import pytest
import pytest_polyloop
from polyloop.testing import StoreSamples
from sandbox_stores import open_store_at


@pytest_polyloop.seam("run_store"{samples})
@pytest.fixture
def my_store(tmp_path):
    return open_store_at(tmp_path)

"""

SUBCLASS = """\
import pytest
from polyloop.testing import RunStoreContract, StoreSamples
from sandbox_stores import open_store_at


class TestMyStore(RunStoreContract):
    @pytest.fixture
    def run_store(self, tmp_path):
        return open_store_at(tmp_path)

"""

INI = """\
[tool.pytest.ini_options]
asyncio_default_fixture_loop_scope = "function"
polyloop_seams = ["run_store:my_store{samples}"]
"""

ROOT_CONFTEST = """\
import pytest
from polyloop.testing import StoreSamples
from sandbox_stores import open_store_at


@pytest.fixture
def my_store(tmp_path):
    return open_store_at(tmp_path)

"""


def _write_route(project: Project, route: str, samples: str | None, fixture: str | None) -> str:
    """One store found through ``route``; ``samples`` is the fixture a tag (or ini line) names,
    ``fixture`` a samples fixture defined beside it (or as a method). The implementation id."""
    project.write("tests/sandbox_stores.py", STORES)
    defined = SAMPLES.format(name=fixture) if fixture else ""
    if route == "subclass":
        defined = defined.replace("():", "(self):")  # a method of the subclass
        method = "\n".join("    " + line for line in defined.splitlines())
        project.write("tests/test_store.py", SUBCLASS + method + "\n")
        return "tests/test_store.py::TestMyStore"
    tag = f", samples={samples!r}" if samples else ""
    if route == "seam":
        project.write("tests/conftest.py", TAGGED.format(samples=tag) + defined)
    else:
        project.write("pyproject.toml", INI.format(samples=f":{samples}" if samples else ""))
        project.write("conftest.py", ROOT_CONFTEST + defined)
        project.pytester.syspathinsert(project.path / "tests")
    return "my_store"


def _durability(project: Project, implementation: str) -> dict[str, object]:
    run = project.run("-k", "prefix_durability", "tests")
    return run.promise(implementation, DURABLE)


@pytest.mark.parametrize("route", ["subclass", "seam", "ini"])
def test_the_store_hint_names_a_route_that_works_for_the_route_that_found_the_store(
    project: Project, route: str
) -> None:
    implementation = _write_route(project, route, samples=None, fixture=None)
    before = _durability(project, implementation)
    assert before["outcome"] == "unverifiable"
    hint = str(before["verify_yourself"])
    # The hint's instruction for every route: a fixture named `store_samples` returning the
    # factory (a method of the subclass, or a fixture beside a tagged or ini-named one).
    assert "from a fixture named `store_samples`" in hint
    assert "a method of your RunStoreContract subclass" in hint
    assert "a fixture of that name beside it" in hint
    _write_route(project, route, samples=None, fixture="store_samples")
    after = _durability(project, implementation)
    assert after["outcome"] == "held", after


@pytest.mark.parametrize("route", ["seam", "ini"])
def test_the_store_hint_also_names_the_tag_route_and_it_works(project: Project, route: str) -> None:
    implementation = _write_route(project, route, samples=None, fixture=None)
    hint = str(_durability(project, implementation)["verify_yourself"])
    assert "@pytest_polyloop.seam('run_store', samples='<fixture>')" in hint
    assert "(in polyloop_seams: run_store:<fixture>:<samples fixture>)" in hint
    _write_route(project, route, samples="my_store_samples", fixture="my_store_samples")
    assert _durability(project, implementation)["outcome"] == "held"


REQUIRED = """\
@pytest.fixture
def action_samples():
    return samples_for_all()


@pytest_polyloop.seam("action_executor")
@pytest.fixture
def plain_executor():
    return SandboxExecutor()
"""

SUBCLASS_WITHOUT_SAMPLES = """\
import pytest
from polyloop.testing import ActionExecutorContract
from sandbox_executors import SandboxExecutor


class TestMine(ActionExecutorContract):
    @pytest.fixture
    def action_executor(self):
        return SandboxExecutor()
"""


def test_needed_samples_come_from_a_fixture_of_the_suites_name_on_every_route(
    project: Project,
) -> None:
    project.conftest(
        "tests", REQUIRED.replace("samples_for_all()", "action_samples_from_sandbox()")
    )
    project.write(
        "tests/conftest.py",
        (project.path / "tests/conftest.py")
        .read_text()
        .replace(
            "from sandbox_executors import SandboxExecutor, action_samples",
            "from sandbox_executors import SandboxExecutor\n"
            "from sandbox_executors import action_samples as action_samples_from_sandbox",
        ),
    )
    project.write("tests/test_mine.py", SUBCLASS_WITHOUT_SAMPLES)
    run = project.run()
    assert run.report is not None, run.output
    for implementation in ("plain_executor", "tests/test_mine.py::TestMine"):
        entry = run.implementation(implementation)
        assert entry["setup_error"] is None, entry["setup_error"]
        assert entry["counts"]["held"] >= 5, entry["counts"]


def test_a_tag_without_samples_and_no_fixture_of_that_name_says_both_routes(
    project: Project,
) -> None:
    project.write(
        "tests/conftest.py",
        "import pytest\nimport pytest_polyloop\nfrom sandbox_executors import SandboxExecutor\n\n\n"
        '@pytest_polyloop.seam("action_executor")\n@pytest.fixture\n'
        "def plain_executor():\n    return SandboxExecutor()\n",
    )
    run = project.run()
    assert run.ret == 4
    assert "samples='my_action_samples'" in run.output
    assert "or define a fixture named `action_samples` beside this one" in run.output


def test_seam_on_a_suite_subclass_is_refused_saying_how_samples_reach_it(
    project: Project,
) -> None:
    project.write(
        "tests/conftest.py",
        "import pytest_polyloop\nfrom polyloop.testing import RunStoreContract\n\n\n"
        '@pytest_polyloop.seam("run_store", samples="my_samples")\n'
        "class TestMine(RunStoreContract):\n    pass\n",
    )
    run = project.run()
    assert run.ret == 4
    assert "tags a fixture, not a class" in run.output
    assert "overriding the suite's samples fixture" in run.output


def test_a_store_samples_fixture_beside_a_tagged_store_is_read_not_shadowed(
    project: Project,
) -> None:
    implementation = _write_route(project, "seam", samples=None, fixture="store_samples")
    assert _durability(project, implementation)["outcome"] == "held"


EXECUTOR = """\
from polyloop import Action, ActionOutcome, ActionStatus
from polyloop.testing import ActionSamples


class RefusingExecutor:
    def __init__(self):
        self.broken = False

    async def execute(self, action):
        if self.broken:
            return ActionOutcome(status=ActionStatus.ENV_ERROR, observation="session gone")
        if action.text == "no_such_tool()":
            return ActionOutcome(status=ActionStatus.NOT_EXECUTED, observation="unknown tool")
        if action.text == "boom":
            return ActionOutcome(status=ActionStatus.EXECUTED, observation="Traceback: boom")
        return ActionOutcome(status=ActionStatus.EXECUTED, observation="ok")


async def break_session(executor):
    executor.broken = True


def samples(**opt_ins):
    return ActionSamples(
        executes_cleanly=Action(text="print(1)"),
        executes_but_errors=Action(text="boom"),
        **opt_ins,
    )
"""

EXECUTOR_FIXTURES = """\
import pytest
import pytest_polyloop
from polyloop import Action
from refusing import RefusingExecutor, break_session, samples


@pytest.fixture
def my_samples():
    return samples({opt_ins})


{tag}@pytest.fixture
def my_executor():
    return RefusingExecutor()
"""

EXECUTOR_SUBCLASS = """\
import pytest
from polyloop import Action
from polyloop.testing import ActionExecutorContract
from refusing import RefusingExecutor, break_session, samples


class TestMine(ActionExecutorContract):
    @pytest.fixture
    def action_executor(self):
        return RefusingExecutor()

    @pytest.fixture
    def action_samples(self):
        return samples({opt_ins})
"""

HINTS = {
    "action_executor.status_trigger_conditions": (
        "give ActionSamples(refused=",
        "refused=Action(text='no_such_tool()')",
    ),
    "action_executor.failure_is_a_return_value": (
        "give ActionSamples(break_environment=",
        "break_environment=break_session",
    ),
}


def _write_executor(project: Project, route: str, opt_ins: str) -> str:
    project.write("tests/refusing.py", EXECUTOR)
    if route == "subclass":
        project.write("tests/test_mine.py", EXECUTOR_SUBCLASS.format(opt_ins=opt_ins))
        return "tests/test_mine.py::TestMine"
    if route == "seam":
        tag = '@pytest_polyloop.seam("action_executor", samples="my_samples")\n'
        project.write("tests/conftest.py", EXECUTOR_FIXTURES.format(opt_ins=opt_ins, tag=tag))
    else:
        project.write(
            "pyproject.toml",
            INI.format(samples="").replace(
                "run_store:my_store", "action_executor:my_executor:my_samples"
            ),
        )
        project.write("conftest.py", EXECUTOR_FIXTURES.format(opt_ins=opt_ins, tag=""))
        project.pytester.syspathinsert(project.path / "tests")
    return "my_executor"


@pytest.mark.parametrize("route", ["subclass", "seam", "ini"])
def test_following_each_executor_hint_verifies_its_promise_on_every_route(
    project: Project, route: str
) -> None:
    implementation = _write_executor(project, route, opt_ins="")
    before = project.run("tests")
    for promise_id, (instruction, _) in HINTS.items():
        entry = before.promise(implementation, promise_id)
        assert entry["outcome"] == "unverifiable", entry
        assert instruction in str(entry["verify_yourself"])
    _write_executor(project, route, opt_ins=", ".join(opt_in for _, opt_in in HINTS.values()))
    after = project.run("tests")
    for promise_id in HINTS:
        assert after.outcome(implementation, promise_id) == "held", after.output
