"""From the items of an implementation to its part of the report: an item that never ran is
missing alone, the skip text is classified, a pending promise keeps its failure, and a new
implementation gets no pending. Each survived mutation testing before it had its own test
(docs/explanation/mutation-testing.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_polyloop._outcomes import PhaseResult
from pytest_polyloop._report import (
    Baseline,
    build_implementation,
    build_report,
    write_json,
    write_markdown,
)
from tests.plugin._sandbox import Project
from tests.unit._reports import ENVIRONMENT

SEAM = "action_executor"
PROMISES = ("action_executor.a_first", "action_executor.b_second", "action_executor.c_third")


def phase(when: str, outcome: str, **fields: object) -> PhaseResult:
    return PhaseResult(when=when, outcome=outcome, duration=0.25, **fields)  # type: ignore[arg-type]


def ran(call: PhaseResult | None = None) -> list[PhaseResult]:
    return [phase("setup", "passed"), call or phase("call", "passed"), phase("teardown", "passed")]


def entry(implementation_id: str = "impl") -> dict[str, Any]:
    return {
        "id": implementation_id,
        "seam": SEAM,
        "fixture": implementation_id,
        "source": "conftest.py:1",
        "suite_hash": "h",
        "catalogue": [{"id": p, "doc": f"{p} holds.", "kind": "promise"} for p in PROMISES],
        "waive": {},
        "overridden": [],
        "items": {f"t.py::test_{p}": p for p in PROMISES},
    }


def build(
    results: Mapping[str, Sequence[PhaseResult]],
    baseline: Baseline | None = None,
    parse_skip: Any = lambda text: None,
    implementation_id: str = "impl",
) -> dict[str, Any]:
    return build_implementation(entry(implementation_id), results, baseline, parse_skip)


def outcomes(implementation: Mapping[str, Any]) -> dict[str, str]:
    return {promise["id"]: promise["outcome"] for promise in implementation["promises"]}


# -- an item that never ran is missing, and only it ------------------------------------------


def test_an_item_that_never_ran_is_missing_and_every_later_promise_is_still_judged() -> None:
    first, second, third = PROMISES
    results = {f"t.py::test_{first}": ran(), f"t.py::test_{third}": ran()}
    implementation = build(results)
    assert implementation["missing"] == [second]
    assert outcomes(implementation) == {first: "held", third: "held"}
    assert implementation["collected"] == 2


def test_the_first_item_never_run_leaves_every_other_promise_judged() -> None:
    first, second, third = PROMISES
    results = {f"t.py::test_{second}": ran(), f"t.py::test_{third}": ran()}
    implementation = build(results)
    assert implementation["missing"] == [first]
    assert outcomes(implementation) == {second: "held", third: "held"}


# The same through a real run, serial and under xdist: a conftest hook stops pytest from running
# the first promise of the catalogue (as a plugin that swallows an item would); every other
# promise is judged.
NEVER_RUN = "action_executor.action_error_is_a_normal_observation_not_an_env_error"
SWALLOW_ONE = f"""\
@pytest_polyloop.seam("action_executor", samples="samples")
@pytest.fixture
def good_executor():
    return SandboxExecutor()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    if item.name.startswith("test_{NEVER_RUN.split(".")[1]}"):
        return True  # handled: no report at all, as if it never ran
    return None
"""


def _check_only_the_swallowed_promise_is_missing(report: Mapping[str, Any] | None) -> None:
    assert report is not None
    [implementation] = report["implementations"]
    assert implementation["missing"] == [NEVER_RUN]
    assert implementation["catalogue"] > 2
    assert implementation["collected"] == implementation["catalogue"] - 1
    # First in catalogue order: a judgement loop that stopped at it would judge none at all.
    assert all(promise["id"] > NEVER_RUN for promise in implementation["promises"])
    assert report["verdict"] == "incomplete"


def test_a_promise_that_never_ran_in_a_real_run_is_the_only_one_missing(
    project: Project,
) -> None:
    project.conftest("tests", SWALLOW_ONE)
    run = project.run()
    _check_only_the_swallowed_promise_is_missing(run.report)


def test_a_promise_that_never_ran_under_xdist_is_the_only_one_missing(project: Project) -> None:
    project.conftest("tests", SWALLOW_ONE)
    run = project.run("-p", "xdist", "-n", "2", subprocess=True)
    _check_only_the_swallowed_promise_is_missing(run.report)


# -- the skip text is classified when no contract skip travelled ----------------------------


def test_an_item_skipped_with_only_its_text_is_classified_from_the_text() -> None:
    first, second, third = PROMISES
    parts = {"outcome": "unverifiable", "why": "no sample", "verify_yourself": "add one"}
    skipped = phase("call", "skipped", skip_reason="Skipped: coded")
    results = {
        f"t.py::test_{first}": ran(),
        f"t.py::test_{second}": ran(skipped),
        f"t.py::test_{third}": ran(),
    }
    implementation = build(results, parse_skip=lambda text: parts if "coded" in text else None)
    [promise] = [p for p in implementation["promises"] if p["id"] == second]
    assert (promise["outcome"], promise["why"], promise["verify_yourself"]) == (
        "unverifiable",
        "no sample",
        "add one",
    )


# -- pending keeps the failure, and only an implementation the baseline knows gets it ---------

FAILED = phase("call", "failed", text="E   AssertionError: x", crash="AssertionError: x")


def _violated_second() -> dict[str, list[PhaseResult]]:
    first, second, third = PROMISES
    return {
        f"t.py::test_{first}": ran(),
        f"t.py::test_{second}": ran(FAILED),
        f"t.py::test_{third}": ran(),
    }


def test_a_pending_promise_keeps_its_failure_and_says_why_it_does_not_fail_the_run() -> None:
    first, second, _ = PROMISES
    catalogue = frozenset((SEAM, promise) for promise in PROMISES)  # the kit had them all
    baseline = Baseline({("impl", first): "held", ("impl", second): "pending"}, catalogue)
    implementation = build(_violated_second(), baseline)
    [promise] = [p for p in implementation["promises"] if p["id"] == second]
    assert promise["outcome"] == "pending"
    assert promise["detail"] == (
        "AssertionError: x\n"
        "(pending: new in this kit or pending in the baseline, so it does not fail the run)"
    )
    assert implementation["counts"]["pending"] == 1
    assert implementation["counts"]["violated"] == 0


def test_a_promise_new_to_the_kit_is_pending_for_a_known_implementation() -> None:
    first, _, third = PROMISES
    catalogue = frozenset({(SEAM, first), (SEAM, third)})  # the baseline's kit lacked `second`
    baseline = Baseline({("impl", first): "held", ("impl", third): "held"}, catalogue)
    implementation = build(_violated_second(), baseline)
    assert outcomes(implementation)[PROMISES[1]] == "pending"


def test_a_new_implementation_gets_no_pending_even_for_a_promise_new_to_the_kit() -> None:
    first, second, third = PROMISES
    catalogue = frozenset({(SEAM, first), (SEAM, third)})  # the baseline's kit lacked `second`
    baseline = Baseline({("other", first): "held", ("other", third): "held"}, catalogue)
    assert not baseline.is_pending(SEAM, "impl", second)
    implementation = build(_violated_second(), baseline)
    assert outcomes(implementation)[second] == "violated"
    [promise] = [p for p in implementation["promises"] if p["id"] == second]
    assert promise["detail"] == "AssertionError: x"


# -- the verdict: an implementation that could not be built outranks a violation -------------


def test_a_setup_error_anywhere_is_the_verdict_even_beside_a_violation() -> None:
    broken_setup = phase("setup", "failed", crash="RuntimeError: no db")
    violated = {f"t.py::test_{p}": ran(FAILED) for p in PROMISES}
    unbuilt = {f"u.py::test_{p}": [broken_setup, phase("teardown", "passed")] for p in PROMISES}
    other = {**entry("unbuilt"), "items": {f"u.py::test_{p}": p for p in PROMISES}}
    report = build_report(
        implementations=[entry("violating"), other],
        results={**violated, **unbuilt},
        baseline=None,
        parse_skip=lambda text: None,
        kit_version="k",
        suite_hash="s",
        pytest_version="p",
        python_version="py",
        created_at="now",
        environment=ENVIRONMENT,
        report_id="r1",
    )
    assert report["verdict"] == "setup_error"
    by_id = {item["id"]: item for item in report["implementations"]}
    assert by_id["violating"]["counts"]["violated"] == 3
    assert by_id["unbuilt"]["setup_error"]["type"] == "RuntimeError"


def test_every_promise_of_an_implementation_that_could_not_be_built_says_so() -> None:
    first, second, _ = PROMISES
    broken_setup = phase("setup", "failed", crash="RuntimeError: no db")
    results = {
        f"t.py::test_{first}": [broken_setup, phase("teardown", "passed")],
        # Ran without the part that failed, its waiver's xfail: not judged either.
        f"t.py::test_{second}": ran(phase("call", "skipped", wasxfail="waived: ticket 7")),
    }  # `third` never ran
    waived = {**entry(), "waive": {first: "ticket 3", second: "ticket 7"}}
    implementation = build_implementation(waived, results, None, lambda text: None)
    assert implementation["setup_error"] == {
        "type": "RuntimeError",
        "message": "no db",
        "location": "conftest.py:1",
    }
    assert [(p["id"], p["outcome"], p["detail"], p["waiver_reason"]) for p in implementation[
        "promises"
    ]] == [
        (promise, "setup_error", "not judged: the implementation's setup failed (RuntimeError)",
         {first: "ticket 3", second: "ticket 7"}.get(promise))
        for promise in PROMISES
    ]  # fmt: skip
    assert implementation["missing"] == []
    assert implementation["counts"]["setup_error"] == 1


def test_a_promise_violated_again_that_held_in_the_baseline_is_violated_not_pending() -> None:
    first, second, _ = PROMISES
    catalogue = frozenset((SEAM, promise) for promise in PROMISES)
    baseline = Baseline({("impl", first): "pending", ("impl", second): "held"}, catalogue)
    assert outcomes(build(_violated_second(), baseline))[second] == "violated"


def test_a_folded_promise_keeps_the_time_it_ran_and_one_never_run_took_none() -> None:
    first, _, third = PROMISES
    broken_setup = phase("setup", "failed", crash="RuntimeError: no db")
    results = {f"t.py::test_{first}": [broken_setup, phase("teardown", "passed")]}
    implementation = build(results)
    durations = {p["id"]: p["duration_s"] for p in implementation["promises"]}
    assert durations == {first: 0.5, PROMISES[1]: 0.0, third: 0.0}


# -- what else travels from the phases into a promise's entry --------------------------------


def test_kept_by_and_reruns_reach_the_promise_entry() -> None:
    first, second, third = PROMISES
    kept = {"outcome": "not_applicable", "why": "polyloop keeps it", "kept_by": "polyloop"}
    rerun = [phase(when, "passed", attempt=1) for when in ("setup", "call", "teardown")]
    results = {
        f"t.py::test_{first}": ran(phase("call", "skipped", contract_skip=kept)),
        f"t.py::test_{second}": [phase("call", "rerun"), *rerun],
        f"t.py::test_{third}": ran(),
    }
    promises = {p["id"]: p for p in build(results)["promises"]}
    assert (promises[first]["outcome"], promises[first]["kept_by"]) == (
        "not_applicable",
        "polyloop",
    )
    assert (promises[second]["outcome"], promises[second]["reruns"]) == ("held", 1)
    assert "kept_by" not in promises[third]
    assert "reruns" not in promises[third]


def test_a_plain_skip_without_a_reason_says_skipped() -> None:
    first, *_ = PROMISES
    results = {f"t.py::test_{first}": ran(phase("call", "skipped", skip_reason=""))}
    [promise] = build(results)["promises"]
    assert (promise["outcome"], promise["why"]) == ("not_applicable", "skipped")


def test_promises_are_listed_in_promise_order_whatever_their_node_ids() -> None:
    reversed_ids = {f"t.py::test_{9 - n}": p for n, p in enumerate(PROMISES)}
    results = {nodeid: ran() for nodeid in reversed_ids}
    implementation = build_implementation(
        {**entry(), "items": reversed_ids}, results, None, lambda text: None
    )
    assert [p["id"] for p in implementation["promises"]] == list(PROMISES)


def test_a_setup_errors_own_location_wins_over_the_fixtures() -> None:
    first, *_ = PROMISES
    error = {"type": "TypeError", "message": "bad samples", "location": "conftest.py:9"}
    results = {f"t.py::test_{first}": ran(phase("call", "passed", setup_error=error))}
    assert build(results)["setup_error"] == error


# -- the whole report and each verdict, from data ---------------------------------------------


def _report(
    *entries: dict[str, Any],
    results: Mapping[str, Sequence[PhaseResult]],
    baseline: Baseline | None = None,
    **kw: Any,
) -> dict[str, Any]:
    return build_report(
        implementations=list(entries),
        results=results,
        baseline=baseline,
        parse_skip=lambda text: None,
        kit_version="0.9",
        suite_hash="sha256:abc",
        pytest_version="9.0",
        python_version="3.11.7",
        created_at="2026-01-01T00:00:00Z",
        environment=ENVIRONMENT,
        report_id="r1",
        **kw,
    )


def _all(call: PhaseResult | None = None) -> dict[str, list[PhaseResult]]:
    return {f"t.py::test_{p}": ran(call) for p in PROMISES}


def test_the_report_carries_its_run_and_lists_implementations_by_id() -> None:
    second = {**entry("b"), "items": {f"u.py::test_{p}": p for p in PROMISES}}
    results = {**_all(), **{f"u.py::test_{p}": ran() for p in PROMISES}}
    report = _report(second, entry("a"), results=results, interrupted=True)
    assert {key: value for key, value in report.items() if key != "implementations"} == {
        "schema": "polyloop-conformance/2",
        "kit_version": "0.9",
        "suite_hash": "sha256:abc",
        "pytest_version": "9.0",
        "python_version": "3.11.7",
        "created_at": "2026-01-01T00:00:00Z",
        "verdict": "conformant",
        "interrupted": True,
        "environment": ENVIRONMENT,
        "report_id": "r1",
        "left_out": [],
    }
    assert [item["id"] for item in report["implementations"]] == ["a", "b"]
    assert _report(entry(), results=_all())["interrupted"] is False


def test_left_out_implementations_are_listed_unless_judged_and_never_change_the_verdict() -> None:
    def left(name: str, *ids: str) -> dict[str, Any]:
        return {"implementation": name, "seam": None, "extra": "x", "hint": "h", "ids": list(ids)}

    left_out = [left("Gone"), left("a"), left("Other", "a")]
    report = _report(entry("a"), results=_all(), left_out=left_out)
    assert report["left_out"] == [left("Gone")]  # "a" was judged, by name and by id
    assert report["verdict"] == "conformant"
    assert _report(results={}, left_out=[left("Gone")])["verdict"] == "no_implementations"


def test_each_verdict_from_data() -> None:
    assert _report(results={})["verdict"] == "no_implementations"
    assert _report(entry(), results=_all())["verdict"] == "conformant"
    assert _report(entry(), results=_all(FAILED))["verdict"] == "violations"
    stale = phase("call", "passed", wasxfail="waived: old")
    assert _report(entry(), results=_all(stale))["verdict"] == "violations"
    first, *_ = PROMISES
    assert _report(entry(), results={f"t.py::test_{first}": ran()})["verdict"] == "incomplete"
    skipped = phase("call", "skipped", skip_reason="Skipped: no")
    assert _report(entry(), results=_all(skipped))["verdict"] == "incomplete"  # none held


def test_an_override_is_incomplete_unless_it_is_waived() -> None:
    first, *_ = PROMISES
    overridden = {**entry(), "overridden": [first]}
    assert _report(overridden, results=_all())["verdict"] == "incomplete"
    waived = {**overridden, "waive": {first: "replaced on purpose"}}
    assert _report(waived, results=_all())["verdict"] == "conformant"


def test_a_failing_teardown_makes_the_run_incomplete_and_is_named() -> None:
    first, *_ = PROMISES
    results = _all()
    failing = phase("teardown", "failed", crash="OSError: leak")
    results[f"t.py::test_{first}"] = [phase("setup", "passed"), phase("call", "passed"), failing]
    report = _report(entry(), results=results)
    assert report["verdict"] == "incomplete"
    assert report["implementations"][0]["teardown_errors"] == [
        f"teardown failed: OSError: leak (after t.py::test_{first})"
    ]


def test_the_baseline_reaches_every_implementation_of_the_report() -> None:
    results = _violated_second()
    assert _report(entry(), results=results)["verdict"] == "violations"
    catalogue = frozenset((SEAM, promise) for promise in PROMISES)
    baseline = Baseline({("impl", PROMISES[1]): "pending"}, catalogue)
    report = _report(entry(), results=results, baseline=baseline)
    assert report["verdict"] == "conformant"  # pending does not fail the run
    assert report["implementations"][0]["counts"]["pending"] == 1


# -- the files ------------------------------------------------------------------------------


def test_the_json_report_is_written_indented_in_utf8_into_new_directories(
    tmp_path: Path,
) -> None:
    target = tmp_path / "a" / "b" / "report.json"
    write_json({"why": "café", "n": [1]}, target)
    assert target.read_bytes() == '{\n  "why": "café",\n  "n": [\n    1\n  ]\n}\n'.encode()


def test_the_markdown_report_is_written_into_new_directories(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    target = tmp_path / "a" / "b" / "report.md"
    assert write_markdown("# ok é\n", target) == [target]
    assert target.read_bytes() == "# ok é\n".encode()


def test_a_not_applicable_row_shows_its_own_promise_not_the_skips_shared_text() -> None:
    """Three promises skipped by one shared helper once read identically: each row is its
    promise (the first paragraph of its docstring), the skip's reason stays in ``why``."""
    shared = {
        "outcome": "not_applicable",
        "promise": "commit_now(run_id, records, *, sequence) commits a batch without awaiting",
        "why": "this store offers no commit_now",
        "verify_yourself": "add commit_now",
    }
    results = {
        f"t.py::test_{p}": ran(phase("call", "skipped", contract_skip=shared)) for p in PROMISES
    }
    promises = build(results)["promises"]
    assert [p["promise"] for p in promises] == [f"{p} holds." for p in PROMISES]
    assert {p["why"] for p in promises} == {"this store offers no commit_now"}
