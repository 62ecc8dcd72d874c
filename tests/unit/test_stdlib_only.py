"""The runtime core imports nothing outside the standard library (SPEC §8)."""

from __future__ import annotations

import json
import subprocess
import sys

CORE = [
    "polyloop",
    "polyloop.stores",
    "polyloop.events",
    "polyloop.instrumentation",
    "polyloop.models",
    "polyloop.types",
    "polyloop.ports",
    "polyloop.tools",
    "polyloop.ray",  # the Ray backend imports Ray only when a RayBackend is built
]

PROBE = f"""
import json, sys
before = set(sys.modules)
for name in {CORE!r}:
    __import__(name)
loaded = sorted(set(sys.modules) - before)
print(json.dumps(loaded))
"""


def test_importing_the_core_loads_only_the_standard_library_and_polyloop():
    completed = subprocess.run(
        [sys.executable, "-I", "-c", PROBE], capture_output=True, text=True, check=True
    )

    loaded = json.loads(completed.stdout)
    foreign = sorted(
        name
        for name in loaded
        if name.split(".")[0] not in sys.stdlib_module_names and name.split(".")[0] != "polyloop"
    )
    assert "polyloop.types" in loaded
    assert foreign == []
