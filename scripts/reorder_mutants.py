"""Hand-written reordering mutants: mutmut changes operators, constants and calls but never the
order of statements, and the order is most of what the stopping order, the outcome precedence,
the verdict and the append rules decide.

Each mutant swaps two checks in a copy of the project; the tests named for its module must fail
on it. Run by scripts/mutation.sh (``python scripts/reorder_mutants.py``); exit status 1 if a
mutant survives. See docs/explanation/mutation-testing.md.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Reorder:
    name: str
    path: str
    first: str  # the text of the first check, exactly as it stands before `second`
    second: str
    tests: tuple[str, ...]
    equivalent: str = ""  # why no test can tell this mutant from the code, if none can


STOPPING_TESTS = (
    "tests/unit/test_stop_reasons.py",
    "tests/unit/test_running_totals.py",
    "tests/unit/test_step_records.py",
)
OUTCOME_TESTS = ("tests/plugin/test_classify.py", "tests/plugin/test_outcome_channels.py")
VERDICT_TESTS = ("tests/plugin/test_report_items.py", "tests/plugin/test_verdicts.py")
RULE_TESTS = ("tests/unit/test_batched_commits.py", "tests/unit/test_sqlite_store.py")

MUTANTS = (
    Reorder(
        "admit: the action budget before the step budget",
        "polyloop/_loop/_stopping.py",
        "    if counters.steps >= budget.max_steps:\n        return StopReason.STEP_BUDGET\n",
        "    if counters.executed_actions >= budget.max_executed_actions:\n"
        "        return StopReason.ACTION_BUDGET\n",
        STOPPING_TESTS,
    ),
    Reorder(
        "settle: the step counted after a model failure returns",
        "polyloop/_loop/_stopping.py",
        "    counters = replace(counters, steps=counters.steps + 1)\n",
        "    if model_failed:  # C\n        return counters, StopReason.LLM_ERROR\n",
        STOPPING_TESTS,
        equivalent="the run ends on LLM_ERROR and only executed_actions is read after a stop",
    ),
    Reorder(
        "settle: completion checked before the environment error",
        "polyloop/_loop/_stopping.py",
        "    if step.action_status is ActionStatus.ENV_ERROR:  # G\n"
        "        return counters, StopReason.ENV_ERROR\n",
        "    if step.action_status is ActionStatus.NOT_EXECUTED:  # G: never entered execution\n"
        "        return counters, None\n"
        "    counters = replace(counters, executed_actions=counters.executed_actions + 1)\n"
        "    marker = agent.tools is not None and "
        "agent.tools.is_completion_marker(step.tool_name)\n"
        "    if step.env_reported_completion or marker:  # G\n"
        "        return counters, StopReason.TASK_COMPLETED\n",
        STOPPING_TESTS,
    ),
    *(
        Reorder(
            f"classify: {second} before {first}",
            "pytest_polyloop/_outcomes.py",
            f"    {first},\n",
            f"    {second},\n",
            OUTCOME_TESTS,
        )
        for first, second in (
            ("_setup_error", "_violated"),
            ("_violated", "_overridden"),
            ("_overridden", "_stale_waiver"),
            ("_stale_waiver", "_skipped"),
        )
    ),
    Reorder(
        "verdict: violations before setup_error",
        "pytest_polyloop/_report.py",
        '    elif any(item["setup_error"] for item in judged):\n        verdict = "setup_error"\n',
        '    elif any(item["counts"]["violated"] or item["counts"]["stale_waiver"] '
        "for item in judged):\n"
        '        verdict = "violations"\n',
        VERDICT_TESTS,
    ),
    Reorder(
        "verdict: incomplete before violations",
        "pytest_polyloop/_report.py",
        '    elif any(item["counts"]["violated"] or item["counts"]["stale_waiver"] '
        "for item in judged):\n"
        '        verdict = "violations"\n',
        '    elif any(_is_incomplete(item, waivers[item["id"]]) for item in judged):\n'
        '        verdict = "incomplete"\n',
        VERDICT_TESTS,
    ),
    Reorder(
        "check_append: finished before a second RunStarted",
        "polyloop/stores/_rules.py",
        "    if isinstance(record, RunStarted) and length > 0:\n"
        '        raise RunAlreadyExists(f"run {run_id!r} already has a log '
        '({_records(length)})")\n',
        "    if finished:\n"
        '        raise RunAlreadyFinished(f"run {run_id!r} is finished; '
        'nothing may be appended")\n',
        RULE_TESTS,
    ),
)


def _swap(source: str, mutant: Reorder) -> str:
    both = mutant.first + mutant.second
    if source.count(both) != 1:
        raise SystemExit(f"{mutant.name}: the two checks are not found, adjacent, in {mutant.path}")
    return source.replace(both, mutant.second + mutant.first)


def main() -> int:
    survivors = []
    with tempfile.TemporaryDirectory(prefix="polyloop-reorder-") as scratch:
        copy = Path(scratch) / "project"
        shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(".*", "mutants", "site", "*.db*"))
        for mutant in MUTANTS:
            target = copy / mutant.path
            original = target.read_text(encoding="utf-8")
            target.write_text(_swap(original, mutant), encoding="utf-8")
            try:
                # `python -m pytest` puts the copy first on sys.path: the mutant is imported.
                argv = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:randomly"]
                argv += ["-p", "no:cacheprovider", "-k", "not xdist", *mutant.tests]
                done = subprocess.run(argv, cwd=copy, capture_output=True, text=True, check=False)
            finally:
                target.write_text(original, encoding="utf-8")
            if done.returncode == 1:
                print(f"killed: {mutant.name}")
            elif mutant.equivalent:
                print(f"survived, equivalent: {mutant.name} ({mutant.equivalent})")
            else:
                print(f"SURVIVED (pytest exit {done.returncode}): {mutant.name}")
                survivors.append(mutant.name)
    print(f"reordering mutants: {len(survivors)} non-equivalent survivor(s) of {len(MUTANTS)}")
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
