"""The public API, pinned: every name in ``__all__`` of the public modules, with its kind.

A move inside the package (issue #33) must leave this unchanged; a deliberate addition or
removal updates the golden file (``python -m tests.unit.test_public_api``) in the same commit
as its CHANGELOG entry, so the change is seen in review.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

GOLDEN = Path(__file__).parent / "golden" / "public_api.json"
PUBLIC_MODULES = (
    "polyloop",
    "polyloop.types",
    "polyloop.errors",
    "polyloop.ports",
    "polyloop.tools",
    "polyloop.events",
    "polyloop.instrumentation",
    "polyloop.report",
    "polyloop.stores",
    "polyloop.testing",
    "polyloop.testing.strategies",
    "polyloop.executors",
    "polyloop.parsers",
    "polyloop.models",
    "polyloop.cli",
    "pytest_polyloop",
    "pytest_polyloop.hookspecs",
)


def public_api() -> dict[str, dict[str, str]]:
    """``module → name → kind`` (the type's name of the object) for every name in ``__all__``."""
    api: dict[str, dict[str, str]] = {}
    for name in PUBLIC_MODULES:
        module = importlib.import_module(name)
        exported = sorted(getattr(module, "__all__", ()))
        api[name] = {n: type(getattr(module, n)).__name__ for n in exported}
    return api


def test_the_public_api_is_the_pinned_one() -> None:
    pinned = json.loads(GOLDEN.read_text(encoding="utf-8"))
    now = public_api()
    changes = [
        f"{module}.{name}: {pinned.get(module, {}).get(name)} → {now.get(module, {}).get(name)}"
        for module in sorted(pinned.keys() | now.keys())
        for name in sorted(pinned.get(module, {}).keys() | now.get(module, {}).keys())
        if pinned.get(module, {}).get(name) != now.get(module, {}).get(name)
    ]
    assert not changes, "the public API changed (update the golden file on purpose):\n" + "\n".join(
        changes
    )


if __name__ == "__main__":
    GOLDEN.write_text(json.dumps(public_api(), indent=1, sort_keys=True) + "\n", encoding="utf-8")
