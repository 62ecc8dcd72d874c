"""A downstream project in a pytester sandbox, run in conformance mode, its JSON report read
back and validated against the shipped schema."""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import pytest

import pytest_polyloop

# Every sandbox run: deterministic order, no cache files, the report validated; and without
# pytest-rerunfailures (of the dev extra), which opens a socket server in every session that has
# xdist: a test that wants it passes `-p rerunfailures`.
SANDBOX_FLAGS = ("-p", "no:randomly", "-p", "no:cacheprovider", "-p", "no:rerunfailures")

PYPROJECT = """\
[tool.pytest.ini_options]
asyncio_default_fixture_loop_scope = "function"
"""

# A downstream project's executor: `broken=True` reports an action's own error as env_error
# (a contract violation); it answers within one event-loop tick, so the cancellation promise is
# not applicable to it. `LoopBoundExecutor` remembers the loop it was built in.
EXECUTORS = """\
import asyncio

import pytest

from polyloop import Action, ActionOutcome, ActionStatus
from polyloop.testing import ActionSamples


class SandboxExecutor:
    def __init__(self, broken=False):
        self.broken = broken

    async def execute(self, action):
        if action.text == "boom":
            status = ActionStatus.ENV_ERROR if self.broken else ActionStatus.EXECUTED
            return ActionOutcome(status=status, observation="Traceback: boom")
        return ActionOutcome(status=ActionStatus.EXECUTED, observation="ok")


class LoopBoundExecutor(SandboxExecutor):
    def __init__(self):
        super().__init__()
        self.loop = asyncio.get_running_loop()

    async def execute(self, action):
        if asyncio.get_running_loop() is not self.loop:
            raise RuntimeError("executor used from a different loop than the one it was built in")
        return await super().execute(action)


def action_samples():
    return ActionSamples(
        executes_cleanly=Action(text="print(1)"), executes_but_errors=Action(text="boom")
    )
"""

CONFTEST_HEADER = """\
import pytest
import pytest_polyloop
from sandbox_executors import SandboxExecutor, action_samples


@pytest.fixture
def samples():
    return action_samples()

"""

ERROR_PROMISE = "action_executor.action_error_is_a_normal_observation_not_an_env_error"
FIVE_FIELDS = "action_executor.returns_all_five_fields"
CANCELLATION = "action_executor.cancellation_propagates_and_is_not_swallowed"

# A project with one implementation per outcome kind (the hand-written subclasses give
# `overridden`; a baseline run gives `pending`).
MIXED_PROJECT = f"""\
@pytest_polyloop.seam("action_executor", samples="samples")
@pytest.fixture
def good_executor():
    return SandboxExecutor()


@pytest.fixture
@pytest_polyloop.seam("action_executor", samples="samples")
def broken_executor():
    return SandboxExecutor(broken=True)


@pytest_polyloop.seam(
    "action_executor",
    samples="samples",
    waive={{"{ERROR_PROMISE}": "our sandbox reports a crashing tool as env_error (ticket 12)"}},
)
@pytest.fixture
def waived_executor():
    return SandboxExecutor(broken=True)


@pytest_polyloop.seam(
    "action_executor", samples="samples", waive={{"{FIVE_FIELDS}": "was broken in 0.9"}}
)
@pytest.fixture
def stale_executor():
    return SandboxExecutor()
"""

HANDWRITTEN = f"""\
import pytest
from polyloop.testing import ActionExecutorContract
from sandbox_executors import SandboxExecutor, action_samples


class TestOverridden(ActionExecutorContract):
    @pytest.fixture
    def action_executor(self):
        return SandboxExecutor()

    @pytest.fixture
    def action_samples(self):
        return action_samples()

    def test_returns_all_five_fields(self, action_executor):
        '''Our own, weaker version.'''


class TestOverriddenWithWaiver(TestOverridden):
    waive = {{"{CANCELLATION}": "our own cancellation test covers it"}}

    def test_returns_all_five_fields(self, action_executor):
        '''Left as is.'''

    def test_cancellation_propagates_and_is_not_swallowed(self, action_executor):
        '''Replaced, and waived with a reason.'''


class TestOverriddenAndFailing(TestOverridden):
    def test_returns_all_five_fields(self, action_executor):
        '''Replaced, and failing.'''
        raise AssertionError("our replacement fails")
"""


@dataclass
class Conformance:
    """One sandbox run: pytest's result and the JSON report (``None`` if none was written)."""

    result: pytest.RunResult
    report: dict[str, Any] | None

    @property
    def ret(self) -> int:
        return int(self.result.ret)

    @property
    def output(self) -> str:
        return "\n".join(self.result.outlines + self.result.errlines)

    def implementation(self, implementation_id: str) -> dict[str, Any]:
        assert self.report is not None, self.output
        for entry in self.report["implementations"]:
            if entry["id"] == implementation_id:
                return dict(entry)
        found = [entry["id"] for entry in self.report["implementations"]]
        raise AssertionError(f"no implementation {implementation_id!r} in the report: {found}")

    def promise(self, implementation_id: str, promise_id: str) -> dict[str, Any]:
        for entry in self.implementation(implementation_id)["promises"]:
            if entry["id"] == promise_id:
                return dict(entry)
        raise AssertionError(f"{implementation_id} has no promise {promise_id!r}")

    def outcome(self, implementation_id: str, promise_id: str) -> str:
        return str(self.promise(implementation_id, promise_id)["outcome"])

    def counts(self, implementation_id: str) -> dict[str, int]:
        return dict(self.implementation(implementation_id)["counts"])


class Project:
    """A downstream project in the sandbox: files to write, then a conformance run."""

    def __init__(self, pytester: pytest.Pytester) -> None:
        self.pytester = pytester
        self.path: Path = pytester.path
        self._runs = 0
        self.write("pyproject.toml", PYPROJECT)
        self.write("tests/sandbox_executors.py", EXECUTORS)

    def write(self, relative: str, source: str) -> Path:
        path = self.path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source), encoding="utf-8")
        return path

    def conftest(self, relative_dir: str, body: str) -> Path:
        """A conftest with the sandbox imports and a ``samples`` fixture, plus ``body``."""
        return self.write(f"{relative_dir}/conftest.py", CONFTEST_HEADER + textwrap.dedent(body))

    def run(self, *args: str, subprocess: bool = False) -> Conformance:
        self._runs += 1
        report_path = self.path / f"report-{self._runs}.json"
        argv = ["--polyloop-conformance", *SANDBOX_FLAGS, f"--polyloop-report={report_path}"]
        argv += args
        if subprocess:
            # Let the child cache its assertion-rewritten modules (Hypothesis, the kit): without
            # that every child process and xdist worker rewrites them again, for seconds.
            with pytest.MonkeyPatch.context() as patch:
                patch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
                result = self.pytester.runpytest_subprocess(*argv)
        else:
            result = self.pytester.runpytest_inprocess(*argv)
        report = None
        if report_path.exists():
            report = json.loads(report_path.read_text(encoding="utf-8"))
            jsonschema.validate(report, pytest_polyloop.schema())
        return Conformance(result, report)
