"""Which search the kit's property-based promises make, and where what a search found is kept.

A promise test is one function shared by every implementation's subclass, so Hypothesis alone
would give all of them one stream of draws (``derandomize`` hashes the function's source) or a
new random one every run. Neither is evidence: the same code must get the same verdict, and two
implementations should not share one blind spot. So :func:`searched`, run around every promise
test of a concrete subclass (``ContractBase``'s autouse fixture), picks the search at run time:

* ``seeded`` (the default, with or without ``CI``): the draws are seeded from the promise id and
  the implementation (the concrete class's module and qualified name: the plugin's generated
  class is named after the implementation id). The same code draws the same examples every run;
  another implementation draws others. What an earlier wide search saved in the examples
  directory is replayed first; nothing is written there.
* ``wide`` (``--polyloop-search=wide``, ini ``polyloop_search``; for nightly jobs): random draws,
  ``budget`` times each promise's examples, and every failing example saved in the examples
  directory (``--polyloop-examples``/ini ``polyloop_examples``, default ``.polyloop/examples``
  under the rootdir) — where the default run replays it.

When a search finds a failing example, the item gets the user property ``polyloop_search``
(JSON: ``search`` — ``seeded``, ``wide`` or ``replayed`` — and ``examples``, the directory): the
conformance report says which search produced the violation and how to replay it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hypothesis
import pytest
from hypothesis.database import DirectoryBasedExampleDatabase, ExampleDatabase

__all__ = [
    "DEFAULT_BUDGET",
    "DEFAULT_EXAMPLES",
    "PROPERTY_SEARCH",
    "SEARCHES",
    "Search",
    "parse_search",
    "search_of",
    "searched",
    "seed_for",
]

SEARCHES = ("seeded", "wide")
DEFAULT_BUDGET = 10
DEFAULT_EXAMPLES = ".polyloop/examples"
PROPERTY_SEARCH = "polyloop_search"


@dataclass(frozen=True, slots=True)
class Search:
    """The search of one session: ``mode`` (``seeded``/``wide``), the wide search's examples
    multiplier ``budget``, and the ``examples`` directory (``None``: nothing kept)."""

    mode: str = "seeded"
    budget: int = DEFAULT_BUDGET
    examples: Path | None = None


def parse_search(mode: object, budget: object) -> tuple[str, int]:
    """``(mode, budget)`` from an option's or ini key's text, or ``ValueError`` saying why."""
    text = str(mode).strip().lower()
    if text not in SEARCHES:
        raise ValueError(f"polyloop_search must be one of {', '.join(SEARCHES)}, got {mode!r}")
    try:
        times = int(str(budget).strip().removesuffix("x"))
    except ValueError:
        times = 0
    if times < 1:
        raise ValueError(
            f"polyloop_search_budget must be a whole number of times each promise's examples "
            f"(1 or more, e.g. 10 or 10x), got {budget!r}"
        )
    return text, times


def _setting(config: pytest.Config, name: str) -> Any:
    """``--<name>`` if given, else the ini key, else ``None`` (also without the plugin)."""
    option = config.getoption(name, None)
    if option not in (None, ""):
        return option
    try:
        value = config.getini(name)
    except ValueError:  # the plugin is not loaded: its keys are unknown
        return None
    return value or None


def search_of(config: pytest.Config) -> Search:
    """The session's search from its options and ini keys (``ValueError`` on a bad value)."""
    mode, budget = parse_search(
        _setting(config, "polyloop_search") or "seeded",
        _setting(config, "polyloop_search_budget") or DEFAULT_BUDGET,
    )
    examples = Path(_setting(config, "polyloop_examples") or DEFAULT_EXAMPLES)
    return Search(mode, budget, examples if examples.is_absolute() else config.rootpath / examples)


def seed_for(promise_id: str, implementation: str) -> int:
    """The seed of the default search for one promise and one implementation."""
    digest = hashlib.sha256(f"{promise_id}\n{implementation}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


@dataclass
class _Current:
    """The promise test running now: whose examples the database reads and writes."""

    search: Search
    prefix: bytes
    item: pytest.Item
    replayed: set[bytes] = field(default_factory=set)
    told: bool = False


class _SearchDatabase(ExampleDatabase):
    """The example database of every kit search: the examples directory, keyed by promise and
    implementation as well as by Hypothesis's key, read by both searches, written only by the
    wide one. It also notes the first failing example Hypothesis saves, and whence it came."""

    def __init__(self) -> None:
        super().__init__()
        self.current: _Current | None = None

    def _backing(self) -> tuple[_Current, DirectoryBasedExampleDatabase] | None:
        current = self.current
        if current is None or current.search.examples is None:
            return None
        return current, DirectoryBasedExampleDatabase(current.search.examples)

    def fetch(self, key: bytes) -> Iterable[bytes]:
        found = self._backing()
        if found is None:
            return []
        current, backing = found
        values = list(backing.fetch(current.prefix + key))
        current.replayed.update(values)
        return values

    def save(self, key: bytes, value: bytes) -> None:
        found = self._backing()
        if found is None:
            return
        current, backing = found
        # The first save is the failing example, saved as Hypothesis finds it.
        if not current.told and current.search.examples is not None:
            current.told = True
            whence = "replayed" if value in current.replayed else current.search.mode
            examples = _shown(current.search.examples, current.item.config.rootpath)
            note = json.dumps({"search": whence, "examples": examples})
            current.item.user_properties.append((PROPERTY_SEARCH, note))
        if current.search.mode == "wide":
            backing.save(current.prefix + key, value)

    def delete(self, key: bytes, value: bytes) -> None:
        found = self._backing()
        if found is not None and found[0].search.mode == "wide":
            found[1].delete(found[0].prefix + key, value)

    def __repr__(self) -> str:
        return "polyloop's example database (the examples directory, by promise and implementation)"


DATABASE = _SearchDatabase()


def _shown(path: Path, root: Path) -> str:
    """``path`` relative to the rootdir when it is under it (as the report prints it)."""
    return (path.relative_to(root) if path.is_relative_to(root) else path).as_posix()


def implementation_of(cls: type[Any]) -> str:
    """The implementation a concrete subclass tests, as the seed reads it."""
    return f"{cls.__module__}.{cls.__qualname__}"


@contextmanager
def searched(request: pytest.FixtureRequest, promise_id: str) -> Iterator[None]:
    """Run one promise test under the session's search (a no-op for a test Hypothesis does not
    drive). The test function is shared by every subclass: its seed and settings are set for
    this item only, and put back after it."""
    test = getattr(request.node, "obj", None)
    function: Any = getattr(test, "__func__", test)
    if not getattr(function, "is_hypothesis_test", False):
        yield
        return
    search = search_of(request.config)
    implementation = implementation_of(type(request.instance))
    saved_seed = function._hypothesis_internal_use_seed
    saved_settings = function._hypothesis_internal_use_settings
    if search.mode == "seeded":
        # What @hypothesis.seed sets, without its database=None: the replay must still happen.
        function._hypothesis_internal_use_seed = seed_for(promise_id, implementation)
        settings = hypothesis.settings(saved_settings, database=DATABASE)
    else:
        function._hypothesis_internal_use_seed = None
        settings = hypothesis.settings(
            saved_settings,
            database=DATABASE,
            derandomize=False,
            max_examples=saved_settings.max_examples * search.budget,
        )
    function._hypothesis_internal_use_settings = settings
    prefix = hashlib.sha256(f"{promise_id}\n{implementation}".encode()).hexdigest().encode()
    DATABASE.current = _Current(search, prefix + b":", request.node)
    try:
        yield
    finally:
        DATABASE.current = None
        function._hypothesis_internal_use_seed = saved_seed
        function._hypothesis_internal_use_settings = saved_settings
