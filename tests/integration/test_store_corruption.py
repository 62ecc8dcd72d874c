"""One corruption, one message: SQLite and PostgreSQL decode their rows with one rule.

The same damage is done behind each durable store's back (both keep the records in a table
``polyloop_records(run_id, sequence, kind, body)``); reading the log must fail with the same
error and, after the location (a file or a server), the same words.
"""

from __future__ import annotations

import contextlib
import re
import sqlite3

import pytest

from polyloop.errors import SchemaVersionError, StoreCorrupted
from polyloop.stores import open_store
from polyloop.types import ModelCallIntent, Record, RunStarted

pytestmark = pytest.mark.asyncio

RUN = "r"
DEEP = "[" * 100_000  # hostile: the JSON parser's recursion limit, not a ValueError

CORRUPTIONS = {
    "a gap": (
        "DELETE FROM polyloop_records WHERE sequence = 1",
        r"record missing, a gap in the log \(next stored is 2\)",
    ),
    "a body that is not JSON": (
        "UPDATE polyloop_records SET body = '{\"kind\": ' WHERE sequence = 1",
        r"unreadable record \(malformed record: not JSON \(Expecting value: .*\)\)",
    ),
    "a body that is not an object": (
        "UPDATE polyloop_records SET body = '[]' WHERE sequence = 1",
        r"unreadable record \(malformed record: expected a JSON object\)",
    ),
    "a body nested past the parser's limit": (
        f"UPDATE polyloop_records SET body = '{DEEP}' WHERE sequence = 1",
        r"unreadable record \(maximum recursion depth exceeded.*\)",
    ),
    "a body indexed under another kind": (
        "UPDATE polyloop_records SET kind = 'run_finished' WHERE sequence = 1",
        r"record body is a model_call_intent but is indexed as 'run_finished'",
    ),
}


def damage(url: str, sql: str) -> None:
    """Run ``sql`` on the store's tables directly, as a disk fault or a careless admin would."""
    if url.startswith("sqlite:///"):
        with contextlib.closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as conn:
            conn.execute(sql)
            conn.commit()
        return
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql)


async def write(url: str, records: list[Record]) -> None:
    store = open_store(url)
    try:
        for sequence, record in enumerate(records):
            await store.append(RUN, record, sequence=sequence)
    finally:
        await store.aclose()  # type: ignore[attr-defined]  # both durable stores have it


async def read_error(url: str, expected: type[Exception]) -> str:
    store = open_store(url)
    try:
        with pytest.raises(expected) as caught:
            await store.read_log(RUN)
    finally:
        await store.aclose()  # type: ignore[attr-defined]
    return str(caught.value)


def started() -> RunStarted:
    return RunStarted(
        run_id=RUN, goal="g", parameters={}, parameters_hash="sha256:0", started_at="t"
    )


@pytest.mark.parametrize("corruption", list(CORRUPTIONS))
async def test_one_corruption_reads_as_one_message_in_every_durable_store(
    store_url: str, corruption: str
) -> None:
    sql, problem = CORRUPTIONS[corruption]
    await write(
        store_url,
        [
            started(),
            ModelCallIntent(step_index=0, prompt_chars=1),
            ModelCallIntent(step_index=1, prompt_chars=2),
        ],
    )
    damage(store_url, sql)

    message = await read_error(store_url, StoreCorrupted)

    assert re.fullmatch(rf".+: run '{RUN}', sequence 1: {problem}", message), message


async def test_an_unknown_record_major_stays_a_schema_version_error_in_every_durable_store(
    store_url: str,
) -> None:
    await write(store_url, [started()])
    damage(
        store_url,
        "UPDATE polyloop_records SET body = "
        'replace(body, \'"schema_version":"1.1"\', \'"schema_version":"9.0"\')',
    )

    message = await read_error(store_url, SchemaVersionError)

    assert re.fullmatch(
        rf".+: run '{RUN}', sequence 0: run_started record: unknown schema major version '9\.0' "
        r"\(this polyloop reads 1\.x\)",
        message,
    ), message
