"""pytest entry point (``pytest11``: ``polyloop``): hook wiring only.

Passive by default: the plugin registers its options, ini keys, the ``polyloop_seam`` marker
and its two hookspecs, and does nothing else. ``--polyloop-conformance`` registers a
``ConformanceSession`` (``_session.py``), which wires discovery → generated items → pytest
results → outcomes → report; each step lives in its own module.
"""

from __future__ import annotations

import pytest

from pytest_polyloop import hookspecs
from pytest_polyloop._tagging import MARKER_NAME

# The suites live in polyloop.testing; an editable install is not rewritten unless asked,
# and this must happen before anything imports the kit.
pytest.register_assert_rewrite("polyloop.testing")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("polyloop", "polyloop contract conformance")
    group.addoption(
        "--polyloop-conformance",
        action="store_true",
        default=False,
        help="run polyloop's contract suites against every tagged seam fixture and hand-written "
        "suite subclass (and nothing else), and print the conformance report",
    )
    group.addoption(
        "--polyloop-seam",
        action="append",
        default=[],
        metavar="NAME",
        help="with --polyloop-conformance: only this seam (repeatable)",
    )
    group.addoption(
        "--polyloop-report",
        default=None,
        metavar="PATH.json",
        help="write the conformance report as JSON (schema polyloop-conformance/1)",
    )
    group.addoption(
        "--polyloop-report-md",
        default=None,
        metavar="PATH.md",
        help="write the conformance report as Markdown (also appended to $GITHUB_STEP_SUMMARY "
        "when that is set)",
    )
    group.addoption(
        "--polyloop-baseline",
        default=None,
        metavar="OLD.json",
        help="an earlier JSON report: a violated promise that never held there is 'pending' "
        "and does not fail the run; one that held there is a regression",
    )
    parser.addini(
        "polyloop_seams",
        type="linelist",
        default=[],
        help="seam implementations by fixture name, one per line: seam:fixture[:samples_fixture]",
    )
    parser.addini(
        "polyloop_waive",
        type="linelist",
        default=[],
        help="waivers, one per line: <implementation id> <promise id>: <reason>",
    )


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER_NAME}(name, *, implementation, promise): a generated polyloop contract item "
        "(set by pytest_polyloop; tag fixtures with @pytest_polyloop.seam(...))",
    )
    if config.getoption("polyloop_conformance"):
        # Imported here: a passive plugin loads neither the session nor the runtime it reads.
        from pytest_polyloop._session import ConformanceSession

        config.pluginmanager.register(ConformanceSession(config), "polyloop-conformance-session")
