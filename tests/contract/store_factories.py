"""The bundled stores' factories for the crash promises (``StoreSamples(factory=...)``).

A module of its own that imports only the stores: the crash probe's writer process imports it
once per round, and a test module would drag pytest and Hypothesis into every writer.
"""

from __future__ import annotations

import os
from pathlib import Path

from polyloop.stores import PostgresStore, SQLiteStore

#: The DSN of the database the PostgreSQL contract run uses; its fixture sets it.
POSTGRES_DSN_VARIABLE = "POLYLOOP_CONTRACT_POSTGRES_DSN"


def open_sqlite_store(directory: Path) -> SQLiteStore:
    """The store over ``runs.db`` in ``directory``."""
    return SQLiteStore(directory / "runs.db")


def open_postgres_store(directory: Path) -> PostgresStore:
    """The contract run's database; ``directory`` is unused, since a PostgreSQL store keeps
    its data in the server (every call reaches the same data, and the probe's runs are fresh)."""
    return PostgresStore(os.environ[POSTGRES_DSN_VARIABLE])
