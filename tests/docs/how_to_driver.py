"""Follow a how-to page's plan in the current directory, as a reader would: one Python session for
its Python blocks (a later block sees what an earlier one defined), a new shell for each command,
files written where the page says. Stops at the first step that fails and says where it is.

Run by tests/docs/test_how_tos_run_whole.py as ``python how_to_driver.py PLAN.json`` in a fresh
directory; standard library only, so that the session holds nothing the page does not import.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Any

SHELL_TIMEOUT_S = 240


class _Tee(io.StringIO):
    """Keeps what a block prints and passes it on, so the test's failure shows it too."""

    def write(self, text: str) -> int:
        sys.__stdout__.write(text)  # type: ignore[union-attr]
        return super().write(text)

    @property
    def buffer(self) -> Any:  # bytes go straight through, uncaptured
        return sys.__stdout__.buffer  # type: ignore[union-attr]


def _failed(where: str, what: str, output: str) -> bool:
    print(f"\nFAILED {where} ({what}):\n{output}", file=sys.stderr, flush=True)
    return False


def _run_python(step: dict[str, Any], namespace: dict[str, Any]) -> bool:
    printed = _Tee()
    try:
        with contextlib.redirect_stdout(printed):
            exec(compile(step["code"], step["where"], "exec"), namespace)
    except BaseException:  # any failure of the block, SystemExit included
        return _failed(step["where"], "python", traceback.format_exc())
    claimed = step.get("prints")
    if claimed and claimed not in printed.getvalue().splitlines():
        return _failed(step["where"], "python", f"the page says it prints {claimed!r}")
    return True


def _run_shell(step: dict[str, Any]) -> bool:
    done = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", step["code"]],
        capture_output=True,
        text=True,
        timeout=SHELL_TIMEOUT_S,
        check=False,
    )
    print(f"$ {step['code']}\n{done.stdout}{done.stderr}", flush=True)
    if done.returncode != 0:
        output = f"$ {step['code']}\nexit status {done.returncode}\n{done.stdout}{done.stderr}"
        return _failed(step["where"], "shell", output)
    return True


def _write(step: dict[str, Any]) -> bool:
    path = Path(step["path"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(step["code"], encoding="utf-8")
    return True


def main(argv: list[str]) -> int:
    plan = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
    sys.path[0] = os.getcwd()  # a session started here imports the reader's modules from here
    namespace: dict[str, Any] = {"__name__": "__main__"}
    for step in plan:
        kind = step["kind"]
        ok = (
            _run_python(step, namespace)
            if kind == "python"
            else _run_shell(step)
            if kind == "shell"
            else _write(step)
        )
        if not ok:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
