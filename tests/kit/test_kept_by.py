"""Promises the library keeps itself carry who keeps them (``kept_by``) through the skip."""

from __future__ import annotations

import pickle

import pytest

from polyloop.testing import ContractSkip, kept_by_polyloop
from polyloop.testing._skips import parse_skip_reason

GUARDS = ("tests/unit/test_x.py::test_y", "tests/unit/test_x.py::test_z")


def test_kept_by_polyloop_is_an_unverifiable_skip_naming_the_guarding_tests() -> None:
    with pytest.raises(ContractSkip) as caught:
        kept_by_polyloop(promise="the loop isolates it", why="it is the loop's", guarded_by=GUARDS)
    parts = caught.value.as_dict()
    assert parts["outcome"] == "unverifiable"
    assert parts["kept_by"] == ", ".join(GUARDS)
    assert "polyloop keeps this promise" in parts["verify_yourself"]
    assert parse_skip_reason(str(caught.value.msg))["kept_by"] == ", ".join(GUARDS)  # type: ignore[index]


def test_a_plain_skip_has_no_kept_by_and_the_field_survives_pickling() -> None:
    plain = ContractSkip(outcome="unverifiable", promise="p", why="w", verify_yourself="v")
    assert "kept_by" not in plain.as_dict()
    kept = ContractSkip(
        outcome="unverifiable", promise="p", why="w", verify_yourself="v", kept_by=GUARDS
    )
    assert pickle.loads(pickle.dumps(kept)).kept_by == GUARDS


@pytest.mark.parametrize("kept_by", ["tests/a.py::t", ("",), ("not a node id",), (3,)])
def test_kept_by_must_be_a_tuple_of_node_ids(kept_by: object) -> None:
    with pytest.raises(ValueError, match="kept_by must be a tuple of pytest node ids"):
        ContractSkip(
            outcome="unverifiable",
            promise="p",
            why="w",
            verify_yourself="v",
            kept_by=kept_by,  # type: ignore[arg-type]
        )
