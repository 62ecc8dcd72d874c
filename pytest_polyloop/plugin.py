"""pytest entry point (``pytest11``: ``polyloop``): hook wiring only.

Passive by default: the plugin registers its options, ini keys, the ``polyloop_seam`` marker
and its two hookspecs, and does nothing else. ``--polyloop-conformance`` registers a
``ConformanceSession`` (``_session.py``), which wires discovery → generated items → pytest
results → outcomes → report; each step lives in its own module.
"""

from __future__ import annotations

import linecache
import traceback
from collections.abc import Generator
from pathlib import Path

import pytest

from pytest_polyloop import _tagging, hookspecs
from pytest_polyloop._discovery import relative_path
from pytest_polyloop._tagging import MARKER_HINT, MARKER_NAME, MARKS_ON_FIXTURES

_PACKAGE = Path(_tagging.__file__).parent  # the plugin's own frames are never the user's

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


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests() -> Generator[None, None, None]:
    """Misused tags in a conftest are usage errors naming ``path:line``, not crash traces:
    pytest >= 9 refuses ``@pytest.mark.polyloop_seam`` on a fixture with a bare ``Failed``,
    and ``seam(...)`` refuses bad arguments (e.g. a waiver without a reason) when applied."""
    try:
        return (yield)
    except BaseException as error:
        tag_error = _seam_argument_error(error)
        if tag_error is not None:
            raise pytest.UsageError(f"{_where(tag_error)}: {tag_error}") from None
        if MARKS_ON_FIXTURES not in str(error) or MARKER_NAME not in _source_line(error):
            raise
        raise pytest.UsageError(
            f"{_where(error)}: {MARKS_ON_FIXTURES.lower()} on pytest >= 9; {MARKER_HINT}"
        ) from None


def _seam_argument_error(error: BaseException) -> BaseException | None:
    """The error ``seam(...)`` raised while a conftest was imported, if that is what failed."""
    cause = getattr(error, "cause", None)  # pytest's ConftestImportFailure wraps the error
    if not isinstance(cause, TypeError | ValueError):
        return None
    frames = traceback.extract_tb(cause.__traceback__)
    raised_by_seam = bool(frames) and Path(frames[-1].filename) == Path(_tagging.__file__)
    return cause if raised_by_seam else None


def _user_frames(error: BaseException) -> list[traceback.FrameSummary]:
    frames = traceback.extract_tb(error.__traceback__)
    return [
        frame
        for frame in frames
        if "site-packages" not in frame.filename
        and "<" not in frame.filename
        and Path(frame.filename).parent != _PACKAGE
    ]


def _where(error: BaseException) -> str:
    frames = _user_frames(error)
    if not frames:
        return "conftest"
    return f"{relative_path(Path(frames[-1].filename), Path.cwd())}:{frames[-1].lineno}"


def _source_line(error: BaseException) -> str:
    """The decorated function's source around the failing frame (the marker is written there)."""
    frames = _user_frames(error)
    if not frames:
        return ""
    lines = linecache.getlines(frames[-1].filename)
    start = (frames[-1].lineno or 1) - 1
    return "".join(lines[start : start + 5])


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


@pytest.hookimpl(tryfirst=True)  # before pytest-asyncio reads its ini key
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER_NAME}(name, *, implementation, promise): a generated polyloop contract item "
        "(set by pytest_polyloop; tag fixtures with @pytest_polyloop.seam(...))",
    )
    if config.getoption("polyloop_conformance"):
        # Imported here: a passive plugin loads neither the session nor the runtime it reads.
        from pytest_polyloop._session import ConformanceSession

        _default_fixture_loop_scope(config)
        config.pluginmanager.register(ConformanceSession(config), "polyloop-conformance-session")


_LOOP_SCOPE_KEY = "asyncio_default_fixture_loop_scope"


def _default_fixture_loop_scope(config: pytest.Config) -> None:
    """Conformance mode runs only generated suites, which need no pytest-asyncio configuration:
    set the key pytest-asyncio warns about, unless the user set it."""
    try:
        if config.getini(_LOOP_SCOPE_KEY):
            return
    except ValueError:
        return  # pytest-asyncio is not installed: the session says what to install
    # getini caches; there is no public setter (pytest 8.4–9.2 keep the cache under this name).
    config._inicache[_LOOP_SCOPE_KEY] = "function"
