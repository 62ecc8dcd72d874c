"""A time limit on every probe: no implementation can hang the session.

Every promise test calls into the implementation: awaited calls (``execute``, ``complete``,
``append``…) and synchronous ones (``parse``, an ``execute`` that blocks its event loop). A call
that never returns — a lock leaked by an earlier cancelled call, a parser looping on ``"\\r"``,
a blocking socket read without a timeout — would hang pytest forever and no report would be
written. So each phase of a contract item (setting up the implementation, the probe, tearing it
down) runs under a watchdog: ``SIGALRM`` from a real-time interval timer, whose handler raises
:class:`ProbeTimedOut` in the main thread wherever it is — inside the implementation's Python
code, or in the event loop's ``select`` while a hung await waits. It interrupts a blocking system
call (``time.sleep``, a socket read, a lock wait), since the signal wakes it.

What it cannot interrupt: a C extension that holds the GIL and never returns to the
interpreter (a runaway regular expression in ``re``, a native library's busy loop) — the handler
runs only when the extension gives the interpreter control back. Nor does it work off the main
thread or where ``SIGALRM`` does not exist (Windows): there the probes run without a limit.
"""

from __future__ import annotations

import asyncio
import math
import os
import signal
import sysconfig
import threading
import time
from asyncio import events as asyncio_events
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

__all__ = [
    "DEFAULT_TIME_LIMIT_S",
    "ProbeTimedOut",
    "Watchdog",
    "parse_time_limit",
    "time_limit",
]

#: Per phase of each contract item; generous for real stores and servers, bounded for a hang.
DEFAULT_TIME_LIMIT_S = 120.0


class ProbeTimedOut(SystemExit):
    """A probe ran past its time limit.

    Not an ``Exception``, so an implementation's ``except Exception`` does not swallow it and
    Hypothesis does not take it for a falsifying example to shrink; a ``SystemExit`` because
    asyncio lets only that and ``KeyboardInterrupt`` out of a task (anything else raised by a
    call blocking inside some task would be stored in that task, where a probe may read it as an
    ordinary result), and ``KeyboardInterrupt`` would end pytest's whole session.
    """


def parse_time_limit(value: object, source: str) -> float | None:
    """A time limit in seconds from configuration; ``0`` means no limit.

    ``source`` names where the value came from, for the error. Raises ``ValueError`` for
    anything that is not a finite number ≥ 0.
    """
    if isinstance(value, bool):
        raise ValueError(f"{source} must be a number of seconds (0: no limit), got {value!r}")
    try:
        seconds = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(
            f"{source} must be a number of seconds (0: no limit), got {value!r}"
        ) from None
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"{source} must be a finite number of seconds ≥ 0, got {value!r}")
    return seconds or None


def can_limit() -> bool:
    """Whether a watchdog can run here: the main thread of a platform with ``SIGALRM``."""
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


@dataclass
class Watchdog:
    """What one :func:`time_limit` saw: whether it fired, and where it found the probe."""

    message: str
    fired: bool = False
    where: str | None = None  # "interrupted at path:line in function", when one was found

    def text(self) -> str:
        """The report's one line, and where the implementation was interrupted."""
        return f"{self.message}; {self.where}" if self.where else self.message


@contextmanager
def time_limit(seconds: float | None, what: str) -> Iterator[Watchdog]:
    """Raise :class:`ProbeTimedOut` ("timed out after N s in <what>") if the block outlives
    ``seconds``; ``None``, or a place where no watchdog can run: no limit.

    If the exception is swallowed (an implementation's ``except BaseException``), it is raised
    again every ``seconds`` until the block ends. The caller's own ``SIGALRM`` handler and timer
    (pytest-timeout's, say) are put back afterwards, the time spent here deducted.
    """
    watchdog = Watchdog(f"timed out after {seconds:g} s in {what}" if seconds else "")
    if seconds is None or not can_limit():
        yield watchdog
        return

    def on_alarm(signum: int, frame: FrameType | None) -> None:
        if not watchdog.fired:
            watchdog.fired, watchdog.where = True, _where(frame)
        raise ProbeTimedOut(watchdog.message)

    previous_handler = signal.signal(signal.SIGALRM, on_alarm)
    previous_delay, previous_interval = signal.setitimer(signal.ITIMER_REAL, seconds, seconds)
    started = time.monotonic()
    try:
        yield watchdog
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous_handler)
        if previous_delay:
            left = max(previous_delay - (time.monotonic() - started), 0.001)
            signal.setitimer(signal.ITIMER_REAL, left, previous_interval)


def _where(frame: FrameType | None) -> str | None:
    """The implementation's frame the alarm found: on the stack, or — when the event loop was
    idle, waiting — in a task suspended at a hung await."""
    found = _user_frame(frame)
    if found is None:
        loop = asyncio_events._get_running_loop()
        tasks = asyncio.all_tasks(loop) if loop is not None else set()
        for task in tasks:
            frames = reversed(list(_awaiting_frames(task.get_coro())))
            found = next(filter(None, (_user_frame(f, walk=False) for f in frames)), None)
            if found is not None:
                return f"interrupted while awaiting at {found}"
        return None
    return f"interrupted at {found}"


def _awaiting_frames(awaitable: object) -> Iterator[FrameType]:
    """The frames of a suspended coroutine and of everything it awaits, outermost first.

    A generator that drives an awaitable by hand (``send``/``throw``, as the cancellation probe
    does to count await points) keeps it in a local named ``awaiting``: followed too.
    """
    while awaitable is not None:
        frame = getattr(awaitable, "cr_frame", None) or getattr(awaitable, "gi_frame", None)
        if frame is not None:
            yield frame
        awaitable = (
            getattr(awaitable, "cr_await", None)
            or getattr(awaitable, "gi_yieldfrom", None)
            or (frame.f_locals.get("awaiting") if frame is not None else None)
        )


_KIT = Path(__file__).resolve().parent.parent  # polyloop/testing: every room of the kit
_LIBRARY = tuple(
    str(path.resolve()) + os.sep
    for path in {
        *(Path(sysconfig.get_paths()[key]) for key in ("stdlib", "platstdlib", "purelib")),
        Path(sysconfig.get_paths()["platlib"]),
        _KIT.parent.parent / "pytest_polyloop",  # the plugin, from a checkout
        _KIT,
    }
)


def _user_frame(frame: FrameType | None, *, walk: bool = True) -> str | None:
    """``path:line in function`` of the innermost frame outside the standard library, installed
    packages and the kit itself (``walk``: follow the frame's callers)."""
    while frame is not None:
        path = str(Path(frame.f_code.co_filename).resolve())
        if not path.startswith(_LIBRARY) and not frame.f_code.co_filename.startswith("<"):
            return f"{frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}"
        frame = frame.f_back if walk else None
    return None
