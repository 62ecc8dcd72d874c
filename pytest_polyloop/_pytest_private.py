"""The three things the plugin needs from pytest that pytest has no public API for, kept here so
they are reached in one place, each with a fallback if a later pytest renames them.

Checked on pytest 8.4.2 (the oldest pytest the plugin supports; CI runs ``tests/plugin`` on
8.4.x) and 9.2.0 (the newest release when this was written): ``tests/plugin/
test_pytest_private.py`` checks both on whichever pytest is installed.

* :func:`set_ini_default` — ``Config.getini`` has no setter for a non-list value
  (``Config.addinivalue_line`` only appends to ``linelist`` values), and ``-o`` is read before
  any plugin runs. ``getini`` caches what it returns in ``Config._inicache``; writing the cache
  is the one way a plugin can give an ini key a value at configure time.
* :func:`fixture_visible` — whether a fixture of a name is visible from a collector, asked at
  collection, before any test runs: the public ``FixtureRequest`` exists only for a running
  test. ``FixtureManager.getfixturedefs(name, node)`` (reached through
  ``Session._fixturemanager``) answers exactly that on every version above.
* :func:`fixture_functions` — the function that provides a fixture to an item, to locate a
  setup error in the samples fixture that caused it: an item's resolved fixtures are only in
  ``Item._fixtureinfo.name2fixturedefs`` (each ``FixtureDef.func``; the last one applies).
"""

from __future__ import annotations

from typing import Any

import pytest

__all__ = ["fixture_functions", "fixture_visible", "set_ini_default"]


def set_ini_default(config: pytest.Config, name: str, value: str) -> bool:
    """Make ``config.getini(name)`` return ``value``; ``False`` (nothing done) if this pytest
    keeps no ini cache under the name it had when checked."""
    cache = getattr(config, "_inicache", None)
    if not isinstance(cache, dict):
        return False
    cache[name] = value
    return True


def fixture_visible(name: str, node: pytest.Collector) -> bool:
    """Whether a fixture called ``name`` is visible from ``node``. ``True`` if this pytest has
    no fixture manager under the name it had when checked: never a false complaint; a fixture
    that is really missing then fails as pytest's own "fixture not found"."""
    manager: Any = getattr(node.session, "_fixturemanager", None)
    lookup = getattr(manager, "getfixturedefs", None)
    if lookup is None:
        return True
    return bool(lookup(name, node))


def fixture_functions(item: pytest.Item, name: str) -> list[object]:
    """The functions that define fixture ``name`` for ``item``, the one that applies last (each
    earlier one is what ``request.getfixturevalue(name)`` inside the next reaches); empty if the
    item does not use it or this pytest keeps its fixtures elsewhere."""
    info: Any = getattr(item, "_fixtureinfo", None)
    definitions = getattr(info, "name2fixturedefs", None)
    if not isinstance(definitions, dict):
        return []
    return [getattr(definition, "func", None) for definition in definitions.get(name) or ()]
