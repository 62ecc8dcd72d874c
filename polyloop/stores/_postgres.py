"""PostgresStore: the intent log in PostgreSQL, for runs spread over many machines.

Extra ``polyloop[postgres]`` (psycopg 3 + psycopg_pool). This module imports neither at import
time: ``import polyloop.stores`` stays stdlib-only, and a missing driver is reported when a
store is constructed, with the install hint.

Tables (created on first use, see ``_SCHEMA``): ``polyloop_schema`` (the store schema version),
``polyloop_runs`` (one row per run: its length, whether it is finished and its stop reason —
the row every append locks) and ``polyloop_records`` (one row per record,
``PRIMARY KEY (run_id, sequence)``: the hard fence that holds even against a writer that skips
the row lock).

Group commit (``docs/design/0005-group-commit.md``): an append made while another of this store
object's commits is in flight waits for the next group, which one task commits in one
transaction (one WAL flush): each batch under a savepoint of its own (a refused batch is rolled
back alone), the batches in run-id order so that two groups never lock rows in opposite orders.
An append with nothing in flight commits alone, in the caller's task, as before.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from polyloop._base._closing import AsyncClosing
from polyloop._base._run_id import validate_run_id
from polyloop._base._run_index import RunQuery, RunStats, RunSummary
from polyloop.errors import (
    IndexNotBuilt,
    PolyloopError,
    RunAlreadyExists,
    RunConflict,
    SchemaVersionError,
    StoreCorrupted,
)
from polyloop.stores._postgres_index import (
    INDEX_COLUMNS,
    INDEXED_VERSION,
    build_index,
    index_arguments,
    query_runs,
    run_stats,
)
from polyloop.stores._rules import check_append_many, check_batch, check_record, decode_log
from polyloop.types import Record, RunFinished, RunLog, RunStarted

if TYPE_CHECKING:
    from psycopg import AsyncConnection, AsyncCursor
    from psycopg_pool import AsyncConnectionPool

__all__ = ["PostgresStore"]

_INSTALL_HINT: Final = "pip install 'polyloop[postgres]'"

#: The store's table layout, independent of the record schema version. A database whose major
#: differs was written by an incompatible polyloop: refuse it rather than guess.
#: 1.1: the run index (polyloop/stores/_postgres_index.py); a 1.0 store gets it built by the
#: first use of a store that may migrate.
STORE_SCHEMA_VERSION: Final = INDEXED_VERSION
_SUPPORTED_MAJOR: Final = "1"

# Two-key advisory lock for schema creation: CREATE TABLE IF NOT EXISTS is not safe against a
# concurrent CREATE of the same table (it can fail on pg_type's unique index), so the first uses
# of many processes against an empty database take turns. The first key namespaces the lock
# away from the application's own advisory locks.
_LOCK_NAMESPACE: Final = "polyloop"
_SCHEMA_LOCK_KEY: Final = "schema"

# Record bodies are `text`, not `jsonb`, holding exactly ``record.to_json()`` (canonical JSON):
# jsonb would re-order keys (by length) and drop the canonical byte form, and it rejects the
# escape ``\u0000`` that canonical JSON uses for a NUL character inside a string, so a record
# holding "\x00" could not be stored at all. Canonical JSON escapes every control character, so
# the text never contains a raw NUL (which a PostgreSQL text value cannot hold). The codec
# writes a lone surrogate as its escape, so the text is always valid UTF-8 and is stored as
# the codec gives it. Queries can still cast ``body::jsonb`` where no record contains a NUL or
# a lone surrogate (jsonb refuses the escape of either).
_SCHEMA: Final = (
    """
    CREATE TABLE IF NOT EXISTS polyloop_schema (
        component text PRIMARY KEY,
        version text NOT NULL
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS polyloop_runs (
        run_id text COLLATE "C" PRIMARY KEY
            CHECK (run_id ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$'),
        length bigint NOT NULL CHECK (length >= 1),
        finished boolean NOT NULL,
        stop_reason text,
        started_at timestamptz NOT NULL DEFAULT now()
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS polyloop_records (
        run_id text COLLATE "C" NOT NULL,
        sequence bigint NOT NULL CHECK (sequence >= 0),
        kind text NOT NULL,
        body text NOT NULL,
        appended_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (run_id, sequence)
    )
    """,
)


def _has_index(version: str) -> bool:
    """Whether a store of this version keeps the run index (1.1 and every later 1.x)."""
    minor = version.split(".", 2)[1] if version.count(".") else "0"
    return minor.isascii() and minor.isdigit() and int(minor) >= int(INDEXED_VERSION.split(".")[1])


def _require_driver() -> None:
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            f"PostgresStore needs psycopg 3 and psycopg_pool ({exc}); install them with: "
            f"{_INSTALL_HINT}"
        ) from exc


def _describe_dsn(dsn: str) -> str:
    """The DSN without its password, for error messages."""
    from psycopg.conninfo import conninfo_to_dict

    params = conninfo_to_dict(dsn)
    # libpq checks the port only when connecting; a typo here should fail at construction.
    for port in str(params.get("port") or "").split(","):
        if port and not (port.isascii() and port.isdigit()):
            raise ValueError(f"invalid PostgreSQL DSN: port {port!r} is not a number")
    shown = {k: v for k, v in params.items() if k in {"host", "hostaddr", "port", "dbname", "user"}}
    return " ".join(f"{k}={v}" for k, v in sorted(shown.items())) or "(libpq defaults)"


@dataclass(slots=True)
class _LoopBinding:
    """What is bound to one event loop: its pool, the lock guarding the pool's creation, and
    the task that closes the pool when the loop shuts down."""

    # Weak: a finished loop (and what its selector still references, such as a connection
    # attempt cut short by the loop's shutdown) must be freed, not kept alive by the store.
    loop: weakref.ref[asyncio.AbstractEventLoop]
    opening: asyncio.Lock = field(default_factory=asyncio.Lock)
    pool: AsyncConnectionPool[Any] | None = None
    guardian: asyncio.Task[None] | None = None
    # Group commit: commits in flight (alone or a group), the batches waiting for a group, the
    # tasks committing groups (at most one per pool connection, each on its own connection),
    # and whether one of them is about to take the waiting batches (then no other is started).
    committing: int = 0
    waiting: list[_Waiter] = field(default_factory=list)
    groupers: set[asyncio.Task[None]] = field(default_factory=set)
    starting: asyncio.Task[None] | None = None


@dataclass(slots=True, eq=False)
class _Waiter:
    """A batch waiting for a group commit, and the future its append awaits."""

    run_id: str
    batch: tuple[Record, ...]
    sequence: int
    arguments: tuple[Any, ...]
    future: asyncio.Future[None]


class PostgresStore(AsyncClosing):
    """A :class:`~polyloop.ports.RunStore` in PostgreSQL (psycopg 3, an async pool).

    ``dsn`` is a libpq connection string or URI (``postgresql://user@host:5432/db``).
    ``min_size``/``max_size`` size the connection pool (per event loop, per store object).
    ``migrate=False`` never changes the schema of a store written by an earlier polyloop (the
    read-only commands): its run index is then not built, ``query_runs``/``run_stats`` raise
    ``IndexNotBuilt`` and appends are refused; by default the first use builds the index
    (resumably, logged on the ``polyloop`` logger).

    Nothing is connected in ``__init__``: the schema is checked (and created if absent) and the
    pool opened on first use, in the running event loop. Event loops: a store may be used from
    successive event loops (two ``asyncio.run`` calls) without ``aclose()`` in between: the
    pool is closed when its loop shuts down, and the next loop opens a new one. It must not be
    used from two loops *at the same time* (that raises ``RuntimeError``). ``aclose()`` (or
    ``async with``) closes the pool now; a closed store reopens on its next use.

    Every append is one transaction: lock the run's row (``SELECT … FOR UPDATE``), read its
    length and whether it is finished, apply the append rules, write — so many writer
    processes are safe, and the ``PRIMARY KEY (run_id, sequence)`` is the final fence. It is
    durable when it returns (the session forces ``synchronous_commit = on``). Appends made
    while another of this object's commits is in flight share one transaction, each batch
    under its own savepoint (group commit, docs/design/0005).
    """

    def __init__(
        self, dsn: str, *, min_size: int = 1, max_size: int = 10, migrate: bool = True
    ) -> None:
        if not isinstance(dsn, str) or not dsn.strip():
            raise ValueError("dsn must be a non-empty PostgreSQL connection string or URI")
        for name, value in (("min_size", min_size), ("max_size", max_size)):
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"{name} must be an int, got {value!r}")
        if min_size < 0:
            raise ValueError(f"min_size must be >= 0, got {min_size}")
        if max_size < max(1, min_size):
            raise ValueError(f"max_size must be >= max(1, min_size), got {max_size}")
        _require_driver()
        import psycopg

        try:
            self._where = _describe_dsn(dsn)
        except psycopg.ProgrammingError as exc:
            raise ValueError(f"invalid PostgreSQL DSN: {exc}") from None
        self._dsn = dsn
        self._min_size = min_size
        self._max_size = max_size
        self._binding: _LoopBinding | None = None
        self._schema_checked = False
        # False: a store written without the run index stays as it is (read-only commands);
        # its index is then not built, and appends are refused.
        self._migrate = migrate
        self._indexed = True
        # Every connection the pools opened, so a pool left behind by a finished event loop
        # can have its sockets closed without that loop.
        self._connections: weakref.WeakSet[AsyncConnection[Any]] = weakref.WeakSet()

    # ------------------------------------------------------------------ RunStore

    async def append(self, run_id: str, record: Record, *, sequence: int) -> None:
        check_record(run_id, record, sequence)
        await self.append_many(run_id, (record,), sequence=sequence)

    async def append_many(self, run_id: str, records: Sequence[Record], *, sequence: int) -> None:
        """Append ``records`` at ``sequence``, ``sequence + 1``, … in one transaction.

        All or nothing: the append rules apply to each record in order under the run's row
        lock, and the first violation is raised with nothing written. With nothing else of this
        store committing, the transaction is this batch's own, in the caller's task; otherwise
        the batch waits for a group commit (docs/design/0005): one transaction for every batch
        then waiting, each still all or nothing and fenced, and durable when this returns.
        """
        batch = check_batch(run_id, records, sequence)
        arguments = _append_arguments(run_id, batch, sequence)
        if not self._migrate:
            await self._pool()
            if not self._indexed:
                raise IndexNotBuilt(
                    f"PostgresStore({self._where}): opened with migrate=False on a store "
                    "without its run index; appending would leave the index behind"
                )
        pool = await self._pool()
        binding = self._binding
        assert binding is not None  # _pool() bound this loop
        if not binding.committing and not binding.waiting:
            binding.committing += 1
            try:
                async with pool.connection() as conn:
                    outcome = await self._write_batch(conn, run_id, batch, sequence, arguments)
            finally:
                binding.committing -= 1
                self._start_groups(binding, pool)
            if outcome is not None:
                raise outcome
            return
        future = asyncio.get_running_loop().create_future()
        waiter = _Waiter(run_id, batch, sequence, arguments, future)
        binding.waiting.append(waiter)
        self._start_groups(binding, pool)
        # Cancelled while waiting, the batch is dropped (nothing written); once its group has
        # begun, the group commits it whole whatever happens to this await.
        await waiter.future

    def _start_groups(self, binding: _LoopBinding, pool: AsyncConnectionPool[Any]) -> None:
        """Start a group task for the waiting batches, unless one is about to take them or
        every pool connection already carries a group. The task takes the batches only when it
        first runs: every append made in this turn of the event loop joins the same group."""
        if not binding.waiting or binding.starting is not None:
            return
        if len(binding.groupers) >= self._max_size:
            return  # the groups in flight take the waiting batches when they are done
        task = asyncio.get_running_loop().create_task(
            self._commit_groups(binding, pool), name="polyloop-group-commit"
        )
        binding.starting = task
        binding.groupers.add(task)

    async def _commit_groups(self, binding: _LoopBinding, pool: AsyncConnectionPool[Any]) -> None:
        """Commit the waiting batches, a group at a time, while any are waiting; hand each
        waiter its outcome once its group's ``COMMIT`` returned. Several of these run at once,
        each group on its own connection (docs/design/0005)."""
        task = asyncio.current_task()
        try:
            while binding.waiting:
                if binding.starting is task:
                    binding.starting = None
                # A waiter cancelled before its group began gave up: nothing of it is written.
                group = [waiter for waiter in binding.waiting if not waiter.future.done()]
                binding.waiting = []
                if not group:
                    continue
                self._start_groups(binding, pool)  # batches arriving now need not wait for this
                binding.committing += 1
                try:
                    outcomes = await self._commit_group(pool, group)
                except asyncio.CancelledError:  # the loop is shutting down: nobody is told "done"
                    for waiter in group:
                        waiter.future.cancel()
                    raise
                except Exception as exc:  # the shared transaction: nothing of it is written
                    outcomes = [exc] * len(group)
                finally:
                    binding.committing -= 1
                _settle(group, outcomes)
        finally:
            if binding.starting is task:
                binding.starting = None
            binding.groupers.discard(task)
            if not binding.groupers:
                for waiter in binding.waiting:  # only if cancelled: nothing of theirs written
                    waiter.future.cancel()
                binding.waiting = []

    async def _commit_group(
        self, pool: AsyncConnectionPool[Any], group: list[_Waiter]
    ) -> list[BaseException | None]:
        """One transaction for every batch of ``group``, sent in one round trip (pipeline
        mode): ``BEGIN``, each batch's append function, ``COMMIT``. Each batch's outcome,
        ``None`` (committed) or the error that refused it alone (the function rolls a refused
        batch back to its own savepoint). An error of the transaction itself (its ``COMMIT``,
        the connection) is raised: nothing of it is written.

        Batches are written in run-id order: every group takes its row locks in one order, so
        two groups (of this store object, of two objects or processes) can wait for each other
        but never deadlock.
        """
        order = sorted(group, key=lambda waiter: waiter.run_id)
        async with pool.connection() as conn:
            if len(order) == 1:  # its own transaction: no BEGIN, no COMMIT to send
                only = order[0]
                outcome = await self._write_batch(
                    conn, only.run_id, only.batch, only.sequence, only.arguments
                )
                return [outcome]
            async with conn.pipeline():
                await conn.execute("BEGIN")
                sent = [
                    (waiter, await self._send_batch(conn, waiter.arguments)) for waiter in order
                ]
                await conn.execute("COMMIT")
            outcomes = {
                id(waiter): _outcome(
                    await cursor.fetchone(), waiter.run_id, waiter.batch, waiter.sequence
                )
                for waiter, cursor in sent
            }
        return [outcomes[id(waiter)] for waiter in group]

    async def _write_batch(
        self,
        conn: AsyncConnection[Any],
        run_id: str,
        batch: tuple[Record, ...],
        sequence: int,
        arguments: tuple[Any, ...],
    ) -> BaseException | None:
        """Fence and insert one run's batch in one statement, one round trip: its own
        transaction on an idle connection. The error that refused the batch (nothing of it
        written), or ``None``: committed and durable."""
        cursor = await self._send_batch(conn, arguments)
        return _outcome(await cursor.fetchone(), run_id, batch, sequence)

    async def _send_batch(
        self, conn: AsyncConnection[Any], arguments: tuple[Any, ...]
    ) -> AsyncCursor[Any]:
        """The one place a batch meets the tables: a call of the append function
        (``_APPEND_FUNCTION``), which locks the run's row, applies the fence, writes the runs
        row with its index columns, the records, the labels and the usage, and rolls all of it
        back to its own savepoint when anything refuses it. In pipeline mode this only queues
        the call; what must change with a run's records belongs in the function."""
        return await conn.execute(_APPEND, arguments)

    async def read_log(self, run_id: str) -> RunLog:
        validate_run_id(run_id)
        pool = await self._pool()
        async with pool.connection() as conn:
            cur = await conn.execute(
                "SELECT sequence, kind, body FROM polyloop_records WHERE run_id = %s "
                "ORDER BY sequence",
                (run_id,),
            )
            rows = await cur.fetchall()
        return decode_log(run_id, rows, where=f"PostgresStore({self._where})")

    async def run_ids(self) -> list[str]:
        pool = await self._pool()
        async with pool.connection() as conn:
            cur = await conn.execute("SELECT run_id FROM polyloop_runs")
            rows = await cur.fetchall()
        return sorted(str(row[0]) for row in rows)

    async def query_runs(self, query: RunQuery) -> list[RunSummary]:
        """The run index's rows ``query`` selects (``polyloop.ports.IndexedRunStore``)."""
        pool = await self._index_pool()
        async with pool.connection() as conn:
            return await query_runs(conn, query)

    async def run_stats(self, query: RunQuery) -> RunStats:
        """The statistics of the rows ``query`` selects (``polyloop.ports.IndexedRunStore``)."""
        pool = await self._index_pool()
        async with pool.connection() as conn:
            return await run_stats(conn, query)

    async def _index_pool(self) -> AsyncConnectionPool[Any]:
        pool = await self._pool()
        if not self._indexed:
            raise IndexNotBuilt(
                f"PostgresStore({self._where}): the store was written by an earlier polyloop "
                "and its run index is not built yet"
            )
        return pool

    # ------------------------------------------------------------------ lifecycle

    async def aclose(self) -> None:
        """Close the pool (idempotent). The store reopens on its next use."""
        binding, self._binding = self._binding, None
        if binding is None:
            return
        if binding.loop() is not asyncio.get_running_loop():
            self._abandon(binding)
            return
        if binding.guardian is not None:
            binding.guardian.cancel()
        await self._close_pool(binding)

    def __repr__(self) -> str:
        return f"PostgresStore({self._where}, min_size={self._min_size}, max_size={self._max_size})"

    # ------------------------------------------------------------------ internals

    async def _pool(self) -> AsyncConnectionPool[Any]:
        loop = asyncio.get_running_loop()
        binding = self._binding
        if binding is not None and binding.loop() is not loop:
            old_loop = binding.loop()
            if old_loop is not None and old_loop.is_running():
                raise RuntimeError(
                    f"{self!r} is in use by another running event loop; use one store object "
                    "per event loop at a time"
                )
            self._abandon(binding)
            binding = None
        if binding is None:
            binding = self._binding = _LoopBinding(loop=weakref.ref(loop))
        if binding.pool is None:
            async with binding.opening:
                if binding.pool is None:
                    binding.pool = await self._open_pool()
                    binding.guardian = loop.create_task(
                        self._close_at_loop_shutdown(binding), name="polyloop-pool-guardian"
                    )
        return binding.pool

    async def _close_at_loop_shutdown(self, binding: _LoopBinding) -> None:
        """Wait until cancelled — ``asyncio.run`` cancels every task when its main coroutine
        returns — then close the pool.

        psycopg_pool's maintenance tasks swallow a ``CancelledError`` that hits them while they
        run a task, so a pool that is still open when its loop shuts down can make
        ``asyncio.run`` wait forever; closing the pool stops them.
        """
        try:
            await asyncio.Event().wait()
        finally:
            try:
                await self._close_pool(binding)
            finally:
                # Nothing of this loop runs any more; a connection the pool's cancelled tasks
                # were still configuring is not in the pool and would stay open otherwise.
                self._finish_connections()

    async def _close_pool(self, binding: _LoopBinding) -> None:
        pool, binding.pool = binding.pool, None
        if pool is None:
            return
        try:
            await pool.close()
        except BaseException:
            # At loop shutdown the pool's own tasks are already cancelled and close() can
            # stop half-way; whatever it left open is closed without the loop.
            self._finish_connections()
            raise

    async def _open_pool(self) -> AsyncConnectionPool[Any]:
        from psycopg_pool import AsyncConnectionPool

        if not self._schema_checked:
            await self._ensure_schema()
            self._schema_checked = True
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            self._dsn,
            min_size=self._min_size,
            max_size=self._max_size,
            kwargs={"autocommit": True},
            configure=self._configure,
            open=False,
            name="polyloop",
        )
        await pool.open()
        return pool

    async def _configure(self, conn: AsyncConnection[Any]) -> None:
        from psycopg import IsolationLevel

        # Known before any await: a connection whose configuration is cancelled (its loop
        # shutting down) is not in the pool, and must still be closed.
        self._connections.add(conn)
        # The fence relies on READ COMMITTED (a statement after the row lock sees the previous
        # append's commit) whatever the server's default_transaction_isolation says, and
        # "durable when append returns" on synchronous_commit whatever the server default is.
        # A lone batch is one statement in autocommit mode, where no BEGIN names the level:
        # the session's default is set too. The append function lives in this session's
        # temporary schema: nothing is added to the database, whatever polyloop version made it.
        # A batch's whole transaction reaches the server in one message, COMMIT included: a
        # writer killed while the server runs it must not have it committed afterwards (a
        # resume reading the log then would be fenced off by a write of a dead process). From
        # PostgreSQL 14 the server checks, while a statement runs, that its client is still
        # there, and aborts the statement if not; before 14 the window is the statement's
        # duration.
        checks = (
            "SET client_connection_check_interval TO 1; "
            if conn.info.server_version >= 140000
            else ""
        )
        await conn.set_isolation_level(IsolationLevel.READ_COMMITTED)
        await conn.execute(
            "SET synchronous_commit TO on; "
            f"SET default_transaction_isolation TO 'read committed'; {checks}{_APPEND_FUNCTION}"
        )

    async def _ensure_schema(self) -> None:
        """Check the store schema version; create the tables in an empty database."""
        import psycopg

        try:
            conn = await psycopg.AsyncConnection.connect(self._dsn, autocommit=True)
        except psycopg.OperationalError as exc:
            exc.add_note(f"PostgresStore could not connect to {self._where}")
            raise
        migrating = False
        async with conn, conn.transaction():
            await conn.execute(
                "SELECT pg_advisory_xact_lock(hashtext(%s), hashtext(%s))",
                (_LOCK_NAMESPACE, _SCHEMA_LOCK_KEY),
            )
            cur = await conn.execute(
                "SELECT to_regclass('polyloop_schema') IS NOT NULL, "
                "to_regclass('polyloop_runs') IS NOT NULL, "
                "to_regclass('polyloop_records') IS NOT NULL"
            )
            row = await cur.fetchone()
            assert row is not None
            has_schema, has_runs, has_records = (bool(v) for v in row)
            if has_schema:
                cur = await conn.execute(
                    "SELECT version FROM polyloop_schema WHERE component = 'store'"
                )
                version_row = await cur.fetchone()
                if version_row is None:
                    raise StoreCorrupted(
                        f"PostgresStore({self._where}): polyloop_schema has no 'store' version"
                    )
                version = str(version_row[0])
                self._check_version(version)
                if has_runs and has_records:
                    if _has_index(version):
                        return
                    if not self._migrate:
                        self._indexed = False
                        return
                    for statement in INDEX_COLUMNS:
                        await conn.execute(statement)
                    migrating = True
            elif has_runs or has_records:
                raise StoreCorrupted(
                    f"PostgresStore({self._where}): tables polyloop_runs/polyloop_records exist "
                    "without polyloop_schema; they are not a polyloop store (left untouched)"
                )
            if not migrating:
                for statement in (*_SCHEMA, *INDEX_COLUMNS):
                    await conn.execute(statement)
                await conn.execute(
                    "INSERT INTO polyloop_schema (component, version) VALUES ('store', %s) "
                    "ON CONFLICT (component) DO NOTHING",
                    (STORE_SCHEMA_VERSION,),
                )
        if migrating:  # outside the schema lock: a chunk of runs per transaction
            async with await psycopg.AsyncConnection.connect(self._dsn, autocommit=True) as work:
                await build_index(work, f"PostgresStore({self._where})")

    def _check_version(self, version: str) -> None:
        if version.split(".", 1)[0] != _SUPPORTED_MAJOR:
            raise SchemaVersionError(
                f"PostgresStore({self._where}): unknown store schema version {version!r} "
                f"(this polyloop reads {_SUPPORTED_MAJOR}.x); nothing was changed"
            )

    def _abandon(self, binding: _LoopBinding) -> None:
        """Forget a pool whose event loop has stopped without shutting it down (a loop closed
        without cancelling its tasks); close its connections' sockets without that loop."""
        if self._binding is binding:
            self._binding = None
        binding.pool = None
        self._finish_connections()

    def _finish_connections(self) -> None:
        # libpq's finish() closes the socket synchronously; no event loop needed.
        for conn in list(self._connections):
            if not conn.closed:
                conn.pgconn.finish()
        self._connections = weakref.WeakSet()


def _refusal(run_id: str, batch: tuple[Record, ...], sequence: int) -> Exception:
    """The error of a batch the primary key refused: another writer committed this run's start
    or this sequence first."""
    if isinstance(batch[0], RunStarted):
        return RunAlreadyExists(f"run {run_id!r} already has a log (a concurrent RunStarted won)")
    return RunConflict(
        f"run {run_id!r}: sequence {sequence} was written concurrently by another "
        "process (another process is driving this run)"
    )


# One call appends one run's batch: the fence and every write of the batch in one statement, so
# a lone batch is one round trip and a group is one round trip for all of its batches
# (docs/design/0005). The append rules stay in Python (polyloop/stores/_rules.py): the caller
# checks the batch against the log it must follow (p_valid: the rules hold for a log of
# p_sequence records, not finished), the function writes only when the locked row is that log,
# and otherwise returns what it found, from which the caller raises the rule's own error. The
# inner block is a savepoint: whatever refuses a batch (a key a racing writer took, a trigger, a
# full disk) rolls back that batch alone, and is returned, not raised, so that the other batches
# of a group go on. Created per session in pg_temp (see _configure).
_APPEND_FUNCTION: Final = """
CREATE OR REPLACE FUNCTION pg_temp.polyloop_append(
    p_run_id text, p_sequence bigint, p_valid boolean, p_kinds text[], p_bodies text[],
    p_finished boolean, p_stop_reason text,
    p_batch text, p_task_id text, p_labels text, p_started_at text,
    p_label_keys text[], p_label_values text[],
    p_steps bigint, p_executed bigint, p_final_executed bigint, p_finished_at text,
    p_usage_keys text[], p_usage_tokens numeric[],
    OUT o_written boolean, OUT o_length bigint, OUT o_finished boolean,
    OUT o_state text, OUT o_message text
) LANGUAGE plpgsql AS $polyloop$
BEGIN
    o_written := false;
    BEGIN
        SELECT r.length, r.finished INTO o_length, o_finished
            FROM polyloop_runs r WHERE r.run_id = p_run_id FOR UPDATE;
        IF NOT FOUND THEN
            o_length := 0;
            o_finished := false;
        END IF;
        IF NOT p_valid OR o_length <> p_sequence OR o_finished THEN
            RETURN;
        END IF;
        IF o_length = 0 THEN
            INSERT INTO polyloop_runs (run_id, length, finished, stop_reason, batch, task_id,
                labels, run_started_at, steps, executed_actions, finished_at)
            VALUES (p_run_id, cardinality(p_bodies), p_finished, p_stop_reason, p_batch,
                p_task_id, coalesce(p_labels, '{}'), coalesce(p_started_at, ''), p_steps,
                coalesce(p_final_executed, p_executed), p_finished_at);
            IF cardinality(p_label_keys) > 0 THEN
                INSERT INTO polyloop_run_labels (key, value, run_id)
                SELECT u.k, u.v, p_run_id FROM unnest(p_label_keys, p_label_values) AS u(k, v);
            END IF;
        ELSE
            UPDATE polyloop_runs SET length = o_length + cardinality(p_bodies),
                finished = p_finished, stop_reason = p_stop_reason,
                steps = polyloop_runs.steps + p_steps,
                executed_actions = coalesce(p_final_executed,
                    polyloop_runs.executed_actions + p_executed),
                finished_at = coalesce(p_finished_at, polyloop_runs.finished_at)
            WHERE polyloop_runs.run_id = p_run_id;
        END IF;
        INSERT INTO polyloop_records (run_id, sequence, kind, body)
        SELECT p_run_id, p_sequence + u.n - 1, u.k, u.b
        FROM unnest(p_kinds, p_bodies) WITH ORDINALITY AS u(k, b, n);
        IF cardinality(p_usage_keys) > 0 THEN
            INSERT INTO polyloop_run_usage AS t (run_id, key, tokens)
            SELECT p_run_id, u.k, u.v FROM unnest(p_usage_keys, p_usage_tokens) AS u(k, v)
            ON CONFLICT (run_id, key) DO UPDATE SET tokens = t.tokens + excluded.tokens;
        END IF;
        o_written := true;
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS o_state = RETURNED_SQLSTATE, o_message = MESSAGE_TEXT;
    END;
END
$polyloop$
"""

# The arrays go in binary (%b): psycopg's text form of an array escapes every element with a
# regular expression, which cost more client CPU than the rest of the commit.
_APPEND: Final = (
    "SELECT o_written, o_length, o_finished, o_state, o_message FROM pg_temp.polyloop_append("
    "%s::text, %s::bigint, %s::boolean, %b::text[], %b::text[], %s::boolean, %s::text, "
    "%s::text, %s::text, %s::text, %s::text, %b::text[], %b::text[], "
    "%s::bigint, %s::bigint, %s::bigint, %s::text, %b::text[], %b::text[]::numeric[])"
)

_UNIQUE_VIOLATION: Final = "23505"


def _append_arguments(run_id: str, batch: tuple[Record, ...], sequence: int) -> tuple[Any, ...]:
    """The append function's arguments for ``batch``: encoded on the caller's side, before the
    batch waits for any group."""
    try:
        check_append_many(run_id, batch, sequence=sequence, length=sequence, finished=False)
        valid = True
    except PolyloopError:
        valid = False  # refused whatever the log holds; the function reads what it holds
    last = batch[-1]
    # Copied out of the body so runs can be filed by stop reason in plain SQL.
    stop_reason = last.stop_reason.value if isinstance(last, RunFinished) else None
    return (
        run_id,
        sequence,
        valid,
        [record.kind for record in batch],
        [record.to_json() for record in batch],
        isinstance(last, RunFinished),
        stop_reason,
        *index_arguments(batch),
    )


def _outcome(
    row: tuple[Any, ...] | None, run_id: str, batch: tuple[Record, ...], sequence: int
) -> BaseException | None:
    """What the append function's row says: ``None`` (written), the append rule's error, or the
    database's error that refused the batch alone."""
    import psycopg

    assert row is not None  # the function returns one row
    written, length, finished, state, message = row
    if written:
        return None
    if state is None:  # not written: the log is not the one the batch must follow
        try:
            check_append_many(
                run_id, batch, sequence=sequence, length=int(length), finished=bool(finished)
            )
        except PolyloopError as exc:
            return exc
        raise StoreCorrupted(  # the function and the rules disagree: never seen
            f"run {run_id!r}: the append at sequence {sequence} was not written, yet the log "
            f"({length} records, finished={finished}) accepts it"
        )
    if state == _UNIQUE_VIOLATION:
        return _refusal(run_id, batch, sequence)
    try:
        error_class = psycopg.errors.lookup(state)
    except KeyError:
        error_class = psycopg.DatabaseError
    return error_class(message)


def _settle(group: list[_Waiter], outcomes: list[BaseException | None]) -> None:
    """Hand each waiter of a committed group its outcome."""
    for waiter, outcome in zip(group, outcomes, strict=True):
        if waiter.future.done():  # cancelled meanwhile: committed all the same
            continue
        if outcome is None:
            waiter.future.set_result(None)
        else:
            waiter.future.set_exception(outcome)
