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
    assert table.count("\n| `") >= 30  # every entry, not an empty table


def test_the_page_lists_exactly_the_mutants_killed_in_a_child_of_their_file() -> None:
    table = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "mutation_check.py"), "child-table",
         str(ROOT / "scripts" / "mutation-killed-in-a-child.txt")],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout.strip()  # fmt: skip
    page = (ROOT / "docs" / "explanation" / "mutation-testing.md").read_text(encoding="utf-8")
    start, end = "<!-- killed-in-a-child:start -->\n", "\n<!-- killed-in-a-child:end -->"
    shown = page.split(start, 1)[1].split(end)[0]
    assert shown == table
    assert table.count("\n| `") >= 7


def test_no_mutant_is_listed_both_as_equivalent_and_as_killed_in_a_child() -> None:
    def names(file: str) -> set[str]:
        text = (ROOT / "scripts" / file).read_text(encoding="utf-8")
        return {line.split("#", 1)[0].strip() for line in text.splitlines()} - {""}

    both = names("mutation-equivalent.txt") & names("mutation-killed-in-a-child.txt")
    assert not both


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
