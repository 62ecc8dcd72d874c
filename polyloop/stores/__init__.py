"""Bundled run stores, and :func:`open_store` to pick one by URL.

Importing this package imports only the standard library: ``PostgresStore`` (psycopg) is
imported when a ``postgresql://`` URL is opened, or when the name is first looked up here.
"""

from __future__ import annotations

import importlib
import os
import re
from typing import TYPE_CHECKING, Any

from polyloop.ports import RunStore
from polyloop.stores._memory import MemoryStore
from polyloop.stores._sqlite import SQLiteStore

__all__ = ["MemoryStore", "PostgresStore", "SQLiteStore", "open_store"]

if TYPE_CHECKING:
    from polyloop.stores._postgres import PostgresStore


def __getattr__(name: str) -> Any:
    # PostgresStore is exported lazily; its module imports psycopg only when a store is built.
    if name == "PostgresStore":
        from polyloop.stores._postgres import PostgresStore

        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_ACCEPTED = (
    "memory:, sqlite:///relative/path.db, sqlite:////absolute/path.db, a plain file path "
    "(runs.db, /abs/runs.db), postgresql://user@host/dbname (or postgres://...)"
)
# A URL scheme: what a string that names a store by URL starts with. Anything without one is a
# plain file path (a path whose first part has a colon is written ./a:b.db).
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
_DRIVE = re.compile(r"[A-Za-z]:[\\/]" if os.name == "nt" else r"(?!)")  # C:\runs.db on Windows


def sqlite_path(url: str) -> str | None:
    """The SQLite file a store URL or plain path names, or ``None`` if it names another store.

    ``sqlite:///runs.db`` and ``runs.db`` name ``runs.db`` relative to the current directory;
    ``sqlite:////abs/runs.db`` and ``/abs/runs.db`` an absolute path. Raises ``ValueError``
    (one line, the accepted forms) for a URL of an unknown scheme or one naming no file.
    """
    if not isinstance(url, str):
        raise ValueError(f"store URL must be a str, got {type(url).__name__}; use {_ACCEPTED}")
    if url == "memory:" or url.startswith(("postgresql://", "postgres://")):
        return None
    if url.startswith("sqlite:///"):
        path = url[len("sqlite:///") :]
    elif (
        (_SCHEME.match(url) and not _DRIVE.match(url))
        or not url.strip()
        or url in ("memory", "sqlite", "postgres", "postgresql")  # a scheme without its colon
    ):
        raise ValueError(f"unsupported store URL {_shown(url)!r}; use {_ACCEPTED}")
    else:
        path = url
    if path and not path.endswith(("/", os.sep)) and "\x00" not in path:
        return path
    raise ValueError(f"store URL {_shown(url)!r} names no database file; use {_ACCEPTED}")


def open_store(url: str) -> RunStore:
    """Make the store a URL names. Synchronous and without I/O: the store connects on first use.

    * ``memory:`` — a fresh :class:`MemoryStore` (gone when the process ends);
    * ``sqlite:///runs.db`` — a :class:`SQLiteStore`, path relative to the current directory;
      ``sqlite:////var/lib/runs.db`` (four slashes) — an absolute path;
    * ``postgresql://…`` or ``postgres://…`` — a ``PostgresStore`` with the URL as its DSN
      (needs ``pip install 'polyloop[postgres]'``);
    * a plain path (``runs.db``, ``/var/lib/runs.db``) — the same as ``sqlite:///`` followed
      by it (a path whose first part holds a colon is written ``./a:b.db``).

    Any other ``scheme:`` is a ``ValueError`` whose one-line message lists the accepted forms.
    """
    path = sqlite_path(url)
    if path is not None:
        return SQLiteStore(path)
    if url == "memory:":
        return MemoryStore()
    return _postgres_store(url)


def _postgres_store(dsn: str, *, migrate: bool = True) -> RunStore:
    hint = "PostgreSQL stores need psycopg: pip install 'polyloop[postgres]'"
    try:
        # By name, so this module type-checks and imports without the optional extra.
        importlib.import_module("psycopg")
        importlib.import_module("psycopg_pool")
    except ImportError:
        raise ValueError(f"cannot open {_shown(dsn)!r}: {hint}") from None
    try:
        module = importlib.import_module("polyloop.stores._postgres")
    except ModuleNotFoundError as exc:
        if exc.name == "polyloop.stores._postgres":
            raise ValueError(
                f"cannot open {_shown(dsn)!r}: this polyloop build has no PostgreSQL store"
            ) from None
        raise
    store: RunStore = module.PostgresStore(dsn, migrate=migrate)
    return store


def _shown(url: str) -> str:
    """The URL as it may appear in an error message: without a password."""
    return re.sub(r"(//[^/@:]*):[^/@]*@", r"\1:***@", url)
