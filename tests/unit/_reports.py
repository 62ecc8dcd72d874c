"""Fixed reports for the report views and the merge: every outcome, long, unicode and hostile
names, 1 and 40 implementations. Built as the plugin writes them (schema /2, valid)."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

from polyloop.report import OUTCOMES, SCHEMA

SUITE = "sha256:" + "a" * 64
HOSTILE = '<script>alert("x")</script> & [link](javascript:alert(1)) | `tick` **bold** <!--'
ENVIRONMENT = {
    "python": "3.11.2",
    "pytest": "8.4.2",
    "polyloop": "0.1.0",
    "os": "Linux-6.1",
    "extras": ["schema", "testing"],
    "xdist_workers": 0,
    "job": None,
}


def promise(
    promise_id: str, outcome: str, text: str = "", detail: str | None = None
) -> dict[str, Any]:
    return {
        "id": promise_id,
        "outcome": outcome,
        "nodeid": f"tests/test_x.py::Suite::test_{promise_id.split('.')[1]}",
        "duration_s": 0.01,
        "promise": text or f"{promise_id} is kept.",
        "why": "cannot be checked here" if outcome in ("unverifiable", "not_applicable") else None,
        "verify_yourself": "run the probe by hand" if outcome == "unverifiable" else None,
        "detail": detail if detail is not None else (f"{outcome}!" if outcome != "held" else None),
        "waiver_reason": "known" if outcome in ("waived", "stale_waiver", "overridden") else None,
    }


def implementation(
    impl_id: str,
    seam: str,
    outcomes: dict[str, str],
    *,
    missing: tuple[str, ...] = (),
    texts: dict[str, str] | None = None,
    details: dict[str, str] | None = None,
    suite: str = SUITE,
) -> dict[str, Any]:
    promises = [
        promise(pid, outcome, (texts or {}).get(pid, ""), (details or {}).get(pid))
        for pid, outcome in sorted(outcomes.items())
    ]
    counts = dict.fromkeys(OUTCOMES, 0)
    for entry in promises:
        counts[entry["outcome"]] += 1
    counts["setup_error"] = min(counts["setup_error"], 1)
    setup = "setup_error" in outcomes.values()
    return {
        "id": impl_id,
        "seam": seam,
        "fixture": "impl",
        "source": "conftest.py:1",
        "suite_hash": suite,
        "counts": counts,
        "collected": len(promises),
        "catalogue": len(promises) + len(missing),
        "missing": sorted(missing),
        "teardown_errors": [],
        "setup_error": {"type": "E", "message": "boom", "location": "x.py:1"} if setup else None,
        "promises": promises,
    }


def report(
    *implementations: dict[str, Any],
    report_id: str = "r1",
    created_at: str = "2026-12-01T10:00:00.000Z",
    suite: str = SUITE,
    verdict: str | None = None,
    job: str | None = None,
) -> dict[str, Any]:
    if verdict is None:
        items = list(implementations)
        if not items:
            verdict = "no_implementations"
        elif any(i["setup_error"] for i in items):
            verdict = "setup_error"
        elif any(i["counts"]["violated"] or i["counts"]["stale_waiver"] for i in items):
            verdict = "violations"
        elif any(not i["counts"]["held"] or i["missing"] for i in items):
            verdict = "incomplete"
        else:
            verdict = "conformant"
    return {
        "schema": SCHEMA,
        "report_id": report_id,
        "kit_version": "0.1.0",
        "suite_hash": suite,
        "pytest_version": "8.4.2",
        "python_version": "3.11.2",
        "created_at": created_at,
        "verdict": verdict,
        "interrupted": False,
        "environment": {**ENVIRONMENT, "job": job},
        "implementations": list(implementations),
    }


def every_outcome_report() -> dict[str, Any]:
    """Every outcome in one report, with a not-run cell, a hostile and a unicode name, and a
    long promise text."""
    executor = {f"action_executor.p{i}": outcome for i, outcome in enumerate(OUTCOMES)}
    executor["action_executor.p0"] = "held"
    broken = {**executor, "action_executor.p0": "violated"}
    long_text = "A promise whose text is long. " * 12
    return report(
        implementation(
            "tests/contract/test_x.py::Ünïcode执行器Executor",
            "action_executor",
            {k: ("held" if v == "setup_error" else v) for k, v in executor.items()},
            missing=("action_executor.zz_not_run",),
            texts={"action_executor.p1": long_text},
        ),
        implementation(
            HOSTILE,
            "action_executor",
            {k: ("held" if v == "setup_error" else v) for k, v in broken.items()},
            texts={"action_executor.p2": HOSTILE},
            details={"action_executor.p0": HOSTILE},
        ),
        implementation(
            "Setup" * 20 + "FailingParser",
            "decision_parser",
            {
                "decision_parser.a": "setup_error",
                "decision_parser.b": "setup_error",
            },
        ),
    )


def many_report(count: int = 40) -> dict[str, Any]:
    seams = ("model_client", "decision_parser", "action_executor", "event_sink", "run_store")
    items = []
    for number in range(count):
        outcomes = {f"{seams[0]}.p{i}": "held" for i in range(6)}
        if number % 7 == 3:
            outcomes[f"{seams[0]}.p2"] = "violated"
        items.append(implementation(f"impl_{number:02d}_with_a_long_name", seams[0], outcomes))
    return report(*items)


def run_under_ascii_locale(code: str, *args: str, **env: str) -> str:
    """Run ``code`` in a child Python whose locale encoding is ASCII (C locale, no UTF-8 mode,
    no locale coercion); return its stdout. Fails the test if the child fails."""
    child_env = {
        **os.environ,
        "LC_ALL": "C",
        "LANG": "C",
        "PYTHONUTF8": "0",
        "PYTHONCOERCECLOCALE": "0",
        **env,
    }
    done = subprocess.run(
        [sys.executable, "-X", "utf8=0", "-c", code, *args],
        env=child_env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        errors="replace",
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout
