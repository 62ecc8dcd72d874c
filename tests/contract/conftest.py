"""The bundled implementations' conformance run (the README's main job).

Implementations behind an extra (PostgresStore, OpenAIChatModel, MCPExecutor, JupyterExecutor,
OpenTelemetrySink) join the run where their extra is installed — PostgresStore also needs
PostgreSQL's binaries — or always in CI (where a missing extra then fails loudly). Elsewhere each
is left out of collection with one warning naming it and the extra to install, instead of being
collected and skipped: an implementation whose every promise was skipped makes the verdict
``incomplete``, and the main job must pass on a fresh machine that has only the embedded default
store (the README's own install line, ``pip install -e '.[testing]'``).

Every probe goes through :func:`polyloop._base._extras.extra_installed`, which is safe for dotted
module names (``opentelemetry.sdk`` without ``opentelemetry`` answers "missing", not a crash).
"""

from __future__ import annotations

import warnings

from polyloop._base._extras import extra_installed, install_hint
from polyloop.testing._base import in_ci
from tests.conftest import _postgres_bindir

collect_ignore: list[str] = []

# (contract module, implementation, its extra)
_BEHIND_AN_EXTRA = (
    ("test_postgres_store_contract.py", "PostgresStore", "postgres"),
    ("test_openai_model_contract.py", "OpenAIChatModel", "openai"),
    ("test_mcp_executor_contract.py", "MCPExecutor", "mcp"),
    ("test_jupyter_executor_contract.py", "JupyterExecutor", "jupyter"),
    ("test_otel_sink_contract.py", "OpenTelemetrySink", "otel"),
)


def _left_out() -> list[tuple[str, str]]:
    """(contract module, why) of each implementation this machine cannot judge."""
    left_out = []
    for module, implementation, extra in _BEHIND_AN_EXTRA:
        needs = [] if extra_installed(extra) else [install_hint(extra)]
        if extra == "postgres" and _postgres_bindir() is None:
            needs.append("the PostgreSQL binaries (apt-get install -y postgresql)")
        if needs:
            why = (
                f"{implementation} is not judged in this conformance run: it needs "
                + " and ".join(needs)
            )
            left_out.append((module, why))
    return left_out


if not in_ci():
    for _module, _why in _left_out():
        collect_ignore.append(_module)
        warnings.warn(_why, stacklevel=1)
