"""pytest entry point (``pytest11``: ``polyloop``): hook wiring only.

Passive by default: the plugin registers its options, ini keys, the ``polyloop_seam`` marker
and its two hookspecs, and does nothing else. ``--polyloop-conformance`` registers a
``ConformanceSession`` (``_session.py``), which wires discovery → generated items → pytest
results → outcomes → report; each step lives in its own module.
"""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from pytest_polyloop import _time_limits, hookspecs
from pytest_polyloop._conftest_errors import marker_on_fixture_misuse, seam_argument_misuse
from pytest_polyloop._pytest_private import set_ini_default
from pytest_polyloop._report_text import escape_surrogates
from pytest_polyloop._tagging import MARKER_NAME

# The suites live in polyloop.testing; an editable install is not rewritten unless asked,
# and this must happen before anything imports the kit.
pytest.register_assert_rewrite("polyloop.testing")


# table of data: the plugin's command-line options, (flag, keyword arguments of addoption)
_OPTIONS: tuple[tuple[str, dict[str, Any]], ...] = (
    (
        "--polyloop-conformance",
        dict(
            action="store_true",
            default=False,
            help="run polyloop's contract suites against every tagged seam fixture and "
            "hand-written suite subclass (and nothing else), and print the conformance report",
        ),
    ),
    (
        "--polyloop-seam",
        dict(
            action="append",
            default=[],
            metavar="NAME",
            help="with --polyloop-conformance: only this seam (repeatable)",
        ),
    ),
    (
        "--polyloop-report",
        dict(
            default=None,
            metavar="PATH.json",
            help="write the conformance report as JSON (schema polyloop-conformance/2)",
        ),
    ),
    (
        "--polyloop-report-md",
        dict(
            default=None,
            metavar="PATH.md",
            help="write the conformance report as Markdown (also appended to $GITHUB_STEP_SUMMARY "
            "when that is set)",
        ),
    ),
    (
        "--polyloop-matrix",
        dict(
            action="store_true",
            default=False,
            help="with --polyloop-conformance: also print the promise x implementation matrix (a "
            "glyph per outcome, split into column groups to fit the terminal)",
        ),
    ),
    (
        "--polyloop-verbose",
        dict(
            action="store_true",
            default=False,
            help="with --polyloop-conformance: print the long texts in the terminal section too "
            "(why each unverifiable promise cannot be checked here and how to verify it "
            "yourself); -v does the same. The Markdown and HTML reports always have them",
        ),
    ),
    (
        "--polyloop-job",
        dict(
            default=None,
            metavar="LABEL",
            help="which CI job or shard this run is (recorded in the report's environment; "
            "polyloop report merge lists it)",
        ),
    ),
    (
        "--polyloop-baseline",
        dict(
            default=None,
            metavar="OLD.json",
            help="an earlier JSON report: a violated promise that never held there is 'pending' "
            "and does not fail the run; one that held there is a regression",
        ),
    ),
    (
        "--polyloop-timeout",
        dict(
            default=None,
            metavar="SECONDS",
            help="time limit for each phase (set-up, probe, tear-down) of every contract item; a "
            "probe that runs past it is violated ('timed out after N s in <promise>') and the "
            "session goes on (default 120; 0: no limit)",
        ),
    ),
    (
        "--polyloop-search",
        dict(
            default=None,
            metavar="seeded|wide",
            help="how the property-based promises search: 'seeded' (default) draws the same "
            "examples every run, seeded from the promise and the implementation; 'wide' (for "
            "nightly jobs) draws at random, budget times as many, and saves what fails in the "
            "examples directory, which every run replays",
        ),
    ),
    (
        "--polyloop-search-budget",
        dict(
            default=None,
            metavar="N",
            help="with --polyloop-search=wide: N times each promise's examples (default 10)",
        ),
    ),
    (
        "--polyloop-examples",
        dict(
            default=None,
            metavar="DIR",
            help="where a wide search saves the examples that failed, and every run replays "
            "them from (default .polyloop/examples under the rootdir)",
        ),
    ),
)

# table of data: the plugin's ini keys, (key, keyword arguments of addini)
_INI_KEYS: tuple[tuple[str, dict[str, Any]], ...] = (
    (
        "polyloop_timeout",
        dict(
            type="string",
            default="",
            help="time limit in seconds for each phase of every contract item "
            "(default 120; 0: none)",
        ),
    ),
    (
        "polyloop_seams",
        dict(
            type="linelist",
            default=[],
            help="seam implementations by fixture name, one per line: "
            "seam:fixture[:samples_fixture]",
        ),
    ),
    (
        "polyloop_waive",
        dict(
            type="linelist",
            default=[],
            help="waivers, one per line: <implementation id> <promise id>: <reason>",
        ),
    ),
    (
        "polyloop_search",
        dict(type="string", default="", help="seeded (default) or wide: see --polyloop-search"),
    ),
    (
        "polyloop_search_budget",
        dict(
            type="string",
            default="",
            help="the wide search's examples multiplier (default 10)",
        ),
    ),
    (
        "polyloop_examples",
        dict(
            type="string",
            default="",
            help="the examples directory (default .polyloop/examples under the rootdir)",
        ),
    ),
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("polyloop", "polyloop contract conformance")
    for flag, keywords in _OPTIONS:
        group.addoption(flag, **keywords)
    for key, keywords in _INI_KEYS:
        parser.addini(key, **keywords)


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests() -> Generator[None, None, None]:
    """Misused tags in a conftest are usage errors naming ``path:line``, not crash traces:
    pytest >= 9 refuses ``@pytest.mark.polyloop_seam`` on a fixture with a bare ``Failed``,
    and ``seam(...)`` refuses bad arguments (e.g. a waiver without a reason) when applied."""
    try:
        return (yield)
    except BaseException as error:
        here = Path.cwd()
        misuse = seam_argument_misuse(error, here) or marker_on_fixture_misuse(error, here)
        if misuse is None:
            raise
        raise pytest.UsageError(str(misuse)) from None


def pytest_exception_interact(
    node: pytest.Collector | pytest.Item, call: pytest.CallInfo[Any], report: Any
) -> None:
    """A conftest pytest imports while collecting (below the startup ones) whose ``seam(...)``
    refused its arguments: the directory's collection error is that one line, not the trace
    (the conformance session makes it a usage error)."""
    if not isinstance(report, pytest.CollectReport) or not report.failed or call.excinfo is None:
        return
    misuse = seam_argument_misuse(call.excinfo.value, Path.cwd())
    if misuse is not None:
        report.longrepr = str(misuse)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


@pytest.hookimpl(tryfirst=True)  # before pytest-asyncio reads its ini key
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER_NAME}(name, *, implementation, promise): a generated polyloop contract item "
        "(set by pytest_polyloop; tag fixtures with @pytest_polyloop.seam(...))",
    )
    _time_limits.configure(config)
    _check_search(config)
    if config.getoption("polyloop_conformance"):
        # Imported here: a passive plugin loads neither the session nor the runtime it reads.
        from pytest_polyloop._session import ConformanceSession

        _default_fixture_loop_scope(config)
        config.pluginmanager.register(ConformanceSession(config), "polyloop-conformance-session")


def _check_search(config: pytest.Config) -> None:
    """A bad --polyloop-search or budget is a usage error (exit 4), read by the kit's parser."""
    try:
        from polyloop.testing._shared._search import search_of
    except ImportError:  # the testing extra is missing: there is no search to configure
        return
    try:
        search_of(config)
    except ValueError as error:
        raise pytest.UsageError(f"polyloop: {error}") from None


# Every phase of a contract item runs under a watchdog, so no implementation hangs the session.
@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    with _time_limits.phase_limit(item, "setup"):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    with _time_limits.phase_limit(item, "call"):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, None, None]:
    with _time_limits.phase_limit(item, "teardown"):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    timed_out = _time_limits.timed_out_text(item, call.when) if call.excinfo else None
    if timed_out is not None:
        report.longrepr = timed_out
    escape_surrogates(report)
    return report


_LOOP_SCOPE_KEY = "asyncio_default_fixture_loop_scope"


def _default_fixture_loop_scope(config: pytest.Config) -> None:
    """Conformance mode runs only generated suites, which need no pytest-asyncio configuration:
    set the key pytest-asyncio warns about, unless the user set it."""
    try:
        if config.getini(_LOOP_SCOPE_KEY):
            return
    except ValueError:
        return  # pytest-asyncio is not installed: the session says what to install
    set_ini_default(config, _LOOP_SCOPE_KEY, "function")  # pytest has no public setter
