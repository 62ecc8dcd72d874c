"""Every how-to runs whole, as written: each page's code blocks, top to bottom, in one fresh
directory, as a reader following the page would run them.

What each block of a page in docs/how-to/ is, by its fence and the HTML comments right above it:

* ``python`` — run in one Python session for the whole page (a later block sees what an earlier
  one defined); ``<!-- save-as: PATH -->`` (or ``<!-- file: PATH -->``, a project file shown
  verbatim) writes it to PATH instead, for a later block or command to import or run. A line
  "It prints `TEXT`" after it is checked.
* ``console`` — the ``$ `` lines are commands (a trailing ``\\`` continues one), the rest is what
  they print; ``bash``/``sh`` — every line is a command. Each command runs in a new ``bash``
  with the project's virtualenv first on ``PATH`` (the ``polyloop`` command included) and must
  exit 0. A ``pip install`` line is not run: it is checked to name real extras of pyproject.toml
  (or a distribution), and that they are installed here.
* ``text`` — what a command or a block prints; not run.
* any other language (SQL, YAML, TOML, Markdown) — written with ``save-as``, or ``not-run``.
* ``<!-- not-run: REASON -->`` — a block that runs nowhere (a CI workflow, a signature, a line
  of a class body); the reason is required. ``<!-- fragment -->`` is not allowed in a how-to.
* ``<!-- needs: postgres -->`` — runs against the throwaway server (its example URL replaced);
  ``<!-- needs: otlp -->`` — sends to an OTLP/HTTP receiver of the test's (likewise), which must
  receive spans; ``<!-- needs: mcp-http -->`` — the MCP tests' server over streamable HTTP,
  which requires the page's bearer token;
  ``<!-- needs: ray, postgres -->`` — runs only in the Ray job: its ``run-by`` test (marked
  ``ray``) runs the whole page through it with :func:`run_how_to`.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from polyloop.testing._shared._base import in_ci
from tests.conftest import mcp_http_server, require_extra

ROOT = Path(__file__).resolve().parents[2]
HOW_TOS = sorted((ROOT / "docs" / "how-to").glob("*.md"))
DRIVER = Path(__file__).with_name("how_to_driver.py")
FENCE = re.compile(r"^(?P<indent>\s*)```(?P<lang>\S*)\s*$")
MARKER = re.compile(r"^<!-- (?P<kind>[a-z-]+)(?::\s*(?P<value>.*?))? -->$")
SHELLS = {"console", "bash", "sh"}
EXAMPLE_URLS = {
    "postgres": "postgresql://polyloop@db.internal:5432/runs",
    "otlp": "http://localhost:4318",
    "mcp-http": "http://127.0.0.1:8000/mcp",
}
MCP_TOKEN = "s3cret"  # the bearer token the MCP how-to sends
# The pages that cannot run in a few seconds, and why.
SLOW = {
    "conformance-by-subclassing.md": "it runs the example's whole conformance suite (about 30 s)",
}


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    lang: str
    code: str
    markers: dict[str, str]
    prints: str | None  # "It prints `…`" right after the block

    @property
    def where(self) -> str:
        return f"{shown(self.page)}:{self.line}"

    @property
    def needs(self) -> set[str]:
        return {need.strip() for need in self.markers.get("needs", "").split(",") if need.strip()}


def shown(page: Path) -> str:
    return str(page.relative_to(ROOT)) if page.is_relative_to(ROOT) else page.name


def blocks(page: Path) -> list[Block]:
    """Every fenced block of the page, in order, with its markers (indented fences too)."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found, index = [], 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        indent = opening["indent"]
        end = next(i for i in range(index + 1, len(lines)) if lines[i] == f"{indent}```")
        markers, above = {}, index - 1
        while above >= 0 and (marker := MARKER.match(lines[above].strip())):
            markers[marker["kind"]] = (marker["value"] or "").strip()
            above -= 1
        code = "".join(line.removeprefix(indent) + "\n" for line in lines[index + 1 : end])
        after = next((line for line in lines[end + 1 :] if line.strip()), "")
        prints = re.match(r"\s*It prints `([^`]+)`", after)
        found.append(Block(page, index + 1, opening["lang"], code, markers, prints and prints[1]))
        index = end + 1
    return found


def commands(block: Block) -> list[tuple[int, str]]:
    """The commands of a shell block with their page lines: a console block's ``$`` lines (every
    line when it has none), every line of a bash block; a trailing backslash continues a command
    on the next line."""
    found: list[tuple[int, str]] = []
    pending: list[str] = []
    prompted = block.lang == "console" and any(
        line.startswith("$ ") for line in block.code.splitlines()
    )
    for offset, raw in enumerate(block.code.splitlines(), start=1):
        if not pending:
            if prompted and not raw.startswith("$ "):
                continue
            raw = raw.removeprefix("$ ") if prompted else raw
            if not raw.strip() or raw.lstrip().startswith("#"):
                continue
            start = block.line + offset
        pending.append(raw.removesuffix("\\"))
        if not raw.endswith("\\"):
            found.append((start, "".join(pending)))
            pending = []
    return found


# ---------------------------------------------------------------- pip lines are checked, not run

EXTRAS = set(
    tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]["optional-dependencies"]
)


def check_pip_install(where: str, command: str) -> None:
    """``pip install -e '.[a,b]'`` names extras pyproject.toml has, installed here; any other
    argument names a distribution installed here. Missing: a skip, or a failure in CI."""
    missing = []
    for argument in shlex.split(command, comments=True)[2:]:
        if argument.startswith("-"):
            continue
        extras = re.fullmatch(r"\.\[([a-z0-9_,-]+)\]", argument)
        if extras:
            for extra in extras[1].split(","):
                assert extra in EXTRAS, f"{where}: pyproject.toml has no extra {extra!r}"
                if extra != "dev":
                    require_extra(extra)
            continue
        assert "polyloop" not in argument, f"{where}: install polyloop from the checkout"
        try:
            importlib.metadata.version(argument)
        except importlib.metadata.PackageNotFoundError:
            missing.append(argument)
    if missing:
        hint = f"{where} installs {', '.join(missing)}, which is not installed here"
        pytest.fail(hint) if in_ci() else pytest.skip(hint)


# ---------------------------------------------------------------- the plan and the run


def step_of(block: Block, services: Mapping[str, str]) -> list[dict[str, Any]]:
    """What following one block means: the driver's steps for it (none for output)."""
    if "not-run" in block.markers or block.lang == "text":
        return []
    target = block.markers.get("save-as") or block.markers.get("file")
    if target:
        return [{"kind": "write", "where": block.where, "path": target, "code": block.code}]
    if block.lang in SHELLS:
        steps = []
        for line, command in commands(block):
            command = with_services(command, block, services)
            where = f"{shown(block.page)}:{line}"
            if command.startswith("pip install "):
                check_pip_install(where, command)
            else:
                steps.append({"kind": "shell", "where": where, "code": command})
        return steps
    assert block.lang == "python", f"{block.where}: a {block.lang!r} block is neither run nor saved"
    code = with_services(block.code, block, services)
    return [{"kind": "python", "where": block.where, "code": code, "prints": block.prints}]


def with_services(code: str, block: Block, services: Mapping[str, str]) -> str:
    """The code with each example URL of what the block needs replaced by the service's."""
    for need in sorted(block.needs & set(EXAMPLE_URLS)):
        code = code.replace(EXAMPLE_URLS[need], services[need])
    return code


def run_how_to(
    page: Path,
    directory: Path,
    services: Mapping[str, str],
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run the page's blocks in order in ``directory`` (fresh), every block whose needs are all in
    ``services`` (need → the URL its example URL is replaced with; ``ray``: any value)."""
    plan = [
        step
        for block in blocks(page)
        if block.needs <= set(services)
        for step in step_of(block, services)
    ]
    plan_file = directory.parent / f"{directory.name}.plan.json"
    plan_file.write_text(json.dumps(plan), encoding="utf-8")
    directory.mkdir(exist_ok=True)
    child_env = {k: v for k, v in os.environ.items() if k not in ("PYTHONWARNINGS", "PYTHONPATH")}
    child_env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{child_env.get('PATH', '')}"
    child_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", str(DRIVER), str(plan_file)],
        cwd=directory,
        env=child_env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def the_run_failed(done: subprocess.CompletedProcess[str]) -> str:
    """The failure the driver reported (page, line, output), after the last of what ran."""
    return f"{done.stderr}\n--- what ran before it (end) ---\n{done.stdout[-4000:]}"


# ---------------------------------------------------------------- the tests


def page_param(page: Path) -> Any:
    marks = [pytest.mark.slow] if page.name in SLOW else []
    return pytest.param(page, marks=marks, id=page.name)


@pytest.mark.parametrize("page", [page_param(page) for page in HOW_TOS])
def test_the_how_to_runs_whole_as_written(
    page: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    needs = {need for block in blocks(page) for need in block.needs} - {"ray"}
    services: dict[str, str] = {}
    if "postgres" in needs:
        require_extra("postgres")
        services["postgres"] = request.getfixturevalue("postgres_database_dsn")
    with contextlib.ExitStack() as stack:
        if "mcp-http" in needs:
            require_extra("mcp")
            url, _ = stack.enter_context(mcp_http_server("--token", MCP_TOKEN))
            services["mcp-http"] = url
        services["otlp"], received = stack.enter_context(otlp_receiver("otlp" in needs))
        done = run_how_to(page, tmp_path / "reader", services)

    assert done.returncode == 0, the_run_failed(done)
    if "otlp" in needs:
        assert "/v1/traces" in {path for path, _, _ in received}, "no span reached the receiver"


@contextlib.contextmanager
def otlp_receiver(wanted: bool) -> Iterator[tuple[str, list[tuple[str, str, bytes]]]]:
    """The OTel integration tests' OTLP/HTTP receiver on a loopback port, when ``wanted``: its
    URL and what it received (path, content type, body)."""
    received: list[tuple[str, str, bytes]] = []
    if not wanted:
        yield "", received
        return
    require_extra("otel")
    from tests.integration.test_otel_otlp import serving_receiver

    with serving_receiver() as served:
        yield served


ALL = [block for page in HOW_TOS for block in blocks(page)]


@pytest.mark.parametrize("block", ALL, ids=[block.where for block in ALL])
def test_every_block_of_a_how_to_says_what_it_is(block: Block) -> None:
    assert block.lang, f"{block.where}: say what the block is (console: it runs; text: output)"
    assert "fragment" not in block.markers, f"{block.where}: make it run, or say why not-run"
    if "not-run" in block.markers:
        assert len(block.markers["not-run"]) >= 10, f"{block.where}: not-run needs its reason"
    elif block.lang not in {"python", "text", *SHELLS}:
        assert "save-as" in block.markers, f"{block.where}: a {block.lang} block is not run"
    if block.lang in SHELLS and "not-run" not in block.markers:
        assert commands(block), f"{block.where}: a shell block without a command"
    assert block.needs <= {*EXAMPLE_URLS, "ray"}, f"{block.where}: nothing provides {block.needs}"
    for need in block.needs & set(EXAMPLE_URLS):
        assert EXAMPLE_URLS[need] in block.code, f"{block.where}: shows no example URL for {need}"
    if "mcp-http" in block.needs:
        assert MCP_TOKEN in block.code, f"{block.where}: the test server wants {MCP_TOKEN!r}"
    path, _, test = block.markers.get("run-by", "").partition("::")
    source = (ROOT / path).read_text("utf-8") if path else ""
    if "run-by" in block.markers or "ray" in block.needs:
        assert re.search(rf"^def {re.escape(test)}\(", source, re.M), f"{block.where}: run-by"
    if "ray" in block.needs:
        assert "pytest.mark.ray" in source, f"{block.where}: its run-by test is not marked ray"


def test_the_commands_of_a_console_block_are_its_dollar_lines() -> None:
    page = ROOT / "docs" / "how-to" / "x.md"
    block = Block(page, 10, "console", "$ a \\\n  --b\nout\n$ # note\n$ c\n", {}, None)
    assert commands(block) == [(11, "a   --b"), (15, "c")]


PAGE_THAT_BREAKS = """# A page

```python
greeting = "hello"
print(greeting)
```

It prints `hello`

<!-- save-as: tool.py -->
```python
def shout(text):
    return text.upper()
```

```console
$ python -c 'import tool; print(tool.shout("ok"))'
OK
$ test -f missing.txt
```
"""


def test_a_failing_command_is_reported_with_its_page_line_and_output(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(PAGE_THAT_BREAKS, encoding="utf-8")

    done = run_how_to(page, tmp_path / "reader", {})

    assert done.returncode == 1
    assert "FAILED page.md:19 (shell):\n$ test -f missing.txt\nexit status 1" in done.stderr
    assert done.stdout.splitlines()[:2] == [
        "hello",
        "$ python -c 'import tool; print(tool.shout(\"ok\"))'",
    ]
    assert "OK" in done.stdout.splitlines()


def test_a_block_that_does_not_print_what_the_page_says_fails(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(PAGE_THAT_BREAKS.replace("It prints `hello`", "It prints `bye`"), "utf-8")

    done = run_how_to(page, tmp_path / "reader", {})

    assert done.returncode == 1
    assert "FAILED page.md:3 (python):\nthe page says it prints 'bye'" in done.stderr
