"""The codec and the value types depend one way: ``types`` imports ``_codec``, never the reverse
(issue 24: they imported each other, the cycle hidden by function-level imports)."""

from __future__ import annotations

import ast
from pathlib import Path

import polyloop
from polyloop import types

PACKAGE = Path(polyloop.__file__).parent


def _imported(path: Path) -> set[str]:
    """Every module ``path`` imports, at any level (inside functions too)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_the_codec_imports_nothing_of_the_value_types() -> None:
    imported = _imported(PACKAGE / "_base" / "_codec.py")
    assert not {n for n in imported if n in ("polyloop.types", "polyloop")}, imported


def test_the_value_types_import_the_codec() -> None:
    assert "polyloop._base._codec" in _imported(PACKAGE / "types.py")


def test_there_is_a_reader_for_every_record_kind() -> None:
    assert set(types._READERS) == {cls.kind for cls in types.RECORD_TYPES}
