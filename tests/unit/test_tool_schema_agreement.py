"""ToolExecutor judges arguments exactly as ``jsonschema`` Draft 2020-12 does (issue #11).

Four tool schemas written the way the ecosystem writes them — pydantic's
``model_json_schema()`` shapes (``$defs`` + ``$ref``, ``anyOf`` with ``null`` for ``Optional``,
enums through ``$ref``), an OpenAI function definition, MCP filesystem/calendar tools — and 23
argument sets, valid and invalid. The verdict (``executed`` / ``not_executed``) must be the
reference validator's for every one, and invalid arguments must never reach the function.
"""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from polyloop import Action, ActionStatus, Tool, ToolRegistry
from polyloop.executors import ToolExecutor

# A pydantic model: CreateIssueArgs(repo, title, body: str | None, priority: Priority,
# labels: list[Label], assignee_id: PositiveInt | None), extra="forbid".
CREATE_ISSUE: dict[str, Any] = {
    "$defs": {
        "Label": {
            "additionalProperties": False,
            "properties": {
                "name": {"maxLength": 50, "minLength": 1, "title": "Name", "type": "string"},
                "color": {
                    "anyOf": [{"pattern": "^#[0-9a-fA-F]{6}$", "type": "string"}, {"type": "null"}],
                    "default": None,
                    "title": "Color",
                },
            },
            "required": ["name"],
            "title": "Label",
            "type": "object",
        },
        "Priority": {"enum": ["low", "medium", "high"], "title": "Priority", "type": "string"},
    },
    "additionalProperties": False,
    "properties": {
        "repo": {"pattern": "^[\\w.-]+/[\\w.-]+$", "title": "Repo", "type": "string"},
        "title": {"maxLength": 256, "minLength": 1, "title": "Title", "type": "string"},
        "body": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None, "title": "Body"},
        "priority": {"$ref": "#/$defs/Priority", "default": "medium"},
        "labels": {
            "items": {"$ref": "#/$defs/Label"},
            "maxItems": 10,
            "title": "Labels",
            "type": "array",
        },
        "assignee_id": {
            "anyOf": [{"exclusiveMinimum": 0, "type": "integer"}, {"type": "null"}],
            "default": None,
            "title": "Assignee Id",
        },
    },
    "required": ["repo", "title"],
    "title": "CreateIssueArgs",
    "type": "object",
}

# An OpenAI function definition's "parameters".
SEARCH: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "minLength": 1, "description": "what to look for"},
        "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 10},
        "min_score": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
        "since": {"type": "string", "format": "date-time"},
        "sort": {"type": "string", "enum": ["relevance", "recent"]},
    },
    "required": ["query"],
    "additionalProperties": False,
}

# An MCP filesystem server's edit_file tool.
EDIT_FILE: dict[str, Any] = {
    "$defs": {
        "EditOperation": {
            "type": "object",
            "properties": {"oldText": {"type": "string"}, "newText": {"type": "string"}},
            "required": ["oldText", "newText"],
            "additionalProperties": False,
        }
    },
    "type": "object",
    "properties": {
        "path": {"type": "string", "minLength": 1},
        "edits": {"type": "array", "items": {"$ref": "#/$defs/EditOperation"}, "minItems": 1},
        "dryRun": {"type": "boolean", "default": False},
    },
    "required": ["path", "edits"],
    "additionalProperties": False,
}

# A pydantic model with an Optional enum and an Optional nested model (anyOf [$ref, null]).
CREATE_EVENT: dict[str, Any] = {
    "$defs": {
        "Reminder": {
            "properties": {
                "minutes_before": {
                    "exclusiveMinimum": 0,
                    "maximum": 40320,
                    "title": "Minutes Before",
                    "type": "integer",
                },
                "method": {"default": "popup", "enum": ["email", "popup"], "type": "string"},
            },
            "required": ["minutes_before"],
            "title": "Reminder",
            "type": "object",
        },
        "Visibility": {"enum": ["public", "private"], "title": "Visibility", "type": "string"},
    },
    "properties": {
        "summary": {"maxLength": 100, "title": "Summary", "type": "string"},
        "attendees": {"items": {"format": "email", "type": "string"}, "type": "array"},
        "visibility": {"anyOf": [{"$ref": "#/$defs/Visibility"}, {"type": "null"}]},
        "reminder": {"anyOf": [{"$ref": "#/$defs/Reminder"}, {"type": "null"}], "default": None},
        "duration_hours": {"maximum": 24, "minimum": 0.25, "type": "number"},
    },
    "required": ["summary", "duration_hours"],
    "title": "CreateEventArgs",
    "type": "object",
}

ISSUE = {"repo": "octo/hello", "title": "Crash on start"}
EDIT = {"oldText": "a", "newText": "b"}
EVENT = {"summary": "standup", "duration_hours": 0.5}

# (case id, schema, arguments)
CASES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("issue-minimal", CREATE_ISSUE, ISSUE),
    ("issue-full", CREATE_ISSUE, {**ISSUE, "body": None, "priority": "high", "assignee_id": 7,
                                  "labels": [{"name": "bug", "color": "#ff0000"}]}),
    ("issue-enum-through-ref", CREATE_ISSUE, {**ISSUE, "priority": "urgent"}),
    ("issue-empty-title", CREATE_ISSUE, {**ISSUE, "title": ""}),
    ("issue-pattern-inside-anyof", CREATE_ISSUE,
     {**ISSUE, "labels": [{"name": "bug", "color": "red"}]}),
    ("issue-zero-assignee", CREATE_ISSUE, {**ISSUE, "assignee_id": 0}),
    ("issue-repo-pattern", CREATE_ISSUE, {**ISSUE, "repo": "not a repo"}),
    ("issue-extra-key-in-ref", CREATE_ISSUE, {**ISSUE, "labels": [{"name": "x", "size": 3}]}),
    ("issue-body-not-string-or-null", CREATE_ISSUE, {**ISSUE, "body": 42}),
    ("search-integral-float-is-integer", SEARCH, {"query": "polyloop", "limit": 2.0}),
    ("search-below-minimum", SEARCH, {"query": "x", "limit": 0}),
    ("search-above-maximum", SEARCH, {"query": "x", "limit": 101}),
    ("search-exclusive-minimum", SEARCH, {"query": "x", "min_score": 0}),
    ("search-format-is-an-annotation", SEARCH, {"query": "x", "since": "yesterday"}),
    ("search-enum", SEARCH, {"query": "x", "sort": "oldest"}),
    ("search-boolean-is-not-integer", SEARCH, {"query": "x", "limit": True}),
    ("edit-valid", EDIT_FILE, {"path": "README.md", "edits": [EDIT]}),
    ("edit-min-items", EDIT_FILE, {"path": "README.md", "edits": []}),
    ("edit-required-inside-ref", EDIT_FILE, {"path": "README.md", "edits": [{"oldText": "a"}]}),
    ("edit-boolean", EDIT_FILE, {"path": "README.md", "edits": [EDIT], "dryRun": "yes"}),
    ("event-full", CREATE_EVENT, {**EVENT, "visibility": "private", "attendees": ["a@example.com"],
                                  "reminder": {"minutes_before": 10, "method": "popup"}}),
    ("event-exclusive-minimum-through-anyof-ref", CREATE_EVENT,
     {**EVENT, "reminder": {"minutes_before": 0}}),
    ("event-enum-through-anyof-ref", CREATE_EVENT, {**EVENT, "visibility": "secret"}),
]  # fmt: skip


def reference_verdict(schema: dict[str, Any], args: dict[str, Any]) -> ActionStatus:
    valid = jsonschema.Draft202012Validator(schema).is_valid(args)
    return ActionStatus.EXECUTED if valid else ActionStatus.NOT_EXECUTED


def test_the_comparison_holds_23_cases_of_both_verdicts():
    verdicts = [reference_verdict(schema, args) for _, schema, args in CASES]
    assert len(CASES) == 23
    assert len({case_id for case_id, _, _ in CASES}) == 23
    assert verdicts.count(ActionStatus.EXECUTED) == 6
    for schema in (CREATE_ISSUE, SEARCH, EDIT_FILE, CREATE_EVENT):
        jsonschema.Draft202012Validator.check_schema(schema)


@pytest.mark.asyncio
@pytest.mark.parametrize(("schema", "args"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
async def test_the_verdict_is_the_reference_validators_and_invalid_arguments_never_run(
    schema, args
):
    calls: list[dict[str, Any]] = []

    def tool(**kwargs: Any) -> str:
        calls.append(kwargs)
        return "done"

    executor = ToolExecutor(ToolRegistry([Tool(name="t", description="", parameters=schema,
                                               func=tool)]))  # fmt: skip
    outcome = await executor.execute(Action(text="call t", tool_name="t", tool_args=args))

    expected = reference_verdict(schema, args)
    assert outcome.status is expected, outcome.observation
    assert calls == ([args] if expected is ActionStatus.EXECUTED else [])
