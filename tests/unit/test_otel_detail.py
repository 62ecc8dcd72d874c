"""What an executor's detail puts on a span, and a tool's progress as span events: hostile and
boundary details (not a mapping, wrong types, lone surrogates, huge lists) are one clear rule
each, and nothing that can quote an argument is recorded without content."""

from __future__ import annotations

from typing import Any

import pytest

from polyloop._telemetry._detail import detail_attributes, detail_error_type
from polyloop._telemetry._progress import PROGRESS_EVENT, ProgressEvents, progress_events
from tests.unit._hostile_errors import (
    HUGE_MESSAGE,
    Unprintable,
    is_capped_and_clean,
    unprintable_text,
)

REFUSAL = {
    "kind": "invalid_arguments",
    "tool": "add",
    "violations": [{"path": "a", "rule": "type", "message": "'pw' is not of type 'integer'"}],
}


@pytest.mark.parametrize(
    "detail",
    [None, {}, {"refusal": None}, {"refusal": "invalid"}, {"refusal": {"kind": None}},
     {"error": {"kind": 3}}, {"error": ["timeout"]}, {"other": {"kind": "x"}}],
)  # fmt: skip
def test_a_detail_without_a_reason_gives_no_error_type(detail: Any) -> None:
    assert detail_error_type(detail) is None
    assert not any(
        k.startswith(("polyloop.refusal", "polyloop.error"))
        for k in detail_attributes(detail, content_chars=None)
    )


def test_a_refusal_wins_over_an_error_and_an_empty_kind_is_none() -> None:
    both = {"refusal": {"kind": "unknown_tool"}, "error": {"kind": "timeout"}}
    assert detail_error_type(both) == "unknown_tool"
    assert detail_error_type({"error": {"kind": ""}}) is None


def test_names_are_cleaned_and_cut_and_lists_are_capped() -> None:
    detail = {
        "refusal": {
            "kind": "unknown_tool",
            "tool": "\udc00" + "t" * 1000,
            "available": [f"tool{i}" for i in range(10_000)] + [None],
            "code": True,  # a bool is no code
        }
    }

    attributes = detail_attributes(detail, content_chars=None)

    assert attributes["polyloop.refusal.tool"] == "\ufffd" + "t" * 199 + "…"
    available = attributes["polyloop.refusal.available"]
    assert isinstance(available, list)
    assert len(available) == 200
    assert "polyloop.refusal.code" not in attributes


def test_violations_that_are_not_objects_are_skipped_and_missing_fields_are_empty() -> None:
    detail = {"refusal": {"kind": "invalid_arguments", "violations": [5, {"path": "a"}, "x"]}}

    attributes = detail_attributes(detail, content_chars=10)

    assert attributes["polyloop.refusal.violations.path"] == ["a"]
    assert attributes["polyloop.refusal.violations.rule"] == [""]
    assert attributes["polyloop.refusal.violations.message"] == [""]


def test_messages_and_the_detail_json_only_with_content() -> None:
    without = detail_attributes({"refusal": REFUSAL}, content_chars=None)
    with_content = detail_attributes({"refusal": REFUSAL}, content_chars=16)

    assert "pw" not in repr(without)
    assert with_content["polyloop.refusal.violations.message"] == ["'pw' is not of type 'integer'"]
    assert with_content["polyloop.executor_detail"] == '{"refusal":{"kin'
    full = '{"refusal":' + '{"kind":"invalid_arguments","tool":"add","violations":[{"message":'
    cut = with_content["polyloop.executor_detail_truncated_chars"]
    assert isinstance(cut, int)
    assert cut > len(full) - 16


def test_tool_list_changes_and_the_progress_count_are_structure() -> None:
    detail = {
        "tools_changed": {"added": ["wave"], "removed": [], "changed": "x"},
        "progress": {"notifications": 3, "last": []},
    }

    assert detail_attributes(detail, content_chars=None) == {
        "polyloop.tools_changed.added": ["wave"],
        "polyloop.progress.notifications": 3,
    }


class Span:
    def __init__(self, fails: bool = False) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.fails = fails

    def add_event(self, name: str, attributes: dict[str, Any]) -> None:
        if self.fails:
            raise ValueError("no")
        self.events.append((name, attributes))


def test_a_progress_event_leaves_out_what_the_server_did_not_send_and_cuts_the_message() -> None:
    span = Span()
    events = ProgressEvents(span, content=True)

    events.add(None, None, None)
    events.add(1.5, 2.0, "\ud800" + "m" * 2000)

    assert span.events[0] == (PROGRESS_EVENT, {"polyloop.progress.sequence": 1})
    assert span.events[1][0] == PROGRESS_EVENT
    second = span.events[1][1]
    assert second["polyloop.progress.value"] == 1.5
    assert second["polyloop.progress.total"] == 2.0
    assert second["polyloop.progress.message"] == "\ufffd" + "m" * 499


def test_a_span_that_raises_costs_one_warning_for_the_whole_call(
    caplog: pytest.LogCaptureFixture,
) -> None:
    events = ProgressEvents(Span(fails=True), content=False)

    for n in range(5):
        events.add(float(n), None, "m")

    assert len([r for r in caplog.records if "progress" in r.getMessage()]) == 1


class HostileSpan:
    """A span whose add_event raises ``error``."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def add_event(self, name: str, attributes: dict[str, Any]) -> None:
        raise self.error


@pytest.mark.parametrize("error", [Unprintable(), ValueError(HUGE_MESSAGE)])
def test_the_progress_warning_shows_any_exception_safely(
    caplog: pytest.LogCaptureFixture, error: Exception
) -> None:
    events = ProgressEvents(HostileSpan(error), content=False)

    events.add(1.0, None, None)

    (message,) = [r.getMessage() for r in caplog.records if "progress" in r.getMessage()]
    if isinstance(error, Unprintable):
        assert f"recording a tool's progress ({unprintable_text(error)})" in message
    else:
        assert "recording a tool's progress (ValueError: \\x1b[31mxxx" in message
        assert is_capped_and_clean(message, around=200)


@pytest.mark.parametrize("error", [Unprintable(), ValueError(HUGE_MESSAGE)])
def test_the_warning_for_an_unreadable_current_span_shows_any_exception_safely(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    pytest.importorskip("opentelemetry.trace")
    from opentelemetry import trace

    def broken() -> Any:
        raise error

    monkeypatch.setattr(trace, "get_current_span", broken)

    assert progress_events() is None
    (message,) = [r.getMessage() for r in caplog.records if "current span" in r.getMessage()]
    if isinstance(error, Unprintable):
        assert f"reading the current span ({unprintable_text(error)})" in message
    else:
        assert "reading the current span (ValueError: \\x1b[31mxxx" in message
        assert is_capped_and_clean(message, around=200)
