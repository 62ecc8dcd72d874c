"""The code a reader copies from the README and the tutorial runs, and prints what the text says."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def python_blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(encoding="utf-8"), flags=re.S)


def run_blocks(blocks: list[str]) -> str:
    namespace: dict[str, object] = {"__name__": "docs_example"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for block in blocks:
            exec(compile(block, "<docs>", "exec"), namespace)
    return out.getvalue()


def test_readme_run_example_prints_the_stop_reason_and_answer_it_claims() -> None:
    blocks = [
        b for b in python_blocks(ROOT / "README.md") if "polyloop.run(" in b and "asyncio.run(" in b
    ]
    assert len(blocks) == 1
    printed = run_blocks(blocks)
    assert printed.strip() == "agent_finished done"


def test_tutorial_runs_crashes_and_resumes_as_the_text_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    blocks = python_blocks(ROOT / "docs" / "tutorial" / "first-run.md")
    assert len(blocks) == 4
    printed = run_blocks(blocks).splitlines()
    assert printed == ["agent_finished 5 4", "ActionIntent", "resume_state_unknown"]
    assert (tmp_path / "tutorial.db").exists()


def test_the_mcp_how_to_runs_its_server_and_agent_and_prints_what_it_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.conftest import require_mcp

    require_mcp()
    page = (ROOT / "docs" / "how-to" / "use-mcp-tools.md").read_text(encoding="utf-8")
    server, agent, *_ = python_blocks(ROOT / "docs" / "how-to" / "use-mcp-tools.md")
    promised = re.findall(r"It prints:\n\n```text\n(.*?)```", page, flags=re.S)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "weather_server.py").write_text(server, encoding="utf-8")

    printed = run_blocks([agent])

    assert printed == promised[0]


def test_report_reference_example_prints_what_its_comments_say(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    [block] = python_blocks(ROOT / "docs" / "reference" / "report.md")
    claimed = [line.split("  # ", 1)[1] for line in block.splitlines() if "  # " in line]
    assert run_blocks([block]).splitlines() == claimed
