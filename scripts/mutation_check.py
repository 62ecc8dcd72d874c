"""Helpers of scripts/mutation.sh (see docs/explanation/mutation-testing.md).

``configure-slice PYPROJECT``  rewrite ``[tool.mutmut]`` of a COPY of the project so that it
    runs only the CI slice: ``[tool.polyloop-mutation-slice]`` names its modules and tests.
``slice-patterns``  print the slice's mutant name patterns, one a line.
``check EQUIVALENT PATTERN...``  read ``mutmut results --all True`` on stdin; print the counts
    per module and fail (exit 1) on any mutant matching a PATTERN that was not killed and is
    not listed in EQUIVALENT (one mutant name a line, ``#`` starts a comment).
"""

from __future__ import annotations

import fnmatch
import json
import re
import sys
import tomllib
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# `mutmut results` prints "    <name>: <status>"; these statuses are no kill.
NOT_KILLED = ("survived", "no tests", "timeout", "suspicious", "segfault", "skipped")


def _slice() -> dict[str, list[str]]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    table: dict[str, list[str]] = data["tool"]["polyloop-mutation-slice"]
    return table


def configure_slice(pyproject: Path) -> None:
    text = pyproject.read_text(encoding="utf-8")
    table = tomllib.loads(text)["tool"]["mutmut"]
    table["only_mutate"] = _slice()["only_mutate"]
    table["pytest_add_cli_args_test_selection"] = _slice()["tests"]
    # [tool.mutmut] is the last table of pyproject.toml up to the next table header, if any.
    start = text.index("\n[tool.mutmut]\n")
    end = text.find("\n[", start + 1)
    rest = text[end:] if end != -1 else "\n"
    lines = [f"{key} = {json.dumps(value)}" for key, value in table.items()]
    pyproject.write_text(text[:start] + "\n[tool.mutmut]\n" + "\n".join(lines) + rest)


def _equivalent(path: Path) -> set[str]:
    names = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        name = line.split("#", 1)[0].strip()
        if name:
            names.add(name)
    return names


def check(equivalent_file: Path, patterns: list[str], results: str) -> int:
    equivalent = _equivalent(equivalent_file)
    statuses = {}
    for line in results.splitlines():
        match = re.fullmatch(r"\s*(\S+): (.+)", line)
        if match and any(fnmatch.fnmatchcase(match[1], p) for p in patterns):
            statuses[match[1]] = match[2].strip()
    if not statuses:
        print("mutation check: no mutant matched; did mutmut run?", file=sys.stderr)
        return 2
    per_module: dict[str, Counter[str]] = {}
    for name, status in statuses.items():
        module = name.split(".x_")[0].split(".xǁ")[0]
        kind = "killed" if status not in NOT_KILLED else status
        if status in NOT_KILLED and name in equivalent:
            kind = "equivalent"
        per_module.setdefault(module, Counter())[kind] += 1
    for module, counts in sorted(per_module.items()):
        shown = ", ".join(f"{kind} {count}" for kind, count in sorted(counts.items()))
        print(f"{module}: {sum(counts.values())} mutants: {shown}")
    unchecked = sorted(n for n, s in statuses.items() if s == "not checked")
    new = sorted(n for n, s in statuses.items() if s in NOT_KILLED and n not in equivalent)
    for name in new:
        print(f"NOT KILLED ({statuses[name]}), not listed as equivalent: {name}")
    if unchecked:
        print(f"{len(unchecked)} mutants not checked (the run stopped early?)", file=sys.stderr)
    if new:
        print(
            f"{len(new)} mutant(s) no test kills: see them with `mutmut show NAME`, then kill "
            f"them with a test, or list them in {equivalent_file.name} with the reason"
        )
    return 1 if new or unchecked else 0


def main(argv: list[str]) -> int:
    command, *args = argv
    if command == "configure-slice":
        configure_slice(Path(args[0]))
        return 0
    if command == "slice-patterns":
        print("\n".join(_slice()["mutants"]))
        return 0
    if command == "check":
        return check(Path(args[0]), args[1:], sys.stdin.read())
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
