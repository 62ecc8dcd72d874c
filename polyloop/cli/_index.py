"""``polyloop runs``, ``stats``, ``export`` and ``migrate``: the run index from the command line.

The reading commands ask the store's run index (``polyloop.ports.IndexedRunStore``) and read no
log to list or count runs. A store written by an earlier polyloop has no index yet: they never
build it (they only read), so they read every log instead and say so in one line on stderr;
``polyloop migrate`` (or any writing use of the store) builds it.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from polyloop._base._run_index import (
    RUNNING,
    Percentiles,
    RunQuery,
    RunStats,
    RunSummary,
    newest_last,
    stats_of,
    summarize_log,
)
from polyloop.cli._errors import one_line
from polyloop.cli._read_only import NoStore, ReadOnlySQLite, open_for_reading
from polyloop.errors import IndexNotBuilt, PolyloopError, SchemaVersionError, StoreCorrupted
from polyloop.ports import RunStore
from polyloop.stores import open_store, sqlite_path
from polyloop.types import RunLog, StepCompleted, StopReason

__all__ = ["StoreUnavailable", "add_index_commands", "query_of"]

Reader = RunStore | ReadOnlySQLite


class StoreUnavailable(Exception):
    """The store cannot be opened (missing, not a store, incompatible): exit status 2."""


def add_index_commands(
    commands: Any, store_option: argparse.ArgumentParser, handlers: dict[str, Any]
) -> None:
    """Add ``runs``, ``stats``, ``export`` and ``migrate`` to the CLI's subcommands."""
    filters = _filter_options()
    limit = argparse.ArgumentParser(add_help=False)
    limit.add_argument(
        "--limit", metavar="N", help="only the newest N runs (still listed oldest first)"
    )
    base = [store_option, filters]
    specs: Sequence[tuple[str, list[argparse.ArgumentParser], str, str, str]] = (
        ("runs", [*base, limit],
         "polyloop runs [--store URL] [FILTERS] [--limit N] [--format table|json|csv]",
         "list runs: id, start time, stop reason (or running), steps",
         "List the store's runs, oldest first, from its run index. Only reads: the store is "
         "never created or changed."),
        ("stats", base,
         "polyloop stats [--store URL] [FILTERS] [--format table|json]",
         "stop-reason breakdown, steps and executed actions (median, p90, max), usage totals",
         "Tally the runs the filters select, from the store's run index. Only reads."),
        ("export", [*base, limit],
         "polyloop export [--store URL] [FILTERS] [--limit N] [-o FILE]",
         "write each run's index row and steps as JSON Lines (for pandas, DuckDB)",
         "Write one JSON object per run, oldest first: its index row and its steps. Only "
         "reads the store."),
        ("migrate", [store_option],
         "polyloop migrate [--store URL]",
         "build the run index of a store written by an earlier polyloop",
         "Open the store for writing, which builds its run index if it has none (resumably: "
         "an interrupted migration continues next time)."),
    )  # fmt: skip
    parsers = {}
    for name, parents, usage, summary, description in specs:
        parsers[name] = commands.add_parser(
            name, parents=parents, usage=usage, help=summary, description=description
        )
        parsers[name].set_defaults(handler=handlers[name])
    parsers["runs"].add_argument("--format", choices=("table", "json", "csv"), default="table")
    parsers["stats"].add_argument("--format", choices=("table", "json"), default="table")
    parsers["export"].add_argument(
        "-o", "--output", default="-", metavar="FILE", help="where to write (default -: stdout)"
    )


def _filter_options() -> argparse.ArgumentParser:
    """The options that select runs, shared by ``runs``, ``stats`` and ``export``."""
    filters = argparse.ArgumentParser(add_help=False)
    filters.add_argument("--batch", metavar="ID", help="only the runs of this batch")
    filters.add_argument(
        "--stop-reason",
        action="append",
        default=[],
        metavar="REASON",
        help="only runs that stopped for this reason, or 'running' for unfinished ones "
        "(repeatable: any of them)",
    )
    filters.add_argument(
        "--since", metavar="TIME", help="only runs started at or after this ISO 8601 time (UTC)"
    )
    filters.add_argument(
        "--label",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="only runs carrying this label (repeatable: all of them)",
    )
    return filters


# --------------------------------------------------------------------------- arguments


def query_of(args: argparse.Namespace) -> RunQuery:
    """The filters given on the command line; ``ValueError`` (one line) for a bad one."""
    labels: dict[str, str] = {}
    for given in getattr(args, "label", []):
        key, equals, value = given.partition("=")
        if not equals or not key:
            raise ValueError(f"invalid --label {given!r}: use KEY=VALUE (a non-empty key)")
        if key in labels and labels[key] != value:
            raise ValueError(f"--label {key!r} is given twice with different values")
        labels[key] = value
    known = [reason.value for reason in StopReason]
    for reason in getattr(args, "stop_reason", []):
        if reason not in (*known, RUNNING):
            raise ValueError(
                f"unknown stop reason {reason!r} for --stop-reason; use one of "
                f"{', '.join(known)} or {RUNNING}"
            )
    return RunQuery(
        batch=getattr(args, "batch", None),
        stop_reasons=tuple(dict.fromkeys(getattr(args, "stop_reason", []))),
        since=getattr(args, "since", None),
        labels=labels,
        limit=_limit(getattr(args, "limit", None)),
    )


def _limit(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        number = int(text.strip(), 10)
    except ValueError:
        raise ValueError(f"invalid --limit {text!r}: use a whole number >= 1") from None
    if number < 1:
        raise ValueError(f"invalid --limit {text!r}: use a whole number >= 1")
    return number


# --------------------------------------------------------------------------- reading


def open_reader(url: str) -> Reader:
    """The store, for reading; :class:`StoreUnavailable` when it cannot be opened."""
    try:
        return open_for_reading(url)
    except (NoStore, StoreCorrupted, SchemaVersionError) as exc:
        raise StoreUnavailable(str(exc)) from None


async def close(store: Reader) -> None:
    aclose = getattr(store, "aclose", None)
    if aclose is not None:
        await aclose()


async def index_rows(
    store: Reader, query: RunQuery, url: str
) -> tuple[list[RunSummary], dict[str, str]]:
    """The rows ``query`` selects, from the index or else from the logs; and the runs whose
    log could not be read (run id → why), found only when the logs are read."""
    indexed = getattr(store, "query_runs", None)
    if indexed is not None:
        try:
            rows: list[RunSummary] = await indexed(query)
            return rows, {}
        except IndexNotBuilt:
            pass
    _say_reading_logs(url)
    summaries, unreadable = await _summaries_from_logs(store)
    return newest_last(summaries, query), unreadable


async def index_stats(store: Reader, query: RunQuery, url: str) -> RunStats:
    indexed = getattr(store, "run_stats", None)
    if indexed is not None:
        try:
            stats: RunStats = await indexed(query)
            return stats
        except IndexNotBuilt:
            pass
    _say_reading_logs(url)
    summaries, _ = await _summaries_from_logs(store)
    return stats_of(newest_last(summaries, query))


async def unknown_batch_note(store: Reader, query: RunQuery, url: str) -> str | None:
    """When ``--batch NAME`` selected nothing because the store has no batch of that name: one
    line saying so and naming the batches it has (the first few), else ``None`` (the batch
    exists, and only another filter left nothing)."""
    if query.batch is None:
        return None
    rows, _ = await index_rows(store, RunQuery(), url)
    batches = sorted({row.batch for row in rows if row.batch is not None})
    if query.batch in batches:
        return None
    if not batches:
        has = "it has no batches (runs get one from `polyloop batch` or run_many)"
    else:
        shown = ", ".join(repr(name) for name in batches[:_BATCHES_SHOWN])
        more = len(batches) - _BATCHES_SHOWN
        tail = f" and {more} more (polyloop runs --format json lists them)" if more > 0 else ""
        has = f"its batches: {shown}{tail}"
    return f"polyloop: note: {url} has no batch {query.batch!r}; {has}"


_BATCHES_SHOWN = 10


def _say_reading_logs(url: str) -> None:
    print(
        f"polyloop: note: {url} has no run index yet (written by an earlier polyloop); "
        "reading every run's log instead (polyloop migrate builds the index)",
        file=sys.stderr,
    )


async def _summaries_from_logs(store: Reader) -> tuple[list[RunSummary], dict[str, str]]:
    summaries: list[RunSummary] = []
    unreadable: dict[str, str] = {}
    for run_id in await store.run_ids():
        try:
            log = await store.read_log(run_id)
        except (PolyloopError, ValueError) as exc:  # one damaged run must not hide the others
            unreadable[run_id] = one_line(exc)
            continue
        summary = summarize_log(run_id, log)
        if summary is not None:
            summaries.append(summary)
    return summaries, unreadable


# --------------------------------------------------------------------------- output


def write_rows(rows: list[RunSummary], form: str, out: TextIO) -> None:
    if form == "json":
        json.dump([row.to_dict() for row in rows], out, ensure_ascii=False, indent=1)
        out.write("\n")
    elif form == "csv":
        writer = csv.writer(out, lineterminator="\n")
        names = list(RunSummary(run_id="x").to_dict())
        writer.writerow(names)
        for row in rows:
            fields = row.to_dict()
            writer.writerow([_csv_cell(fields[name]) for name in names])


def _csv_cell(value: object) -> object:
    """A mapping as JSON text (labels, usage), ``None`` as an empty cell."""
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    return "" if value is None else value


def write_stats(stats: RunStats, form: str, out: TextIO) -> None:
    if form == "json":
        json.dump(stats.to_dict(), out, ensure_ascii=False, indent=1)
        out.write("\n")
        return
    finished = stats.runs - stats.running
    print(f"runs: {stats.runs} ({finished} finished, {stats.running} running)", file=out)
    if stats.stop_reasons:
        width = max(len("STOP REASON"), *(len(r) for r in stats.stop_reasons))
        print(f"{'STOP REASON':<{width}}  {'RUNS':>7}  {'SHARE':>6}", file=out)
        ordered = sorted(stats.stop_reasons.items(), key=lambda item: (-item[1], item[0]))
        for reason, count in ordered:
            print(f"{reason:<{width}}  {count:>7}  {count / finished:>6.1%}", file=out)
    print(f"{'finished runs':<16}  {'MEDIAN':>7}  {'P90':>7}  {'MAX':>7}", file=out)
    for name, spread in (("steps", stats.steps), ("executed actions", stats.executed_actions)):
        print(f"{name:<16}  {_spread(spread)}", file=out)
    if stats.usage:
        totals = ", ".join(f"{key}={total}" for key, total in sorted(stats.usage.items()))
        print(f"usage totals: {totals}", file=out)
    else:
        print("usage totals: none recorded", file=out)


def _spread(p: Percentiles | None) -> str:
    if p is None:
        return f"{'-':>7}  {'-':>7}  {'-':>7}"
    return f"{p.median:>7}  {p.p90:>7}  {p.max:>7}"


def trajectory_line(row: RunSummary, log: RunLog) -> str:
    """One run for ``export``: its index row, the goal and final answer, and its steps."""
    fields = row.to_dict()
    started, finished = log.started, log.finished
    fields["goal"] = None if started is None else started.goal
    fields["final_answer"] = None if finished is None else finished.final_answer
    fields["trajectory"] = [_step(completed) for completed in log.steps]
    return json.dumps(fields, ensure_ascii=False, sort_keys=False)


def _step(completed: StepCompleted) -> dict[str, Any]:
    step: dict[str, Any] = json.loads(completed.to_json())["step"]
    step["model_error"] = completed.model_error
    step["executor_observation"] = completed.executor_observation
    return step


# --------------------------------------------------------------------------- output files


class Output:
    """Where ``export`` writes: stdout, or a file written whole or not at all.

    :meth:`check` runs before the store is read, so an unwritable place is refused with
    nothing done; the file is written to a temporary file beside it and renamed over it only
    once complete, so an error half-way leaves no partial file.
    """

    def __init__(self, path: str) -> None:
        self.path = path

    def check(self) -> None:
        if self.path == "-":
            return
        if not self.path.strip() or "\x00" in self.path:
            raise ValueError(f"cannot write to {self.path!r}: not a file name")
        try:
            self._check_place()
        except (OSError, UnicodeError) as exc:  # a name the file system cannot take
            raise ValueError(f"cannot write to {self.path!r}: {exc}") from None

    def _check_place(self) -> None:
        os.fsencode(self.path)  # UnicodeError: a name this file system cannot hold
        target = Path(self.path)
        if target.is_dir():
            raise ValueError(f"cannot write to {self.path}: it is a directory")
        parent = target.absolute().parent
        if not parent.is_dir():
            raise ValueError(f"cannot write to {self.path}: directory {parent} does not exist")
        if not os.access(parent, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
            raise ValueError(f"cannot write to {self.path}: permission denied")

    def write(self, produce: Callable[[TextIO], None], out: TextIO) -> None:
        if self.path == "-":
            produce(out)
            return
        target = Path(self.path).absolute()
        handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
        try:
            with os.fdopen(handle, "w", encoding="utf-8", errors="backslashreplace") as file:
                produce(file)
            os.replace(temporary, target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise


def check_store_exists_for_migration(url: str) -> None:
    """``migrate`` never creates a store: a SQLite file must already be a polyloop store (it is
    checked read-only first, so anything else is refused untouched)."""
    if sqlite_path(url) is None:
        return
    reader = open_reader(url)
    if isinstance(reader, ReadOnlySQLite):
        reader.close()


def open_for_migration(url: str) -> RunStore:
    check_store_exists_for_migration(url)
    return open_store(url)
