"""PostgresStore against a real PostgreSQL server (the ``postgres_dsn`` fixture in tests/conftest).

Every test gets a fresh database, so "absent before" holds without cleanup between tests.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import uuid
from collections.abc import AsyncIterator, Iterator

import psycopg
import pytest
import pytest_asyncio

from polyloop.errors import (
    InvalidRunId,
    RunAlreadyExists,
    RunAlreadyFinished,
    RunConflict,
    SchemaVersionError,
    StoreCorrupted,
)
from polyloop.stores import PostgresStore
from polyloop.types import (
    Action,
    ActionIntent,
    ActionStatus,
    ModelCallIntent,
    ModelReplied,
    ModelReply,
    Record,
    RunFinished,
    RunLog,
    RunStarted,
    StepCompleted,
    StepRecord,
    StopReason,
)

pytestmark = [pytest.mark.asyncio, pytest.mark.postgres]

# Nothing listens on port 1: a store pointed there fails on its first I/O, so a test that
# expects an error "before any I/O" would see OperationalError instead if I/O happened.
UNREACHABLE_DSN = "postgresql://postgres@127.0.0.1:1/nothing?connect_timeout=2"
NASTY = '\x00 ünï😀code \u2028 "quoted" \\ back\tslash \x7f'


def run_started(run_id: str, goal: str = "goal") -> RunStarted:
    return RunStarted(
        run_id=run_id,
        goal=goal,
        parameters={"system_prompt": "s", "budget": {"max_steps": 3}},
        parameters_hash="sha256:" + "0" * 64,
        started_at="2026-01-01T00:00:00.000Z",
    )


def step(index: int, **overrides: object) -> StepRecord:
    values: dict[str, object] = {
        "step_index": index,
        "raw_output": "reply",
        "response_chars": 5,
        "reasoning_chars": 0,
        "action": None,
        "parse_ok": True,
        "parse_error": None,
        "observation": "",
        "observation_is_synthetic": False,
        "observation_truncated_chars": 0,
        "prompt_chars": 10,
        "llm_call_id": None,
        "step_wall_ms": 0,
    }
    values.update(overrides)
    return StepRecord(**values)  # type: ignore[arg-type]


def finished(reason: StopReason = StopReason.AGENT_FINISHED) -> RunFinished:
    return RunFinished(
        stop_reason=reason,
        final_answer="done" if reason is StopReason.AGENT_FINISHED else None,
        executed_actions=0,
        finished_at="2026-01-01T00:00:01.000Z",
    )


def every_kind_with_nasty_values(run_id: str) -> list[Record]:
    """One record of each of the six kinds, holding edge values: 0, "", None, NUL, unicode,
    integers beyond 64 bits, floats, nested containers."""
    return [
        RunStarted(
            run_id=run_id,
            goal=NASTY,
            parameters={
                "": "",
                "zero": 0,
                "none": None,
                "big": 2**70,
                "negative": -(2**64),
                "float": 0.1,
                "nested": {"list": [1, "two", None, [], {}], "nul\x00key": NASTY},
                "bools": [True, False],
            },
            parameters_hash="sha256:" + "f" * 64,
            started_at="2026-01-01T00:00:00.000Z",
        ),
        ModelCallIntent(step_index=0, prompt_chars=0),
        ModelReplied(
            step_index=0,
            reply=ModelReply(text=NASTY, reasoning="", call_id=None, usage={"": 0, "big": 2**63}),
        ),
        ModelReplied(step_index=0, reply=ModelReply(text="", call_id="c\x00ll-😀")),
        ActionIntent(
            step_index=0,
            action=Action(text=NASTY, tool_name="t", tool_args={"a": [0, "", None, NASTY]}),
        ),
        ActionIntent(step_index=0, action=Action(text="")),
        StepCompleted(
            step=step(
                0,
                raw_output=NASTY,
                action=NASTY,
                observation="\x00",
                observation_is_synthetic=True,
                llm_call_id="id",
                tool_name="t",
                tool_args_json='{"a":"\\u0000"}',
                action_status=ActionStatus.NOT_EXECUTED,
                env_reported_completion=True,
                step_wall_ms=2**40,
            ),
            executor_observation=NASTY,
            model_error=None,
        ),
        StepCompleted(
            step=step(1, parse_ok=False, parse_error="", raw_output=""),
            model_error="ValueError: \x00",
        ),
        RunFinished(
            stop_reason=StopReason.AGENT_FINISHED,
            final_answer=NASTY,
            executed_actions=0,
            finished_at="2026-01-01T00:00:01.000Z",
        ),
    ]


def new_run_id() -> str:
    return uuid.uuid4().hex


@pytest_asyncio.fixture
async def store(postgres_database_dsn: str) -> AsyncIterator[PostgresStore]:
    async with PostgresStore(postgres_database_dsn) as store:
        yield store


@pytest.fixture
def admin(postgres_database_dsn: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    """A plain connection to the test's database, to look behind the store's back."""
    with psycopg.connect(postgres_database_dsn, autocommit=True) as conn:
        yield conn


async def append_all(store: PostgresStore, run_id: str, records: list[Record]) -> None:
    for sequence, record in enumerate(records):
        await store.append(run_id, record, sequence=sequence)


# --------------------------------------------------------------------------- round trip


async def test_every_record_kind_round_trips_with_nasty_values(store: PostgresStore) -> None:
    run_id = new_run_id()
    records = every_kind_with_nasty_values(run_id)

    await append_all(store, run_id, records)

    log = await store.read_log(run_id)
    assert isinstance(log, RunLog)
    assert log.records == tuple(records)
    assert [type(r) for r in log.records] == [type(r) for r in records]


async def test_bodies_are_stored_as_the_exact_canonical_json(store: PostgresStore, admin) -> None:
    run_id = new_run_id()
    records = every_kind_with_nasty_values(run_id)

    await append_all(store, run_id, records)

    rows = admin.execute(
        "SELECT kind, body FROM polyloop_records WHERE run_id = %s ORDER BY sequence", (run_id,)
    ).fetchall()
    assert rows == [(r.kind, r.to_json()) for r in records]


async def test_the_run_row_files_a_run_by_its_stop_reason(store: PostgresStore, admin) -> None:
    run_id = new_run_id()
    await append_all(store, run_id, [run_started(run_id)])
    query = "SELECT length, finished, stop_reason FROM polyloop_runs WHERE run_id = %s"
    assert admin.execute(query, (run_id,)).fetchone() == (1, False, None)

    await store.append(run_id, finished(StopReason.STEP_BUDGET), sequence=1)

    assert admin.execute(query, (run_id,)).fetchone() == (2, True, "step_budget")


async def test_a_lone_surrogate_round_trips(store: PostgresStore) -> None:
    # Canonical JSON keeps a lone surrogate raw, which UTF-8 (and so PostgreSQL) cannot hold.
    run_id = new_run_id()
    records: list[Record] = [run_started(run_id, goal="bad \udcff byte")]

    await append_all(store, run_id, records)

    assert (await store.read_log(run_id)).records == tuple(records)


async def test_unknown_run_reads_as_an_empty_log(store: PostgresStore) -> None:
    log = await store.read_log(new_run_id())

    assert log == RunLog.empty()
    assert isinstance(log, RunLog)


async def test_runs_are_isolated_and_listed_sorted(store: PostgresStore) -> None:
    ids = ["b", "A", "a-1", "a.1", "a_1", "Z9", "0"]
    for run_id in ids:
        await append_all(store, run_id, [run_started(run_id, goal=f"goal of {run_id}")])

    assert await store.run_ids() == sorted(ids)
    for run_id in ids:
        log = await store.read_log(run_id)
        assert log.records == (run_started(run_id, goal=f"goal of {run_id}"),)


# --------------------------------------------------------------------------- append rules


async def test_run_started_on_a_run_with_a_log_is_run_already_exists(store: PostgresStore) -> None:
    run_id = new_run_id()
    await append_all(store, run_id, [run_started(run_id)])

    with pytest.raises(RunAlreadyExists):
        await store.append(run_id, run_started(run_id, goal="other"), sequence=1)

    assert (await store.read_log(run_id)).records == (run_started(run_id),)


async def test_any_record_after_run_finished_is_run_already_finished(store: PostgresStore) -> None:
    run_id = new_run_id()
    records: list[Record] = [run_started(run_id), finished()]
    await append_all(store, run_id, records)

    with pytest.raises(RunAlreadyFinished):
        await store.append(run_id, ModelCallIntent(step_index=0, prompt_chars=1), sequence=2)
    with pytest.raises(RunAlreadyFinished):
        await store.append(run_id, finished(StopReason.CANCELLED), sequence=2)

    assert (await store.read_log(run_id)).records == tuple(records)


@pytest.mark.parametrize("sequence", [0, 2, 7])
async def test_a_sequence_other_than_the_length_is_run_conflict(
    store: PostgresStore, sequence: int
) -> None:
    run_id = new_run_id()
    await append_all(store, run_id, [run_started(run_id)])

    with pytest.raises(RunConflict):
        await store.append(run_id, ModelCallIntent(step_index=0, prompt_chars=1), sequence=sequence)

    assert len(await store.read_log(run_id)) == 1


async def test_the_first_record_must_be_run_started(store: PostgresStore) -> None:
    run_id = new_run_id()

    with pytest.raises(RunConflict):
        await store.append(run_id, ModelCallIntent(step_index=0, prompt_chars=1), sequence=0)

    assert await store.read_log(run_id) == RunLog.empty()
    assert run_id not in await store.run_ids()


async def test_precedence_exists_then_finished_then_conflict(store: PostgresStore) -> None:
    run_id = new_run_id()
    await append_all(store, run_id, [run_started(run_id), finished()])

    # All three apply: a RunStarted, on a finished run, at a wrong sequence.
    with pytest.raises(RunAlreadyExists):
        await store.append(run_id, run_started(run_id), sequence=5)
    # Finished and conflict apply.
    with pytest.raises(RunAlreadyFinished):
        await store.append(run_id, ModelCallIntent(step_index=0, prompt_chars=1), sequence=5)

    assert len(await store.read_log(run_id)) == 2


@pytest.mark.parametrize("run_id", ["../x", "", "a/b", "-leading-dash", "x" * 129, "nul\x00"])
async def test_an_invalid_run_id_is_rejected_before_any_io(run_id: str) -> None:
    store = PostgresStore(UNREACHABLE_DSN)

    with pytest.raises(InvalidRunId):
        await store.append(run_id, run_started("valid"), sequence=0)
    with pytest.raises(InvalidRunId):
        await store.read_log(run_id)


async def test_a_non_record_or_a_bad_sequence_is_rejected_before_any_io() -> None:
    store = PostgresStore(UNREACHABLE_DSN)

    with pytest.raises(TypeError, match="polyloop record"):
        await store.append("r", {"kind": "run_started"}, sequence=0)  # type: ignore[arg-type]
    for sequence in (-1, True, 1.0, "0"):
        with pytest.raises(ValueError, match="sequence"):
            await store.append("r", run_started("r"), sequence=sequence)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- concurrency


async def test_racing_run_started_lets_exactly_one_win(postgres_database_dsn: str) -> None:
    run_id = new_run_id()
    # Separate store objects stand for separate processes: no shared client-side state.
    stores = [PostgresStore(postgres_database_dsn, max_size=2) for _ in range(8)]
    try:
        results = await asyncio.gather(
            *(
                s.append(run_id, run_started(run_id, goal=f"writer {i}"), sequence=0)
                for i, s in enumerate(stores)
            ),
            return_exceptions=True,
        )
        log = await stores[0].read_log(run_id)
    finally:
        for s in stores:
            await s.aclose()

    assert sum(r is None for r in results) == 1
    assert all(isinstance(r, RunAlreadyExists) for r in results if r is not None)
    winner = results.index(None)
    assert log.records == (run_started(run_id, goal=f"writer {winner}"),)


async def test_racing_appends_at_one_sequence_let_exactly_one_win(
    postgres_database_dsn: str,
) -> None:
    run_id = new_run_id()
    stores = [PostgresStore(postgres_database_dsn, max_size=2) for _ in range(8)]
    try:
        await stores[0].append(run_id, run_started(run_id), sequence=0)
        results = await asyncio.gather(
            *(
                s.append(run_id, ModelCallIntent(step_index=0, prompt_chars=i), sequence=1)
                for i, s in enumerate(stores)
            ),
            return_exceptions=True,
        )
        log = await stores[0].read_log(run_id)
    finally:
        for s in stores:
            await s.aclose()

    assert sum(r is None for r in results) == 1
    assert all(isinstance(r, RunConflict) for r in results if r is not None)
    assert log.records == (
        run_started(run_id),
        ModelCallIntent(step_index=0, prompt_chars=results.index(None)),
    )


async def test_the_fence_holds_even_when_the_database_defaults_to_serializable(
    postgres_database_dsn: str, admin
) -> None:
    # A server default of SERIALIZABLE would turn a lost race into a serialization failure
    # (not RunConflict) unless the store pins READ COMMITTED on its own connections.
    dbname = postgres_database_dsn.rsplit("/", 1)[1]
    admin.execute(f'ALTER DATABASE "{dbname}" SET default_transaction_isolation = serializable')
    run_id = new_run_id()
    stores = [PostgresStore(postgres_database_dsn, max_size=2) for _ in range(6)]
    try:
        await stores[0].append(run_id, run_started(run_id), sequence=0)
        results = await asyncio.gather(
            *(
                s.append(run_id, ModelCallIntent(step_index=0, prompt_chars=1), sequence=1)
                for s in stores
            ),
            return_exceptions=True,
        )
    finally:
        for s in stores:
            await s.aclose()

    assert sum(r is None for r in results) == 1
    assert all(isinstance(r, RunConflict) for r in results if r is not None), results


async def test_the_primary_key_fences_a_writer_that_skipped_the_run_lock(
    store: PostgresStore, admin
) -> None:
    run_id = new_run_id()
    await append_all(store, run_id, [run_started(run_id)])
    # Another writer put sequence 1 in place without updating the run row.
    intruder = ModelCallIntent(step_index=0, prompt_chars=99)
    admin.execute(
        "INSERT INTO polyloop_records (run_id, sequence, kind, body) VALUES (%s, 1, %s, %s)",
        (run_id, intruder.kind, intruder.to_json()),
    )

    with pytest.raises(RunConflict):
        await store.append(run_id, ModelCallIntent(step_index=0, prompt_chars=1), sequence=1)

    assert (await store.read_log(run_id)).records == (run_started(run_id), intruder)


async def test_200_concurrent_runs_in_one_event_loop_all_read_back(store: PostgresStore) -> None:
    run_ids = [new_run_id() for _ in range(200)]

    def records_of(run_id: str) -> list[Record]:
        return [
            run_started(run_id, goal=run_id),
            ModelCallIntent(step_index=0, prompt_chars=len(run_id)),
            finished(),
        ]

    await asyncio.gather(*(append_all(store, r, records_of(r)) for r in run_ids))

    logs = await asyncio.gather(*(store.read_log(r) for r in run_ids))
    assert [log.records for log in logs] == [tuple(records_of(r)) for r in run_ids]
    assert set(run_ids) <= set(await store.run_ids())


# --------------------------------------------------------------------------- event loops


async def test_one_store_serves_successive_event_loops_and_closes_each_loops_pool(
    postgres_database_dsn: str, admin, monkeypatch: pytest.MonkeyPatch
) -> None:
    # psycopg_pool logs a connection attempt cut short by a loop's shutdown with the exception
    # as an argument; pytest's log capture keeps that record, and through the traceback the
    # half-open connection, alive until the test ends. Not propagating keeps this count honest.
    for name in ("psycopg.pool", "psycopg_pool.sched_async"):
        monkeypatch.setattr(logging.getLogger(name), "propagate", False)
    store = PostgresStore(postgres_database_dsn, min_size=1, max_size=3)
    run_id = new_run_id()

    async def in_a_new_loop(loop_number: int) -> int:
        # Concurrency makes each loop's pool open several connections.
        if loop_number == 0:
            await store.append(run_id, run_started(run_id), sequence=0)
        else:
            await store.append(
                run_id,
                ModelCallIntent(step_index=loop_number, prompt_chars=1),
                sequence=loop_number,
            )
        logs = await asyncio.gather(*(store.read_log(run_id) for _ in range(10)))
        return len(logs[-1])

    def successive_asyncio_runs() -> list[int]:
        # Each asyncio.run makes and closes its own loop; the store is never aclose()d between.
        return [asyncio.run(in_a_new_loop(n)) for n in range(4)]

    lengths = await asyncio.to_thread(successive_asyncio_runs)

    assert lengths == [1, 2, 3, 4]
    # Each loop's pool was closed when that loop shut down, without aclose(): the server ends
    # the backends shortly after the clients hang up.
    open_connections = -1
    for _ in range(100):
        open_connections = admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
        ).fetchone()[0]
        if open_connections == 0:
            break
        await asyncio.sleep(0.1)
    assert open_connections == 0


async def test_using_one_store_from_two_running_loops_at_once_is_refused(
    store: PostgresStore,
) -> None:
    run_id = new_run_id()
    await store.append(run_id, run_started(run_id), sequence=0)  # bound to this running loop

    with pytest.raises(RuntimeError, match="another running event loop"):
        await asyncio.to_thread(asyncio.run, store.read_log(run_id))

    assert len(await store.read_log(run_id)) == 1  # still serves its own loop


async def test_a_closed_store_reopens_on_next_use(postgres_database_dsn: str) -> None:
    store = PostgresStore(postgres_database_dsn)
    run_id = new_run_id()
    async with store:
        await store.append(run_id, run_started(run_id), sequence=0)
    await store.aclose()  # idempotent

    await store.append(run_id, finished(), sequence=1)

    assert len(await store.read_log(run_id)) == 2
    await store.aclose()


# --------------------------------------------------------------------------- schema


async def test_concurrent_first_use_on_an_empty_database_creates_the_schema_once(
    postgres_database_dsn: str, admin
) -> None:
    stores = [PostgresStore(postgres_database_dsn, max_size=1) for _ in range(6)]
    try:
        lists = await asyncio.gather(*(s.run_ids() for s in stores))
    finally:
        for s in stores:
            await s.aclose()

    assert lists == [[]] * 6
    assert admin.execute("SELECT component, version FROM polyloop_schema").fetchall() == [
        ("store", "1.1")  # 1.1: with the run index
    ]


async def test_an_unknown_store_schema_major_is_a_schema_version_error(
    postgres_database_dsn: str, admin
) -> None:
    async with PostgresStore(postgres_database_dsn) as first:
        await first.run_ids()
    admin.execute("UPDATE polyloop_schema SET version = '2.0' WHERE component = 'store'")

    with pytest.raises(SchemaVersionError, match=r"'2\.0'"):
        await PostgresStore(postgres_database_dsn).run_ids()


async def test_foreign_tables_with_our_names_are_store_corrupted_and_untouched(
    postgres_database_dsn: str, admin
) -> None:
    admin.execute("CREATE TABLE polyloop_records (something int)")

    with pytest.raises(StoreCorrupted, match="not a polyloop store"):
        await PostgresStore(postgres_database_dsn).run_ids()

    assert admin.execute("SELECT to_regclass('polyloop_schema')").fetchone() == (None,)


async def test_an_undecodable_body_is_store_corrupted_naming_run_and_sequence(
    store: PostgresStore, admin
) -> None:
    run_id = new_run_id()
    await append_all(store, run_id, [run_started(run_id), finished()])
    admin.execute(
        'UPDATE polyloop_records SET body = \'{"kind": "run_finished"\' '
        "WHERE run_id = %s AND sequence = 1",
        (run_id,),
    )

    with pytest.raises(StoreCorrupted, match=rf"run '{run_id}', sequence 1: unreadable record"):
        await store.read_log(run_id)


async def test_a_body_of_an_unknown_record_major_is_a_schema_version_error(
    store: PostgresStore, admin
) -> None:
    run_id = new_run_id()
    await append_all(store, run_id, [run_started(run_id)])
    admin.execute(
        'UPDATE polyloop_records SET body = replace(body, \'"schema_version":"1.1"\', '
        '\'"schema_version":"9.0"\') WHERE run_id = %s',
        (run_id,),
    )

    with pytest.raises(SchemaVersionError, match=rf"run '{run_id}', sequence 0: .*'9.0'"):
        await store.read_log(run_id)


async def test_a_gap_in_the_log_is_store_corrupted(store: PostgresStore, admin) -> None:
    run_id = new_run_id()
    await append_all(
        store, run_id, [run_started(run_id), ModelCallIntent(step_index=0, prompt_chars=1)]
    )
    admin.execute("DELETE FROM polyloop_records WHERE run_id = %s AND sequence = 0", (run_id,))

    with pytest.raises(StoreCorrupted, match="gap"):
        await store.read_log(run_id)


# --------------------------------------------------------------------------- construction


async def test_an_unreachable_server_is_a_clear_connection_error() -> None:
    store = PostgresStore(UNREACHABLE_DSN)

    with pytest.raises(psycopg.OperationalError) as caught:
        await store.read_log("r")

    assert "127.0.0.1" in str(caught.value)
    assert any("could not connect to" in note for note in caught.value.__notes__)


async def test_a_missing_database_is_a_clear_connection_error(postgres_dsn: str) -> None:
    dsn = postgres_dsn.rsplit("/", 1)[0] + "/no_such_database"

    with pytest.raises(psycopg.OperationalError, match="no_such_database"):
        await PostgresStore(dsn).run_ids()


@pytest.mark.parametrize(
    "dsn", ["", "   ", "not a dsn", "host=h port", "postgresql://h:notaport/db", "mysql://h/db"]
)
async def test_a_malformed_dsn_is_a_value_error_at_construction(dsn: str) -> None:
    with pytest.raises(ValueError, match=r"(?i)\bdsn\b"):
        PostgresStore(dsn)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"min_size": -1}, "min_size"),
        ({"max_size": 0}, "max_size"),
        ({"min_size": 5, "max_size": 4}, "max_size"),
        ({"max_size": True}, "max_size"),
        ({"min_size": 1.5}, "min_size"),
    ],
)
async def test_bad_pool_sizes_are_value_errors_naming_the_field(
    kwargs: dict[str, object], field: str
) -> None:
    with pytest.raises(ValueError, match=field):
        PostgresStore("postgresql://h/db", **kwargs)  # type: ignore[arg-type]


async def test_repr_never_shows_the_password() -> None:
    store = PostgresStore("postgresql://alice:s3cret@db.example:5433/runs")

    assert "s3cret" not in repr(store)
    assert "db.example" in repr(store)


async def test_without_psycopg_construction_fails_with_the_install_hint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)

    with pytest.raises(ImportError, match=r"pip install 'polyloop\[postgres\]'"):
        PostgresStore("postgresql://h/db")


async def test_importing_the_stores_package_does_not_import_psycopg() -> None:
    code = (
        "import sys, polyloop.stores\n"
        "assert polyloop.stores.PostgresStore.__name__ == 'PostgresStore'\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('psycopg', 'psycopg_pool')))"
    )

    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", code, stdout=asyncio.subprocess.PIPE
    )
    out, _ = await child.communicate()

    assert child.returncode == 0
    assert out.decode().strip() == "[]"
