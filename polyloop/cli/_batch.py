"""``polyloop batch TASKS.jsonl --agent MODULE:ATTR --seams MODULE:FUNC``: run_many from a shell.

The order is what makes "nothing written" true for every refusal: the arguments, the tasks file
and both import paths are checked first (no store touched), then the store is opened and every
task is checked against it (reads only), and only then does anything run. Each refusal is one
line and exit status 2.

Exit status: 0 — every task's run is finished and no ``--fail-on`` rule is broken; 1 — a run
failed (a seam raised), a task was refused while running, a ``--fail-on`` rule is broken, or
the store failed at run time; 2 — a usage error or bad input, nothing written; 130 (SIGINT) or
143 (SIGTERM) — interrupted: the first signal drains the batch (no new task, no new model
call, no new action; the actions in flight finish and are recorded, for at most ``--grace``
seconds), a second one cancels what is left; the runs in flight are left unfinished and
resumable, the summary is printed, and the same command resumes them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import signal
import sqlite3
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TextIO

from polyloop._batch import (
    BatchSummary,
    Plan,
    ProcessBackend,
    batch_run_id,
    execute,
    plan,
    vet,
)
from polyloop.cli._batch_display import ProgressLine, render_summary
from polyloop.cli._errors import is_driver_error, one_line, refuse
from polyloop.cli._fail_on import BadRule, FailOn, parse_rules, tripped
from polyloop.cli._import_path import BadImportPath, load
from polyloop.cli._otel import OtelUnavailable, from_environment
from polyloop.cli._tasks_file import BadTasks, NumberedTask, read_tasks
from polyloop.errors import InvalidRunId, PolyloopError, TaskRefused
from polyloop.ports import Instrumentation, RunStore
from polyloop.stores import open_store, sqlite_path
from polyloop.types import AgentDefinition

__all__ = ["BATCH_USAGE", "add_batch_command"]

BATCH_USAGE = (
    "polyloop batch TASKS.jsonl --agent MODULE:ATTR --seams MODULE:FUNC [--store URL] "
    "[--batch ID] [--concurrency N] [--workers N] [--time-limit SECONDS] [--grace SECONDS] "
    "[--otel] [--fail-on STOP_REASON[:N|:P%],...]"
)
# argparse formats usage and help with %: a literal percent sign is written twice there.
_USAGE_TEXT = BATCH_USAGE.replace("%", "%%")
USAGE, FAILED = 2, 1
_EXIT_ON_SIGNAL = {signal.SIGINT: 130, signal.SIGTERM: 143}
_TICK_S = 1.0  # how often the progress line is refreshed


class Refused(Exception):
    """Bad input: one line, exit 2, nothing written."""


def add_batch_command(subparsers: Any, store_option: argparse.ArgumentParser) -> None:
    """Add ``batch`` to the CLI's subparsers; its handler is stored as ``func``."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "batch",
        parents=[store_option],
        usage=_USAGE_TEXT,
        help="run an agent over every task of a JSON Lines file; resumable",
        description="Run an agent over every task of TASKS.jsonl (one JSON object a line: id, "
        "goal, optional labels), CONCURRENCY at a time. Running the same command again "
        "resumes the unfinished runs (never replaying an action) and skips the finished ones. "
        "The first Ctrl-C (or SIGTERM) drains: the actions in flight finish and are "
        "recorded (at most --grace seconds), nothing new starts; a second one stops at once. "
        "Exit 0 when every run is finished, 1 for a failed run or a broken --fail-on rule, 2 "
        "for bad input (nothing written), 130/143 when interrupted.",
    )
    parser.add_argument("tasks", metavar="TASKS.jsonl", help="the tasks, one JSON object a line")
    parser.add_argument("--agent", required=True, metavar="MODULE:ATTR", help="an AgentDefinition")
    parser.add_argument(
        "--seams",
        required=True,
        metavar="MODULE:FUNC",
        help="called with each run's Task, returns its RunSeams (model, parser, executor)",
    )
    parser.add_argument(
        "--batch", default=None, metavar="ID", help="the batch id (default: the file's name "
        "without extension); with each task id it makes the run id BATCH.TASK_ID"
    )  # fmt: skip
    _add_driving_options(parser)
    parser.add_argument(
        "--otel",
        action="store_true",
        help="trace every run with OpenTelemetry, configured from the OTEL_* environment "
        "variables (extra polyloop[otel]); each run span carries polyloop.batch and "
        "polyloop.task_id",
    )
    parser.add_argument(
        "--fail-on",
        action="append",
        default=[],
        metavar="STOP_REASON[:N|:P%],...",
        help="exit 1 when more than N runs (or P%% of the finished runs; no threshold: any) "
        "stopped with STOP_REASON",
    )
    parser.set_defaults(func=run_batch_command)


def _add_driving_options(parser: argparse.ArgumentParser) -> None:
    """How the tasks are driven: at a time, in which processes, for how long, how to stop."""
    parser.add_argument(
        "--concurrency", default="8", metavar="N", help="runs at a time (default 8)"
    )
    parser.add_argument(
        "--workers",
        default=None,
        metavar="N",
        help="drive the tasks in N worker processes on this machine, CONCURRENCY runs at a "
        "time in each (default: all in this process); needs a SQLite file or PostgreSQL store",
    )
    parser.add_argument(
        "--time-limit",
        default=None,
        metavar="SECONDS",
        help="end a run driven longer than this with stop reason time_limit",
    )
    parser.add_argument(
        "--grace",
        default="30",
        metavar="SECONDS",
        help="after the first Ctrl-C (or SIGTERM), how long the actions in flight may take to "
        "finish and be recorded before what is left is cancelled (default 30; 0: at once)",
    )


def run_batch_command(args: argparse.Namespace) -> int:
    """The ``batch`` command: its exit status; errors are one line on stderr."""
    try:
        settings = _settings(args)
    except (Refused, BadTasks, BadImportPath, BadRule, ValueError, OtelUnavailable) as exc:
        return refuse(exc, USAGE)
    try:
        return _run_with_signals(settings)
    finally:
        if settings.shutdown is not None:
            settings.shutdown()  # the last spans and metrics are exported


def _run_with_signals(settings: _Settings) -> int:
    signals = _Signals()
    previous = {number: signal.signal(number, signals.handle) for number in _EXIT_ON_SIGNAL}
    try:
        return asyncio.run(_batch(settings, sys.stdout, sys.stderr, signals))
    except Refused as exc:
        return refuse(exc, USAGE)
    except (PolyloopError, OSError, sqlite3.Error) as exc:
        return refuse(exc, FAILED)
    except Exception as exc:
        if is_driver_error(exc):
            return refuse(exc, FAILED)
        raise
    finally:
        # Once a signal interrupted the batch the process is on its way out and the signals
        # stay ignored (see _Signals).
        if signals.caught is None:
            for number, handler in previous.items():
                signal.signal(number, handler)
        else:
            signals.ignore()


class _Signals:
    """SIGINT and SIGTERM for one batch command: the first one drains the batch (once it runs,
    or as soon as it starts), the second one stops it at once, the others are ignored.

    A plain signal handler, not the event loop's, and the second signal turns both into
    ``SIG_IGN`` for the rest of the process (so does the end of an interrupted batch): an
    interrupted batch prints its summary and exits, and a Python handler is reset to the
    default when the interpreter shuts down, so an impatient Ctrl-C used to kill the process
    (status -SIGINT instead of 130) after the summary was printed."""

    def __init__(self) -> None:
        self.caught: signal.Signals | None = None
        self.again = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._events: tuple[asyncio.Event, asyncio.Event | None] | None = None

    def handle(self, number: int, frame: object) -> None:
        if self.caught is None:
            self.caught = signal.Signals(number)
            self._wake(0)
            return
        self.again = True
        self.ignore()
        self._wake(1)

    @staticmethod
    def ignore() -> None:
        """Both signals ignored from now on, at the C level (survives interpreter shutdown)."""
        for ignored in _EXIT_ON_SIGNAL:
            signal.signal(ignored, signal.SIG_IGN)

    def _wake(self, which: int) -> None:
        if self._loop is None or self._events is None:
            return
        event = self._events[which]
        if event is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nothing left to stop
                self._loop.call_soon_threadsafe(event.set)

    def interrupt_on(self, event: asyncio.Event, stop_now: asyncio.Event | None = None) -> None:
        """Set ``event`` at the first signal and ``stop_now`` at the second (now, for those
        that came already)."""
        self._loop = asyncio.get_running_loop()
        self._events = (event, stop_now)
        if self.caught is not None:
            event.set()
        if self.again and stop_now is not None:
            stop_now.set()


class _Settings(argparse.Namespace):
    tasks: list[NumberedTask]
    where: str
    agent: AgentDefinition
    seams: Any
    store_url: str
    batch: str
    concurrency: int
    workers: int | None
    time_limit_s: float | None
    grace_s: float
    rules: tuple[FailOn, ...]
    instrumentation: Instrumentation | None
    shutdown: Callable[[], None] | None


def _settings(args: argparse.Namespace) -> _Settings:
    """Everything checked without touching the store: arguments, the file, the imports."""
    settings = _Settings()
    settings.concurrency = _concurrency(args.concurrency)
    settings.workers = _workers(args.workers, args.store, args.otel)
    settings.time_limit_s = _time_limit(args.time_limit)
    settings.grace_s = _grace(args.grace)
    settings.rules = parse_rules(args.fail_on)
    sqlite_path(args.store)  # ValueError (a usage error) for a URL of no known form
    settings.store_url = args.store
    path = Path(args.tasks)
    settings.where = args.tasks
    settings.batch = args.batch if args.batch is not None else path.stem
    _check_batch_id(settings.batch, args.batch is None, args.tasks)
    settings.tasks = read_tasks(path)
    agent = load("--agent", args.agent)
    if not isinstance(agent, AgentDefinition):
        raise Refused(f"--agent {args.agent}: not an AgentDefinition (got {type(agent).__name__})")
    settings.agent = agent
    settings.instrumentation, settings.shutdown = None, None
    if args.otel:
        settings.instrumentation, settings.shutdown = from_environment()
    settings.seams = load("--seams", args.seams)
    if not callable(settings.seams):
        raise Refused(
            f"--seams {args.seams}: not callable (got {type(settings.seams).__name__}); it is "
            "called with each run's Task and returns its RunSeams"
        )
    return settings


def _concurrency(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise Refused(f"--concurrency must be an integer >= 1, got {text!r}")
    return int(text)


def _workers(text: str | None, store: str, otel: bool) -> int | None:
    """``--workers``: ``None`` (this process) or N >= 1, with a store every process can open."""
    if text is None:
        return None
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise Refused(f"--workers must be an integer >= 1, got {text!r}")
    if store == "memory:":
        raise Refused(
            "--workers needs a store every worker process can open: a SQLite file or "
            "PostgreSQL, not memory:"
        )
    if otel:
        raise Refused("--workers cannot be combined with --otel yet: trace in one process")
    return int(text)


def _time_limit(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        seconds = float(text)
    except ValueError:
        seconds = float("nan")
    if not (0 < seconds < float("inf")):
        raise Refused(f"--time-limit must be a number of seconds > 0, got {text!r}")
    return seconds


def _grace(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = float("nan")
    if not (0 <= seconds < float("inf")):
        raise Refused(f"--grace must be a number of seconds >= 0, got {text!r}")
    return seconds


def _check_batch_id(batch: str, from_file: bool, tasks: str) -> None:
    try:
        batch_run_id(batch, "x")
    except InvalidRunId as exc:
        source = f" (from the file name {tasks!r}; give one with --batch)" if from_file else ""
        raise Refused(f"batch id {batch!r}{source}: {exc}") from None


async def _batch(settings: _Settings, out: TextIO, err: TextIO, signals: _Signals) -> int:
    lines = {numbered.task.id: numbered.line for numbered in settings.tasks}
    store = open_store(settings.store_url)
    try:
        checked = await _vetted(settings, store, lines)
        terminal = err.isatty()
        width = shutil.get_terminal_size().columns if terminal else 0
        progress = ProgressLine(checked.total, err, terminal=terminal, width=width)
        summary = await _driven(checked, progress, signals, settings.grace_s)
    finally:
        aclose = getattr(store, "aclose", None)
        if aclose is not None:
            await aclose()
    for line in render_summary(summary, lines, settings.where, store=settings.store_url):
        print(line, file=out)
    broken = tripped(settings.rules, summary)
    for why in broken:
        print(f"fail-on: {why}", file=out)
    if signals.caught is not None and summary.interrupted:
        return _EXIT_ON_SIGNAL[signals.caught]
    return FAILED if broken or summary.failures or summary.refusals else 0


async def _vetted(settings: _Settings, store: RunStore, lines: dict[str, int]) -> Plan:
    """The plan, checked in full against the store: a refusal names the task's line."""
    try:
        checked = plan(
            settings.agent,
            [numbered.task for numbered in settings.tasks],
            seams=settings.seams,
            store=store,
            store_url=settings.store_url,
            batch=settings.batch,
            concurrency=settings.concurrency,
            time_limit_s=settings.time_limit_s,
            backend=None if settings.workers is None else ProcessBackend(settings.workers),
        )
        job = replace(checked.job, instrumentation=settings.instrumentation)
        vetted = await vet(replace(checked, job=job))
    except TaskRefused as exc:
        line = settings.tasks[exc.index].line
        more = f" ({exc.others} more refused likewise)" if exc.others else ""
        raise Refused(f"{settings.where}:{line}: {exc.reason}{more}") from None
    except (PolyloopError, OSError, sqlite3.Error) as exc:
        raise Refused(_unopened(exc)) from None
    except Exception as exc:
        if is_driver_error(exc):
            raise Refused(_unopened(exc)) from None
        raise
    return vetted


def _unopened(exc: BaseException) -> str:
    # Not the URL: it may hold a password. The store's own message names the file or server.
    return f"--store: the store cannot be opened: {one_line(exc)}"


async def _driven(
    checked: Plan, progress: ProgressLine, signals: _Signals, grace_s: float
) -> BatchSummary:
    """Run the plan; the first SIGINT or SIGTERM drains it, for at most ``grace_s`` seconds;
    the second stops it at once; more are ignored."""
    interrupt, stop_now = asyncio.Event(), asyncio.Event()
    signals.interrupt_on(interrupt, stop_now)
    ticker = asyncio.ensure_future(_tick(progress))
    try:
        return await execute(
            checked,
            progress=progress.update,
            interrupt=interrupt,
            stop_now=stop_now,
            grace_s=grace_s,
        )
    finally:
        ticker.cancel()
        progress.close()


async def _tick(progress: ProgressLine) -> None:
    while True:
        await asyncio.sleep(_TICK_S)
        progress.tick()
