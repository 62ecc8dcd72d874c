"""Promises the library keeps itself carry who keeps them (``kept_by``) through the skip."""

from __future__ import annotations

import pickle

import pytest

from polyloop.testing import ContractSkip, kept_by_library


def test_kept_by_library_is_an_unverifiable_skip_naming_the_guarding_tests() -> None:
    with pytest.raises(ContractSkip) as caught:
        kept_by_library(promise="the loop isolates it", guarded_by="tests/unit/test_x.py::test_y")
    parts = caught.value.as_dict()
    assert parts["outcome"] == "unverifiable"
    assert parts["kept_by"] == "tests/unit/test_x.py::test_y"
    assert "polyloop keeps it" in parts["verify_yourself"]


def test_a_plain_skip_has_no_kept_by_and_the_field_survives_pickling() -> None:
    plain = ContractSkip(outcome="unverifiable", promise="p", why="w", verify_yourself="v")
    assert "kept_by" not in plain.as_dict()
    kept = ContractSkip(
        outcome="unverifiable", promise="p", why="w", verify_yourself="v", kept_by="t"
    )
    assert pickle.loads(pickle.dumps(kept)).as_dict()["kept_by"] == "t"


@pytest.mark.parametrize("kept_by", ["", "   ", 3])
def test_kept_by_must_be_a_non_empty_str(kept_by: object) -> None:
    with pytest.raises(ValueError, match="kept_by must be a non-empty str"):
        ContractSkip(
            outcome="unverifiable",
            promise="p",
            why="w",
            verify_yourself="v",
            kept_by=kept_by,  # type: ignore[arg-type]
        )
