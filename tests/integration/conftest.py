"""Fixtures local to the integration tests.

``store_url`` is parametrised over the two durable stores: a fresh SQLite file, and a fresh
database on the session's throwaway PostgreSQL server (``postgres_database_dsn`` from
``tests/conftest.py``; those items carry the ``postgres`` mark and skip where the server
binaries are missing, except in CI).
"""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An ``open_store`` URL of an empty store."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'runs.db'}"
    dsn: str = request.getfixturevalue("postgres_database_dsn")
    return dsn
