"""Discovery: tagged fixtures in conftest and test modules, ini-declared fixtures, misuse.

Discovery reads module objects (conftest modules come from the plugin manager, test modules
from their collector) — never pytest's private fixture tables. It returns plain data
(:class:`Implementation`) and :class:`Misuse` lines; it does not touch the collection tree.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from _pytest.fixtures import getfixturemarker  # the one way to recognise a fixture object

from pytest_polyloop._registry import RegisteredSeam, SeamRegistry
from pytest_polyloop._tagging import SeamTag, make_tag, read_tag

__all__ = [
    "Implementation",
    "Misuse",
    "check_waivers",
    "implementation_from_tag",
    "parse_ini_seams",
    "parse_ini_waivers",
    "tagged_fixtures",
]

HOW_TO_TAG = """\
tag the fixture that builds your implementation, e.g. in tests/conftest.py:

    import pytest
    import pytest_polyloop

    @pytest_polyloop.seam("action_executor", samples="my_action_samples")
    @pytest.fixture
    def my_executor():
        return MyExecutor()

or name it in your pytest configuration (for fixtures that come from installed plugins):

    [tool.pytest.ini_options]
    polyloop_seams = ["action_executor:my_executor:my_action_samples"]

or write a subclass of a suite yourself (class TestMyExecutor(ActionExecutorContract))."""


@dataclass(frozen=True, slots=True)
class Misuse:
    """A usage error, printed as ``path:line: fixture: problem`` (``path:line: problem`` when
    no fixture is known yet, e.g. ``seam(...)`` refused its arguments)."""

    location: str
    fixture: str
    problem: str

    def __str__(self) -> str:
        subject = f" {self.fixture}:" if self.fixture else ""
        return f"{self.location}:{subject} {self.problem}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Implementation:
    """One tagged fixture (before parametrisation): what the generated suite needs."""

    id: str
    seam: str
    fixture: str
    samples: str | None
    waive: Mapping[str, str] = field(default_factory=dict)
    loop_scope: str = "function"
    source: str
    route: str


@dataclass(frozen=True, slots=True)
class TaggedFixture:
    """A fixture object in a module, with its tag, fixture name and ``path:line``."""

    fixture: str
    tag: SeamTag
    source: str


def source_of(function: object, rootpath: Path) -> str:
    """``path:line`` of a function's ``def`` (path relative to ``rootpath`` when inside it)."""
    inner = inspect.unwrap(function) if callable(function) else function
    code = getattr(inner, "__code__", None)
    filename = str(getattr(code, "co_filename", None) or getattr(inner, "__module__", "?"))
    line = getattr(code, "co_firstlineno", 0)
    return f"{relative_path(Path(filename), rootpath)}:{line}"


def relative_path(path: Path, rootpath: Path) -> str:
    """``path`` relative to ``rootpath`` with ``/`` separators, or absolute if outside it."""
    try:
        return path.resolve().relative_to(rootpath.resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def tagged_fixtures(
    module: types.ModuleType, rootpath: Path
) -> tuple[list[TaggedFixture], list[Misuse]]:
    """Every tagged fixture defined in (or imported into) ``module``, and every misused tag.

    A tag on something that is not a fixture, or a malformed ``polyloop_seam`` marker, is a
    misuse.
    """
    found: list[TaggedFixture] = []
    misuses: list[Misuse] = []
    for attribute, value in list(vars(module).items()):
        if isinstance(value, type | types.ModuleType):
            continue
        try:
            tag = read_tag(value)
        except (TypeError, ValueError) as error:
            misuses.append(Misuse(source_of(value, rootpath), attribute, str(error)))
            continue
        if tag is None:
            continue
        marker = getfixturemarker(value)
        if marker is None:
            misuses.append(
                Misuse(
                    source_of(value, rootpath),
                    attribute,
                    "tagged as a polyloop seam but is not a fixture: put @pytest.fixture on it "
                    "(with @pytest_polyloop.seam(...) above or below)",
                )
            )
            continue
        name = marker.name or getattr(value, "name", None) or attribute
        found.append(TaggedFixture(fixture=name, tag=tag, source=source_of(value, rootpath)))
    return found, misuses


def ini_line_of(inipath: Path | None, location: str) -> Callable[[str], str]:
    """``text → path:line`` of the first ini line containing ``text`` (``location`` if none)."""
    try:
        lines = inipath.read_text(encoding="utf-8").splitlines() if inipath else []
    except (OSError, UnicodeDecodeError):
        lines = []

    def where(text: str) -> str:
        number = next((n for n, line in enumerate(lines, 1) if text in line), None)
        return f"{location}:{number}" if number else location

    return where


def implementation_from_tag(
    tagged: TaggedFixture,
    registry: SeamRegistry,
    ini_waivers: Mapping[str, Mapping[str, str]],
    ini_where: Callable[[str], str] = lambda text: "ini",
) -> tuple[Implementation | None, list[Misuse]]:
    """Check a tag against the registry and the suite's catalogue; build the implementation.

    A waiver's problem is blamed where it was written: the tag's source, or the ini line."""
    tag = tagged.tag
    registered = registry.get(tag.seam)
    if registered is None:
        known = ", ".join(registry.names()) or "(none registered)"
        return None, [
            Misuse(
                tagged.source,
                tagged.fixture,
                f"unknown seam {tag.seam!r}; the registered seams are: {known}",
            )
        ]
    implementation_id = tag.id or tagged.fixture
    from_ini = ini_waivers.get(implementation_id, {})
    misuses = [
        Misuse(tagged.source, tagged.fixture, p) for p in check_waivers(registered, tag.waive)
    ]
    for promise_id, reason in from_ini.items():
        where = ini_where(f"{implementation_id} {promise_id}")
        problems = check_waivers(registered, {promise_id: reason})
        misuses += [Misuse(where, tagged.fixture, problem) for problem in problems]
    if misuses:
        return None, misuses
    waive = {**tag.waive, **from_ini}
    return (
        Implementation(
            id=implementation_id,
            seam=tag.seam,
            fixture=tagged.fixture,
            samples=tag.samples if registered.samples_target is not None else None,
            waive=waive,
            loop_scope=tag.loop_scope or "function",
            source=tagged.source,
            route=tag.route,
        ),
        [],
    )


def check_waivers(registered: RegisteredSeam, waive: Mapping[str, str]) -> list[str]:
    """Problems with a waiver mapping: unknown promise ids, unverifiable promises."""
    catalogue = {spec.id: spec for spec in registered.suite.promises()}
    problems = []
    for promise_id in waive:
        spec = catalogue.get(promise_id)
        if spec is None:
            problems.append(
                f"waiver names unknown promise {promise_id!r}; the {registered.name} promises "
                f"are: {', '.join(sorted(catalogue))}"
            )
        elif spec.kind == "unverifiable":
            problems.append(
                f"waiver names {promise_id!r}, an unverifiable promise: it is never checked "
                "here, so there is nothing to waive"
            )
    return problems


def parse_ini_seams(
    lines: Iterable[str], location: str
) -> tuple[list[TaggedFixture], list[Misuse]]:
    """``polyloop_seams`` lines: ``seam:fixture[:samples_fixture]``."""
    found: list[TaggedFixture] = []
    misuses: list[Misuse] = []
    for raw in lines:
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = [part.strip() for part in line.split(":")]
        if len(parts) not in (2, 3) or not all(parts):
            misuses.append(
                Misuse(
                    location,
                    "polyloop_seams",
                    f"cannot read {line!r}: write seam:fixture or seam:fixture:samples_fixture",
                )
            )
            continue
        seam_name, fixture, *samples = parts
        if not fixture.isidentifier():
            misuses.append(
                Misuse(location, "polyloop_seams", f"{fixture!r} is not a fixture name ({line!r})")
            )
            continue
        try:
            tag = make_tag(seam_name, samples=samples[0] if samples else None, route="ini")
        except (TypeError, ValueError) as error:
            misuses.append(Misuse(location, fixture, str(error)))
            continue
        found.append(TaggedFixture(fixture=fixture, tag=tag, source=location))
    return found, misuses


def parse_ini_waivers(
    lines: Iterable[str], where: Callable[[str], str]
) -> tuple[dict[str, dict[str, str]], list[Misuse]]:
    """``polyloop_waive`` lines: ``<implementation id> <promise id>: <reason>``; a misuse is
    blamed on its ini line (``where(text)`` is ``path:line`` of the line containing ``text``)."""
    waivers: dict[str, dict[str, str]] = {}
    misuses: list[Misuse] = []
    for raw in lines:
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        head, colon, reason = line.partition(":")
        words = head.split()
        if colon and len(words) == 2 and not reason.strip():
            problem = f"{head.strip()}: a waiver needs a reason"
            misuses.append(Misuse(where(line), "polyloop_waive", problem))
            continue
        if not colon or len(words) != 2:
            problem = f"cannot read {line!r}: write '<implementation id> <promise id>: <reason>'"
            misuses.append(Misuse(where(line), "polyloop_waive", problem))
            continue
        implementation_id, promise_id = words
        waivers.setdefault(implementation_id, {})[promise_id] = reason.strip()
    return waivers, misuses


def module_has_tags(module: object) -> bool:
    """Whether any attribute of ``module`` carries a seam tag (cheap pre-check)."""
    for value in list(vars(module).values()):
        if isinstance(value, type | types.ModuleType):
            continue
        try:
            if read_tag(value) is not None:
                return True
        except (TypeError, ValueError):
            return True
    return False


def ini_holder() -> types.ModuleType:
    """A module object standing for the ini file in the collection tree (it holds no code)."""
    holder = types.ModuleType("polyloop_ini_seams")
    holder.__doc__ = "Seam implementations declared with the polyloop_seams ini option."
    return holder
