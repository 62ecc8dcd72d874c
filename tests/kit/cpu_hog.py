"""Run as a script: a real-time busy loop on CPU 0 that leaves it free only 10 ms in 130.

Started beside a process pinned to the same CPU, it makes that process's threads wait for the
CPU most of the time they are ready to run: what a loaded CI host does to a test, on demand.
Prints ``ready`` once it runs at real-time priority; exits 3 where it may not (no privilege,
no such scheduler).
"""

from __future__ import annotations

import os
import sys
import time

BUSY_S, FREE_S = 0.12, 0.01


def main() -> int:
    try:
        os.sched_setaffinity(0, {0})
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
    except (AttributeError, OSError) as error:
        print(f"cannot run at real-time priority on CPU 0: {error}", flush=True)
        return 3
    print("ready", flush=True)
    end = time.monotonic() + float(sys.argv[1])  # never outlives the test that started it
    while time.monotonic() < end:
        busy_until = time.monotonic() + BUSY_S
        while time.monotonic() < busy_until:
            pass
        time.sleep(FREE_S)
    return 0


if __name__ == "__main__":
    sys.exit(main())
