"""The power-loss probe's other outcomes: what it says when it cannot run or cannot judge, and
that it leaves no process, mount or file behind when it is interrupted or times out."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from polyloop.testing import parse_skip_reason
from polyloop.testing._run_store._power import missing_for_power_probe
from tests.kit._sandbox import run_sandbox

ROOT = Path(__file__).resolve().parents[2]
NEEDS_STRACE = pytest.mark.skipif(
    missing_for_power_probe() is not None and not os.environ.get("CI"),
    reason=f"{missing_for_power_probe()} (CI installs it: .ci/run)",
)


def _power_outcome(pytester: pytest.Pytester, store: str) -> tuple[str, dict[str, str]]:
    body = textwrap.dedent(f"""
        from tests.kit import broken_stores

        class TestStore(testing.RunStoreContract):
            @pytest.fixture
            def run_store(self, tmp_path):
                return broken_stores.{store}(tmp_path)

            @pytest.fixture
            def store_samples(self):
                return testing.StoreSamples(factory="tests.kit.broken_stores:{store}")
        """)
    outcomes = run_sandbox(pytester, body, "-k", "survives_power_loss")
    got = outcomes[("TestStore", "test_survives_power_loss")]
    return got.outcome, parse_skip_reason(got.longrepr) or {"text": got.longrepr}


def test_without_strace_it_is_unverifiable_and_says_how_to_install_it(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no strace on it
    outcome, parts = _power_outcome(pytester, "SyncedLineFileStore")
    assert outcome == "skipped"
    assert parts["outcome"] == "unverifiable", parts
    assert "needs strace, which is not installed" in parts["why"]
    assert "apt-get install strace" in parts["verify_yourself"]


def test_on_another_operating_system_it_says_which_and_what_it_needs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    missing = missing_for_power_probe()
    assert missing is not None
    assert "Linux system-call trace (strace)" in missing
    assert "darwin" in missing


def test_a_tracer_that_may_not_trace_is_unverifiable_with_its_words(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = tmp_path / "strace"
    fake.write_text(
        "#!/bin/sh\necho 'strace: ptrace(PTRACE_TRACEME, ...): Operation not permitted' >&2\n"
        "exit 1\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    outcome, parts = _power_outcome(pytester, "SyncedLineFileStore")
    assert outcome == "skipped"
    assert parts["outcome"] == "unverifiable", parts
    assert "strace cannot trace a process here: strace: ptrace" in parts["why"]
    assert "--cap-add SYS_PTRACE" in parts["verify_yourself"]


@NEEDS_STRACE
def test_a_store_keeping_its_data_elsewhere_is_not_judged(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """As a database server's store: the probe cannot cut the power under it, so it must not
    call it held (a store opened on an empty directory reads the writer's records)."""
    monkeypatch.setenv("POLYLOOP_TEST_ELSEWHERE", str(tmp_path))
    outcome, parts = _power_outcome(pytester, "KeptElsewhere")
    assert outcome == "skipped"
    assert parts["outcome"] == "unverifiable", parts
    assert "keeps its data outside the directory its factory was given" in parts["why"]


# The driver takes Ctrl-C as a terminal's process does, whatever it inherited: a test that ran
# before in the same worker may have left SIGINT ignored or blocked (an interrupted batch command
# ignores it for the rest of its process), and a child inherits both; CI once saw the probe run
# to its end, exit 0, for that.
_DRIVER = """
import asyncio, signal, sys
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
signal.signal(signal.SIGINT, signal.default_int_handler)
from polyloop.testing._run_store._power import power_findings

async def main():
    await asyncio.wait_for(power_findings("tests.kit.broken_stores:SlowSyncedLineFileStore"),
                           float(sys.argv[1]))

asyncio.run(main())
"""


def _leftovers(scratch: Path) -> list[str]:
    """Files left in the probe's scratch directory, and processes that still name it."""
    found = [str(path) for path in scratch.rglob("*")]
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                line = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if str(scratch) in line:
                found.append(f"process {proc.name}: {line[:200]}")
    return found


def _start(scratch: Path, bound: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ, POLYLOOP_POWER_TMPDIR=str(scratch), PYTHONPATH=str(ROOT))
    return subprocess.Popen(
        [sys.executable, "-c", _DRIVER, bound], cwd=ROOT, env=env, stderr=subprocess.PIPE
    )


def _wait_for_the_writer(scratch: Path, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while not list(scratch.glob("*/trace.txt")):
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        assert time.monotonic() < deadline, "the traced writer never started"
        time.sleep(0.05)
    time.sleep(1.0)  # well inside the writer's rounds (6 s of appends at least)


@NEEDS_STRACE
def test_an_interrupted_probe_leaves_no_process_and_no_file(tmp_path: Path) -> None:
    process = _start(tmp_path, "600")
    _wait_for_the_writer(tmp_path, process)
    process.send_signal(signal.SIGINT)  # Ctrl-C, as a terminal's user stops the tests
    process.communicate(timeout=60)
    assert process.returncode != 0
    time.sleep(0.2)
    assert _leftovers(tmp_path) == []


@NEEDS_STRACE
def test_a_probe_that_times_out_leaves_no_process_and_no_file(tmp_path: Path) -> None:
    process = _start(tmp_path, "4")  # a test's time limit, cancelling it mid-trace
    _, err = process.communicate(timeout=120)
    assert b"TimeoutError" in err, err.decode()[-2000:]
    time.sleep(0.2)
    assert _leftovers(tmp_path) == []


@NEEDS_STRACE
def test_a_finding_is_not_reused_under_another_tracer_or_seed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Findings are kept per process; one made with a working strace must not answer for a
    tracer that cannot trace (CI ran the kit's matrices first in the same worker and reported
    the refusing tracer's probe as passed), nor for another seed."""
    import asyncio

    from polyloop.testing._run_store import _power

    factory = "tests.kit.broken_stores:SyncedLineFileStore"
    first = asyncio.run(_power.power_findings(factory))
    assert first.not_judged is None
    assert first.crash_points > 0
    monkeypatch.setenv("POLYLOOP_POWER_SEED", str(first.seed + 1))
    assert asyncio.run(_power.power_findings(factory)).seed == first.seed + 1
    fake = tmp_path / "strace"
    fake.write_text("#!/bin/sh\necho 'strace: ptrace(PTRACE_TRACEME, ...): refused' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(_power.TracerUnavailable, match="refused"):
        asyncio.run(_power.power_findings(factory))


@NEEDS_STRACE
def test_a_store_refusing_its_own_append_in_the_writer_is_said_to_refuse_it(
    pytester: pytest.Pytester,
) -> None:
    # Issue 37: a RunConflict out of the traced writer's own append (at the right sequence, on
    # a log the writer built) was reported as "the power-loss probe could not run".
    outcome, parts = _power_outcome(pytester, "FencesOnCommitCount")
    assert outcome == "failed", parts
    text = parts["text"]
    assert "could not run" not in text, text
    assert "the store refused its own append_many(run " in text, text
    assert "sequence=7) in round 1 (call 4 of that round), raising RunConflict: " in text, text
    assert "at the right sequence" in text, text
