"""The batch's values: ``Task``, ``RunSeams`` (or a mapping), ``batch_run_id``."""

from __future__ import annotations

from typing import Any

import pytest

import polyloop
from polyloop import RunSeams, Task, batch_run_id
from polyloop._batch import seams_of


def test_batch_run_id_joins_batch_and_task_with_a_dot() -> None:
    assert batch_run_id("evals-2024", "q.17") == "evals-2024.q.17"
    assert batch_run_id("b", "t") == batch_run_id("b", "t")


@pytest.mark.parametrize(
    ("batch", "task_id", "match"),
    [
        ("", "t", "batch id must not be empty"),
        ("b", "", "task id must not be empty"),
        (None, "t", "batch id must be a str"),
        ("b", 3, "task id must be a str"),
        ("_b", "t", "cannot start a run id"),
        ("b" * 100, "t" * 28, "makes no valid run id"),
    ],
)
def test_batch_run_id_refuses_what_cannot_make_a_run_id(
    batch: Any, task_id: Any, match: str
) -> None:
    with pytest.raises(polyloop.InvalidRunId, match=match):
        batch_run_id(batch, task_id)


def test_the_longest_batch_run_id_is_accepted() -> None:
    assert len(batch_run_id("b" * 100, "t" * 27)) == 128


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        (("", "g"), ValueError, "task id must not be empty"),
        ((None, "g"), TypeError, "task id must be a str"),
        ((5, "g"), TypeError, "task id must be a str, got int"),
        (("t", None), TypeError, "goal must be a str, got NoneType"),
        (("t", b"g"), TypeError, "goal must be a str, got bytes"),
        (("t", "g", ["a"]), TypeError, "labels must be a mapping"),
        (("t", "g", {1: "a"}), TypeError, "labels must map str to str"),
        (("t", "g", {"a": 1}), TypeError, "labels must map str to str"),
        (("t", "g", {"a": None}), TypeError, "labels must map str to str"),
    ],
)
def test_a_task_refuses_bad_fields(
    args: tuple[Any, ...], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        Task(*args)


def test_a_task_copies_its_labels_and_accepts_an_empty_goal_and_unicode() -> None:
    labels = {"lang": "日本語", "\ud800": "lone"}
    task = Task("t", "", labels)
    labels["lang"] = "changed"
    assert task.labels == {"lang": "日本語", "\ud800": "lone"}
    assert Task("t", "goal").labels == {}


def test_run_seams_from_a_mapping_names_what_is_missing_or_unknown() -> None:
    with pytest.raises(TypeError, match="without executor and with unknown keys store"):
        seams_of({"model": 1, "parser": 2, "store": 3})
    built = seams_of({"model": 1, "parser": 2, "executor": 3})
    assert built == RunSeams(model=1, parser=2, executor=3)  # type: ignore[arg-type]


def test_a_task_and_a_job_without_its_store_pickle_for_other_processes() -> None:
    import pickle
    from dataclasses import replace

    from polyloop._batch import BatchJob
    from polyloop.stores import MemoryStore
    from tests.batch_doubles import AGENT, seams

    task = Task("t", "g", {"k": "v"})
    assert pickle.loads(pickle.dumps(task)) == task
    job = BatchJob(AGENT, seams, MemoryStore(), "sqlite:///runs.db", "b", 30.0)
    shipped = pickle.loads(pickle.dumps(replace(job, store=None)))  # type: ignore[arg-type]
    assert (shipped.agent, shipped.seams, shipped.store_url) == (AGENT, seams, "sqlite:///runs.db")
