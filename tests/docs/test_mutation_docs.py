"""The mutation-testing page shows the equivalents file as it is (one list, one place)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_page_lists_exactly_the_equivalent_mutants_of_the_file() -> None:
    table = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "mutation_check.py"), "equivalents-table",
         str(ROOT / "scripts" / "mutation-equivalent.txt")],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout.strip()  # fmt: skip
    page = (ROOT / "docs" / "explanation" / "mutation-testing.md").read_text(encoding="utf-8")
    shown = page.split("<!-- equivalents:start -->\n", 1)[1].split("\n<!-- equivalents:end -->")[0]
    assert shown == table
    assert table.count("\n| `") >= 40  # every entry, not an empty table


def test_every_group_runs_only_tests_that_exist() -> None:
    import tomllib

    groups = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
        "polyloop-mutation"
    ]
    for name, group in groups.items():
        for argument in group["tests"]:
            if argument.startswith("--deselect="):
                path = argument.removeprefix("--deselect=").split("::")[0]
            elif argument.startswith("-") or " " in argument:
                continue
            else:
                path = argument
            assert (ROOT / path).exists(), (name, argument)
        for module in group["only_mutate"]:
            assert (ROOT / module).is_file(), (name, module)
