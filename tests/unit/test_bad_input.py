"""Bad input to ``run()`` / ``resume()`` gets a clear error before anything is touched."""

from __future__ import annotations

import re

import pytest

import polyloop
from polyloop import InvalidRunId, RunAlreadyExists
from polyloop.events import MemorySink
from polyloop.stores import MemoryStore
from tests.unit._doubles import (
    GOAL,
    ForbiddenSink,
    ReadOnlyStore,
    UntouchableStore,
    act,
    agent,
    final,
    forbidden_seams,
    run_to_end,
    script,
)

pytestmark = pytest.mark.asyncio

BAD_RUN_IDS = ["../x", "", "a/b", "a" * 200, "a" * 129, "a\x00b", ".hidden", "-x", "a b",
               "run\n", 5, b"run", ["run"]]  # fmt: skip


@pytest.mark.parametrize("run_id", BAD_RUN_IDS, ids=repr)
async def test_run_refuses_an_invalid_run_id_before_any_io(run_id):
    with pytest.raises(InvalidRunId):
        await polyloop.run(
            agent(), GOAL, run_id=run_id, store=UntouchableStore(), events=ForbiddenSink(),
            **forbidden_seams(),
        )  # fmt: skip


@pytest.mark.parametrize("run_id", [*BAD_RUN_IDS, None], ids=repr)
async def test_resume_refuses_an_invalid_run_id_before_any_io(run_id):
    with pytest.raises(InvalidRunId):
        await polyloop.resume(
            run_id, agent(), store=UntouchableStore(), events=ForbiddenSink(), **forbidden_seams()
        )


async def test_the_longest_valid_run_id_is_accepted():
    run_id = "A1._-" + "z" * 123

    result = await polyloop.run(agent(), GOAL, run_id=run_id, **script(final()).kwargs())

    assert result.run_id == run_id


async def test_run_without_a_run_id_makes_a_uuid4_hex_one_and_logs_under_it():
    store = MemoryStore()

    result = await polyloop.run(agent(), GOAL, store=store, **script(final()).kwargs())

    assert re.fullmatch(r"[0-9a-f]{32}", result.run_id)
    assert await store.run_ids() == [result.run_id]


async def test_run_refuses_an_existing_run_id_before_calling_any_other_seam():
    store = MemoryStore()
    await run_to_end(script(act(), final()), agent(), store=store, run_id="taken")

    with pytest.raises(RunAlreadyExists):
        await polyloop.run(
            agent(), GOAL, run_id="taken", store=ReadOnlyStore(store), events=ForbiddenSink(),
            **forbidden_seams(),
        )  # fmt: skip


async def test_run_refuses_an_unfinished_existing_run_too():
    store = MemoryStore()
    await polyloop.run(
        agent(), GOAL, run_id="taken", store=store, events=MemorySink(),
        **script(final()).kwargs(),
    )  # fmt: skip

    with pytest.raises(RunAlreadyExists):
        await polyloop.run(agent(), "another goal", run_id="taken", store=ReadOnlyStore(store),
                           **forbidden_seams())  # fmt: skip


@pytest.mark.parametrize("goal", [None, b"goal", 42, ["goal"]], ids=repr)
async def test_a_goal_that_is_not_a_str_is_a_type_error_before_any_io(goal):
    with pytest.raises(TypeError, match="goal"):
        await polyloop.run(agent(), goal, store=UntouchableStore(), **forbidden_seams())


async def test_an_agent_that_is_not_an_agent_definition_is_a_type_error_before_any_io():
    with pytest.raises(TypeError, match="AgentDefinition"):
        await polyloop.run(
            {"system_prompt": "x"},  # type: ignore[arg-type]
            GOAL,
            store=UntouchableStore(),
            **forbidden_seams(),
        )
