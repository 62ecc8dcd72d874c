"""Tool schemas: refused at ``Tool(...)`` when unusable, and the built-in subset agrees with
``jsonschema`` exactly (issue #11). The 23 real-world cases: test_tool_schema_agreement.py."""

from __future__ import annotations

import contextlib
import inspect
import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any
from unittest import mock

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from polyloop import MAX_NESTING, Action, ActionStatus, Tool, ToolRegistry
from polyloop._base import _schema as schema_module
from polyloop._base._schema import BUILTIN_KEYWORDS, INSTALL_HINT, check_schema, validate
from polyloop.executors import ToolExecutor

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@contextlib.contextmanager
def without_jsonschema() -> Iterator[None]:
    """As if the ``schema`` extra were not installed."""
    with mock.patch.object(schema_module, "_jsonschema", return_value=None):
        yield


def reference_is_valid(schema: Any, value: Any) -> bool:
    return bool(jsonschema.Draft202012Validator(schema).is_valid(value))


def builtin_is_valid(schema: Any, value: Any) -> bool:
    with without_jsonschema():
        return validate({"properties": {"v": schema}}, {"v": value}) is None


def executor_for(parameters: dict[str, Any], calls: list[dict[str, Any]]) -> ToolExecutor:
    def tool(**kwargs: Any) -> str:
        calls.append(kwargs)
        return "done"

    return ToolExecutor(ToolRegistry([Tool(name="t", description="", parameters=parameters,
                                           func=tool)]))  # fmt: skip


async def call(executor: ToolExecutor, args: dict[str, Any] | None) -> Any:
    return await executor.execute(Action(text="call t", tool_name="t", tool_args=args))


# --------------------------------------------------------------------- the built-in subset

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from([0.0, 1.0, 2.0, -1.5, 0.5])
    | st.text(alphabet="ab\u00e9\U0001f600", max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("abc"), inner,
                                                                 max_size=3),
    max_leaves=6,
)  # fmt: skip
TYPE_ARGUMENT = st.sampled_from(schema_module._TYPES) | st.lists(
    st.sampled_from(schema_module._TYPES), min_size=1, max_size=3, unique=True
)
NUMBERS = st.integers(-2, 2) | st.sampled_from([0.5, 1.0, -1.5])
COUNTS = st.integers(0, 3) | st.sampled_from([1.0, 2.0])
LEAF_KEYWORDS = {
    "type": TYPE_ARGUMENT, "enum": st.lists(JSON_VALUES, max_size=3), "const": JSON_VALUES,
    "minimum": NUMBERS, "maximum": NUMBERS, "exclusiveMinimum": NUMBERS,
    "exclusiveMaximum": NUMBERS, "minLength": COUNTS, "maxLength": COUNTS, "minItems": COUNTS,
    "maxItems": COUNTS, "title": st.text(max_size=3), "format": st.sampled_from(["email", "uri"]),
    "default": JSON_VALUES,
}  # fmt: skip


def _with_children(sub: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.fixed_dictionaries({}, optional={
        "type": TYPE_ARGUMENT,
        "properties": st.dictionaries(st.sampled_from("abc"), sub, max_size=3),
        "required": st.lists(st.sampled_from("abc"), unique=True, max_size=3),
        "additionalProperties": sub, "items": sub, "minItems": COUNTS,
    })  # fmt: skip


SUBSET_SCHEMAS = st.recursive(
    st.booleans() | st.fixed_dictionaries({}, optional=LEAF_KEYWORDS), _with_children, max_leaves=5
)


@SETTINGS
@given(schema=SUBSET_SCHEMAS, value=JSON_VALUES)
def test_the_builtin_subset_gives_jsonschemas_verdict_on_every_value(schema, value):
    assert builtin_is_valid(schema, value) is reference_is_valid(schema, value)


@SETTINGS
@given(st.dictionaries(st.sampled_from(sorted(BUILTIN_KEYWORDS)), JSON_VALUES, max_size=2))
def test_the_builtin_subset_refuses_what_jsonschema_calls_invalid_and_never_skims(schema):
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
        reference_problem = None
    except jsonschema.SchemaError as exc:
        reference_problem = exc.message
    with without_jsonschema():
        try:
            check_schema(schema)
            builtin_problem = None
        except ValueError as exc:
            builtin_problem = str(exc)
    if reference_problem is not None:
        assert builtin_problem is not None
    elif builtin_problem is not None:  # valid, but with a keyword the subset does not check
        assert "which the built-in validator does not implement" in builtin_problem


@pytest.mark.parametrize(
    ("schema", "value", "valid"),
    [
        ({"type": "integer"}, 2.0, True),
        ({"type": "integer"}, 2.5, False),
        ({"type": "integer"}, True, False),
        ({"type": "number"}, False, False),
        ({"enum": [1]}, 1.0, True),
        ({"enum": [1]}, True, False),
        ({"const": [0]}, [False], False),
        ({"minimum": 1}, True, True),  # a bound applies to numbers only, and true is none
        ({"minLength": 2}, "\U0001f600", False),  # characters, not UTF-16 units or bytes
        ({"format": "email"}, "not an email", True),  # format is an annotation
    ],
)
def test_the_builtin_subset_counts_as_jsonschema_does(schema, value, valid):
    assert reference_is_valid(schema, value) is valid
    assert builtin_is_valid(schema, value) is valid


@pytest.mark.parametrize(
    "keyword",
    ["$ref", "$defs", "anyOf", "oneOf", "allOf", "not", "pattern", "multipleOf",
     "patternProperties", "uniqueItems", "prefixItems", "x-order"],
)  # fmt: skip
def test_without_the_extra_a_keyword_outside_the_subset_is_refused_naming_it_and_the_extra(
    keyword,
):
    parameters = {"type": "object", "properties": {"a": {keyword: {}}}}
    with without_jsonschema(), pytest.raises(ValueError, match=r"^Tool 't'") as raised:
        Tool(name="t", description="", parameters=parameters)
    message = str(raised.value)
    assert message.startswith("Tool 't': the schema at properties.a uses ")
    assert repr(keyword) in message
    assert INSTALL_HINT in message
    assert "\n" not in message


def test_without_the_extra_installed_a_ref_is_refused_and_the_subset_validates():
    probe = textwrap.dedent("""
        import sys
        sys.modules["jsonschema"] = None  # what an environment without the extra looks like
        import asyncio
        from polyloop import Action, Tool, ToolRegistry
        from polyloop.executors import ToolExecutor
        try:
            Tool(name="t", description="", parameters={"$ref": "#/$defs/A", "$defs": {"A": {}}})
        except ValueError as exc:
            print(exc)
        tool = Tool(name="n", description="", parameters={"properties": {"n": {"type": "integer",
                    "maximum": 3}}}, func=lambda n: n)
        executor = ToolExecutor(ToolRegistry([tool]))
        for n in (2.0, 4):
            outcome = asyncio.run(executor.execute(Action(text="", tool_name="n",
                                                          tool_args={"n": n})))
            print(outcome.status, outcome.observation)
    """)
    completed = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    )
    assert completed.stdout.splitlines() == [
        "Tool 't': the schema uses '$defs', which the built-in validator does not implement; "
        f"install the schema extra for full JSON Schema: {INSTALL_HINT}",
        "executed 2.0",
        "not_executed Invalid arguments for tool 'n': n: must be at most 3.",
    ]


# --------------------------------------------------------------------- refused at Tool(...)


@pytest.mark.parametrize(
    ("parameters", "problem"),
    [
        ({"type": "no-such-type"}, "not a valid JSON Schema (Draft 2020-12) at $.type"),
        ({"properties": {"a": {"minLength": -1}}}, "at $.properties.a.minLength"),
        ({"items": [{"type": "string"}]}, "at $.items"),  # draft-07's tuple form
        ({"properties": {"a": {"$ref": "#/$defs/Missing"}}, "$defs": {}},
         "$ref '#/$defs/Missing' points to nothing"),
        # an index of digits that are not ASCII ("²".isdigit() is true, int("²") refuses it)
        ({"prefixItems": [{}], "properties": {"a": {"$ref": "#/prefixItems/\u00b2"}}},
         "$ref '#/prefixItems/²' points to nothing"),
        ({"prefixItems": [{}], "properties": {"a": {"$ref": "#/prefixItems/\u0660"}}},
         "$ref '#/prefixItems/٠' points to nothing"),
        ({"$ref": "https://example.com/schema.json"}, "points outside the schema"),
        ({"$ref": "#nowhere"}, "names no $anchor"),
        ({"$ref": "#"}, "loop back to themselves"),
        ({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"allOf": [{"$ref": "#/$defs/a"}]}},
          "properties": {"x": {"$ref": "#/$defs/a"}}}, "loop back to themselves"),
    ],
)  # fmt: skip
def test_an_unusable_schema_is_a_one_line_value_error_naming_the_tool(parameters, problem):
    with pytest.raises(ValueError, match=r"^Tool 'search': ") as raised:
        Tool(name="search", description="", parameters=parameters)
    message = str(raised.value)
    assert message.startswith("Tool 'search': ")
    assert problem in message
    assert "\n" not in message


@pytest.mark.parametrize(
    "reference",
    [
        {"$ref": "#/$defs/Count"},
        {"$ref": "#/definitions/Count"},  # draft-07's container, as zod-to-json-schema writes it
        {"$ref": "#/$defs/a~1b"},  # JSON-pointer escapes
        {"$ref": "#/$defs/with%20space"},  # percent-encoding
        {"$ref": "#count"},  # an $anchor
    ],
)
@pytest.mark.asyncio
async def test_references_inside_the_schema_are_followed(reference):
    count = {"type": "integer", "minimum": 0}
    parameters = {
        "$defs": {
            "Count": count,
            "a/b": count,
            "with space": count,
            "x": {**count, "$anchor": "count"},
        },
        "definitions": {"Count": count},
        "properties": {"n": reference},
    }
    calls: list[dict[str, Any]] = []
    executor = executor_for(parameters, calls)
    assert (await call(executor, {"n": -1})).status is ActionStatus.NOT_EXECUTED
    assert (await call(executor, {"n": 1})).status is ActionStatus.EXECUTED
    assert calls == [{"n": 1}]


@pytest.mark.parametrize("parameters", [[], "object", None, 1])
def test_a_schema_that_is_not_a_mapping_is_refused(parameters):
    with pytest.raises(ValueError, match=r"Tool\.parameters must be a JSON-schema mapping"):
        Tool(name="t", description="", parameters=parameters)


@pytest.mark.parametrize("depth", [300, 5000])
def test_a_schema_nested_beyond_what_python_can_walk_is_refused_not_crashed(depth):
    parameters: dict[str, Any] = {}
    for _ in range(depth):
        parameters = {"items": parameters}
    with pytest.raises(ValueError, match=r"^Tool\b") as raised:
        Tool(name="t", description="", parameters=parameters)
    assert "\n" not in str(raised.value)


# --------------------------------------------------------------------- arguments


TREE = {
    "$defs": {
        "Node": {
            "type": "object",
            "properties": {"label": {"type": "string"},
                           "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}},
            "required": ["label"],
        }
    },
    "type": "object",
    "properties": {"root": {"$ref": "#/$defs/Node"}},
    "required": ["root"],
}  # fmt: skip


def nested_tree(depth: int, leaf: dict[str, Any]) -> dict[str, Any]:
    node = leaf
    for _ in range(depth):
        node = {"label": "n", "children": [node]}
    return node


@pytest.mark.asyncio
async def test_a_recursive_schema_validates_every_level_of_the_arguments():
    calls: list[dict[str, Any]] = []
    executor = executor_for(TREE, calls)
    good = await call(executor, {"root": nested_tree(12, {"label": "leaf"})})
    bad = await call(executor, {"root": nested_tree(12, {"children": []})})
    assert good.status is ActionStatus.EXECUTED
    assert bad.status is ActionStatus.NOT_EXECUTED
    assert "root" + ".children[0]" * 12 + ": 'label' is a required property" in bad.observation
    assert len(calls) == 1


@pytest.mark.asyncio
async def test_the_deepest_arguments_an_action_holds_are_validated_at_every_level():
    calls: list[dict[str, Any]] = []
    executor = executor_for(TREE, calls)
    depth = (MAX_NESTING - 2) // 2  # each tree level is an object and a list
    good = {"root": nested_tree(depth, {"label": "leaf"})}
    bad = {"root": nested_tree(depth, {"label": 7})}  # wrong only at the bottom
    assert (await call(executor, good)).status is ActionStatus.EXECUTED
    refused = await call(executor, bad)
    assert refused.status is ActionStatus.NOT_EXECUTED
    assert "is not of type 'string'" in refused.observation
    assert calls == [good]


@pytest.mark.asyncio
async def test_arguments_too_deep_to_validate_are_not_executed_instead_of_crashing():
    calls: list[dict[str, Any]] = []
    executor = executor_for(TREE, calls)
    deep = {"root": nested_tree((MAX_NESTING - 2) // 2, {"label": "leaf"})}
    action = Action(text="t", tool_name="t", tool_args=deep)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(len(inspect.stack()) + 150)  # called with little stack left
    try:
        outcome = await executor.execute(action)
    finally:
        sys.setrecursionlimit(limit)
    assert outcome.status is ActionStatus.NOT_EXECUTED
    assert "nest too deeply to be validated" in outcome.observation
    assert calls == []


@pytest.mark.asyncio
async def test_unicode_property_names_are_validated_and_reported():
    calls: list[dict[str, Any]] = []
    schema = {"type": "object", "properties": {"日本語": {"type": "integer"}, "a\u202eb": {}},
              "required": ["a\u202eb"], "additionalProperties": False}  # fmt: skip
    executor = executor_for(schema, calls)
    good = await call(executor, {"日本語": 1, "a\u202eb": None})
    bad = await call(executor, {"日本語": "一"})
    assert good.status is ActionStatus.EXECUTED
    assert bad.status is ActionStatus.NOT_EXECUTED
    assert "日本語: '一' is not of type 'integer'" in bad.observation
    assert calls == [{"日本語": 1, "a\u202eb": None}]


@pytest.mark.asyncio
@pytest.mark.parametrize("args", [None, {}])
async def test_no_arguments_are_an_empty_object_to_the_schema(args):
    calls: list[dict[str, Any]] = []
    optional = executor_for({"type": "object", "properties": {"a": {"type": "string"}}}, calls)
    required = executor_for({"type": "object", "required": ["a"]}, calls)
    assert (await call(optional, args)).status is ActionStatus.EXECUTED
    assert (await call(required, args)).status is ActionStatus.NOT_EXECUTED
    assert calls == [{}]


@pytest.mark.asyncio
async def test_many_huge_violations_give_a_bounded_observation_that_counts_the_rest():
    schema = {"type": "object", "additionalProperties": {"type": "integer"}}
    args = {f"p{i}": "x" * 100_000 for i in range(8)}
    outcome = await call(executor_for(schema, []), args)
    assert outcome.status is ActionStatus.NOT_EXECUTED
    assert outcome.observation.endswith("; and 3 more.")
    assert len(outcome.observation) < 5 * 250
    assert outcome.observation.count(": '") == 5


@pytest.mark.asyncio
async def test_a_schema_broken_in_place_after_construction_is_not_executed_not_a_crash():
    calls: list[dict[str, Any]] = []
    parameters: dict[str, Any] = {"type": "object"}
    executor = executor_for(parameters, calls)
    parameters["type"] = "no-such-type"
    outcome = await call(executor, {})
    assert outcome.status is ActionStatus.NOT_EXECUTED
    assert "Tool 't' has an unusable schema: not a valid JSON Schema" in outcome.observation
    assert calls == []


def test_validate_lists_each_problem_with_its_location_and_none_when_valid():
    schema = {"type": "object", "properties": {"a": {"type": "array", "items": {"minimum": 0}}}}
    assert validate(schema, {"a": [1, 2]}) is None
    assert validate(schema, {"a": [1, -2, -3]}) == (
        "a[1]: -2 is less than the minimum of 0; a[2]: -3 is less than the minimum of 0"
    )
    with without_jsonschema():
        assert validate(schema, {"a": [1, -2]}) == "a[1]: must be at least 0"
    assert json.dumps(schema)  # the schema was not modified by validating with it
