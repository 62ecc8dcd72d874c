"""``polyloop report diff OLD NEW`` on hand-made reports: every move away from ``held`` is a
regression (exit 1) except the deliberate ones, each move is one line, and a file that is not a
report is exit 2 with one line whatever it holds."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from polyloop.cli import main
from polyloop.report import DELIBERATE, OUTCOMES, diff_reports, render_diff

SEAM = "action_executor"


def implementation(
    implementation_id: str,
    outcomes: dict[str, str],
    *,
    missing: tuple[str, ...] = (),
    reasons: dict[str, str] | None = None,
) -> dict[str, Any]:
    promises = [
        {
            "id": promise_id,
            "outcome": outcome,
            "nodeid": f"t.py::T::test_{promise_id}",
            "promise": f"{promise_id} holds",
            "waiver_reason": (reasons or {}).get(promise_id),
        }
        for promise_id, outcome in outcomes.items()
    ]
    counts = {name: sum(o == name for o in outcomes.values()) for name in OUTCOMES}
    return {
        "id": implementation_id,
        "seam": SEAM,
        "collected": len(outcomes),
        "catalogue": len(outcomes) + len(missing),
        "counts": counts,
        "missing": list(missing),
        "teardown_errors": [],
        "promises": promises,
    }


def report(
    *implementations: dict[str, Any], schema: str = "polyloop-conformance/1"
) -> dict[str, Any]:
    return {
        "schema": schema,
        "verdict": "conformant",
        "suite_hash": "s",
        "implementations": list(implementations),
    }


def diff_cli(
    tmp_path: Path, old: object, new: object, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, str]:
    paths = []
    for name, content in (("old.json", old), ("new.json", new)):
        path = tmp_path / name
        path.write_text(content if isinstance(content, str) else json.dumps(content), "utf-8")
        paths.append(str(path))
    status = main(["report", "diff", *paths])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


BASE = {"a.one": "held", "a.two": "held", "a.three": "violated"}


# --------------------------------------------------------------------------- regressions


@pytest.mark.parametrize(
    "now", [o for o in OUTCOMES if o != "held" and o not in DELIBERATE] + ["setup_error"]
)
def test_held_to_any_other_outcome_is_a_regression_printed_on_its_own_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], now: str
) -> None:
    # On main, held → unverifiable (or not_applicable, stale_waiver, pending) exited 0: only
    # held → violated counted. "setup_error" is an outcome a later schema adds: the rule is
    # "not held", not a list of bad outcomes.
    old = report(implementation("x", BASE))
    new = report(implementation("x", {**BASE, "a.two": now}))
    diff = diff_reports(old, new)
    assert diff.regressed == [(("x", "a.two"), "held", now)]
    assert diff.changed == []
    assert diff.recovered == []
    if now in OUTCOMES:
        status, out, err = diff_cli(tmp_path, old, new, capsys)
        assert (status, err) == (1, "")
        assert f"\n  x  a.two  held → {now}\n" in out
        assert out.endswith("1 regression\n")


def test_a_promise_the_suite_still_has_but_was_not_run_is_a_regression(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = report(implementation("x", BASE))
    new = report(implementation("x", {"a.one": "held", "a.three": "violated"}, missing=("a.two",)))
    status, out, _ = diff_cli(tmp_path, old, new, capsys)
    assert status == 1
    assert "  x  a.two  held → not run\n" in out


def test_an_implementation_missing_from_new_is_a_regression(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = report(implementation("x", BASE), implementation("y", BASE))
    new = report(implementation("x", BASE))
    diff = diff_reports(old, new)
    assert diff.lost == ["y"]
    assert diff.regressed == []
    assert diff.disappeared == []
    status, out, _ = diff_cli(tmp_path, old, new, capsys)
    assert status == 1
    assert "implementations missing from NEW (regressed): 1\n  y\n" in out


# --------------------------------------------------------------------------- not regressions


@pytest.mark.parametrize("now", DELIBERATE)
def test_held_to_waived_or_overridden_is_changed_with_its_reason_not_a_regression(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], now: str
) -> None:
    old = report(implementation("x", BASE))
    new = report(implementation("x", {**BASE, "a.one": now}, reasons={"a.one": "issue 12"}))
    diff = diff_reports(old, new)
    assert diff.changed == [(("x", "a.one"), "held", now)]
    assert diff.regressed == []
    assert diff.recovered == []
    assert not diff.has_regression
    status, out, _ = diff_cli(tmp_path, old, new, capsys)
    assert status == 0
    assert f"changed (not a regression): 1\n  x  a.one  held → {now}  (reason: issue 12)\n" in out
    assert out.endswith("no regression\n")


def test_other_moves_are_changed_exactly(tmp_path: Path) -> None:
    old = report(implementation("x", {**BASE, "a.four": "unverifiable", "a.five": "waived"}))
    new = report(implementation("x", {**BASE, "a.three": "pending", "a.four": "not_applicable",
                                      "a.five": "waived"}))  # fmt: skip
    diff = diff_reports(old, new)
    assert diff.changed == [
        (("x", "a.four"), "unverifiable", "not_applicable"),
        (("x", "a.three"), "violated", "pending"),
    ]
    assert diff.regressed == diff.recovered == []
    assert diff.appeared == diff.disappeared == []


@pytest.mark.parametrize("was", ["violated", "pending", "unverifiable", "waived"])
def test_any_move_to_held_is_recovered(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], was: str
) -> None:
    old = report(implementation("x", {**BASE, "a.two": was}))
    new = report(implementation("x", BASE))
    diff = diff_reports(old, new)
    assert diff.recovered == [(("x", "a.two"), was, "held")]
    assert diff.changed == []
    assert diff.regressed == []
    status, out, _ = diff_cli(tmp_path, old, new, capsys)
    assert status == 0
    assert f"recovered (now held): 1\n  x  a.two  {was} → held\n" in out


def test_promises_new_in_or_gone_from_the_suite_are_listed_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = report(implementation("x", BASE))
    new = report(implementation("x", {"a.one": "held", "a.three": "violated", "a.new": "held"}))
    diff = diff_reports(old, new)
    assert diff.appeared == [(("x", "a.new"), "held")]
    assert diff.disappeared == [(("x", "a.two"), "held")]
    assert not diff.has_regression
    status, out, _ = diff_cli(tmp_path, old, new, capsys)
    assert status == 0
    assert "new in NEW's suite: 1\n  x  a.new  (held)\n" in out
    assert "no longer in NEW's suite: 1\n  x  a.two  (was held)\n" in out


def test_a_new_implementation_is_listed_apart_and_is_not_a_regression(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = report(implementation("x", BASE))
    new = report(implementation("x", BASE), implementation("z", {"a.one": "violated"}))
    diff = diff_reports(old, new)
    assert diff.added == ["z"]
    assert diff.appeared == []
    assert not diff.has_regression
    status, out, _ = diff_cli(tmp_path, old, new, capsys)
    assert status == 0
    assert "implementations new in NEW: 1\n  z\n" in out


def test_a_version_2_report_is_read_and_diffed_against_a_version_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = report(implementation("x", BASE))
    changed = implementation("x", {**BASE, "a.one": "violated"})
    new = report(changed, schema="polyloop-conformance/2")
    status, out, err = diff_cli(tmp_path, old, new, capsys)
    assert (status, err) == (1, "")
    assert "  x  a.one  held → violated\n" in out


def test_render_diff_prints_every_group_in_order() -> None:
    old = report(implementation("x", BASE))
    new = report(implementation("x", {**BASE, "a.one": "violated"}))
    text = render_diff(diff_reports(old, new), old, new)
    headings = [line.split(":")[0] for line in text.splitlines() if not line.startswith(" ")]
    assert headings == [
        "verdict",
        "regressed (held → anything but held, waived or overridden)",
        "implementations missing from NEW (regressed)",
        "recovered (now held)",
        "changed (not a regression)",
        "new in NEW's suite",
        "no longer in NEW's suite",
        "implementations new in NEW",
        "1 regression",
    ]


# --------------------------------------------------------------------------- refusals


VALID = report(implementation("x", BASE))


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("[" * 200_000 + "]" * 200_000, "nested too deeply"),
        ('{"a": ' * 200_000 + "1" + "}" * 200_000, "nested too deeply"),
        (
            json.dumps(report(implementation("x\ud800", BASE))),
            "unpaired surrogate",
        ),
        (
            json.dumps(report(implementation("x", {"a.\udcff": "held"}))),
            "unpaired surrogate",
        ),
        ("not json", "not JSON"),
        (b"\xff\xfe{".decode("latin-1"), "not JSON"),
        (json.dumps({**VALID, "schema": "polyloop-conformance/9"}), "not a polyloop-conformance"),
        (json.dumps([1, 2]), "not a polyloop-conformance"),
        (json.dumps({**VALID, "implementations": [{"id": "x", "promises": [{}]}]}), "'id'"),
    ],
    ids=[
        "nested-lists",
        "nested-objects",
        "surrogate-in-implementation-id",
        "surrogate-in-promise-id",
        "not-json",
        "not-utf8",
        "wrong-schema",
        "not-an-object",
        "promise-without-id",
    ],
)
@pytest.mark.parametrize("side", ["old", "new"])
def test_a_file_that_is_not_a_report_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, reason: str, side: str
) -> None:
    # On main a 200,000-deep file ended in a RecursionError traceback and an escaped lone
    # surrogate in an id in a UnicodeEncodeError traceback, both with exit 1 ("regression").
    bad = tmp_path / f"{side}.json"
    bad.write_text(content, encoding="utf-8", errors="surrogatepass")
    good = tmp_path / "good.json"
    good.write_text(json.dumps(VALID), encoding="utf-8")
    old, new = (bad, good) if side == "old" else (good, bad)
    done = subprocess.run(
        [sys.executable, "-m", "polyloop.cli", "report", "diff", str(old), str(new)],
        capture_output=True,
        timeout=120,
    )
    err = done.stderr.decode("utf-8", "backslashreplace")
    assert (done.returncode, done.stdout) == (2, b""), err
    assert err.count("\n") == 1, err
    assert err.startswith(f"polyloop: error: {bad}: ")
    assert reason in err


@pytest.mark.parametrize(
    "argv",
    [
        ["report", "diff"],
        ["report", "diff", "one.json"],
        ["report", "diff", "a", "b", "c"],
        ["report", "a.json", "b.json"],
        ["report", "diff", "--markdown", "a", "b"],
        ["report"],
        ["report", "--bogus", "a.json"],
    ],
)
def test_wrong_arguments_exit_2_with_one_line(argv: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "polyloop.cli", *argv], capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("polyloop: error: ")
    assert "Traceback" not in done.stderr


def test_report_help_shows_every_form_on_its_own_usage_line() -> None:
    # On main the usage line read "polyloop report [-h] [--markdown] FILE | diff OLD NEW
    # [FILE | diff OLD NEW ...]".
    done = subprocess.run(
        [sys.executable, "-m", "polyloop.cli", "report", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0
    assert done.stdout.split("\n\n")[0] == (
        "usage: polyloop report [--markdown | --matrix] FILE\n"
        "       polyloop report diff OLD NEW\n"
        "       polyloop report html REPORT -o conformance.html [--baseline OLD ...]\n"
        "       polyloop report merge A.json B.json ... -o merged.json [--allow-mixed-suites]\n"
        "       polyloop report badge REPORT -o badge.json"
    )  # written by hand: argparse's own would read "FILE [FILE ...]"


# --------------------------------------------------------------------------- the CI how-to

HOWTO = Path(__file__).resolve().parents[2] / "docs" / "how-to" / "run-conformance-in-ci.md"


def _block(kind: str, containing: str) -> str:
    text = HOWTO.read_text(encoding="utf-8")
    blocks = [b for b in text.split(f"```{kind}\n")[1:] if containing in b.split("```")[0]]
    assert len(blocks) == 1, f"one {kind} block with {containing!r}"
    return blocks[0].split("```")[0]


def test_the_how_to_shows_what_report_diff_prints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shown = _block("console", "$ polyloop report diff")
    command, expected = shown.split("\n", 1)
    prefix = "action_executor."
    old = report(
        implementation(
            "sql_executor",
            {
                f"{prefix}action_error_is_a_normal_observation_not_an_env_error": "held",
                f"{prefix}returns_all_five_fields": "held",
                f"{prefix}cancellation_propagates_and_is_not_swallowed": "pending",
                f"{prefix}status_trigger_conditions": "held",
            },
        )
    )
    new = report(
        implementation(
            "sql_executor",
            {
                f"{prefix}action_error_is_a_normal_observation_not_an_env_error": "violated",
                f"{prefix}returns_all_five_fields": "unverifiable",
                f"{prefix}cancellation_propagates_and_is_not_swallowed": "held",
                f"{prefix}status_trigger_conditions": "waived",
            },
            reasons={f"{prefix}status_trigger_conditions": "ticket 12"},
        )
    )
    new["verdict"] = "violations"
    status, out, err = diff_cli(tmp_path, old, new, capsys)
    assert command == "$ polyloop report diff baseline/conformance.json conformance.json"
    assert (status, err) == (1, "")
    assert out == expected


def test_the_how_to_github_actions_job_gates_on_report_diff() -> None:
    yaml = pytest.importorskip("yaml")
    job = yaml.safe_load(_block("yaml", "polyloop report diff"))
    trigger = job.get("on", job.get(True))  # YAML 1.1 reads the key `on` as true
    assert trigger == {"pull_request": None}
    steps = job["jobs"]["conformance-diff"]["steps"]
    runs = [step["run"] for step in steps if "run" in step]
    assert runs[-1] == "venv-head/bin/polyloop report diff base.json head.json"
    refs = [step.get("with", {}).get("ref") for step in steps if "checkout" in step.get("uses", "")]
    assert refs == ["${{ github.event.pull_request.base.sha }}", None]
    for script, report_name in zip(runs[:2], ("../base.json", "../head.json"), strict=True):
        assert f"--polyloop-report {report_name}" in script
        assert script.rstrip().endswith("|| [ $? -eq 1 ]")
    # The tolerance lets exit 1 (violations: the report is written) through and nothing else.
    for status, passes in ((0, True), (1, True), (2, False), (4, False), (5, False)):
        done = subprocess.run(
            ["bash", "-ec", f"(exit {status}) \\\n  || [ $? -eq 1 ]"], check=False
        )
        assert (done.returncode == 0) is passes
