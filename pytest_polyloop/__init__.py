"""pytest_polyloop — the pytest plugin that runs polyloop's contract suites."""

from __future__ import annotations

__all__: list[str] = []
