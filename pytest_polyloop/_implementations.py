"""What the report needs to know about each implementation, taken from the collected items.

An *implementation entry* is plain JSON-ready data (it travels from xdist workers through
``workeroutput``): ``{id, seam, fixture, source, suite_hash, catalogue: [{id, doc, kind}],
waive, overridden, items: {nodeid: promise id}}``. Generated suites and hand-written
subclasses both end up here.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_polyloop._discovery import relative_path
from pytest_polyloop._generate import implementation_of, is_generated
from pytest_polyloop._registry import RegisteredSeam, SeamRegistry

__all__ = ["ContractItem", "Implementations"]

ContractItem = tuple[RegisteredSeam, str, str]  # seam, implementation id, promise id


class Implementations:
    """Implementation entries keyed by implementation id (``id[param]`` when parametrised).

    ("Record" is taken: it means a run-log record, and the ``records`` fixture's type bundle.)
    """

    def __init__(
        self,
        registry: SeamRegistry,
        suite_hash: Callable[[Sequence[Any]], str],
        rootpath: Path,
    ) -> None:
        self._registry = registry
        self._suite_hash = suite_hash
        self._rootpath = rootpath
        self._entries: dict[str, dict[str, Any]] = {}

    def identify(self, item: pytest.Item) -> ContractItem | None:
        """The seam, implementation and promise of a contract item (noting it), or ``None``
        for anything else: another test, or a test of a suite subclass that is no promise."""
        cls = getattr(item, "cls", None)
        registered = self._registry.suite_of(cls) if isinstance(cls, type) else None
        if cls is None or registered is None:
            return None
        test_name = getattr(item, "originalname", item.name)
        spec = next((s for s in registered.suite.promises() if s.test_name == test_name), None)
        if spec is None:
            return None
        if is_generated(cls):
            base_id = implementation_of(cls).id
        else:
            parent = item.getparent(pytest.Class)
            base_id = parent.nodeid if parent is not None else item.nodeid
        callspec = getattr(item, "callspec", None)
        implementation_id = f"{base_id}[{callspec.id}]" if callspec is not None else base_id
        entry = self._entries.get(implementation_id)
        if entry is None:
            entry = self._new(implementation_id, cls, registered)
            self._entries[implementation_id] = entry
        entry["items"][item.nodeid] = spec.id
        return registered, implementation_id, spec.id

    def _new(
        self, implementation_id: str, cls: type[Any], registered: RegisteredSeam
    ) -> dict[str, Any]:
        promises = registered.suite.promises()
        if is_generated(cls):
            implementation = implementation_of(cls)
            fixture, source = implementation.fixture, implementation.source
            waive, overridden = dict(implementation.waive), []
        else:  # hand-written: its fixture is the seam's, a replaced promise test is "overridden"
            fixture, source = registered.suite.seam, self._class_source(cls)
            waive = dict(getattr(cls, "waive", {}) or {})
            overridden = [
                spec.id
                for spec in promises
                if getattr(cls, spec.test_name, None) is not spec.function
            ]
        return {
            "id": implementation_id,
            "seam": registered.name,
            "fixture": fixture,
            "source": source,
            "suite_hash": self._suite_hash(promises),
            "catalogue": [{"id": s.id, "doc": s.doc, "kind": s.kind} for s in promises],
            "waive": waive,
            "overridden": overridden,
            "items": {},
        }

    def _class_source(self, cls: type[Any]) -> str:
        try:
            path = inspect.getsourcefile(cls) or "?"
            line = inspect.getsourcelines(cls)[1]
        except (OSError, TypeError):
            return str(getattr(cls, "__module__", "?"))
        return f"{relative_path(Path(path), self._rootpath)}:{line}"

    def keep_only(self, nodeids: Iterable[str]) -> list[str]:
        """Forget items that were deselected after identification (``-k``, ``-m``); an
        implementation left with no item is not judged at all. Returns the ids dropped."""
        running = set(nodeids)
        dropped = []
        for implementation_id in list(self._entries):
            entry = self._entries[implementation_id]
            entry["items"] = {n: p for n, p in entry["items"].items() if n in running}
            if not entry["items"]:
                del self._entries[implementation_id]
                dropped.append(implementation_id)
        return dropped

    def merge(self, entries: Iterable[dict[str, Any]]) -> None:
        """Add entries shipped by an xdist worker (each worker collected the same items)."""
        for entry in entries:
            merged = self._entries.setdefault(entry["id"], {**entry, "items": {}})
            merged["items"].update(entry["items"])

    def as_list(self) -> list[dict[str, Any]]:
        """Every entry, JSON-ready."""
        return list(self._entries.values())
