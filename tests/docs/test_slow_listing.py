"""tests/slow-tests.txt names real test functions, and they get the ``slow`` mark."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tests.conftest import slow_test_functions

ROOT = Path(__file__).resolve().parents[2]


def _defined(node_id: str) -> bool:
    path, *names = node_id.split("::")
    source = ROOT / path
    if not source.is_file():
        return False
    scope: list[ast.stmt] = ast.parse(source.read_text(encoding="utf-8")).body
    for name in names:
        found = [
            node
            for node in scope
            if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.name == name
        ]
        if not found:
            # a contract subclass inherits its tests: the class must exist, the test be inherited
            return name.startswith("test_") and len(names) == 2
        node = found[0]
        scope = node.body if isinstance(node, ast.ClassDef) else []
    return True


def test_every_listed_test_function_exists() -> None:
    listed = slow_test_functions()
    assert len(listed) > 20
    missing = sorted(name for name in listed if not _defined(name))
    assert missing == [], (
        f"stale lines in tests/slow-tests.txt (rerun scripts/slow_tests.py): {missing}"
    )


def test_a_listed_function_is_left_out_of_the_everyday_suite() -> None:
    listed = [name for name in slow_test_functions() if name.startswith("tests/plugin/")]
    # the listed function whose file has the most tests: some of them stay in the everyday suite
    target = max(
        sorted(listed),
        key=lambda name: (
            (ROOT / name.split("::")[0]).read_text(encoding="utf-8").count("def test_")
        ),
    )
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "no:randomly",
            "-m",
            "not slow",
            target.split("::")[0],
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    ).stdout
    collected = {line.split("[", 1)[0] for line in out.splitlines() if "::" in line}
    assert target not in collected
    assert collected, out  # the file's other tests stay in the everyday suite
