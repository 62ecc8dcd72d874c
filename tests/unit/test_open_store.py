"""open_store: a store chosen by URL, made without I/O; a bad URL is a one-line ValueError."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from polyloop.stores import MemoryStore, SQLiteStore, open_store
from tests.conftest import require_extra


def test_memory_url_gives_a_fresh_memory_store_each_time() -> None:
    first = open_store("memory:")
    second = open_store("memory:")

    assert isinstance(first, MemoryStore)
    assert first is not second


def test_three_slashes_is_a_path_relative_to_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)

    store = open_store("sqlite:///sub/runs.db")

    assert isinstance(store, SQLiteStore)
    assert store.path == tmp_path / "sub" / "runs.db"


def test_four_slashes_is_an_absolute_path(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/runs.db")  # tmp_path starts with "/"

    assert isinstance(store, SQLiteStore)
    assert store.path == tmp_path / "runs.db"


@pytest.mark.parametrize("given", ["runs.db", "sub/runs.db", "./a:b.db", "memory.db"])
def test_a_plain_path_is_a_sqlite_store_like_three_slashes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: str
) -> None:
    # On main a plain path was refused: "unsupported store URL 'runs.db'".
    monkeypatch.chdir(tmp_path)

    store = open_store(given)
    absolute = open_store(str(tmp_path / given))

    assert isinstance(store, SQLiteStore)
    assert isinstance(absolute, SQLiteStore)
    assert store.path == absolute.path == (tmp_path / given).absolute()
    assert store.path == open_store(f"sqlite:///{given}").path  # type: ignore[attr-defined]
    assert list(tmp_path.iterdir()) == []


def test_opening_a_sqlite_url_touches_no_file(tmp_path: Path) -> None:
    target = tmp_path / "runs.db"

    open_store(f"sqlite:///{target}")

    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "url",
    [
        "",
        "memory",
        "memory://",
        "sqlite:runs.db",
        "sqlite://runs.db",
        "sqlite:///",
        "sqlite:///dir/",
        "mysql://user@host/db",
        "c:runs.db",
        "sqlite",
        "postgresql",
        " ",
        "dir/",
    ],
)
def test_a_bad_url_is_a_one_line_value_error_listing_the_accepted_forms(url: str) -> None:
    with pytest.raises(ValueError, match="; use memory:") as caught:
        open_store(url)

    message = str(caught.value)
    assert "\n" not in message
    for form in ("memory:", "sqlite:///", "sqlite:////", "postgresql://"):
        assert form in message


def test_a_non_string_url_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="store URL must be a str"):
        open_store(Path("runs.db"))  # type: ignore[arg-type]


def test_a_password_in_a_bad_url_is_not_repeated_in_the_error() -> None:
    with pytest.raises(ValueError, match="unsupported store URL") as caught:
        open_store("postgresq://alice:s3cret@db.example/runs")

    assert "s3cret" not in str(caught.value)
    assert "alice:***@db.example" in str(caught.value)


@pytest.mark.parametrize("scheme", ["postgresql", "postgres"])
def test_a_postgres_url_without_psycopg_says_how_to_install_it(
    scheme: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Simulate an installation without the extra: importing psycopg fails.
    monkeypatch.setitem(sys.modules, "psycopg", None)
    monkeypatch.setitem(sys.modules, "psycopg_pool", None)
    monkeypatch.delitem(sys.modules, "polyloop.stores._postgres", raising=False)

    with pytest.raises(ValueError, match=r"pip install 'polyloop\[postgres\]'") as caught:
        open_store(f"{scheme}://alice:s3cret@localhost/runs")

    assert "s3cret" not in str(caught.value)


@pytest.mark.parametrize("scheme", ["postgresql", "postgres"])
def test_a_postgres_url_makes_a_postgres_store_with_the_url_as_dsn(scheme: str) -> None:
    require_extra("postgres")
    postgres = importlib.import_module("polyloop.stores._postgres")
    dsn = f"{scheme}://alice@127.0.0.1:1/runs"  # port 1: nothing listens, and nothing connects

    store = open_store(dsn)

    assert isinstance(store, postgres.PostgresStore)


def test_importing_the_stores_package_does_not_import_psycopg() -> None:
    code = (
        "import sys, polyloop.stores, polyloop.cli; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('psycopg', 'psycopg_pool')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout

    assert out.strip() == "[]"
