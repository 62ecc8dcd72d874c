"""``polyloop.tools``: the registry an agent snapshots and the replay policy a resume asks."""

from __future__ import annotations

import pytest

from polyloop import Tool, ToolRegistry

SEARCH = Tool(name="search", description="look it up", parameters={"type": "object"})
SUBMIT = Tool(name="submit", description="hand it in", completion_marker=True)


def test_registering_a_second_tool_with_the_same_name_is_a_value_error():
    registry = ToolRegistry([SEARCH])

    with pytest.raises(ValueError, match="search"):
        registry.register(Tool(name="search", description="another"))


def test_a_registry_built_with_duplicate_names_is_refused():
    with pytest.raises(ValueError, match="already registered"):
        ToolRegistry([SEARCH, SEARCH])


def test_registering_something_that_is_not_a_tool_is_a_type_error():
    with pytest.raises(TypeError, match="Tool"):
        ToolRegistry().register({"name": "search"})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs",
    [{"name": "", "description": "d"}, {"name": "t", "description": "d", "parameters": {"x": {1}}},
     {"name": "t", "description": "d", "replayable": "yes"}],
    ids=["empty-name", "unserialisable-schema", "replayable-not-a-bool"],
)  # fmt: skip
def test_a_tool_with_a_bad_field_is_refused_naming_it(kwargs):
    with pytest.raises(ValueError, match="Tool"):
        Tool(**kwargs)


def test_describe_is_the_same_text_whatever_the_registration_order():
    forward = ToolRegistry([SEARCH, SUBMIT]).describe()

    backward = ToolRegistry([SUBMIT, SEARCH]).describe()

    assert (
        forward
        == backward
        == (
            "- search: look it up\n"
            '  parameters: {"type":"object"}\n'
            "- submit: hand it in\n"
            "  parameters: {}\n"
            "  calling this tool completes the task"
        )
    )


def test_specs_are_sorted_by_name_and_leave_out_functions_and_replay_flags():
    registry = ToolRegistry([Tool(name="b", description="", func=print, replayable=True), SUBMIT])

    specs = registry.specs()

    assert [s["name"] for s in specs] == ["b", "submit"]
    assert all(set(s) == {"name", "description", "parameters", "completion_marker"} for s in specs)


@pytest.mark.parametrize(
    ("name", "expected"), [("submit", True), ("search", False), ("absent", False), (None, False)]
)
def test_only_a_registered_completion_marker_is_one(name, expected):
    assert ToolRegistry([SEARCH, SUBMIT]).is_completion_marker(name) is expected


@pytest.mark.parametrize(
    ("replayable", "agent_default", "allowed"),
    [(True, False, True), (True, True, True), (False, True, False), (False, False, False),
     (None, True, True), (None, False, False)],
)  # fmt: skip
def test_replay_is_decided_by_the_tool_first_and_the_agent_only_when_the_tool_abstains(
    replayable, agent_default, allowed
):
    registry = ToolRegistry([Tool(name="t", description="d", replayable=replayable)])

    assert registry.replay_allowed("t", agent_default) is allowed


@pytest.mark.parametrize("agent_default", [True, False])
@pytest.mark.parametrize("name", ["not-registered", None])
def test_an_action_whose_tool_is_not_registered_follows_the_agent(name, agent_default):
    registry = ToolRegistry([Tool(name="t", description="d", replayable=False)])

    assert registry.replay_allowed(name, agent_default) is agent_default


def test_a_registry_iterates_sorted_and_answers_membership():
    registry = ToolRegistry([SUBMIT, SEARCH])

    assert [t.name for t in registry] == ["search", "submit"]
    assert len(registry) == 2
    assert "search" in registry
    assert "absent" not in registry
