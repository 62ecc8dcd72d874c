"""The report's outcome and verdict lists are written in code (``OUTCOMES``, the verdict texts)
and in each shipped JSON Schema; these tests keep them equal, in order (issue 24). /1 is the
current list without what /2 added (``setup_error``)."""

from __future__ import annotations

from typing import Any

import pytest

from polyloop.report import OUTCOMES, READABLE_SCHEMAS, SCHEMA, schema
from polyloop.report import _format as report

ADDED_IN_2 = ("setup_error",)


def _outcome_enum(version: str) -> list[Any]:
    enum: list[Any] = schema(version)["$defs"]["promise"]["properties"]["outcome"]["enum"]
    return enum


def _verdict_enum(version: str) -> list[Any]:
    enum: list[Any] = schema(version)["properties"]["verdict"]["enum"]
    return enum


def _as_of(version: str, names: tuple[str, ...] | list[str]) -> list[str]:
    return [n for n in names if version == SCHEMA or n not in ADDED_IN_2]


def test_the_current_schema_lists_exactly_outcomes_in_order() -> None:
    assert _outcome_enum(SCHEMA) == list(OUTCOMES)


def test_the_current_schema_lists_exactly_the_verdicts_the_renderers_know() -> None:
    assert _verdict_enum(SCHEMA) == list(report._VERDICT_TEXT)


@pytest.mark.parametrize("version", sorted(READABLE_SCHEMAS))
def test_every_readable_schema_is_the_current_list_without_what_came_later(version: str) -> None:
    assert _outcome_enum(version) == _as_of(version, OUTCOMES)
    assert _verdict_enum(version) == _as_of(version, list(report._VERDICT_TEXT))
