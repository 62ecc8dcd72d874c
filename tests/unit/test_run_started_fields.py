"""RunStarted's optional batch, task_id, labels and trace_parent (log schema 1.1).

A log written before they existed (schema 1.0) still reads, with their defaults."""

from __future__ import annotations

import json

import pytest

from polyloop import SCHEMA_VERSION, RunStarted, record_from_json

# A RunStarted exactly as polyloop wrote it with log schema 1.0, before these fields existed.
_WRITTEN_BY_1_0 = (
    '{"goal":"add 2 and 2","kind":"run_started","parameters":{"system_prompt":"be brief"},'
    '"parameters_hash":"abc","run_id":"r1","schema_version":"1.0",'
    '"started_at":"2026-11-01T10:00:00.000Z"}'
)


def _started(**fields: object) -> RunStarted:
    base: dict[str, object] = {
        "run_id": "r1",
        "goal": "g",
        "parameters": {},
        "parameters_hash": "h",
        "started_at": "2026-12-02T09:00:00.000Z",
    }
    return RunStarted(**{**base, **fields})  # type: ignore[arg-type]


def test_the_current_schema_is_1_1() -> None:
    assert SCHEMA_VERSION == "1.1"
    assert json.loads(_started().to_json())["schema_version"] == "1.1"


def test_a_1_0_run_started_reads_with_the_defaults() -> None:
    record = record_from_json(_WRITTEN_BY_1_0)
    assert isinstance(record, RunStarted)
    assert record.schema_version == "1.0"
    assert (record.batch, record.task_id, record.labels, record.trace_parent) == (
        None,
        None,
        {},
        None,
    )
    assert record.goal == "add 2 and 2"


def test_the_new_fields_round_trip() -> None:
    record = _started(
        batch="nightly",
        task_id="t-7",
        labels={"split": "dev", "lang": "fr\ud800"},
        trace_parent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    )
    text = record.to_json()
    text.encode("utf-8")  # valid UTF-8 even with a lone surrogate in a label
    assert record_from_json(text) == record
    data = json.loads(text)
    assert data["batch"] == "nightly"
    assert data["labels"] == {"lang": "fr\ud800", "split": "dev"}


def test_a_plain_run_writes_them_empty() -> None:
    data = json.loads(_started().to_json())
    assert (data["batch"], data["task_id"], data["labels"], data["trace_parent"]) == (
        None,
        None,
        {},
        None,
    )


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("batch", 7),
        ("task_id", ["t"]),
        ("labels", ["a"]),
        ("labels", {"a": 1}),
        ("labels", {"a": None}),
        ("trace_parent", {}),
    ],
)
def test_a_malformed_field_is_refused_by_name(field: str, value: object) -> None:
    data = json.loads(_WRITTEN_BY_1_0)
    data[field] = value
    with pytest.raises(ValueError, match=repr(field)):
        record_from_json(json.dumps(data))
