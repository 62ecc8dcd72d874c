"""One answer to "is this extra installed", safe for dotted names, used by every optional probe.

On a bare ``pip install -e '.[testing]'`` the README's main job once exited 4: the contract
conftest asked ``importlib.util.find_spec("opentelemetry.sdk")``, which imports
``opentelemetry`` to look inside it and raises ``ModuleNotFoundError`` when it is absent.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from polyloop._base._extras import (
    EXTRAS,
    extra_installed,
    install_hint,
    missing_modules,
    module_available,
)

ROOT = Path(__file__).resolve().parents[2]
ABSENT = "polyloop_absent_package_for_tests"

# Run pytest with every optional extra made unimportable, as on a bare install: a None entry in
# sys.modules is what Python itself uses to say "this import fails".
BARE_INSTALL = """
import sys
for name in {hidden!r}:
    sys.modules[name] = None
import pytest
sys.exit(pytest.main(sys.argv[1:]))
"""
HIDDEN = [
    "opentelemetry",
    "mcp",
    "openai",
    "psycopg",
    "psycopg_pool",
    "jupyter_client",
    "ipykernel",
]


def test_find_spec_of_a_dotted_name_raises_when_the_parent_is_missing() -> None:
    # The trap itself, so this file keeps saying why module_available exists.
    with pytest.raises(ModuleNotFoundError):
        importlib.util.find_spec(f"{ABSENT}.sdk")


def test_a_dotted_name_whose_parent_is_missing_is_not_available() -> None:
    assert module_available(f"{ABSENT}.sdk") is False
    assert module_available(f"{ABSENT}.sdk.trace") is False
    assert module_available(ABSENT) is False


def test_a_dotted_name_whose_parent_cannot_be_imported_is_not_available(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, ABSENT, None)  # `import ABSENT` now raises ImportError
    assert module_available(f"{ABSENT}.sdk") is False
    assert module_available(ABSENT) is False


def test_a_parent_that_raises_while_importing_is_not_available(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / f"{ABSENT}_broken"
    package.mkdir()
    (package / "__init__.py").write_text('raise ImportError("half installed")\n')
    (package / "sdk.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert module_available(f"{ABSENT}_broken.sdk") is False


def test_present_modules_are_available_dotted_or_not() -> None:
    assert module_available("json")
    assert module_available("json.decoder")
    assert module_available("polyloop.testing._shared._base")
    assert not module_available("json.no_such_submodule")


@pytest.mark.parametrize("name", ["", ".", "json.", ".json", "json..decoder", "a b", "json/x"])
def test_names_that_are_not_module_names_are_not_available(name: str) -> None:
    assert module_available(name) is False


def test_an_extra_is_installed_when_all_its_modules_are(monkeypatch: pytest.MonkeyPatch) -> None:
    assert extra_installed("testing")
    assert missing_modules("testing") == []
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    assert not extra_installed("otel")
    assert missing_modules("otel") == ["opentelemetry.trace", "opentelemetry.sdk"]


def test_an_unknown_extra_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"no extra 'otle'.*otel"):
        extra_installed("otle")
    with pytest.raises(ValueError, match="no extra 'otle'"):
        install_hint("otle")


def test_the_table_names_exactly_the_extras_pyproject_declares() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"][
        "optional-dependencies"
    ]
    assert set(EXTRAS) == set(declared) - {"dev"}


def test_the_hint_says_how_to_install_from_a_checkout() -> None:
    assert (
        install_hint("otel")
        == "the `otel` extra (in a polyloop checkout: pip install -e '.[otel]')"
    )


def test_no_probe_in_the_project_calls_find_spec_itself() -> None:
    """Every optional probe goes through polyloop._base._extras (find_spec is unsafe for dotted
    names)."""
    offenders = []
    for folder in ("polyloop", "pytest_polyloop", "tests", "examples", "benchmarks"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if (
                path == ROOT / "polyloop" / "_base" / "_extras.py"
                or path == Path(__file__).resolve()
            ):
                continue
            if re.search(r"\bfind_spec\(", path.read_text("utf-8")):
                offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []


def test_the_main_job_passes_with_no_extra_installed_and_names_each_left_out_once() -> None:
    """The README's main job on a bare install (narrowed to one implementation to stay quick):
    exit 0, the verdict, and one line per implementation left out, naming the extra to install
    — in the report's terminal section, not as a warning. (Narrowed with -k: --polyloop-seam
    would also narrow the left-out list to that seam's implementations.)"""
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_ADDOPTS")}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # installed plugins import the hidden extras
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            BARE_INSTALL.format(hidden=HIDDEN),
            "-p",
            "pytest_polyloop.plugin",
            "-p",
            "asyncio",
            "-p",
            "no:cacheprovider",
            "--polyloop-conformance",
            "-k",
            "TestNullSinkContract",
            "tests/contract",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "verdict: conformant" in out
    assert "\nleft out (not judged, so not in the verdict):\n" in out  # the report says it
    assert "UserWarning" not in out  # once, in the report, not again as a warning
    for implementation, extra in [
        ("PostgresStore", "postgres"),
        ("OpenAIChatModel", "openai"),
        ("MCPExecutor", "mcp"),
        ("JupyterExecutor", "jupyter"),
        ("OpenTelemetrySink", "otel"),
    ]:
        line = f"{implementation} is not judged in this conformance run: it needs "
        line += install_hint(extra)
        assert out.count(line) == 1, out
