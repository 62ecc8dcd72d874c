"""A conftest that failed to import because a tag in it is misused: the one ``path:line`` line
that replaces pytest's conftest-import trace, whether pytest imported the conftest at startup
(``pytest_load_initial_conftests``) or while collecting a directory below them."""

from __future__ import annotations

import linecache
import traceback
from pathlib import Path

from pytest_polyloop import _tagging
from pytest_polyloop._discovery import Misuse, relative_path
from pytest_polyloop._tagging import MARKER_HINT, MARKER_NAME, MARKS_ON_FIXTURES

__all__ = ["marker_on_fixture_misuse", "seam_argument_misuse"]

_PACKAGE = Path(_tagging.__file__).parent  # the plugin's own frames are never the user's


def seam_argument_misuse(error: BaseException, base: Path) -> Misuse | None:
    """The misuse if ``seam(...)`` refused its arguments while a conftest was imported (``error``
    is pytest's ``ConftestImportFailure``), naming the call's line relative to ``base``."""
    cause = getattr(error, "cause", None)  # ConftestImportFailure wraps the error seam() raised
    if not isinstance(cause, TypeError | ValueError):
        return None
    frames = traceback.extract_tb(cause.__traceback__)
    if not frames or Path(frames[-1].filename) != Path(_tagging.__file__):
        return None
    return Misuse(_where(cause, base), "", str(cause))


def marker_on_fixture_misuse(error: BaseException, base: Path) -> Misuse | None:
    """The misuse if pytest >= 9 refused ``@pytest.mark.polyloop_seam`` on a fixture (a bare
    ``Failed``, which pytest does not wrap: it is no ``Exception``)."""
    if MARKS_ON_FIXTURES not in str(error) or MARKER_NAME not in _source_line(error):
        return None
    problem = f"{MARKS_ON_FIXTURES.lower()} on pytest >= 9; {MARKER_HINT}"
    return Misuse(_where(error, base), "", problem)


def _user_frames(error: BaseException) -> list[traceback.FrameSummary]:
    frames = traceback.extract_tb(error.__traceback__)
    return [
        frame
        for frame in frames
        if "site-packages" not in frame.filename
        and "<" not in frame.filename
        and Path(frame.filename).parent != _PACKAGE
    ]


def _where(error: BaseException, base: Path) -> str:
    frames = _user_frames(error)
    if not frames:
        return "conftest"
    return f"{relative_path(Path(frames[-1].filename), base)}:{frames[-1].lineno}"


def _source_line(error: BaseException) -> str:
    """The decorated function's source around the failing frame (the marker is written there)."""
    frames = _user_frames(error)
    if not frames:
        return ""
    lines = linecache.getlines(frames[-1].filename)
    start = (frames[-1].lineno or 1) - 1
    return "".join(lines[start : start + 5])
