"""How what each pytest-xdist worker discovered reaches the controller, however it ends.

xdist's ``workeroutput`` arrives only from a worker that finishes cleanly: a fixture that kills
its worker (``os._exit``, a segfault) or a Ctrl-C loses it, and the report said "no
implementations" for a project whose implementations were found. So each worker also writes
its discovery to a file as soon as its collection finishes — before any item runs — in a
directory the controller made and passed in ``workerinput``; the controller reads every file
when the session ends and removes the directory. ``workeroutput`` stays the channel for
workers on other hosts (the file is then not on the controller's disk); merging is idempotent.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["WORKERINPUT_KEY", "DiscoveryDrop", "write_discovery"]

WORKERINPUT_KEY = "polyloop_discovery_dir"


class DiscoveryDrop:
    """The controller's directory of worker discovery files (made on first use)."""

    def __init__(self) -> None:
        self.directory: Path | None = None

    def for_worker(self) -> str:
        """The directory to hand to a worker through ``workerinput``."""
        if self.directory is None:
            self.directory = Path(tempfile.mkdtemp(prefix="polyloop-discovery-"))
        return str(self.directory)

    def collect(self) -> list[dict[str, Any]]:
        """Every discovery a worker wrote (a torn or foreign file is skipped), then none: the
        directory is removed."""
        if self.directory is None:
            return []
        found = []
        for path in sorted(self.directory.glob("*.json")):
            try:
                found.append(json.loads(path.read_text(encoding="utf-8")))
            except (OSError, ValueError):
                continue  # written by os.replace, so only a foreign file can be torn
        shutil.rmtree(self.directory, ignore_errors=True)
        self.directory = None
        return found


def write_discovery(workerinput: Mapping[str, Any], output: Mapping[str, Any]) -> None:
    """Worker side: write ``output`` where the controller will look (if it said where)."""
    directory = workerinput.get(WORKERINPUT_KEY)
    if not isinstance(directory, str) or not os.path.isdir(directory):
        return  # an older controller, or a worker on another host: workeroutput only
    name = f"{workerinput.get('workerid', 'worker')}-{os.getpid()}"
    partial = Path(directory) / f"{name}.part"
    partial.write_text(json.dumps(output), encoding="utf-8")
    # One rename: the controller never reads half a file, even if this worker dies next.
    os.replace(partial, Path(directory) / f"{name}.json")
