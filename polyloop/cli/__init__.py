"""The ``polyloop`` command: list and tally runs, export them, show a run's trajectory, run a
demo, read reports.

Standard library only (psycopg is imported only when a ``postgresql://`` store is named).
Every error is one line on stderr, ``polyloop: error: …``, never a traceback: exit status 2
for bad input (a wrong argument, a bad store URL, run id or filter, a store that cannot be
opened, an output that cannot be written), 1 for a failure at run time (an unknown run, a
damaged record, a server that cannot be reached).
``report`` keeps 1 for "a regression" and so reports a file that is not a report with 2.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import sqlite3
import sys
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, NoReturn, TextIO

from polyloop._base._run_id import validate_run_id
from polyloop._base._run_index import RunQuery, RunSummary
from polyloop.cli._batch import add_batch_command
from polyloop.cli._demo import run_demo
from polyloop.cli._errors import is_driver_error, refuse
from polyloop.cli._index import (
    Output,
    StoreUnavailable,
    add_index_commands,
    close,
    index_rows,
    index_stats,
    open_for_migration,
    open_reader,
    query_of,
    trajectory_line,
    unknown_batch_note,
    write_rows,
    write_stats,
)
from polyloop.cli._read_only import NoStore
from polyloop.cli._report import add_report_commands
from polyloop.errors import PolyloopError, SchemaVersionError, StoreCorrupted
from polyloop.stores import open_store, sqlite_path
from polyloop.types import ActionIntent, RunLog, StepRecord, StopReason, canonical_json

__all__ = ["main"]

DEFAULT_STORE = "sqlite:///polyloop.db"
_EXCERPT = 60
USAGE = 2  # exit status of a usage error
FAILED = 1  # exit status of a failure at run time
CLOSED_PIPE = 141  # 128 + SIGPIPE: the reader closed the pipe (`polyloop runs | head -1`)


class CommandError(Exception):
    """A failure at run time the CLI reports as one line and exit status 1."""


class UsageError(Exception):
    """A wrong argument the CLI reports as one line and exit status 2."""


class _Parser(argparse.ArgumentParser):
    """argparse, whose errors are raised (and printed by :func:`main` as one line)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see: {self.prog} --help)")


Handler = Callable[[argparse.Namespace, TextIO], Coroutine[Any, Any, int]]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI with ``argv`` (default ``sys.argv[1:]``); return the exit status.

    A reader that closes the pipe early (``polyloop runs | head -1``) ends the command quietly,
    as Unix tools do: no message, exit status 141 (128 + SIGPIPE, what a shell reports for a
    tool the closed pipe ended).
    """
    try:
        status = _main(argv)
        sys.stdout.flush()  # what is still buffered meets the closed pipe here, not at exit
    except BrokenPipeError:
        return _closed_pipe()
    return status


def _closed_pipe() -> int:
    """The reader went away: nothing more is written (the interpreter's last flush of standard
    output would fail again, so standard output becomes ``/dev/null``)."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return CLOSED_PIPE


def _main(argv: Sequence[str] | None) -> int:
    _escape_unprintable_output()
    parser = _parser()
    try:
        args = _parse(parser, sys.argv[1:] if argv is None else list(argv))
        if not hasattr(args, "store"):  # not set_defaults: that would reach the shared action
            args.store = DEFAULT_STORE
        command = getattr(args, "func", None)
        if command is not None:  # `report` (cli/_report.py): func(args) -> exit status
            return int(command(args))
        handler: Handler | None = getattr(args, "handler", None)
        if handler is None:
            raise UsageError(
                "no command given: runs, stats, export, migrate, show, demo, batch or report "
                "(see: polyloop --help)"
            )
        _check_arguments(args)
    except SystemExit as exc:  # --help or --version: argparse printed it
        return exc.code if isinstance(exc.code, int) else USAGE
    except (UsageError, ValueError) as exc:
        return refuse(exc, USAGE)
    try:
        status = asyncio.run(handler(args, sys.stdout))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        raise  # the reader closed the pipe: main ends quietly
    except StoreUnavailable as exc:  # bad input: a store that cannot be opened
        return refuse(exc, USAGE)
    except (CommandError, NoStore, PolyloopError, ValueError, OSError, sqlite3.Error) as exc:
        return refuse(exc, FAILED)
    except Exception as exc:
        if is_driver_error(exc):  # e.g. PostgreSQL unreachable: a failure, not a crash
            return refuse(exc, FAILED)
        raise
    return int(status)


def _escape_unprintable_output() -> None:
    """A path or URL the user gave may hold bytes that are not text (``\\udcff`` on POSIX), and
    a recorded run may hold any lone surrogate (``\\ud800``): printing either must show it
    escaped, not end in a ``UnicodeEncodeError``. Under the C locale the streams use
    ``surrogateescape``, which encodes only ``\\udc80``–``\\udcff``: replaced as well."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and getattr(stream, "errors", None) in (
            "strict",
            "surrogateescape",
        ):
            # A stream that cannot change is left as it is.
            with contextlib.suppress(ValueError, OSError, TypeError):
                reconfigure(errors="backslashreplace")


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    # `report diff --markdown A B`, `report merge -o M A B`: argparse stops a positional list at
    # an option; the words after it (and after the option's value) belong to the same list.
    args, extra = parser.parse_known_args(argv)
    if extra and getattr(args, "paths", None) is not None:
        unknown = [word for word in extra if word.startswith("-")]
        if not unknown:
            args.paths = [*args.paths, *extra]
            extra = []
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def _check_arguments(args: argparse.Namespace) -> None:
    """Usage errors found before anything runs: a store URL of no known form, a bad run id."""
    sqlite_path(args.store)  # ValueError for an unknown form
    if getattr(args, "run_id", None) is not None:
        validate_run_id(args.run_id)
    if hasattr(args, "label"):  # runs, stats, export: bad filters are refused before any I/O
        query_of(args)
    if getattr(args, "output", None) is not None:
        Output(args.output).check()


def _parser() -> argparse.ArgumentParser:
    # --store is accepted before or after the subcommand; SUPPRESS keeps the subcommand's copy
    # from overwriting a value given before it.
    store_option = _Parser(add_help=False)
    store_option.add_argument(
        "--store",
        default=argparse.SUPPRESS,
        metavar="URL",
        help=f"memory:, sqlite:///rel.db, sqlite:////abs.db, a plain path (runs.db, "
        f"/abs/runs.db) or postgresql://... (default {DEFAULT_STORE})",
    )
    parser = _Parser(
        prog="polyloop",
        usage="polyloop [--store URL] COMMAND ...",
        description="Inspect agent runs recorded by polyloop, run a demo, read conformance "
        "reports. Errors are one line; exit 2 for bad input (a usage error, a store that cannot "
        "be opened), 1 for a failure at run time.",
        parents=[store_option],
    )
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")

    add_index_commands(
        commands,
        store_option,
        {"runs": _runs, "stats": _stats, "export": _export, "migrate": _migrate},
    )
    parsers = {}
    for name, handler, usage, summary, description in (
        ("show", _show, "polyloop show [--store URL] RUN_ID",
         "show one run's trajectory and stop reason",
         "Show a run's trajectory, one line per step, then its stop reason. Only reads: the "
         "store is never created or changed."),
        ("demo", _demo, "polyloop demo [--store URL] [--run-id ID]",
         "record a scripted demo run (no model needed) and show it",
         "Run a scripted arithmetic agent against the store and show its trajectory."),
    ):  # fmt: skip
        parsers[name] = commands.add_parser(
            name, parents=[store_option], usage=usage, help=summary, description=description
        )
        parsers[name].set_defaults(handler=handler)
    parsers["show"].add_argument("run_id", metavar="RUN_ID")
    parsers["demo"].add_argument(
        "--run-id", default=None, metavar="ID", help="the run id (default: a new uuid4 hex)"
    )
    add_batch_command(commands, store_option)
    add_report_commands(commands)
    return parser


# --------------------------------------------------------------------------- commands


async def _runs(args: argparse.Namespace, out: TextIO) -> int:
    query = query_of(args)
    store = open_reader(args.store)
    try:
        rows, unreadable = await index_rows(store, query, args.store)
        note = await unknown_batch_note(store, query, args.store) if not rows else None
    finally:
        await close(store)
    if note is not None:
        print(note, file=sys.stderr)
    if args.format != "table":
        write_rows(rows, args.format, out)
    elif not rows and not unreadable:
        print(f"no runs in {args.store}{_memory_hint(args.store)}", file=out)
    else:
        _print_runs_table(rows, unreadable if query == RunQuery() else {}, out)
    for run_id, reason in sorted(unreadable.items()):  # after the table: it stays one block
        print(f"polyloop: warning: run {run_id} is unreadable: {reason}", file=sys.stderr)
    return 0


def _print_runs_table(rows: list[RunSummary], unreadable: dict[str, str], out: TextIO) -> None:
    table = [("RUN ID", "STARTED AT", "STOP REASON", "STEPS")]
    # A run whose log cannot be read is listed first, its start time unknown.
    table.extend((run_id, "?", "unreadable", "?") for run_id in sorted(unreadable))
    table.extend(
        (row.run_id, row.started_at or "?", row.stop_reason or "running", str(row.steps))
        for row in rows
    )
    widths = [max(len(row[i]) for row in table) for i in range(3)]
    for run_id, started_at, stop, steps in table:
        print(
            f"{run_id:<{widths[0]}}  {started_at:<{widths[1]}}  {stop:<{widths[2]}}  {steps:>5}",
            file=out,
        )


async def _stats(args: argparse.Namespace, out: TextIO) -> int:
    query = query_of(args)
    store = open_reader(args.store)
    try:
        stats = await index_stats(store, query, args.store)
        note = await unknown_batch_note(store, query, args.store) if not stats.runs else None
    finally:
        await close(store)
    write_stats(stats, args.format, out)
    if note is not None:
        print(note, file=sys.stderr)
    return 0


async def _export(args: argparse.Namespace, out: TextIO) -> int:
    query = query_of(args)
    output = Output(args.output)
    output.check()
    store = open_reader(args.store)
    try:
        rows, unreadable = await index_rows(store, query, args.store)
        lines = [trajectory_line(row, await store.read_log(row.run_id)) for row in rows]
    finally:
        await close(store)
    output.write(lambda file: file.writelines(line + "\n" for line in lines), out)
    for run_id, reason in sorted(unreadable.items()):
        print(f"polyloop: warning: run {run_id} is unreadable: {reason}", file=sys.stderr)
    return 0


async def _migrate(args: argparse.Namespace, out: TextIO) -> int:
    store = open_for_migration(args.store)
    try:
        open_now = getattr(store, "__aenter__", None)
        if open_now is not None:
            await open_now()  # a writing open builds the index of a store without one
        runs = len(await store.run_ids())
    except (StoreCorrupted, SchemaVersionError) as exc:
        raise StoreUnavailable(str(exc)) from None
    finally:
        await close(store)
    print(f"{args.store}: the run index is up to date ({_count(runs, 'run')})", file=out)
    return 0


async def _show(args: argparse.Namespace, out: TextIO) -> int:
    run_id = validate_run_id(args.run_id)
    store = open_reader(args.store)
    try:
        log = await store.read_log(run_id)
    finally:
        await close(store)
    if not log.records:
        raise CommandError(f"no run {run_id!r} in {args.store}{_memory_hint(args.store)}")
    _print_trajectory(run_id, log, out)
    return 0


async def _demo(args: argparse.Namespace, out: TextIO) -> int:
    run_id = None if args.run_id is None else validate_run_id(args.run_id)
    store = open_store(args.store)
    try:
        result = await run_demo(store, run_id)
        log = await store.read_log(result.run_id)  # show what the store kept, not memory
    finally:
        await close(store)
    _print_trajectory(result.run_id, log, out)
    print(f"recorded in {args.store}; see it again with: polyloop show {result.run_id}", file=out)
    return 0


# --------------------------------------------------------------------------- helpers


def _memory_hint(url: str) -> str:
    if url != "memory:":
        return ""
    return " (a memory: store starts empty in every command; record to a file to read it back)"


def _print_trajectory(run_id: str, log: RunLog, out: TextIO) -> None:
    started = log.started
    print(f"run {run_id}", file=out)
    if started is not None:
        print(f"started {started.started_at}  goal: {_excerpt(started.goal, 200)}", file=out)
    for completed in log.steps:
        step = completed.step
        status, text = _step_summary(step, completed.model_error)
        line = f"{step.step_index:>4}  {status:<13} {text}"
        if step.observation:
            line += f"  -> {_excerpt(step.observation, _EXCERPT)}"
        print(line.rstrip(), file=out)
        for detail in _detail_lines(completed.executor_detail):
            print(detail, file=out)
    for line in _in_doubt(log):
        print(line, file=out)
    finished = log.finished
    if finished is None:
        last = log.records[-1].kind if log.records else "nothing"
        print(f"stop: running (no run_finished yet; last record: {last})", file=out)
        return
    executed = _count(finished.executed_actions, "executed action")
    stop = f"stop: {finished.stop_reason.value} ({executed})"
    if finished.final_answer is not None:
        stop += f"  answer: {_excerpt(finished.final_answer, 200)}"
    print(stop, file=out)
    if finished.stop_reason is StopReason.PARSER_ERROR and log.steps:
        why = log.steps[-1].step.parse_error or "the decision parser raised"
        print(f"      ended on purpose: {_excerpt(why, 400)}", file=out)


def _in_doubt(log: RunLog) -> list[str]:
    """The action whose result is unknown: the last action intent with no step after it (a
    run cut while it ran; ``resume_state_unknown`` on resume, as it may not be replayed)."""
    done = {completed.step.step_index for completed in log.steps}
    intents = [r for r in log.records if isinstance(r, ActionIntent)]
    if not intents or intents[-1].step_index in done:
        return []
    intent = intents[-1]
    action = intent.action
    lines = [
        f"{intent.step_index:>4}  {'in doubt':<13} {_excerpt(action.text, _EXCERPT)}",
        f"{'':6}the action's intent is logged and its result is not: it may or may not "
        "have run (check the environment)",
    ]
    if action.tool_name is not None:
        lines.append(f"{'':6}tool: {_excerpt(action.tool_name, _EXCERPT)}")
    if action.tool_args is not None:
        arguments = canonical_json(dict(action.tool_args))
        lines.append(f"{'':6}arguments: {_excerpt(arguments, _DETAIL)}")
    return lines


def _count(number: int, noun: str) -> str:
    """``1 executed action``, ``3 executed actions``, ``0 executed actions``."""
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _step_summary(step: StepRecord, model_error: str | None) -> tuple[str, str]:
    """The status column and the text after it, for each path a step can take."""
    if model_error is not None:
        return "llm_error", _excerpt(model_error, _EXCERPT)
    if not step.parse_ok:
        return "parse_error", _excerpt(step.parse_error or "", _EXCERPT)
    if step.action is None:
        return "final_answer", _excerpt(step.raw_output, _EXCERPT)
    status = step.action_status.value if step.action_status is not None else "?"
    return status, _excerpt(step.action, _EXCERPT)


_DETAIL = 240  # one line of an executor's structured audit data


def _detail_lines(detail: dict[str, Any] | None) -> list[str]:
    """The executor's structured audit data (why a call was refused, what happened on the way),
    one indented line per top-level key, its value as canonical JSON."""
    if not detail:
        return []
    lines = []
    for key in sorted(detail):
        value = detail[key]
        text = value if isinstance(value, str) else canonical_json(value)
        lines.append(f"{'':6}{_excerpt(key, _EXCERPT)}: {_excerpt(text, _DETAIL)}")
    return lines


def _excerpt(text: str, limit: int) -> str:
    """One line: newlines shown as ``\\n``, at most ``limit`` characters (``...`` marks a cut).

    Model and tool text is untrusted: every other control character (C0, DEL, C1: ``\\x1b[2J``
    would clear the screen, ``\\r`` overwrite the line) is shown escaped, never sent raw.
    """
    flat = _CONTROL.sub(_escaped, text.replace("\r\n", "\n").replace("\t", " "))
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
_NAMED = {"\n": "\\n", "\r": "\\r"}


def _escaped(match: re.Match[str]) -> str:
    char = match.group()
    return _NAMED.get(char, f"\\x{ord(char):02x}")
