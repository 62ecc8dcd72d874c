"""The run-id grammar has one home, ``polyloop._base._run_id`` (issue 24): the pattern
``validate_run_id`` applies, the alphabets and length the contract kit draws and builds ids from,
and PostgresStore's CHECK constraint all say the same thing."""

from __future__ import annotations

import re

from hypothesis import given

from polyloop._base._run_id import MAX_RUN_ID, RUN_ID_FIRST, RUN_ID_PATTERN, RUN_ID_REST
from polyloop.stores import _postgres
from polyloop.testing import strategies
from polyloop.testing._run_store import _run_ids


def test_the_pattern_accepts_exactly_the_alphabets_and_the_length() -> None:
    pattern = re.compile(RUN_ID_PATTERN)
    for code in range(0x300):
        char = chr(code)
        assert (pattern.fullmatch(char) is not None) == (char in RUN_ID_FIRST), repr(char)
        assert (pattern.fullmatch("a" + char) is not None) == (char in RUN_ID_REST), repr(char)
    assert pattern.fullmatch("a" * MAX_RUN_ID)
    assert not pattern.fullmatch("a" * (MAX_RUN_ID + 1))


def test_postgres_checks_the_same_pattern() -> None:
    assert any(f"'^{RUN_ID_PATTERN}$'" in statement for statement in _postgres._SCHEMA)


def test_the_kit_builds_its_ids_from_the_same_grammar() -> None:
    assert _run_ids.MAX_RUN_ID == MAX_RUN_ID
    pattern = re.compile(RUN_ID_PATTERN)
    for run_id in [*_run_ids.fresh_run_ids(12), _run_ids.unique_run_id("a" * MAX_RUN_ID)]:
        assert pattern.fullmatch(run_id), run_id


@given(strategies.run_ids())
def test_every_drawn_run_id_is_valid(run_id: str) -> None:
    assert re.fullmatch(RUN_ID_PATTERN, run_id)
