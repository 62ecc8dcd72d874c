"""Every Python snippet in README.md and docs/ runs, unless it is marked as something else.

The convention (HTML comments on the lines right above the fence; they do not render):

* no marker — the snippet runs as it is. The snippets of one page run top to bottom as one
  script (a later snippet may use what an earlier one defined, as a reader pasting them would),
  in a fresh directory, with ``python -W error::DeprecationWarning``.
* ``<!-- fragment -->`` — a part of something larger (it uses names the reader provides, or is a
  signature); it is not run.
* ``<!-- needs: postgres -->`` / ``<!-- needs: openai -->`` — it runs like the others, against the
  throwaway server the suite starts: the example URL in the snippet is replaced by the server's.
* ``<!-- run-by: tests/FILE.py::TEST -->`` — a dedicated test runs it and checks what it prints.
* ``<!-- file: PATH -->`` — the snippet is the project file PATH, verbatim (whose own tests run it).
* ``<!-- save-as: PATH -->`` / ``<!-- not-run: REASON -->`` — in a how-to: a file the reader
  writes, a block that runs nowhere. The pages of docs/how-to/ are run whole, shell commands
  included, by tests/docs/test_how_tos_run_whole.py (which says what each marker means there);
  here their markers are checked.

A line "It prints `TEXT`" right after a snippet that runs here is checked (TEXT is a line it
printed).
"""

from __future__ import annotations

import ast
import asyncio
import builtins
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import require_extra

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
MARKER = re.compile(r"^<!-- (?P<kind>[a-z-]+)(?::\s*(?P<value>.*?))? -->$")
KINDS = {"fragment", "needs", "run-by", "file", "pitfall", "ci", "opt-in", "save-as", "not-run"}
HOW_TO = ROOT / "docs" / "how-to"
# The example addresses the `needs:` snippets show, replaced by the throwaway servers'.
EXAMPLE_URLS = {
    "postgres": "postgresql://polyloop@db.internal:5432/runs",
    "openai": "http://127.0.0.1:8000/v1",
}


@dataclass(frozen=True)
class Snippet:
    page: Path
    line: int
    code: str
    markers: dict[str, str]
    prints: str | None  # the text after the snippet says "It prints `…`"

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def runs_here(self) -> bool:
        not_here = {"fragment", "run-by", "file", "save-as", "not-run"}
        return not not_here & set(self.markers) and self.page.parent != HOW_TO

    @property
    def needs(self) -> list[str]:
        return [need.strip() for need in self.markers.get("needs", "").split(",") if need.strip()]


def snippets(page: Path) -> list[Snippet]:
    lines = page.read_text(encoding="utf-8").splitlines()
    found, index = [], 0
    while index < len(lines):
        if lines[index] != "```python":
            index += 1
            continue
        end = lines.index("```", index + 1)
        markers, above = {}, index - 1
        while above >= 0 and (match := MARKER.match(lines[above])):
            markers[match["kind"]] = match["value"] or ""
            above -= 1
        code = "\n".join(lines[index + 1 : end]) + "\n"
        after = next((line for line in lines[end + 1 :] if line.strip()), "")
        prints = re.match(r"It prints `([^`]+)`", after)
        found.append(Snippet(page, index + 1, code, markers, prints and prints[1]))
        index = end + 1
    return found


ALL = [snippet for page in PAGES for snippet in snippets(page)]


def test_the_docs_have_snippets_of_every_kind() -> None:
    kinds = {kind for snippet in ALL for kind in snippet.markers}
    assert {"fragment", "needs", "run-by", "file", "save-as", "not-run"} <= kinds
    assert sum(snippet.runs_here for snippet in ALL) >= 10


@pytest.mark.parametrize("snippet", ALL, ids=[snippet.where for snippet in ALL])
def test_every_marker_is_known_and_names_what_exists(snippet: Snippet) -> None:
    assert set(snippet.markers) <= KINDS, f"{snippet.where}: unknown marker"
    # A how-to's needs (ray, otlp, mcp-http, …) are checked by the test that runs it whole.
    for need in snippet.needs if snippet.page.parent != HOW_TO else []:
        assert need in EXAMPLE_URLS, f"{snippet.where}: no throwaway server for {need!r}"
        assert EXAMPLE_URLS[need] in snippet.code, f"{snippet.where}: shows no example URL"
    if "run-by" in snippet.markers:
        path, _, test = snippet.markers["run-by"].partition("::")
        assert re.search(rf"^def {re.escape(test)}\(", (ROOT / path).read_text("utf-8"), re.M)
    if "file" in snippet.markers:
        shown = (ROOT / snippet.markers["file"]).read_text("utf-8")
        assert snippet.code == shown, f"{snippet.where} shows an old {snippet.markers['file']}"


def test_a_fragment_is_really_a_fragment() -> None:
    """The fragment marker is not a way to skip a snippet that could run: each fragment uses a
    name it does not define (one the reader provides) or is not a complete program."""
    complete = [s.where for s in ALL if "fragment" in s.markers and not free_names(s.code)]
    assert complete == []


def free_names(source: str) -> set[str]:
    """Names the code reads but never binds (nor are builtins); everything for a SyntaxError."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {"<not a complete program>"}
    bound = set(dir(builtins))
    read: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return read - bound


# ---------------------------------------------------------------- running the pages


@pytest.fixture
def openai_endpoint() -> Iterator[str]:
    """An OpenAI-compatible chat-completions endpoint on loopback (the contract suite's fake,
    served from a thread so a snippet in another process can call it)."""
    from tests.contract.test_openai_model_contract import _answer

    loop = asyncio.new_event_loop()
    server = loop.run_until_complete(asyncio.start_server(_answer, "127.0.0.1", 0))
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        server.close()
        loop.run_until_complete(server.wait_closed())
        loop.close()


def pages_that_run() -> list[Path]:
    return sorted({s.page for s in ALL if s.runs_here})


@pytest.mark.parametrize("page", pages_that_run(), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_pages_snippets_run_without_deprecation_warnings(
    page: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    parts, claimed = [], []
    for snippet in (s for s in snippets(page) if s.runs_here):
        code = snippet.code
        need = snippet.markers.get("needs")
        if need == "postgres":
            require_extra("postgres")
            dsn = request.getfixturevalue("postgres_database_dsn")
            code = code.replace(EXAMPLE_URLS["postgres"], dsn)
        elif need == "openai":
            require_extra("openai")
            code = code.replace(EXAMPLE_URLS["openai"], request.getfixturevalue("openai_endpoint"))
        parts.append(f"# {snippet.where}\n{code}")
        claimed += [snippet.prints] if snippet.prints else []
    script = tmp_path / "snippets.py"
    script.write_text("\n".join(parts), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONWARNINGS",)}
    done = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "Warning" not in done.stderr, done.stderr
    for text in claimed:
        assert text in done.stdout.splitlines(), f"{page.name} says it prints {text!r}"


def test_no_page_says_to_install_polyloop_from_the_index() -> None:
    """polyloop is not on the package index yet: every install line is from a checkout or a wheel
    built from it. Only the runtime's own messages are quoted with `polyloop[NAME]` (the lines
    that show what the program prints: `…: pip install 'polyloop[NAME]'`)."""
    from_index = re.compile(r"pip install (?:-U |--upgrade )?['\"]?polyloop\b")
    offenders = [
        f"{page.relative_to(ROOT)}:{number}"
        for page in PAGES
        for number, line in enumerate(page.read_text("utf-8").splitlines(), start=1)
        if from_index.search(line) and ": pip install 'polyloop[" not in line
    ]
    assert offenders == []
    readme = (ROOT / "README.md").read_text("utf-8")
    assert "polyloop is not on the package index yet" in readme
    assert "pip install -e '.[testing]'" in readme
    assert "python -m build" in readme
