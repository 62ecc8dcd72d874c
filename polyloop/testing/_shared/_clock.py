"""Another wall clock, date and time zone for a block of store calls (issue 30 §1, time).

A store that stamps records with the wall clock and orders or expires by the stamp works while
the clock only moves forward in one zone; a deployment sees NTP steps back, a date change,
and processes in other zones. :func:`wall_clock` moves ``time.time`` / ``time.time_ns`` by an
offset and sets ``TZ`` (a POSIX rule, so no time-zone database is needed) for the calls made
inside it, and restores both. Monotonic clocks (the event loop's) are left alone.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["CLOCKS", "wall_clock"]

#: (seconds from now, POSIX TZ rule, what it stands for): each a realistic jump.
CLOCKS: tuple[tuple[float, str, str], ...] = (
    (26 * 3600.0, "LINT-14", "a day and two hours ahead, UTC+14"),
    (-2 * 3600.0, "HST10", "two hours back (a clock stepped back), UTC-10"),
    (400 * 86400.0 + 0.5, "NPT-5:45", "400 days ahead, UTC+5:45"),
    (-86400.0 * 3, "UTC0", "three days back, UTC"),
)


@contextmanager
def wall_clock(offset: float, zone: str) -> Iterator[None]:
    """``time.time()`` reads ``offset`` seconds off and the local zone is ``zone`` inside."""
    real_time, real_ns = time.time, time.time_ns
    had_zone, old_zone = "TZ" in os.environ, os.environ.get("TZ", "")
    time.time = lambda: real_time() + offset
    time.time_ns = lambda: real_ns() + int(offset * 1e9)
    os.environ["TZ"] = zone
    time.tzset()
    try:
        yield
    finally:
        time.time, time.time_ns = real_time, real_ns
        if had_zone:
            os.environ["TZ"] = old_zone
        else:
            del os.environ["TZ"]
        time.tzset()
