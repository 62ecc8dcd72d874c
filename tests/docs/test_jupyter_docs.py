"""The Jupyter how-to's examples run and print what the page says; the benchmark prints its
table (speed is not asserted: the ratios are the benchmark's own output)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import require_extra
from tests.docs.test_docs_examples import python_blocks, run_blocks

ROOT = Path(__file__).resolve().parents[2]
HOW_TO = ROOT / "docs" / "how-to" / "run-code-in-a-jupyter-kernel.md"

require_extra("jupyter")


def test_the_how_to_examples_print_what_the_page_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the artifacts example writes ./artifacts
    text = HOW_TO.read_text(encoding="utf-8")
    blocks = python_blocks(HOW_TO)
    claimed = re.findall(r"It prints:\n\n```text\n(.*?)```", text, flags=re.S)
    assert len(blocks) == len(claimed) == 3

    printed = [run_blocks([block]) for block in blocks]

    assert printed == claimed


def test_the_benchmark_prints_both_executors_and_their_ratio() -> None:
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "jupyter_session.py"),
            "--rounds",
            "1",
            "--cells",
            "3",
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    ).stdout
    for label in ("session start", "per-cell overhead"):
        assert re.search(rf"^{label}\s+[\d.]+ ms\s+[\d.]+ ms\s+[\d.]+x$", out, flags=re.M), out
    assert "(medians of 1 sessions and 3 cells per executor)" in out
