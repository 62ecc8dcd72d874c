"""The bundled implementations' conformance run (the README's main job).

Implementations behind an extra (PostgresStore, OpenAIChatModel, MCPExecutor, JupyterExecutor,
OpenTelemetrySink) join the run where their extra is installed — PostgresStore also needs
PostgreSQL's binaries — or always in CI (where a missing extra then fails loudly). Elsewhere each
is left out of collection, instead of being collected and skipped, and named with what to install:
in a conformance run by the report's ``left_out`` list (its terminal section, JSON, Markdown and
HTML), outside one by a warning. An implementation whose every promise was skipped makes the verdict
``incomplete``, and the main job must pass on a fresh machine that has only the embedded default
store (the README's own install line, ``pip install -e '.[testing]'``).

Every probe goes through :func:`polyloop._base._extras.extra_installed`, which is safe for dotted
module names (``opentelemetry.sdk`` without ``opentelemetry`` answers "missing", not a crash).
"""

from __future__ import annotations

from typing import NamedTuple

import pytest

from polyloop._base._extras import extra_installed, install_hint
from polyloop.testing._shared._base import in_ci
from pytest_polyloop import SeamRegistry
from tests.conftest import _postgres_bindir

collect_ignore: list[str] = []

# (contract module, implementation, its seam, its extra, its suite classes in the module)
_BEHIND_AN_EXTRA = (
    ("test_postgres_store_contract.py", "PostgresStore", "run_store", "postgres",
     ("TestPostgresStoreContract",)),
    ("test_openai_model_contract.py", "OpenAIChatModel", "model_client", "openai",
     ("TestOpenAIChatModelContract",)),
    ("test_mcp_executor_contract.py", "MCPExecutor", "action_executor", "mcp",
     ("TestMCPExecutorOverStdioContract", "TestMCPExecutorOverHttpContract")),
    ("test_jupyter_executor_contract.py", "JupyterExecutor", "action_executor", "jupyter",
     ("TestJupyterExecutorContract",)),
    ("test_otel_sink_contract.py", "OpenTelemetrySink", "event_sink", "otel",
     ("TestOpenTelemetrySinkContract",)),
)  # fmt: skip


class _LeftOut(NamedTuple):
    module: str
    implementation: str
    seam: str
    extra: str
    hint: str  # what it needs: "it needs <hint>"
    ids: list[str]


def _left_out() -> list[_LeftOut]:
    """Each implementation this machine cannot judge, with what it needs."""
    left_out = []
    for module, implementation, seam, extra, classes in _BEHIND_AN_EXTRA:
        needs = [] if extra_installed(extra) else [install_hint(extra)]
        if extra == "postgres" and _postgres_bindir() is None:
            needs.append("the PostgreSQL binaries (apt-get install -y postgresql)")
        if needs:
            ids = [f"tests/contract/{module}::{name}" for name in classes]
            left_out.append(_LeftOut(module, implementation, seam, extra, " and ".join(needs), ids))
    return left_out


_LEFT_OUT = [] if in_ci() else _left_out()
collect_ignore += [entry.module for entry in _LEFT_OUT]


def pytest_polyloop_register_seams(registry: SeamRegistry) -> None:
    """In a conformance run the report lists each left-out implementation (``left_out``: the
    terminal section, the JSON, Markdown and HTML), with the extra to install."""
    for entry in _LEFT_OUT:
        registry.leave_out(
            entry.implementation, hint=entry.hint, extra=entry.extra, seam=entry.seam, ids=entry.ids
        )


def pytest_configure(config: pytest.Config) -> None:
    """Outside a conformance run (no report to list them in), one warning each."""
    if config.getoption("polyloop_conformance", False):
        return
    for entry in _LEFT_OUT:
        why = f"{entry.implementation} is not judged in this conformance run: it needs {entry.hint}"
        config.issue_config_time_warning(UserWarning(why), stacklevel=2)
