"""The loop's shape (issue #24 §1-2): what it imports, and functions that read in one sitting."""

from __future__ import annotations

import ast
from pathlib import Path

import polyloop

PACKAGE = Path(polyloop.__file__).parent
LOOP_MODULES = ("_loop/_run.py", "_loop/_commit.py", "_loop/_delivery.py")


def _tree(name: str) -> ast.Module:
    return ast.parse((PACKAGE / name).read_text(encoding="utf-8"))


def test_the_loop_imports_no_concrete_store_but_the_default() -> None:
    imported: set[str] = set()
    for name in LOOP_MODULES:
        for node in ast.walk(_tree(name)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "polyloop.stores"
            ):
                imported |= {alias.name for alias in node.names}
    assert imported == {"MemoryStore"}


def test_the_loop_never_tests_a_stores_exact_type() -> None:
    for name in LOOP_MODULES:
        source = (PACKAGE / name).read_text(encoding="utf-8")
        assert "type(store) is" not in source, name
        assert "_commit_now" not in source, name


def test_no_function_in_the_loop_is_over_40_lines() -> None:
    long = [
        f"{node.name}: {node.end_lineno - node.lineno + 1} lines"  # type: ignore[operator]
        for node in ast.walk(_tree("_loop/_run.py"))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno - node.lineno + 1 > 40  # type: ignore[operator]
    ]
    assert long == []


def test_the_stopping_order_lives_in_stopping_alone() -> None:
    for name in LOOP_MODULES:
        source = (PACKAGE / name).read_text(encoding="utf-8")
        assert "max_steps" not in source, name  # budgets are read in _loop/_stopping.py
        assert "max_consecutive_parse_failures" not in source, name
