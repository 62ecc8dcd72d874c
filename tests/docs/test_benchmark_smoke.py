"""The store benchmark runs end to end and prints every line it promises (speed is not asserted:
that is the benchmark's own job, measured against a baseline taken in the same run)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.postgres
def test_the_benchmark_prints_every_store_against_the_fsync_limit(
    tmp_path: Path, postgres_database_dsn: str
) -> None:
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "store_throughput.py"),
            "--dir",
            str(tmp_path),
            "--seconds",
            "0.3",
            "--rounds",
            "1",
            "--postgres-dsn",
            postgres_database_dsn,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout

    number = r"[\d,]+\s+\d+\.\d\d"
    for name in (
        "raw write\\+fsync \\(the limit\\)",
        "SQLiteStore",
        "SQLiteStore, 16 runs at once",
        "MemoryStore",
        "PostgresStore",
    ):
        assert re.search(rf"^{name}\s+{number}", out, flags=re.M), (name, out)
    assert re.search(
        r"^target: SQLiteStore sustained >= 0.5 x the fsync limit: \d+\.\d\d, (met|NOT met)",
        out,
        flags=re.M,
    ), out
    assert list(tmp_path.iterdir()) == []  # its temporary files are gone


def test_the_loop_benchmark_prints_ms_per_step_growth_and_the_floor(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "loop_steps.py"),
            "--dir",
            str(tmp_path),
            "--steps",
            "3",
            "6",
            "--rounds",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout

    langgraph = r"(\d+\.\d\d\s+\d+\.\d\d|not installed\s+-)"
    for steps in (3, 6):
        assert re.search(rf"^\s+{steps}\s+\d+\.\d\d\s+{langgraph}\s+\d+\.\d\d$", out, re.M), out
    assert re.search(r"^polyloop growth 6/3: \d+\.\d\d$", out, flags=re.M), out
    assert re.search(r"^two-fsync floor ms/step: \d+\.\d{3}$", out, flags=re.M), out
    for steps in (3, 6):  # each round's ratio to the floor, one per --rounds
        assert re.search(rf"^floor x per round at {steps}: \d+\.\d\d \d+\.\d\d$", out, re.M), out
    assert re.search(r"^targets \(.*\): (met|NOT met)$", out, flags=re.M), out
    assert list(tmp_path.iterdir()) == []  # its temporary files are gone


def test_the_loop_benchmark_refuses_zero_rounds_and_zero_steps() -> None:
    for bad in (["--rounds", "0"], ["--steps", "0", "5"]):
        done = subprocess.run(
            [sys.executable, str(ROOT / "benchmarks" / "loop_steps.py"), *bad],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 2, bad
        assert "must be at least 1" in done.stderr, bad


def test_the_long_run_benchmark_prints_us_per_step_and_growth() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "long_runs.py"), "--steps", "4", "8",
         "--rounds", "1"],
        capture_output=True, text=True, timeout=120, check=True, cwd=ROOT,
    ).stdout  # fmt: skip

    for steps in (4, 8):
        assert re.search(rf"^\s+{steps}\s+\d+\.\d\s+\d+\.\d\d$", out, flags=re.M), out
    assert re.search(r"^growth 8/4: \d+\.\d\d$", out, flags=re.M), out


def test_the_conformance_times_benchmark_times_each_implementation_alone() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "conformance_times.py"),
         "tests/contract/test_null_sink_contract.py",
         "tests/contract/test_memory_sink_contract.py"],
        capture_output=True, text=True, timeout=300, check=True, cwd=ROOT,
    ).stdout  # fmt: skip

    assert len(re.findall(r"^\s+\d+\.\d s  \S+  \(\d+ tests, exit 0\)$", out, flags=re.M)) == 2, out
    assert re.search(r"^implementations: 2, sum \d+\.\d s, whole job", out, flags=re.M), out
    assert re.search(r"^target: each under 10 s: slowest \d+\.\d s, (met|NOT met)$", out, re.M), out


def test_the_run_index_benchmark_prints_each_command_and_its_target(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "run_index.py"),
            "--dir",
            str(tmp_path),
            "--sizes",
            "20",
            "200",
            "--rounds",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout

    for command in ("runs --limit 20", "stats"):
        for size in ("20", "200"):
            assert re.search(rf"^{command}\s+{size}\s+\d+\.\d{{3}}\s+\d+\.\d{{4}}$", out, re.M), (
                command,
                out,
            )
        assert re.search(
            rf"^target: {command} <= 1 s at 200 runs and <= 2x its time at 20: "
            r"\d+\.\d{3} s, \d+\.\d\dx, (met|NOT met)$",
            out,
            flags=re.M,
        ), out
    assert "fixture: 200 runs written" in out


def test_the_instrumentation_benchmark_prints_each_contender_against_none() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "instrumentation_cost.py"), "--steps", "5",
         "--rounds", "2", "--baseline", str(ROOT)],
        capture_output=True, text=True, timeout=120, check=True, cwd=ROOT / "benchmarks",
    ).stdout  # fmt: skip

    assert re.search(r"^none\s+\d+\.\d\s+1\.00$", out, flags=re.M), out
    assert re.search(r"^null\s+\d+\.\d\s+\d+\.\d\d$", out, flags=re.M), out
    assert re.search(r"^otel\s+(\d+\.\d\s+\d+\.\d\d|not installed)$", out, flags=re.M), out
    for version in ("this code", "baseline"):  # --baseline: here the same checkout, as a smoke
        assert re.search(rf"^{version}\s+\d+\.\d$", out, flags=re.M), out
    assert re.search(r"^this code / baseline: \d+\.\d{3}$", out, flags=re.M), out


@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_the_batch_benchmark_prints_both_loops_and_the_ratio(tmp_path: Path, store: str) -> None:
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "batch_overhead.py"),
            "--runs",
            "20",
            "--rounds",
            "2",
            "--store",
            store,
            "--dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout

    name = "MemoryStore" if store == "memory" else "SQLiteStore in "
    assert out.startswith(f"20 runs of 2 steps, concurrency 8, {name}"), out
    assert re.search(r"^gather \+ semaphore over run\(\): \d+\.\d{3} s$", out, flags=re.M), out
    assert re.search(r"^run_many: +\d+\.\d{3} s$", out, flags=re.M), out
    assert re.search(r"^ratio per round: \d+\.\d\d \d+\.\d\d$", out, flags=re.M), out
    assert re.search(
        r"^target: run_many <= 1.1x the hand-written loop: \d+\.\d\d, (met|NOT met)$",
        out,
        flags=re.M,
    ), out
    assert list(tmp_path.iterdir()) == []  # its temporary files are gone


def test_the_concurrent_runs_benchmark_prints_runs_per_second_the_ratio_and_fsync(
    tmp_path: Path,
) -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "concurrent_runs.py"), "--dir", str(tmp_path),
         "--runs", "8", "--concurrency", "1", "4", "--rounds", "2"],
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout  # fmt: skip

    for level in (1, 4):
        assert re.search(rf"^\s+{level}\s+\d+\.\d$", out, flags=re.M), out
    assert re.search(r"^ratio 4/1: \d+\.\d\d$", out, flags=re.M), out
    assert re.search(r"^ratio 4/1 per round: \d+\.\d\d \d+\.\d\d$", out, flags=re.M), out
    assert re.search(r"^fsync ms \(write \+ fsync of 1 KB\): \d+\.\d{3}$", out, flags=re.M), out
    verdict = (
        r"^(target: 4 runs at once >= 2x the runs/s of 1: (met|NOT met)"
        r"|fsync is nearly free on this filesystem .*"
        r"the gain of group commit cannot be shown here)$"
    )
    assert len(re.findall(verdict, out, flags=re.M)) == 1, out
    assert list(tmp_path.iterdir()) == []  # its temporary files are gone


def test_the_concurrent_runs_benchmark_claims_no_gain_where_fsync_is_nearly_free(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))  # as when run as a script
    spec = importlib.util.spec_from_file_location(
        "concurrent_runs", ROOT / "benchmarks" / "concurrent_runs.py"
    )
    assert spec is not None
    assert spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    rates = {1: [100.0], 64: [900.0]}

    free = "\n".join(bench.report(rates, [0.004]))
    costly = "\n".join(bench.report(rates, [0.2]))

    assert "the gain of group commit cannot be shown here" in free
    assert "target" not in free
    assert "target: 64 runs at once >= 2x the runs/s of 1: met" in costly
    assert "cannot be shown" not in costly


def test_the_concurrent_runs_benchmark_refuses_bad_arguments() -> None:
    for bad in (["--runs", "0"], ["--rounds", "0"], ["--concurrency", "0", "4"]):
        done = subprocess.run(
            [sys.executable, str(ROOT / "benchmarks" / "concurrent_runs.py"), *bad],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert done.returncode == 2, bad
        assert "must be at least 1" in done.stderr, bad
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "concurrent_runs.py"), "--concurrency", "4"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "two different levels" in done.stderr


def _durable_ratios(monkeypatch: pytest.MonkeyPatch) -> object:
    spec = importlib.util.spec_from_file_location(
        "durable_ratios", ROOT / "benchmarks" / "durable_ratios.py"
    )
    assert spec is not None
    assert spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "durable_ratios", bench)  # its dataclasses look it up
    spec.loader.exec_module(bench)
    return bench


_RATIO_LINE = r"^{label}\s+\d+\.\d\d\s+>= [\d.]+\s+(met|NOT met)\s+[\d. ]+$"


@pytest.mark.postgres
def test_the_durable_ratios_benchmark_prints_each_ratio_and_its_verdict(
    tmp_path: Path, postgres_database_dsn: str
) -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "durable_ratios.py"), "--dir", str(tmp_path),
         "--runs", "6", "--slow-tasks", "8", "--slow-concurrency", "4", "--model-s", "0.01",
         "--rounds", "2", "--postgres-dsn", postgres_database_dsn],
        capture_output=True, text=True, timeout=180, check=True,
    ).stdout  # fmt: skip

    for label in (
        "SQLite@64 / MemoryStore@64",
        "SQLite@64 / SQLite@1",
        "slow model: SQLite / MemoryStore",
        "slow model: ProcessBackend 2 / 1 workers, SQLite",
        "PostgreSQL@64 / MemoryStore@64",
        "PostgreSQL@64 / PostgreSQL@1",
        "slow model: PostgreSQL / MemoryStore",
        "slow model: ProcessBackend 2 / 1 workers, PostgreSQL",
    ):
        assert re.search(_RATIO_LINE.format(label=re.escape(label)), out, flags=re.M), (label, out)
    assert re.search(r"^fsync ms \(write \+ fsync of 1 KB\): \d+\.\d{3}$", out, flags=re.M), out
    assert "scaled down from 20,000 / 5,000 / 1 s" in out
    if sys.platform == "linux":
        waits = (
            r"^slow sqlite 2 workers: worker processes on a CPU / waiting for one "
            r"\(s, per round\): "
        )
        assert re.search(waits + r"\d+\.\d / \d+\.\d, \d+\.\d / \d+\.\d$", out, re.M), out
    assert list(tmp_path.iterdir()) == []  # its temporary files are gone


def test_the_durable_ratios_benchmark_judges_each_target_and_skips_what_it_lacks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))  # as when run as a script
    bench: Any = _durable_ratios(monkeypatch)
    rates = {
        "memory@64": [1000.0, 1000.0],
        "sqlite@64": [800.0, 700.0],  # 0.80, 0.70: median 0.75, met
        "sqlite@1": [250.0, 100.0],  # 3.2, 7.0: median 5.1, met
        "slow memory": [3000.0, 3000.0],
        "slow sqlite": [1500.0, 1500.0],  # 0.5: NOT met
        "slow sqlite 1 worker": [1000.0, 1000.0],
        "slow sqlite 2 workers": [1650.0, 1750.0],  # median 1.7: met
    }
    lines = "\n".join(bench.report(rates, [1.0, 3.0], None, "tiny"))

    assert re.search(r"^SQLite@64 / MemoryStore@64\s+0\.75\s+>= 0\.75\s+met\s", lines, re.M)
    assert re.search(r"^SQLite@64 / SQLite@1\s+5\.10\s+>= 4\s+met\s", lines, re.M)
    assert re.search(r"^slow model: SQLite / MemoryStore\s+0\.50\s+>= 0\.75\s+NOT met", lines, re.M)
    assert re.search(r"2 / 1 workers, SQLite\s+1\.70\s+>= 1\.7\s+met\s", lines, re.M)
    assert len(re.findall(r"^.*PostgreSQL.*skipped\s+\(no PostgreSQL\)$", lines, re.M)) == 4
    assert "fsync ms (write + fsync of 1 KB): 2.000" in lines


def test_the_durable_ratios_benchmark_refuses_bad_arguments() -> None:
    for bad in (["--runs", "0"], ["--rounds", "0"], ["--slow-concurrency", "0"],
                ["--model-s", "-1"]):  # fmt: skip
        done = subprocess.run(
            [sys.executable, str(ROOT / "benchmarks" / "durable_ratios.py"), *bad],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert done.returncode == 2, bad


@pytest.mark.postgres
def test_the_postgres_ratios_benchmark_prints_every_ratio_and_says_langgraph_was_skipped(
    postgres_database_dsn: str,
) -> None:
    """``benchmarks/postgres_ratios.py`` runs without LangGraph (an optional benchmark
    dependency): its cases are skipped and the report says so; every ratio line is printed."""
    script = ROOT / "benchmarks" / "postgres_ratios.py"
    without_langgraph = (
        "import runpy, sys; sys.modules['langgraph'] = None; "  # importing it raises ImportError
        f"sys.path.insert(0, {str(script.parent)!r}); sys.argv = sys.argv[1:]; "
        "runpy.run_path(sys.argv[0], run_name='__main__')"
    )
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            without_langgraph,
            str(script),
            "--runs",
            "4",
            "--rounds",
            "1",
            "--no-processes",
            "--postgres-dsn",
            postgres_database_dsn,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert "skipped: LangGraph's AsyncPostgresSaver:" in out, out
    for label in ("PostgreSQL@64 / PostgreSQL@1", "PostgreSQL@64 / MemoryStore@64"):
        assert re.search(rf"^{re.escape(label)} +\d+\.\d\d +>= ", out, re.MULTILINE), out
    assert re.search(r"^PostgreSQL@64 / LangGraph saver@64 +skipped$", out, re.MULTILINE), out
    assert "round 1: load " in out
