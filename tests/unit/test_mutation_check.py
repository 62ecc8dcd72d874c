"""scripts/mutation_check.py's verdict over mutmut's results: what passes and what fails.

The groups are the project's own (pyproject.toml); the results are written here, as
``mutmut results --all True`` prints them."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def check() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "mutation_check", ROOT / "scripts" / "mutation_check.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _results(tmp_path: Path, group: str, statuses: dict[str, str]) -> Path:
    path = tmp_path / f"{group}.txt"
    path.write_text("".join(f"    {name}: {status}\n" for name, status in statuses.items()))
    return path


def _equivalents(tmp_path: Path, *names: str) -> Path:
    path = tmp_path / "equivalent.txt"
    path.write_text("# header\n" + "".join(f"{name}  # why\n" for name in names))
    return path


DIFF = "polyloop.report._diff.x_diff_reports__mutmut_1"
RENDER = "polyloop.report._text.x_render_text__mutmut_1"  # not a function the slice judges


def test_a_group_alone_accounts_only_for_the_mutants_it_judges(
    check: ModuleType, tmp_path: Path
) -> None:
    # The CI slice failed on every rendering mutant of the report package ("not judged by any
    # group") because it mutates the whole module but judges only the diff's functions.
    slice_ = _results(tmp_path, "slice", {DIFF: "killed", RENDER: "not checked"})
    assert check.check(_equivalents(tmp_path), [slice_]) == 0


def test_the_whole_run_fails_on_a_mutant_no_group_judges(check: ModuleType, tmp_path: Path) -> None:
    files = [
        _results(tmp_path, name, {DIFF: "killed"})
        for name in ("slice", "rules", "report-reading", "report-files")
    ]
    files[0].write_text(f"    {DIFF}: killed\n    polyloop.nowhere.x_f__mutmut_1: not checked\n")
    assert check.check(_equivalents(tmp_path), files) == 1


def test_a_survivor_fails_unless_listed_and_a_kill_in_any_group_counts(
    check: ModuleType, tmp_path: Path
) -> None:
    reading = _results(tmp_path, "report-reading", {DIFF: "survived", RENDER: "survived"})
    slice_ = _results(tmp_path, "slice", {DIFF: "killed", RENDER: "not checked"})
    assert check.check(_equivalents(tmp_path), [reading, slice_]) == 1  # RENDER survived
    assert check.check(_equivalents(tmp_path, RENDER), [reading, slice_]) == 0


def test_a_stale_equivalent_entry_fails(check: ModuleType, tmp_path: Path) -> None:
    reading = _results(tmp_path, "report-reading", {RENDER: "killed"})
    assert check.check(_equivalents(tmp_path, RENDER), [reading]) == 1


def test_a_timeout_passes_but_is_counted_as_a_timeout_not_as_killed(
    check: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue 30: a mutant whose tests never finished was counted among the killed ones.
    reading = _results(tmp_path, "report-reading", {RENDER: "timeout", DIFF: "killed"})
    assert check.check(_equivalents(tmp_path), [reading]) == 0
    out = capsys.readouterr().out
    assert "polyloop.report._diff: 1 mutants: killed 1" in out
    assert "polyloop.report._text: 1 mutants: timeout 1" in out
    assert f"TIMEOUT (counted apart, not as killed): {RENDER}" in out


def test_a_kill_in_one_group_outweighs_a_timeout_in_another(
    check: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reading = _results(tmp_path, "report-reading", {DIFF: "timeout"})
    slice_ = _results(tmp_path, "slice", {DIFF: "killed"})
    assert check.check(_equivalents(tmp_path), [reading, slice_]) == 0
    assert "polyloop.report._diff: 1 mutants: killed 1" in capsys.readouterr().out


def _child(tmp_path: Path, *names: str) -> Path:
    path = tmp_path / "child.txt"
    path.write_text("# header\n" + "".join(f"{name}  # the child test\n" for name in names))
    return path


def test_a_mutant_killed_in_a_child_is_listed_apart_from_the_equivalents(
    check: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reading = _results(tmp_path, "report-reading", {RENDER: "survived", DIFF: "killed"})
    assert check.check(_equivalents(tmp_path), [reading], _child(tmp_path, RENDER)) == 0
    out = capsys.readouterr().out
    assert "polyloop.report._diff: 1 mutants: killed 1" in out
    assert "polyloop.report._text: 1 mutants: killed in a child 1" in out
    killed_here = _results(tmp_path, "report-reading", {RENDER: "killed"})
    assert check.check(_equivalents(tmp_path), [killed_here], _child(tmp_path, RENDER)) == 1


def test_the_command_line_takes_the_child_list(check: ModuleType, tmp_path: Path) -> None:
    reading = _results(tmp_path, "report-reading", {RENDER: "survived"})
    equivalents, child = _equivalents(tmp_path), _child(tmp_path, RENDER)
    assert check.main(["check", str(equivalents), "--child", str(child), str(reading)]) == 0
    assert check.main(["check", str(equivalents), str(reading)]) == 1


def test_no_result_at_all_is_an_error(check: ModuleType, tmp_path: Path) -> None:
    empty = _results(tmp_path, "slice", {})
    assert check.check(_equivalents(tmp_path), [empty]) == 2
