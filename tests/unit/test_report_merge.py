"""``polyloop report merge``: several jobs' reports as one. Properties (Hypothesis): the merge
is commutative, associative and idempotent on repeated inputs, a promise violated in any job is
never held, held only when every job that ran it held, and the result validates against the
schema; bad input is one line and exit 2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from polyloop.cli import main
from polyloop.report import OUTCOMES, MergeError, load_report, merge_reports, schema
from tests.conftest import require_extra
from tests.unit._reports import SUITE, implementation, report

Jobs = tuple[dict[str, Any], dict[str, Any], dict[str, Any]]
PROMISES = ("event_sink.a", "event_sink.b", "event_sink.c")
IMPLEMENTATIONS = ("sink_one", "sink_two")


@st.composite
def jobs(draw: st.DrawFn, number: int) -> dict[str, Any]:
    """One job: some implementations, each running some promises (the rest not run: a shard)."""
    items = []
    for impl_id in draw(st.lists(st.sampled_from(IMPLEMENTATIONS), unique=True, max_size=2)):
        ran = draw(st.lists(st.sampled_from(PROMISES), unique=True, min_size=1))
        outcomes: dict[str, str] = {pid: draw(st.sampled_from(OUTCOMES)) for pid in ran}
        missing = tuple(pid for pid in PROMISES if pid not in ran)
        items.append(implementation(impl_id, "event_sink", outcomes, missing=missing))
    second = draw(st.integers(0, 59))
    job = report(
        *items, report_id=f"job-{number}", created_at=f"2026-12-01T10:00:{second:02d}.000Z"
    )
    # Left out of this job (a missing extra): maybe judged in another, maybe with other words.
    left = draw(st.lists(st.sampled_from((*IMPLEMENTATIONS, "LeftEverywhere")), unique=True))
    job["left_out"] = [
        {"implementation": name, "hint": draw(st.sampled_from(("the `x` extra", "x and y")))}
        for name in left
        if name not in {item["id"] for item in items}
    ]
    return job


three_jobs = st.tuples(jobs(1), jobs(2), jobs(3))
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def cells(merged: dict[str, Any]) -> dict[tuple[str, str], str]:
    return {
        (item["id"], p["id"]): p["outcome"]
        for item in merged["implementations"]
        for p in item["promises"]
    }


@SETTINGS
@given(three_jobs)
def test_merging_is_commutative_and_associative(reports: Jobs) -> None:
    a, b, c = reports
    whole = merge_reports([a, b, c])
    assert merge_reports([c, a, b]) == whole
    assert merge_reports([b, c, a]) == whole
    assert merge_reports([merge_reports([a, b]), c]) == whole
    assert merge_reports([a, merge_reports([b, c])]) == whole
    assert merge_reports([merge_reports([c]), merge_reports([b, a])]) == whole


@SETTINGS
@given(three_jobs)
def test_left_out_is_the_union_of_what_no_job_judged(reports: Jobs) -> None:
    merged = merge_reports(list(reports))
    judged = {item["id"] for item in merged["implementations"]}
    names = {e["implementation"] for job in reports for e in job["left_out"]} - judged
    assert [e["implementation"] for e in merged.get("left_out", [])] == sorted(names)


@SETTINGS
@given(three_jobs)
def test_merging_is_idempotent_on_repeated_inputs(reports: Jobs) -> None:
    a, b, _ = reports
    once = merge_reports([a, b])
    assert merge_reports([a, b, a, b, b]) == once
    assert merge_reports([once, a]) == once
    assert merge_reports([once, once]) == once
    assert merge_reports([once]) == once
    assert [job["report_id"] for job in once["jobs"]] == sorted(
        ["job-1", "job-2"], key=lambda rid: ({"job-1": a, "job-2": b}[rid]["created_at"], rid)
    )


@SETTINGS
@given(three_jobs)
def test_a_violation_in_any_job_is_never_held_and_held_needs_every_job_that_ran_it(
    reports: Jobs,
) -> None:
    merged = merge_reports(list(reports))
    seen: dict[tuple[str, str], list[str]] = {}
    for job in reports:
        for key, outcome in cells(job).items():
            seen.setdefault(key, []).append(outcome)
    assert set(cells(merged)) == set(seen)  # a promise no job ran is no cell
    for key, outcome in cells(merged).items():
        if "violated" in seen[key]:
            assert outcome == "violated"
        assert (outcome == "held") == all(o == "held" for o in seen[key])
    for item in merged["implementations"]:
        ran = {p["id"] for p in item["promises"]}
        assert set(item["missing"]) == set(PROMISES) - ran  # judged by the jobs that ran it
        for promise in item["promises"]:
            runs = {run["report_id"]: run["outcome"] for run in promise["runs"]}
            expected = {
                job["report_id"]: cells(job)[(item["id"], promise["id"])]
                for job in reports
                if (item["id"], promise["id"]) in cells(job)
            }
            assert runs == expected  # each job's outcome is listed


@SETTINGS
@given(reports=three_jobs)
def test_the_merged_report_validates_against_the_schema_and_reads_back(
    reports: Jobs, tmp_path_factory: pytest.TempPathFactory
) -> None:
    jsonschema = _jsonschema()
    merged = merge_reports(list(reports))
    jsonschema.validate(merged, schema())
    path = tmp_path_factory.mktemp("merged") / "merged.json"
    path.write_text(json.dumps(merged), encoding="utf-8")
    assert load_report(path) == merged


def _jsonschema() -> Any:
    require_extra("schema")
    import jsonschema

    return jsonschema


def test_the_merged_verdict_comes_from_the_merged_cells() -> None:
    held = report(implementation("s", "event_sink", {"event_sink.a": "held"}), report_id="one")
    broken = report(
        implementation("s", "event_sink", {"event_sink.a": "violated"}), report_id="two"
    )
    assert held["verdict"] == "conformant"
    merged = merge_reports([held, broken])
    assert merged["verdict"] == "violations"
    promise = merged["implementations"][0]["promises"][0]
    assert promise["runs"] == [
        {"report_id": "one", "outcome": "held"},
        {"report_id": "two", "outcome": "violated"},
    ]
    assert merged["implementations"][0]["jobs"] == ["one", "two"]


def test_a_shard_that_did_not_run_a_promise_does_not_make_the_merge_incomplete() -> None:
    first = report(
        implementation("s", "event_sink", {"event_sink.a": "held"}, missing=("event_sink.b",)),
        report_id="shard-1",
    )
    second = report(
        implementation("s", "event_sink", {"event_sink.b": "held"}, missing=("event_sink.a",)),
        report_id="shard-2",
    )
    assert first["verdict"] == second["verdict"] == "incomplete"
    merged = merge_reports([first, second])
    assert merged["verdict"] == "conformant"
    assert merged["implementations"][0]["missing"] == []


def test_different_suites_are_refused_unless_allowed_and_then_the_differences_are_marked() -> None:
    other = "sha256:" + "b" * 64
    old = report(
        implementation("s", "event_sink", {"event_sink.a": "held", "event_sink.b": "held"}),
        report_id="old",
    )
    new = report(
        implementation(
            "s",
            "event_sink",
            {"event_sink.a": "held", "event_sink.c": "held", "event_sink.b": "held"},
            texts={"event_sink.b": "a reworded promise"},
            suite=other,
        ),
        report_id="new",
        suite=other,
    )
    with pytest.raises(MergeError, match=r"different suites .* --allow-mixed-suites"):
        merge_reports([old, new])
    merged = merge_reports([old, new], allow_mixed_suites=True)
    assert merged["mixed_suites"] is True
    marked = {p["id"] for p in merged["implementations"][0]["promises"] if p.get("mixed_suite")}
    assert marked == {"event_sink.b", "event_sink.c"}  # reworded; only one suite has it


def test_one_implementation_id_as_two_seams_is_refused() -> None:
    one = report(implementation("x", "event_sink", {"event_sink.a": "held"}), report_id="1")
    two = report(implementation("x", "run_store", {"run_store.a": "held"}), report_id="2")
    with pytest.raises(MergeError, match="'x' is a event_sink in one report and a run_store"):
        merge_reports([one, two])


def test_a_version_1_report_merges_known_by_its_content() -> None:
    old = report(implementation("s", "event_sink", {"event_sink.a": "held"}))
    for key in ("report_id", "environment"):
        del old[key]
    old["schema"] = "polyloop-conformance/1"
    merged = merge_reports([old, old])
    assert len(merged["jobs"]) == 1
    assert merged["jobs"][0]["report_id"].startswith("content-")
    assert merged["jobs"][0]["environment"] is None


# -- the command -----------------------------------------------------------------------------


def write(tmp_path: Path, name: str, value: object) -> Path:
    path = tmp_path / name
    path.write_text(value if isinstance(value, str) else json.dumps(value), encoding="utf-8")
    return path


def test_report_merge_writes_the_merged_report(tmp_path: Path) -> None:
    one = write(
        tmp_path,
        "a.json",
        report(implementation("s", "event_sink", {"event_sink.a": "held"}), report_id="a"),
    )
    two = write(
        tmp_path,
        "b.json",
        report(implementation("s", "event_sink", {"event_sink.a": "held"}), report_id="b"),
    )
    out = tmp_path / "merged.json"
    assert main(["report", "merge", str(one), str(two), "-o", str(out)]) == 0
    merged = load_report(out)
    assert [job["report_id"] for job in merged["jobs"]] == ["a", "b"]
    assert main(["report", "merge", "-o", str(out), str(one), str(one)]) == 0
    assert [job["report_id"] for job in load_report(out)["jobs"]] == ["a"]


VALID = report(implementation("s", "event_sink", {"event_sink.a": "held"}))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ({**VALID, "schema": "junit/1"}, "not a polyloop-conformance/2 report (schema: 'junit/1')"),
        (json.dumps(VALID)[:60], "not JSON: "),
        (
            {**VALID, "schema": "polyloop-conformance/3"},
            "schema: 'polyloop-conformance/3'): a newer polyloop wrote it; upgrade polyloop",
        ),
        ({**VALID, "implementations": [{"id": "s", "promises": "x"}]}, "'implementations' must"),
    ],
    ids=["wrong-schema", "truncated", "future-schema", "malformed"],
)
def test_bad_input_to_merge_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: object, message: str
) -> None:
    good = write(tmp_path, "good.json", VALID)
    bad = write(tmp_path, "bad.json", content)
    assert main(["report", "merge", str(good), str(bad), "-o", str(tmp_path / "m.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"polyloop: error: {bad}: ")
    assert message in err
    assert err.count("\n") == 1
    assert not (tmp_path / "m.json").exists()


def test_mixed_suites_through_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = "sha256:" + "c" * 64
    a = write(tmp_path, "a.json", VALID)
    b = write(tmp_path, "b.json", {**VALID, "report_id": "r2", "suite_hash": other})
    out = tmp_path / "m.json"
    assert main(["report", "merge", str(a), str(b), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("polyloop: error: cannot merge: the reports were made by different")
    assert err.count("\n") == 1
    assert main(["report", "merge", str(a), str(b), "-o", str(out), "--allow-mixed-suites"]) == 0
    merged = load_report(out)
    assert merged["mixed_suites"] is True
    assert merged["suite_hash"] not in (SUITE, other)  # stands for both, is neither


# ------------------------------------------------------- one report id, different contents

colliding_jobs = st.tuples(
    *(st.integers(1, 2).flatmap(jobs) for _ in range(3))
)  # three jobs drawn from two report ids: at least two share an id, often with other contents


def _merged_or_refused(reports: list[dict[str, Any]]) -> object:
    try:
        return merge_reports(reports)
    except MergeError as error:
        return "refused" if "both carry report id 'job-" in str(error) else str(error)


@SETTINGS
@given(colliding_jobs)
def test_with_colliding_report_ids_the_merge_never_depends_on_the_order(reports: Jobs) -> None:
    """Two inputs with one report id and different contents are refused whatever their order;
    the same content given twice merges, and every grouping and order agrees."""
    a, b, c = reports
    whole = _merged_or_refused([a, b, c])
    for order in ([c, a, b], [b, c, a], [b, a, c], [a, c, b], [c, b, a]):
        assert _merged_or_refused(order) == whole
    if whole != "refused":
        assert merge_reports([merge_reports([a, b]), c]) == whole
        assert merge_reports([a, merge_reports([b, c])]) == whole
        assert merge_reports([whole, a]) == whole
        assert merge_reports([a, a, b, c, c]) == whole


def test_one_report_id_with_different_outcomes_is_refused_in_either_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    held = report(implementation("s", "event_sink", {"event_sink.a": "held"}), report_id="r")
    broken = report(implementation("s", "event_sink", {"event_sink.a": "violated"}), report_id="r")
    a, b = write(tmp_path, "a.json", held), write(tmp_path, "b.json", broken)
    out = tmp_path / "m.json"
    for first, second in ((a, b), (b, a)):
        assert main(["report", "merge", str(first), str(second), "-o", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(
            f"polyloop: error: cannot merge: {first} and {second} both carry report id 'r' "
            "with different outcomes"
        )
        assert err.count("\n") == 1
        assert not out.exists()
    assert merge_reports([held, merge_reports([held])]) == merge_reports([held])
    with pytest.raises(MergeError, match="input 1 and input 2 both carry report id 'r'"):
        merge_reports([merge_reports([held]), broken])
