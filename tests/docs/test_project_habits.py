"""The habits CI relies on stay in place: pre-commit runs what CI runs, every ignored lint rule
says why, and the README's test command measures coverage against the floor."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def ci_commands(tool: str) -> list[str]:
    lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip().split(" ", 1)[0] == tool]


def test_pre_commit_runs_exactly_cis_ruff_mypy_and_lint_imports_commands() -> None:
    config = (ROOT / ".pre-commit-config.yaml").read_text(encoding="utf-8")
    entries = re.findall(r"^\s+entry: (.+)$", config, flags=re.M)
    assert entries == ci_commands("ruff") + ci_commands("mypy") + ci_commands("lint-imports")
    assert len(entries) == 4


def test_every_lint_rule_the_config_ignores_has_a_comment_saying_why() -> None:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    ignored = tomllib.loads(text)["tool"]["ruff"]["lint"]["ignore"]
    block = re.search(r"^ignore = \[\n(.*?)^\]", text, flags=re.M | re.S)
    assert block is not None, "write [tool.ruff.lint] ignore one rule a line"
    explained, uncommented = False, []
    for line in block.group(1).splitlines():
        explained = explained or line.strip().startswith("#")
        rule = line.strip().strip('",')
        if rule in ignored and not explained:
            uncommented.append(rule)
        if not line.strip():
            explained = False  # a blank line ends a comment's group of rules
    assert ignored
    assert uncommented == []


def test_the_readme_test_command_measures_coverage_against_a_floor() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    command = re.search(r"<!-- ci:test-command -->\n```bash\n(.+?)\n```", readme)
    assert command is not None
    assert "--cov " in command.group(1) + " "
    coverage = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
        "coverage"
    ]
    assert coverage["run"]["branch"] is True
    assert set(coverage["run"]["source"]) == {"polyloop", "pytest_polyloop"}
    assert coverage["report"]["fail_under"] >= 87
