"""Tagging: the decorator in either order, the ini route, the pytest 8 marker, fixtures at
several depths and in test modules, parametrised and async fixtures; node ids addressable."""

from __future__ import annotations

import pytest

import pytest_polyloop
from polyloop.testing import ActionExecutorContract
from pytest_polyloop._tagging import read_tag
from tests.plugin._sandbox import ERROR_PROMISE, HANDWRITTEN, Project

#: The action-executor catalogue grows; the sandbox executors are judged on all of it.
EXECUTOR_PROMISES = len(ActionExecutorContract.promises())

FIVE_FIELDS = "action_executor.returns_all_five_fields"
PYTEST_MAJOR = int(pytest.__version__.split(".")[0])


def tagged(fixture: str, *decorators: str, body: str = "SandboxExecutor()") -> str:
    lines = "\n".join(decorators)
    return f"{lines}\ndef {fixture}():\n    return {body}\n\n\n"


SEAM = '@pytest_polyloop.seam("action_executor", samples="samples")'
FIXTURE = "@pytest.fixture"


def test_the_tag_reaches_the_function_pytest_stores_in_either_order() -> None:
    def build() -> object:
        return object()

    below = pytest.fixture(pytest_polyloop.seam("action_executor", samples="s")(build))
    above = pytest_polyloop.seam("run_store", id="mine")(pytest.fixture(lambda: None))
    for stored, seam in ((below, "action_executor"), (above, "run_store")):
        for link in (stored, stored.__wrapped__):  # type: ignore[attr-defined]
            tag = read_tag(link)
            assert tag is not None
            assert tag.seam == seam


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"name": "no such"}, "seam name"),
        ({"name": "action_executor", "waive": ["x"]}, "waive must map"),
        ({"name": "action_executor", "waive": {"a.b": ""}}, "a waiver needs a reason"),
        ({"name": "action_executor", "loop_scope": "forever"}, "loop_scope must be one of"),
        ({"name": "action_executor", "id": "a[1]"}, "id must be"),
        ({"name": "action_executor", "samples": 3}, "samples must be"),
    ],
)
def test_bad_seam_arguments_fail_where_they_are_written(
    arguments: dict[str, object], message: str
) -> None:
    with pytest.raises((TypeError, ValueError), match=message):
        pytest_polyloop.seam(**arguments)  # type: ignore[arg-type]


def test_decorator_above_and_below_pytest_fixture_both_generate_a_suite(project: Project) -> None:
    project.conftest("tests", tagged("above", SEAM, FIXTURE) + tagged("below", FIXTURE, SEAM))
    run = project.run()
    assert run.outcome("above", FIVE_FIELDS) == "held"
    assert run.outcome("below", FIVE_FIELDS) == "held"
    assert run.ret == 0, run.output


def test_fixtures_at_several_depths_and_in_test_modules_live_where_they_are_defined(
    project: Project,
) -> None:
    project.conftest("tests", tagged("top", SEAM, FIXTURE))
    project.conftest("tests/a", tagged("middle", SEAM, FIXTURE))
    project.conftest("tests/a/b", tagged("deep", SEAM, FIXTURE))
    project.write(
        "tests/a/test_module.py",
        "import pytest\nimport pytest_polyloop\nfrom sandbox_executors import SandboxExecutor\n\n"
        + tagged("in_module", SEAM, FIXTURE),
    )
    run = project.run()
    assert run.ret == 0, run.output
    where = {
        "top": "tests/conftest.py::ActionExecutorContract__top::",
        "middle": "tests/a/conftest.py::ActionExecutorContract__middle::",
        "deep": "tests/a/b/conftest.py::ActionExecutorContract__deep::",
        "in_module": "tests/a/test_module.py::ActionExecutorContract__in_module::",
    }
    for implementation, prefix in where.items():
        entry = run.promise(implementation, FIVE_FIELDS)
        assert entry["nodeid"] == prefix + "test_returns_all_five_fields"
        assert entry["outcome"] == "held"
    assert run.implementation("deep")["source"] == "tests/a/b/conftest.py:10"


def test_a_generated_node_id_can_be_rerun_on_its_own(project: Project) -> None:
    project.conftest("tests/a", tagged("middle", SEAM, FIXTURE))
    nodeid = "tests/a/conftest.py::ActionExecutorContract__middle::test_returns_all_five_fields"
    run = project.run(nodeid)
    run.result.assert_outcomes(passed=1)
    implementation = run.implementation("middle")
    assert implementation["collected"] == 1
    assert "action_executor.repeated_execution_keeps_status" in implementation["missing"]
    assert run.report is not None
    assert run.report["verdict"] == "incomplete"  # deselected promises: never a trivial pass
    assert run.ret == 1


def test_a_directory_argument_includes_fixtures_of_conftests_above_it(project: Project) -> None:
    project.conftest("tests", tagged("top", SEAM, FIXTURE))
    project.conftest("tests/a", tagged("middle", SEAM, FIXTURE))
    project.write("tests/b/test_x.py", "def test_x():\n    pass\n")
    run = project.run("tests/a")
    assert run.report is not None
    assert sorted(entry["id"] for entry in run.report["implementations"]) == ["middle", "top"]
    assert run.ret == 0, run.output


def test_a_parametrised_fixture_is_one_implementation_per_param(project: Project) -> None:
    project.conftest(
        "tests",
        tagged(
            "executor",
            SEAM,
            '@pytest.fixture(params=["sound", "broken"])',
            body='SandboxExecutor(broken=request.param == "broken")',
        ).replace("def executor():", "def executor(request):"),
    )
    run = project.run()
    assert run.outcome("executor[sound]", ERROR_PROMISE) == "held"
    assert run.outcome("executor[broken]", ERROR_PROMISE) == "violated"
    assert run.promise("executor[broken]", ERROR_PROMISE)["nodeid"] == (
        "tests/conftest.py::ActionExecutorContract__executor::"
        "test_action_error_is_a_normal_observation_not_an_env_error[broken]"
    )
    assert run.implementation("executor[sound]")["collected"] == EXECUTOR_PROMISES


ASYNC_MODULE_FIXTURE = """\
import pytest_asyncio
from sandbox_executors import LoopBoundExecutor


@pytest_polyloop.seam("action_executor", samples="samples"{loop_scope})
@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared_executor():
    yield LoopBoundExecutor()
"""


def test_an_async_module_scoped_fixture_runs_in_its_loop_scope(project: Project) -> None:
    project.conftest("tests", ASYNC_MODULE_FIXTURE.format(loop_scope=', loop_scope="module"'))
    run = project.run()
    assert run.counts("shared_executor")["violated"] == 0, run.output
    assert run.counts("shared_executor")["held"] == 5
    assert run.ret == 0


def test_without_its_loop_scope_the_same_fixture_fails_on_a_different_loop(
    project: Project,
) -> None:
    project.conftest("tests", ASYNC_MODULE_FIXTURE.format(loop_scope=""))
    run = project.run()
    assert run.counts("shared_executor")["violated"] > 0
    assert "different loop" in run.output


def test_the_ini_route_tags_a_fixture_from_an_installed_plugin(project: Project) -> None:
    project.write(
        "sandbox_plugin.py",
        """\
        import pytest
        from sandbox_executors import SandboxExecutor, action_samples


        @pytest.fixture
        def plugin_executor():
            return SandboxExecutor(broken=True)


        @pytest.fixture
        def plugin_samples():
            return action_samples()
        """,
    )
    project.pytester.syspathinsert(project.path)
    project.write(
        "pyproject.toml",
        f"""\
        [tool.pytest.ini_options]
        asyncio_default_fixture_loop_scope = "function"
        polyloop_seams = ["action_executor:plugin_executor:plugin_samples"]
        polyloop_waive = ["plugin_executor {ERROR_PROMISE}: the plugin's sandbox has no tools"]
        """,
    )
    run = project.run("-p", "sandbox_plugin")
    entry = run.promise("plugin_executor", ERROR_PROMISE)
    assert entry["outcome"] == "waived"
    assert entry["waiver_reason"] == "the plugin's sandbox has no tools"
    assert entry["nodeid"].startswith("pyproject.toml::ActionExecutorContract__plugin_executor::")
    assert run.implementation("plugin_executor")["source"] == "pyproject.toml"
    assert run.ret == 0, run.output


def test_an_ini_line_naming_a_missing_fixture_is_a_usage_error(project: Project) -> None:
    project.write(
        "pyproject.toml",
        '[tool.pytest.ini_options]\nasyncio_default_fixture_loop_scope = "function"\n'
        'polyloop_seams = ["action_executor:ghost:samples"]\n',
    )
    run = project.run()
    assert run.ret == 4
    assert "pyproject.toml: ghost: polyloop_seams names fixture 'ghost'" in run.output


@pytest.mark.skipif(PYTEST_MAJOR >= 9, reason="pytest >= 9 refuses marks on fixtures")
def test_the_polyloop_seam_marker_under_pytest_fixture_works_on_pytest_8(project: Project) -> None:
    project.conftest(
        "tests",
        tagged(
            "marked",
            FIXTURE,
            '@pytest.mark.polyloop_seam("action_executor", samples="samples")',
        ),
    )
    run = project.run()
    assert run.outcome("marked", FIVE_FIELDS) == "held"


def test_generated_items_carry_the_polyloop_seam_marker(project: Project) -> None:
    project.conftest("tests", tagged("good", SEAM, FIXTURE))
    project.write("tests/test_plain.py", "def test_plain():\n    pass\n")
    selected = project.run("-m", "polyloop_seam")
    selected.result.assert_outcomes(passed=5, skipped=EXECUTOR_PROMISES - 5, deselected=1)
    excluded = project.run("-m", "not polyloop_seam")
    excluded.result.assert_outcomes(deselected=EXECUTOR_PROMISES + 1)


def test_polyloop_seam_option_narrows_to_one_seam(project: Project) -> None:
    project.conftest(
        "tests",
        tagged("good", SEAM, FIXTURE)
        + '@pytest_polyloop.seam("event_sink")\n@pytest.fixture\n'
        + "def sink():\n    raise RuntimeError('not built when only executors run')\n",
    )
    run = project.run("--polyloop-seam", "action_executor")
    assert run.report is not None
    assert [entry["id"] for entry in run.report["implementations"]] == ["good"]
    assert run.ret == 0, run.output


def test_without_the_flag_the_plugin_is_passive(project: Project) -> None:
    project.conftest("tests", tagged("good", SEAM, FIXTURE))
    project.write("tests/test_plain.py", "def test_plain():\n    pass\n")
    project.write("tests/test_handwritten.py", HANDWRITTEN)
    result = project.pytester.runpytest_inprocess("-p", "no:randomly", "-p", "no:cacheprovider")
    # No generated suite for `good`; the three hand-written subclasses run as ordinary tests
    # (three catalogues: one replaced test fails; a replaced test that passes under a waiver
    # passes; the rest of what does not pass skips).
    skipped = 3 * EXECUTOR_PROMISES - 15 - 1
    result.assert_outcomes(passed=1 + 15, failed=1, skipped=skipped)
    assert "polyloop conformance" not in result.stdout.str()


def test_an_ini_waiver_for_an_unknown_implementation_is_warned_about(project: Project) -> None:
    project.conftest("tests", tagged("good", SEAM, FIXTURE))
    project.write(
        "pyproject.toml",
        f"""\
        [tool.pytest.ini_options]
        asyncio_default_fixture_loop_scope = "function"
        polyloop_waive = ["godo {ERROR_PROMISE}: typo in the implementation id"]
        """,
    )
    run = project.run()
    assert "polyloop_waive names 'godo', which is not a tagged or ini-named" in run.output
    assert run.outcome("good", ERROR_PROMISE) == "held"
