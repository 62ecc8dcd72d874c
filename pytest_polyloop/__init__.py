"""pytest_polyloop — the pytest plugin that runs polyloop's contract suites.

Tag the fixtures that build your seam implementations with :func:`seam`; run
``pytest --polyloop-conformance`` to run the library's contract suites against each and get a
conformance report. The plugin itself is :mod:`pytest_polyloop.plugin` (entry point
``pytest11: polyloop``); its hooks are in :mod:`pytest_polyloop.hookspecs`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from pytest_polyloop._registry import RegisteredSeam, SeamRegistry
from pytest_polyloop._tagging import SeamTag, seam

if TYPE_CHECKING:
    from polyloop.report import SCHEMA, schema

__all__ = ["SCHEMA", "RegisteredSeam", "SeamRegistry", "SeamTag", "schema", "seam"]
_FROM_REPORT = frozenset({"SCHEMA", "schema"})


def __getattr__(name: str) -> object:
    """``SCHEMA`` and ``schema`` are :mod:`polyloop.report`'s, loaded on first use: pytest loads
    this package with every run, and a passive plugin must not import the runtime."""
    if name in _FROM_REPORT:
        return getattr(importlib.import_module("polyloop.report"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
