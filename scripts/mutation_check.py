"""Helpers of scripts/mutation.sh (see docs/explanation/mutation-testing.md).

``groups``  print the names of the groups (``[tool.polyloop-mutation.NAME]``), one a line.
``configure GROUP PYPROJECT``  rewrite ``[tool.mutmut]`` of a COPY of the project so that it
    mutates the group's modules and selects the group's tests.
``patterns GROUP``  print the group's mutant name patterns, one a line.
``equivalents-table EQUIVALENT``  print the Markdown table of EQUIVALENT (mutant, why), as
    docs/explanation/mutation-testing.md shows it between its ``equivalents`` markers.
``child-table CHILD``  the same for the mutants killed only in a child process (between the
    page's ``killed-in-a-child`` markers).
``check EQUIVALENT [--child CHILD] RESULTS...``  read the files ``mutmut results --all True``
    wrote, one per group (named ``GROUP.txt``); a mutant counts for the groups whose patterns
    it matches, and is killed if one of them killed it. Print the counts per module — killed,
    timeout (the tests never finished on it: counted apart, never as killed), equivalent, killed
    in a child, and not killed — and fail (exit 1) on any mutant not killed and listed in
    neither EQUIVALENT nor CHILD (one mutant name a line, ``#`` starts a comment), on a listed
    one that is killed or gone, and on any mutant of the mutated modules that no group judged.
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
NOT_KILLED = ("survived", "no tests", "suspicious", "segfault", "skipped")
# The tests never finished on the mutant (a loop that no longer ends — or a slow machine): a
# run with it would fail by its time limit, so it is not a survivor, but no test killed it
# either. Counted apart, and named, so a timeout is never shown as a kill.
TIMEOUT = "timeout"


def _groups() -> dict[str, dict[str, list[str]]]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    groups: dict[str, dict[str, list[str]]] = data["tool"]["polyloop-mutation"]
    return groups


def _group(name: str) -> dict[str, list[str]]:
    groups = _groups()
    if name not in groups:
        raise SystemExit(f"no mutation group {name!r} (groups: {', '.join(groups)})")
    return groups[name]


def configure(name: str, pyproject: Path) -> None:
    group = _group(name)
    text = pyproject.read_text(encoding="utf-8")
    table = tomllib.loads(text)["tool"]["mutmut"]
    table["only_mutate"] = group["only_mutate"]
    table["pytest_add_cli_args_test_selection"] = group["tests"]
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


def _reasons(path: Path) -> list[tuple[str, str]]:
    """(mutant, reason) of each entry of an equivalents file, in its order."""
    entries = []
    for line in path.read_text(encoding="utf-8").splitlines():
        name, _, reason = line.partition("#")
        if name.strip():
            entries.append((name.strip(), reason.strip()))
    return entries


def equivalents_table(path: Path, header: str = "Why no test can tell it from the code") -> str:
    escaped = "\\|"
    rows = [f"| `{name}` | {reason.replace('|', escaped)} |" for name, reason in _reasons(path)]
    return "\n".join([f"| Mutant | {header} |", "| --- | --- |", *rows])


CHILD_HEADER = "The test that kills it in a child process"


def _statuses(results: str) -> dict[str, str]:
    statuses = {}
    for line in results.splitlines():
        match = re.fullmatch(r"\s*(\S+): (.+)", line)
        if match:
            statuses[match[1]] = match[2].strip()
    return statuses


def _judged(result_files: list[Path]) -> dict[str, str] | None:
    """Each mutant's status over the groups that judged it: a kill if one group killed it, else
    a timeout if one timed out, else the first status; ``None`` when there is no mutant."""
    judged: dict[str, list[str]] = {}  # mutant -> its status in each group that judged it
    every: set[str] = set()  # the mutants to account for
    # The whole run accounts for every mutant of the mutated modules (one no group judges is a
    # failure); a run of some groups only for the mutants those groups judge.
    whole = {path.stem for path in result_files} == set(_groups())
    for path in result_files:
        patterns = _group(path.stem)["mutants"]
        for name, status in _statuses(path.read_text(encoding="utf-8")).items():
            matched = any(fnmatch.fnmatchcase(name, p) for p in patterns)
            if matched:
                judged.setdefault(name, []).append(status)
            if matched or whole:
                every.add(name)
    if not every:
        return None
    statuses = {}
    for name in every:
        seen = judged.get(name, ["not judged by any group"])
        killed = [s for s in seen if s not in (*NOT_KILLED, TIMEOUT, "not checked")]
        timed_out = [s for s in seen if s == TIMEOUT]
        statuses[name] = (killed or timed_out or seen)[0]
    return statuses


def _kind(name: str, status: str, equivalent: set[str], child: set[str]) -> str:
    """What a mutant counts as in the per-module table."""
    if status == TIMEOUT:
        return "timeout"
    if status not in NOT_KILLED:
        return "killed"
    if name in equivalent:
        return "equivalent"
    if name in child:
        return "killed in a child"
    return status


def check(equivalent_file: Path, result_files: list[Path], child_file: Path | None = None) -> int:
    equivalent = _equivalent(equivalent_file)
    child = _equivalent(child_file) if child_file is not None else set()
    statuses = _judged(result_files)
    if statuses is None:
        print("mutation check: no mutant in the results; did mutmut run?", file=sys.stderr)
        return 2
    per_module: dict[str, Counter[str]] = {}
    for name, status in statuses.items():
        module = name.split(".x_")[0].split(".xǁ")[0]
        per_module.setdefault(module, Counter())[_kind(name, status, equivalent, child)] += 1
    for module, counts in sorted(per_module.items()):
        shown = ", ".join(f"{kind} {count}" for kind, count in sorted(counts.items()))
        print(f"{module}: {sum(counts.values())} mutants: {shown}")
    listed = equivalent | child
    missing = sorted(
        n for n, s in statuses.items() if s in ("not checked", "not judged by any group")
    )
    new = sorted(n for n, s in statuses.items() if s in NOT_KILLED and n not in listed)
    patterns = [p for path in result_files for p in _group(path.stem)["mutants"]]
    stale = sorted(
        name
        for name in listed
        if any(fnmatch.fnmatchcase(name, p) for p in patterns)
        and statuses.get(name, "killed") not in NOT_KILLED
    )
    _tell(statuses, new, stale, missing, equivalent_file, child_file)
    return 1 if new or missing or stale else 0


def _tell(
    statuses: dict[str, str],
    new: list[str],
    stale: list[str],
    missing: list[str],
    equivalent_file: Path,
    child_file: Path | None,
) -> None:
    lists = equivalent_file.name + (f" or {child_file.name}" if child_file is not None else "")
    for name in sorted(n for n, s in statuses.items() if s == TIMEOUT):
        print(f"TIMEOUT (counted apart, not as killed): {name}")
    for name in new:
        print(f"NOT KILLED ({statuses[name]}), not listed in {lists}: {name}")
    for name in stale:
        print(f"STALE: listed in {lists} but killed, timed out or gone (renumbered?): {name}")
    for name in missing:
        print(f"NOT RUN ({statuses[name]}): {name}")
    if missing:
        print(f"{len(missing)} mutants not run (the run stopped early, or no group matches them)")
    if new:
        print(
            f"{len(new)} mutant(s) no test kills: see them with `mutmut show NAME`, then kill "
            f"them with a test, or list them in {lists} with the reason"
        )
    if stale:
        print(f"{len(stale)} stale entr{'y' if len(stale) == 1 else 'ies'} in {lists}")


def main(argv: list[str]) -> int:
    command, *args = argv or ["help"]
    if command == "groups":
        print("\n".join(_groups()))
        return 0
    if command == "configure" and len(args) == 2:
        configure(args[0], Path(args[1]))
        return 0
    if command == "patterns" and len(args) == 1:
        print("\n".join(_group(args[0])["mutants"]))
        return 0
    if command == "equivalents-table" and len(args) == 1:
        print(equivalents_table(Path(args[0])))
        return 0
    if command == "child-table" and len(args) == 1:
        print(equivalents_table(Path(args[0]), CHILD_HEADER))
        return 0
    if command == "check" and args:
        equivalent, *rest = args
        child = None
        if rest[:1] == ["--child"] and len(rest) >= 2:
            child, rest = Path(rest[1]), rest[2:]
        return check(Path(equivalent), [Path(a) for a in rest], child)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
