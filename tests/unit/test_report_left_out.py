"""Implementations left out of a run (a missing extra) are part of the report (issue #32): the
``left_out`` list is read, checked, shown in every view, counted by the badge apart from the
judged ones, and merged as a union minus what another job judged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from polyloop.report import (
    ReportError,
    badge,
    diff_reports,
    load_report,
    merge_reports,
    render_diff,
    render_html,
    render_markdown,
    render_text,
    schema,
)
from tests.unit._reports import implementation, report

PG_ID = "tests/contract/test_postgres_store_contract.py::TestPostgresStoreContract"
HINT = "the `postgres` extra (in a polyloop checkout: pip install -e '.[postgres]')"


def _entry(name: str = "PostgresStore", **fields: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "implementation": name,
        "seam": "run_store",
        "extra": "postgres",
        "hint": HINT,
    }
    entry["ids"] = [PG_ID] if name == "PostgresStore" else []
    return {**entry, **fields}


def _with_left_out(*entries: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    data = report(implementation("Impl", "model_client", {"model_client.a": "held"}), **kwargs)
    data["left_out"] = list(entries)
    return data


def _write(tmp_path: Path, data: object, name: str = "r.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_a_report_with_left_out_is_valid_and_loads(tmp_path: Path) -> None:
    data = _with_left_out(_entry(), _entry("MCPExecutor", seam=None, extra=None, ids=[]))
    jsonschema.validate(data, schema())
    assert load_report(_write(tmp_path, data))["left_out"] == data["left_out"]


def test_an_older_report_without_left_out_still_loads(tmp_path: Path) -> None:
    data = _with_left_out()
    del data["left_out"]
    jsonschema.validate(data, schema())
    assert "left_out" not in load_report(_write(tmp_path, data))
    assert "left out" not in render_text(data) + render_markdown(data) + render_html(data)
    assert badge(data)["message"] == "conformant 1/1 implementations"


@pytest.mark.parametrize(
    ("left_out", "problem"),
    [
        ({"implementation": "X"}, "'left_out' must be a list of objects"),
        ([None], "left_out[0]: not an object"),
        (["PostgresStore"], "left_out[0]: not an object"),
        ([{"hint": HINT}], "left_out[0]: 'implementation' must be a non-empty string"),
        ([{"implementation": "", "hint": HINT}], "'implementation' must be a non-empty string"),
        ([{"implementation": "X"}], "left_out[0]: 'hint' must be a non-empty string"),
        ([{"implementation": "X", "hint": 3}], "'hint' must be a non-empty string"),
        ([{"implementation": "X", "hint": "h", "seam": 1}], "'seam' must be a string or null"),
        ([{"implementation": "X", "hint": "h", "extra": []}], "'extra' must be a string or null"),
        ([{"implementation": "X", "hint": "h", "ids": "a"}], "'ids' must be a list of strings"),
        ([_entry(), {"implementation": "Y", "hint": "h", "ids": [1]}], "left_out[1]: 'ids'"),
    ],
)
def test_a_malformed_left_out_is_a_report_error_naming_the_file(
    tmp_path: Path, left_out: object, problem: str
) -> None:
    data = _with_left_out()
    data["left_out"] = left_out
    path = _write(tmp_path, data, "bad-left-out.json")
    with pytest.raises(ReportError) as raised:
        load_report(path)
    message = str(raised.value)
    assert message.startswith(f"{path}: "), message
    assert problem in message
    assert "\n" not in message
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, schema())


def test_the_terminal_text_names_each_left_out_implementation_once_with_its_hint() -> None:
    data = _with_left_out(_entry(), _entry("OpenAIChatModel", seam="model_client"))
    for verbose in (True, False):
        text = render_text(data, 40, verbose=verbose)
        line = f"PostgresStore is not judged in this conformance run: it needs {HINT}"
        assert text.count(line) == 1, text
        assert f"  {line}\n" in text  # whole, on one line, however narrow the terminal
        assert text.count("OpenAIChatModel is not judged") == 1
        assert text.splitlines()[0] == "verdict: conformant"  # not judged: not in the verdict
        assert "install what each left-out implementation needs" in render_text(data)


def test_the_markdown_lists_left_out_implementations_in_a_table() -> None:
    markdown = render_markdown(_with_left_out(_entry()))
    assert "### left out (not judged in this run, so not in the verdict)" in markdown
    row = next(line for line in markdown.splitlines() if line.startswith("| `PostgresStore`"))
    assert "| run_store | `postgres` |" in row
    assert "pip install -e '.\\[postgres\\]'" in row


def test_the_html_lists_left_out_implementations_escaped() -> None:
    hostile = "<script>alert(1)</script>"
    page = render_html(_with_left_out(_entry(), _entry(hostile, hint=hostile, seam=hostile)))
    assert '<h2 id="left-out">' in page
    assert "<strong>PostgresStore</strong> (run_store): it needs the <code>postgres</code>" in page
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


@pytest.mark.parametrize(
    ("verdict", "message"),
    [
        ("conformant", "conformant 1/1 implementations, 2 left out"),
        ("violations", "violations in 0/1 implementations, 2 left out"),
        ("incomplete", "incomplete 1/1 implementations, 2 left out"),
    ],
)
def test_the_badge_counts_left_out_implementations_apart(verdict: str, message: str) -> None:
    data = _with_left_out(_entry(), _entry("MCPExecutor"), verdict=verdict)
    assert badge(data)["message"] == message


def test_a_merge_unions_left_out_and_an_implementation_judged_elsewhere_is_judged() -> None:
    bare = _with_left_out(_entry(), _entry("MCPExecutor"), report_id="bare")
    full = report(implementation(PG_ID, "run_store", {"run_store.a": "held"}), report_id="full")
    other = _with_left_out(_entry("MCPExecutor", hint="another hint"), report_id="other")
    for inputs in ([bare, full, other], [other, full, bare], [full, other, bare]):
        merged = merge_reports(inputs)
        assert [entry["implementation"] for entry in merged["left_out"]] == ["MCPExecutor"]
        assert merged["left_out"] == merge_reports([bare, full, other])["left_out"]
        jsonschema.validate(merged, schema())
    # By name too: an entry without ids whose name is a judged implementation id.
    by_name = _with_left_out(_entry(PG_ID, ids=[]), report_id="by-name")
    assert "left_out" not in merge_reports([by_name, full])
    assert merge_reports([bare, bare])["left_out"] == [_entry("MCPExecutor"), _entry()]


def test_a_diff_says_when_a_lost_implementation_was_left_out() -> None:
    old = report(implementation(PG_ID, "run_store", {"run_store.a": "held"}), report_id="old")
    new = _with_left_out(_entry(), report_id="new")
    diff = diff_reports(old, new)
    assert diff.lost == [PG_ID]
    assert diff.has_regression  # not judged is still not held
    text = render_diff(diff, old, new)
    assert f"  {PG_ID}  (left out of NEW: it needs {HINT})" in text
