"""Run contract-suite subclasses in a pytester sandbox and read back one outcome per test.

The sandbox is a fresh rootdir with no configuration, so it also proves the suites need none:
pytest-asyncio runs in strict mode there, and only the kit's own class mark makes the async
promises run.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

import pytest

# `-p no:polyloop`: these runs exercise the kit alone, not the conformance plugin (which is
# tested in tests/plugin); the plugin stays passive without its flag anyway.
BARE_SANDBOX_ARGS = ("-p", "no:randomly", "-p", "no:cacheprovider", "-p", "no:polyloop", "-q")
# Only silences pytest-asyncio's "unset default fixture loop scope" deprecation notice; the
# suites' own tests run the same without it (test_outcomes checks the bare form).
SANDBOX_ARGS = (*BARE_SANDBOX_ARGS, "-o", "asyncio_default_fixture_loop_scope=function")


HEADER = "import pytest\nfrom polyloop import testing\nfrom tests.kit import broken\n\n"


@dataclass(frozen=True)
class TestOutcome:
    outcome: str  # "passed" | "failed" | "skipped" | "xfailed" | "xpassed"
    longrepr: str


def subclass_source(
    class_name: str, suite: str, fixture: str, impl_expr: str, samples: tuple[str, str] | None
) -> str:
    """The source of one hand-written subclass, as a downstream project would write it."""
    lines = [
        f"class {class_name}(testing.{suite}):",
        "    @pytest.fixture",
        f"    def {fixture}(self):",
        f"        return {impl_expr}",
    ]
    if samples is not None:
        lines += [
            "    @pytest.fixture",
            f"    def {samples[0]}(self):",
            f"        return {samples[1]}",
        ]
    return "\n".join(lines) + "\n"


def run_sandbox(
    pytester: pytest.Pytester, body: str, *args: str
) -> dict[tuple[str, str], TestOutcome]:
    """Write one test module, run it in-process, return {(class, test name): outcome}."""
    pytester.makepyfile(test_sandbox=HEADER + textwrap.dedent(body))
    result = pytester.runpytest_inprocess(*SANDBOX_ARGS, *args)
    reprec = result.reprec  # type: ignore[attr-defined]
    failed_collections = reprec.getfailedcollections()
    assert not failed_collections, "\n".join(str(r.longrepr) for r in failed_collections)
    outcomes: dict[tuple[str, str], TestOutcome] = {}
    for report in reprec.getreports("pytest_runtest_logreport"):
        parts = report.nodeid.split("::")
        key = (parts[-2], parts[-1].split("[", 1)[0])
        text = str(report.longrepr) if report.longrepr else ""
        if report.failed:
            outcome = "xpassed" if "XPASS" in text else "failed"
            outcomes[key] = TestOutcome(outcome, text)
        elif report.skipped and hasattr(report, "wasxfail"):
            outcomes[key] = TestOutcome("xfailed", str(report.wasxfail))
        elif report.skipped:
            outcomes.setdefault(key, TestOutcome("skipped", text))
        elif report.when == "call":
            outcomes.setdefault(key, TestOutcome("passed", text))
    return outcomes
