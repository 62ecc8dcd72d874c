"""The bundled implementations' conformance run (the README's main job).

PostgresStore joins the run only where it can be judged: with PostgreSQL's binaries and psycopg
installed, or always in CI (where the session fixture then fails loudly if they are missing).
JupyterExecutor likewise: with jupyter_client and ipykernel installed, or always in CI (where
constructing it then fails with the install hint).
Elsewhere it is left out of collection with a warning instead of being collected and skipped:
an implementation whose every promise was skipped makes the verdict ``incomplete``, and the main
job must pass on a fresh machine that has only the embedded default store.
"""

from __future__ import annotations

import importlib.util
import warnings

from tests.conftest import _in_ci, _postgres_bindir

collect_ignore: list[str] = []

if not _in_ci():
    missing = []
    if _postgres_bindir() is None:
        missing.append("the PostgreSQL binaries (apt-get install -y postgresql)")
    if importlib.util.find_spec("psycopg") is None:
        missing.append("psycopg (pip install 'polyloop[postgres]')")
    if missing:
        collect_ignore.append("test_postgres_store_contract.py")
        warnings.warn(
            "PostgresStore is not judged in this conformance run: it needs "
            + " and ".join(missing),
            stacklevel=1,
        )

    if importlib.util.find_spec("jupyter_client") is None or (
        importlib.util.find_spec("ipykernel") is None
    ):
        collect_ignore.append("test_jupyter_executor_contract.py")
        warnings.warn(
            "JupyterExecutor is not judged in this conformance run: it needs jupyter_client and "
            "ipykernel (pip install 'polyloop[jupyter]')",
            stacklevel=1,
        )
