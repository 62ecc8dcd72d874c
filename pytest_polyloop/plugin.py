"""pytest entry point (``pytest11``: ``polyloop``)."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "polyloop_seam(name, ...): a polyloop contract item (set by pytest_polyloop)",
    )
