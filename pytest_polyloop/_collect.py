"""Where generated suites live in pytest's collection tree, and the checks made there.

A generated suite is a class collected under the file that defines its fixture: a test module
(pytest's own ``Module``), a ``conftest.py`` or the ini file (a :class:`HolderModule`, since
pytest does not collect those). A directory argument also takes in the conftests above it,
which pytest's walk passes through without collecting.
"""

from __future__ import annotations

import types
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_polyloop._discovery import (
    Implementation,
    Misuse,
    TaggedFixture,
    implementation_from_tag,
    ini_holder,
    ini_line_of,
    module_has_tags,
    tagged_fixtures,
)
from pytest_polyloop._generate import generate_suite, suite_name
from pytest_polyloop._pytest_private import fixture_visible
from pytest_polyloop._registry import SeamRegistry

__all__ = ["Collection", "GeneratedSuite", "HolderModule"]


class GeneratedSuite(pytest.Class):
    """The collector of a generated class (``pytest.Class.from_parent`` ignores ``obj``)."""

    def __init__(self, *args: Any, suite_class: type[Any], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._suite_class = suite_class

    def _getobj(self) -> type[Any]:
        return self._suite_class


class HolderModule(pytest.Module):
    """A module node for a file that pytest does not collect itself (a ``conftest.py``, the ini
    file): it holds only generated suites, so node ids read
    ``tests/conftest.py::ActionExecutorContract__my_executor::test_returns_all_five_fields``."""

    def __init__(self, *args: Any, holder: types.ModuleType, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._holder = holder

    def _getobj(self) -> types.ModuleType:
        return self._holder

    def collect(self) -> list[pytest.Item | pytest.Collector]:
        # Its fixtures are already registered (a conftest's, at its directory); the generated
        # suites are added by the plugin's collection hook, like for any module.
        return []


def make_holder_module(
    parent: pytest.Collector, path: Path, holder: types.ModuleType
) -> HolderModule:
    """Create the :class:`HolderModule` node for ``path`` under ``parent``."""
    node: HolderModule = HolderModule.from_parent(parent, path=path, holder=holder)
    return node


def make_suite_node(parent: pytest.Collector, suite_class: type[Any]) -> GeneratedSuite:
    """Create the :class:`GeneratedSuite` node for a generated class under ``parent``."""
    node: GeneratedSuite = GeneratedSuite.from_parent(
        parent, name=suite_class.__name__, suite_class=suite_class
    )
    return node


class Collection:
    """The collection-time state of a conformance session: implementations placed so far and
    the misuses found."""

    def __init__(
        self,
        *,
        config: pytest.Config,
        registry: SeamRegistry,
        ini_tagged: Sequence[TaggedFixture],
        ini_waivers: Mapping[str, Mapping[str, str]],
        ini_location: str = "ini",
    ) -> None:
        self.config = config
        self.ini_where = ini_line_of(config.inipath, ini_location)
        self.registry = registry
        self.ini_path = config.inipath
        self.ini_tagged = list(ini_tagged)
        self.ini_waivers = ini_waivers
        self.implementations: dict[str, Implementation] = {}
        # (module node id, suite class name) → its implementation: two ids that differ only
        # in punctuation would make one class name, one set of node ids, mixed results.
        self.suite_names: dict[tuple[str, str], Implementation] = {}
        self.misuses: list[Misuse] = []

    def _conftest_module(self, path: Path) -> types.ModuleType | None:
        """The conftest module the plugin manager loaded from ``path``, if any."""
        for plugin in self.config.pluginmanager.get_plugins():
            location = getattr(plugin, "__file__", None)
            matches = location and Path(location).resolve() == path.resolve()
            if isinstance(plugin, types.ModuleType) and matches:
                return plugin
        return None

    def holder_for(self, parent: pytest.Collector, path: Path) -> HolderModule | None:
        """A module node for a conftest with tagged fixtures or for the ini file with
        ``polyloop_seams`` — files pytest does not collect itself."""
        if path.name == "conftest.py":
            module = self._conftest_module(path)
            if module is None or not module_has_tags(module):
                return None
            return make_holder_module(parent, path, module)
        if self.ini_path is not None and path == self.ini_path and self.ini_tagged:
            return make_holder_module(parent, path, ini_holder())
        return None

    def ancestor_holders(
        self, collected: Sequence[pytest.Item | pytest.Collector]
    ) -> list[HolderModule]:
        """For directory arguments: implementations in conftests (and the ini file) of the
        directories above them — pytest's walk matches its way down through those directories
        but does not collect their files."""
        walked = [node.path for node in collected if isinstance(node, pytest.Directory)]
        added: set[Path] = set()
        holders: list[HolderModule] = []
        for node in collected:
            if not isinstance(node, pytest.Directory):
                continue
            for ancestor in node.iter_parents():
                if ancestor is node or not isinstance(ancestor, pytest.Directory):
                    continue
                for path in (ancestor.path / "conftest.py", self.ini_path):
                    if path is None or path.parent != ancestor.path or path in added:
                        continue
                    if any(path.is_relative_to(directory) for directory in walked):
                        continue  # the walk of a directory argument collects it
                    holder = self.holder_for(ancestor, path) if path.is_file() else None
                    if holder is not None:
                        added.add(path)
                        holders.append(holder)
        return holders

    def suites_for(self, module: pytest.Module) -> list[pytest.Collector]:
        """The generated suite nodes for the tagged fixtures of a module (misuse is recorded)."""
        suites: list[pytest.Collector] = []
        for tagged in self._tagged_in(module):
            implementation, problems = implementation_from_tag(
                tagged, self.registry, self.ini_waivers, self.ini_where
            )
            if implementation is not None and self._already_placed(implementation):
                continue  # one fixture imported into several modules is one implementation
            problems += self._check(implementation, module) if implementation else []
            self.misuses += problems
            if implementation is None or problems:
                continue
            registered = self.registry.get(implementation.seam)
            assert registered is not None  # implementation_from_tag checked it
            try:
                suite_class = generate_suite(implementation, registered, module.obj.__name__)
            except (TypeError, ValueError) as error:
                self.misuses.append(
                    Misuse(implementation.source, implementation.fixture, str(error))
                )
                continue
            self.implementations[implementation.id] = implementation
            self.suite_names[(module.nodeid, suite_class.__name__)] = implementation
            suites.append(make_suite_node(module, suite_class))
        return suites

    def _already_placed(self, implementation: Implementation) -> bool:
        earlier = self.implementations.get(implementation.id)
        return earlier is not None and (earlier.source, earlier.fixture) == (
            implementation.source,
            implementation.fixture,
        )

    def unused_ini_waivers(self) -> list[str]:
        """``polyloop_waive`` implementation ids that matched no implementation (a typo, or an
        implementation outside the paths of this run)."""
        return sorted(set(self.ini_waivers) - set(self.implementations))

    def _tagged_in(self, module: pytest.Module) -> list[TaggedFixture]:
        if isinstance(module, HolderModule) and module.path == self.ini_path:
            return self.ini_tagged
        tagged, misuses = tagged_fixtures(module.obj, self.config.rootpath)
        self.misuses += misuses
        return tagged

    def _check(self, implementation: Implementation, module: pytest.Module) -> list[Misuse]:
        """Problems only the collection tree can show: a duplicate id, a fixture not found."""

        def misuse(problem: str) -> Misuse:
            return Misuse(implementation.source, implementation.fixture, problem)

        problems = []
        earlier = self.implementations.get(implementation.id)
        if earlier is not None:
            problems.append(
                misuse(
                    f"implementation id {implementation.id!r} is already used by {earlier.source}: "
                    "ids must be unique in the session; pass id='...' to seam(...)"
                )
            )
        registered = self.registry.get(implementation.seam)
        name = suite_name(registered.suite, implementation.id) if registered else ""
        twin = self.suite_names.get((module.nodeid, name))
        if twin is not None and twin.id != implementation.id:
            problems.append(
                misuse(
                    f"implementation id {implementation.id!r} and {twin.id!r} ({twin.source}) "
                    f"both make the suite class {name}: ids must differ in a letter or digit, "
                    "not only in punctuation"
                )
            )
        if implementation.route == "ini" and not _visible(implementation.fixture, module):
            problems.append(
                misuse(
                    f"polyloop_seams names fixture {implementation.fixture!r}, which does not exist"
                )
            )
        needed = registered.samples_fixture if registered else None
        if needed and implementation.samples is None and not _visible(needed, module):
            problems.append(misuse(_samples_needed(implementation.seam, needed)))
        if implementation.samples is not None and not _visible(implementation.samples, module):
            problems.append(
                misuse(
                    f"samples fixture {implementation.samples!r} not found: define it next to "
                    f"the fixture (it must return the {implementation.seam} samples)"
                )
            )
        return problems


def _samples_needed(seam: str, fixture: str) -> str:
    """The two routes that give a tagged (or ini-named) implementation its samples."""
    return (
        f"the {seam} suite needs samples: name the fixture that returns them, e.g. "
        f"@pytest_polyloop.seam({seam!r}, samples='my_{fixture}') (in polyloop_seams: "
        f"{seam}:<fixture>:my_{fixture}), or define a fixture named `{fixture}` beside this one"
    )


def _visible(fixture: str, node: pytest.Collector) -> bool:
    """Whether a fixture of that name is visible from ``node``."""
    return fixture_visible(fixture, node)
