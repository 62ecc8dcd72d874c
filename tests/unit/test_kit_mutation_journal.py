"""scripts/kit_mutation.py resumes: every verdict is journaled as it is known, keyed by the
mutant, the module's text and the kit's, and a later run judges only what has no verdict under
the same keys."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def km() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "kit_mutation", ROOT / "scripts" / "kit_mutation.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["kit_mutation"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def _mutants(km: ModuleType, *names: str) -> list[object]:
    return [km.Mutant(name, (1, 0), (1, 1), "x") for name in names]


def test_a_journaled_verdict_is_read_back_under_the_same_keys(
    km: ModuleType, tmp_path: Path
) -> None:
    journal = tmp_path / "t.jsonl"
    a, b = _mutants(km, "m1", "m2")
    km._journal(journal, "k", km.Result(a, "killed", 1.5, "test_x"))
    found = km.recorded(journal, "k", [a, b])
    assert [(r.mutant.name, r.status, r.failed) for r in found] == [("m1", "killed", "test_x")]


def test_a_changed_module_or_kit_judges_again(km: ModuleType, tmp_path: Path) -> None:
    journal = tmp_path / "t.jsonl"
    (a,) = _mutants(km, "m1")
    km._journal(journal, km._key("source v1", "kit1"), km.Result(a, "survived", 1.0))
    assert km.recorded(journal, km._key("source v1", "kit1"), [a])
    assert km.recorded(journal, km._key("source v2", "kit1"), [a]) == []
    assert km.recorded(journal, km._key("source v1", "kit2"), [a]) == []


def test_the_latest_verdict_wins_and_a_cut_line_is_judged_again(
    km: ModuleType, tmp_path: Path
) -> None:
    journal = tmp_path / "t.jsonl"
    a, b = _mutants(km, "m1", "m2")
    km._journal(journal, "k", km.Result(a, "timeout", 9.0))
    km._journal(journal, "k", km.Result(a, "killed", 2.0))
    with journal.open("a", encoding="utf-8") as out:
        out.write('{"key": "k", "mutant": "m2", "sta')  # the run was killed mid-line
    found = km.recorded(journal, "k", [a, b])
    assert [(r.mutant.name, r.status) for r in found] == [("m1", "killed")]


def test_a_mutant_no_longer_sampled_is_not_read(km: ModuleType, tmp_path: Path) -> None:
    journal = tmp_path / "t.jsonl"
    a, b = _mutants(km, "m1", "m2")
    km._journal(journal, "k", km.Result(b, "killed", 1.0))
    assert km.recorded(journal, "k", [a]) == []
    assert km.recorded(tmp_path / "none.jsonl", "k", [a]) == []


def test_the_kit_digest_follows_the_kit_source(km: ModuleType) -> None:
    assert km.kit_digest() == km.kit_digest()
    assert len(km.kit_digest()) == 16
