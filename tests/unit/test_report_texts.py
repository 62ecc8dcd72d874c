"""The small texts of the report's reader and renderer that mutation testing found unpinned
(docs/explanation/mutation-testing.md): how a wrong value is quoted in a ReportError, the
rerun plurals, a JSON error on one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from polyloop.report import ReportError, load_report
from polyloop.report._format import _shown
from polyloop.report._text import _after_reruns, _reruns_heading


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("polyloop-conformance/0", "'polyloop-conformance/0'"),
        (None, "None"),
        (3, "3"),
        (1.5, "1.5"),
        (True, "True"),
        ([1], "list"),
        ({"a": 1}, "dict"),
        ("é\u2028", "'é\\u2028'"),  # printable kept, a line separator escaped
        ("\ud800", "'\\ud800'"),  # a lone surrogate escaped: the line stays UTF-8
        ("a\x1b[31m", "'a\\x1b[31m'"),  # no terminal control reaches the screen
        ("x" * 100, "'" + "x" * 80 + "'… (100 characters)"),  # one shortening rule (_shown)
        ("x" * 80, "'" + "x" * 80 + "'"),  # 80 characters: kept
        ("x" * 81, "'" + "x" * 80 + "'… (81 characters)"),  # 81: cut
    ],
)
def test_a_value_read_from_a_file_is_shown_short_printable_and_quoted(
    value: object, shown: str
) -> None:
    assert _shown(value) == shown


def test_a_report_with_a_wrong_schema_names_it_quoted(tmp_path: Path) -> None:
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"schema": "polyloop-conformance/0"}), encoding="utf-8")
    with pytest.raises(ReportError, match=r"schema: 'polyloop-conformance/0'\)$"):
        load_report(path)


def test_a_file_that_is_not_json_is_named_with_the_error_on_one_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text("{\n  oops", encoding="utf-8")
    with pytest.raises(ReportError) as raised:
        load_report(path)
    message = str(raised.value)
    assert message.startswith(f"{path}: not JSON: ")
    assert "\n" not in message
    assert "  " not in message.removeprefix(f"{path}: not JSON: ")
    assert "XX" not in message


def test_the_rerun_texts_count_in_the_singular_and_the_plural() -> None:
    assert _reruns_heading(1) == "needed reruns (1 promise)"
    assert _reruns_heading(2) == "needed reruns (2 promises)"
    assert _after_reruns({"outcome": "held", "reruns": 1}) == "held (after 1 rerun)"
    assert _after_reruns({"outcome": "violated", "reruns": 3}) == "violated (after 3 reruns)"
