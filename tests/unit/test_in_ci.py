"""``in_ci()``: the one reading of the ``CI`` variable, shared by the kit and the tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from polyloop.testing._shared._base import in_ci

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("value", [None, "", "  ", "0", "false", "FALSE", " False ", "no", "No"])
def test_ci_unset_empty_or_spelled_false_is_not_ci(
    monkeypatch: pytest.MonkeyPatch, value: str | None
) -> None:
    if value is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", value)

    assert in_ci() is False


@pytest.mark.parametrize("value", ["true", "1", "yes", "TRUE", "github-actions"])
def test_any_other_value_of_ci_is_ci(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("CI", value)

    assert in_ci() is True


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("tests.unit.test_types", "BOUNDED"),
        ("tests.unit.test_reference_model", "BOUNDED"),
        ("tests.unit.test_parsers", "BOUNDED"),
    ],
)
def test_ci_false_leaves_the_unit_property_tests_randomized(module: str, name: str) -> None:
    script = (
        "import importlib, sys; "
        "print(getattr(importlib.import_module(sys.argv[1]), sys.argv[2]).derandomize)"
    )
    env = {**os.environ, "CI": "false"}

    done = subprocess.run(
        [sys.executable, "-c", script, module, name],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert (done.returncode, done.stdout.strip()) == (0, "False"), done.stderr
