"""The ``polyloop`` command: list runs, show a run's trajectory, run a demo, read reports.

Standard library only (psycopg is imported only when a ``postgresql://`` store is named).
Every refusal — a bad URL, no store, an unknown run, a damaged store — is one line on stderr
and exit status 2; usage errors are argparse's (also 2).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sqlite3
import sys
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TextIO

from polyloop._run_id import validate_run_id
from polyloop.cli._demo import run_demo
from polyloop.cli._report import add_report_commands
from polyloop.errors import PolyloopError
from polyloop.ports import RunStore
from polyloop.stores import SQLiteStore, open_store
from polyloop.types import RunLog, StepRecord

__all__ = ["main"]

DEFAULT_STORE = "sqlite:///polyloop.db"
_EXCERPT = 60


class CommandError(Exception):
    """A refusal the CLI reports as one line and exit status 2."""


Handler = Callable[[argparse.Namespace, TextIO], Coroutine[Any, Any, int]]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI with ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error argparse already printed
        return exc.code if isinstance(exc.code, int) else 2
    if not hasattr(args, "store"):  # not set_defaults: that would reach the shared action
        args.store = DEFAULT_STORE
    command = getattr(args, "func", None)
    if command is not None:  # `report` (cli/_report.py): func(args) -> exit status
        return int(command(args))
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        status = asyncio.run(handler(args, sys.stdout))
    except KeyboardInterrupt:
        return 130
    except (CommandError, PolyloopError, ValueError, OSError, sqlite3.Error) as exc:
        return _refuse(exc)
    except Exception as exc:
        if _is_driver_error(exc):  # e.g. PostgreSQL unreachable: a refusal, not a crash
            return _refuse(exc)
        raise
    return int(status)


def _refuse(exc: BaseException) -> int:
    message = " ".join(str(exc).split()) or type(exc).__name__
    print(f"polyloop: error: {message}", file=sys.stderr)
    return 2


def _is_driver_error(exc: Exception) -> bool:
    psycopg = sys.modules.get("psycopg")
    return psycopg is not None and isinstance(exc, psycopg.Error)


def _parser() -> argparse.ArgumentParser:
    # --store is accepted before or after the subcommand; SUPPRESS keeps the subcommand's copy
    # from overwriting a value given before it.
    store_option = argparse.ArgumentParser(add_help=False)
    store_option.add_argument(
        "--store",
        default=argparse.SUPPRESS,
        metavar="URL",
        help=f"memory:, sqlite:///rel.db, sqlite:////abs.db or postgresql://... "
        f"(default {DEFAULT_STORE})",
    )
    parser = argparse.ArgumentParser(
        prog="polyloop",
        description="Inspect agent runs recorded by polyloop, and run a demo.",
        parents=[store_option],
    )
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")

    parsers = {}
    for name, handler, summary, description in (  # name, handler, help, --help description
        ("runs", _runs, "list runs: id, start time, stop reason (or running), steps",
         "List the store's runs, oldest first."),
        ("show", _show, "show one run's trajectory and stop reason",
         "Show a run's trajectory, one line per step, then its stop reason."),
        ("demo", _demo, "record a scripted demo run (no model needed) and show it",
         "Run a scripted arithmetic agent against the store and show its trajectory."),
    ):  # fmt: skip
        parsers[name] = commands.add_parser(
            name, parents=[store_option], help=summary, description=description
        )
        parsers[name].set_defaults(handler=handler)
    parsers["show"].add_argument("run_id", metavar="RUN_ID")
    parsers["demo"].add_argument(
        "--run-id", default=None, help="the run id (default: a new uuid4 hex)"
    )
    add_report_commands(commands)
    return parser


# --------------------------------------------------------------------------- commands


async def _runs(args: argparse.Namespace, out: TextIO) -> int:
    store = _open_existing(args.store)
    try:
        logs = [(run_id, await _read_or_reason(store, run_id)) for run_id in await store.run_ids()]
    finally:
        await _close(store)
    if not logs:
        print(f"no runs in {args.store}", file=out)
        return 0
    logs.sort(key=lambda item: (_started_at(item[1]), item[0]))
    rows = [("RUN ID", "STARTED AT", "STOP REASON", "STEPS")]
    rows.extend(_runs_row(run_id, log) for run_id, log in logs)
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    for run_id, started_at, stop, steps in rows:
        print(
            f"{run_id:<{widths[0]}}  {started_at:<{widths[1]}}  {stop:<{widths[2]}}  {steps:>5}",
            file=out,
        )
    for run_id, log in logs:  # after the table, so the table stays one block
        if isinstance(log, str):
            print(f"polyloop: warning: run {run_id} is unreadable: {log}", file=sys.stderr)
    return 0


async def _read_or_reason(store: RunStore, run_id: str) -> RunLog | str:
    """The run's log, or why it cannot be read: one damaged run must not hide the others."""
    try:
        return await store.read_log(run_id)
    except (PolyloopError, ValueError) as exc:
        return " ".join(str(exc).split()) or type(exc).__name__


def _runs_row(run_id: str, log: RunLog | str) -> tuple[str, str, str, str]:
    if isinstance(log, str):
        return (run_id, "?", "unreadable", "?")
    stop = log.finished.stop_reason.value if log.finished is not None else "running"
    return (run_id, _started_at(log) or "?", stop, str(len(log.steps)))


async def _show(args: argparse.Namespace, out: TextIO) -> int:
    run_id = validate_run_id(args.run_id)
    store = _open_existing(args.store)
    try:
        log = await store.read_log(run_id)
    finally:
        await _close(store)
    if not log.records:
        raise CommandError(f"no run {run_id!r} in {args.store}")
    _print_trajectory(run_id, log, out)
    return 0


async def _demo(args: argparse.Namespace, out: TextIO) -> int:
    run_id = None if args.run_id is None else validate_run_id(args.run_id)
    store = open_store(args.store)
    try:
        result = await run_demo(store, run_id)
        log = await store.read_log(result.run_id)  # show what the store kept, not memory
    finally:
        await _close(store)
    _print_trajectory(result.run_id, log, out)
    print(f"recorded in {args.store}; see it again with: polyloop show {result.run_id}", file=out)
    return 0


# --------------------------------------------------------------------------- helpers


def _open_existing(url: str) -> RunStore:
    """The store at ``url`` for reading; a SQLite file that does not exist is not created."""
    store = open_store(url)
    if isinstance(store, SQLiteStore) and not store.path.exists():
        raise CommandError(f"no store at {store.path} (nothing has been recorded with {url})")
    return store


async def _close(store: RunStore) -> None:
    aclose = getattr(store, "aclose", None)
    if aclose is not None:
        await aclose()


def _started_at(log: RunLog | str) -> str:
    if isinstance(log, str):  # unreadable: sorted first, its start time unknown
        return ""
    return log.started.started_at if log.started is not None else ""


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
    finished = log.finished
    if finished is None:
        last = log.records[-1].kind if log.records else "nothing"
        print(f"stop: running (no run_finished yet; last record: {last})", file=out)
        return
    stop = f"stop: {finished.stop_reason.value} ({finished.executed_actions} executed actions)"
    if finished.final_answer is not None:
        stop += f"  answer: {_excerpt(finished.final_answer, 200)}"
    print(stop, file=out)


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
