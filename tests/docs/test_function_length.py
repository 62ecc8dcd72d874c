"""No function in the two packages is longer than a reviewer can hold in one screen (60 lines),
except a table of data that says so: a comment `# table of data` on the line above its `def`
(or above its first decorator)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("polyloop", "pytest_polyloop")
LIMIT = 60
TABLE_MARK = "# table of data"


def function_lengths(source: str) -> list[tuple[str, int, int, bool]]:
    """(name, first line, length, marked as a table) for every function in `source`."""
    lines = source.splitlines()
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            above = lines[first - 2].strip() if first >= 2 else ""
            end = node.end_lineno or node.lineno
            length = end - node.lineno + 1
            found.append((node.name, node.lineno, length, above.startswith(TABLE_MARK)))
    return found


def long_functions() -> list[str]:
    too_long = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            source = path.read_text(encoding="utf-8")
            for name, line, length, table in function_lengths(source):
                if length > LIMIT and not table:
                    where = path.relative_to(ROOT).as_posix()
                    too_long.append(f"{where}:{line} {name} ({length} lines)")
    return too_long


def test_no_function_in_either_package_is_over_sixty_lines_unless_marked_a_table() -> None:
    assert long_functions() == []


def test_the_measure_counts_a_long_function_and_spares_only_a_marked_table() -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(LIMIT))
    plain = f"def long():\n{body}"
    table = f"{TABLE_MARK}: one row a line\n@decorated\ndef rows():\n{body}"
    assert function_lengths(plain) == [("long", 1, LIMIT + 1, False)]
    assert function_lengths(table) == [("rows", 3, LIMIT + 1, True)]
    assert function_lengths(f"def short():\n{body[: -len('    x59 = 59') - 1]}")[0][2] == LIMIT
