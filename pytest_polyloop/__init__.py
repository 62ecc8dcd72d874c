"""pytest_polyloop — the pytest plugin that runs polyloop's contract suites.

Tag the fixtures that build your seam implementations with :func:`seam`; run
``pytest --polyloop-conformance`` to run the library's contract suites against each and get a
conformance report. The plugin itself is :mod:`pytest_polyloop.plugin` (entry point
``pytest11: polyloop``); its hooks are in :mod:`pytest_polyloop.hookspecs`.
"""

from __future__ import annotations

from pytest_polyloop._registry import RegisteredSeam, SeamRegistry
from pytest_polyloop._report import SCHEMA, schema
from pytest_polyloop._tagging import SeamTag, seam

__all__ = ["SCHEMA", "RegisteredSeam", "SeamRegistry", "SeamTag", "schema", "seam"]
