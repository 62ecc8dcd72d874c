"""Is an extra installed? The one answer every optional probe in the project uses.

``importlib.util.find_spec("a.b")`` imports ``a`` to find ``b``, so it *raises*
``ModuleNotFoundError`` when ``a`` is absent instead of returning ``None``; a probe written with
it crashes exactly where it should have said "not installed". :func:`module_available` walks a
dotted name one level at a time and answers ``False`` for any missing level, never raising.

Standard library only: the runtime core, the contract kit, the plugin, the project's tests and
its examples all ask this module.
"""

from __future__ import annotations

import importlib.util
from typing import Final

__all__ = ["EXTRAS", "extra_installed", "install_hint", "missing_modules", "module_available"]

# The modules each extra of pyproject.toml brings, by import name (what a probe can check).
# tests/unit/test_extras.py keeps this table and pyproject.toml's extras the same set.
EXTRAS: Final[dict[str, tuple[str, ...]]] = {
    "testing": ("pytest", "pytest_asyncio", "pluggy", "hypothesis", "xdist"),
    "postgres": ("psycopg", "psycopg_pool"),
    "openai": ("openai",),
    "schema": ("jsonschema",),
    "mcp": ("mcp",),
    "otel": ("opentelemetry.trace", "opentelemetry.sdk"),
    "jupyter": ("jupyter_client", "ipykernel"),
    "ray": ("ray",),
}


def module_available(name: str) -> bool:
    """Whether ``import name`` can find the module, for dotted names too; never raises.

    Each level is looked up in turn (``a``, then ``a.b``, …), so a missing parent answers
    ``False`` instead of raising ``ModuleNotFoundError``. Finding a parent package imports it
    (that is how Python finds its submodules); a parent that fails to import answers ``False``.
    """
    parts = name.split(".")
    if not name or not all(part.isidentifier() for part in parts):
        return False
    for depth in range(1, len(parts) + 1):
        try:
            if importlib.util.find_spec(".".join(parts[:depth])) is None:
                return False
        except (ImportError, ValueError):
            # ImportError: the parent is missing or broken; ValueError: a module already in
            # sys.modules without a __spec__ (find_spec cannot tell, so neither can we).
            return False
    return True


def missing_modules(extra: str) -> list[str]:
    """The modules of ``extra`` that cannot be found (empty when it is installed)."""
    try:
        modules = EXTRAS[extra]
    except KeyError:
        raise ValueError(f"polyloop has no extra {extra!r}; it has {', '.join(EXTRAS)}") from None
    return [module for module in modules if not module_available(module)]


def extra_installed(extra: str) -> bool:
    """Whether every module of ``polyloop[extra]`` can be found; ``ValueError`` for no such
    extra."""
    return not missing_modules(extra)


def install_hint(extra: str) -> str:
    """What to install for ``extra``, said for a checkout (polyloop is not on the index yet)."""
    if extra not in EXTRAS:
        raise ValueError(f"polyloop has no extra {extra!r}; it has {', '.join(EXTRAS)}")
    return f"the `{extra}` extra (in a polyloop checkout: pip install -e '.[{extra}]')"
