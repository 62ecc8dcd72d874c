"""The same code gets the same verdict: run the main job and the crash-sensitive breakers N times
and compare every outcome (issue 37 §4).

    python scripts/verdicts_ten_times.py                  ten rounds of everything below
    python scripts/verdicts_ten_times.py -n 2 --seam run_store --kit-k crash_probe_words

Each round runs, one after another, from the repository root (``PYTHONPATH`` set to it):

* **main** — the main job, ``pytest --polyloop-conformance tests/contract examples
  --polyloop-report R.json -p no:randomly`` (``--main PATH`` and ``--seam NAME`` narrow it):
  one outcome per (implementation, promise) from the report;
* **breakers** — the crash-sensitive breakers of ``tests/kit`` and their correct twins as
  implementations of their own (a generated module of ``RunStoreContract`` subclasses, run with
  plain pytest), judged on ``atomic_append``, ``prefix_durability``,
  ``rejects_out_of_order_sequence`` and ``concurrent_appends_to_distinct_runs``: one outcome per
  (breaker, promise);
* **kit** — the tests of ``tests/kit`` whose names involve atomic, prefix, crash, out_of_order
  or concurrent (``--kit-k`` replaces the expression): one outcome per test, from JUnit XML
  (each of them judges many breakers at once, and fails when one of them changes its verdict).

Then it prints each round's wall time, every key whose outcome differed between rounds (with
each round's outcome), and exits 1 if any did (2 if a round could not be read at all). The
machine is shared: ten rounds of everything take a long while — see ``-n`` and the filters.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
Outcomes = dict[str, str]

KIT_TESTS = "atomic or prefix or crash or out_of_order or concurrent"
PROMISES = (
    "atomic_append",
    "prefix_durability",
    "rejects_out_of_order_sequence",
    "concurrent_appends_to_distinct_runs",
)
#: (module of tests/kit, class, built on a directory and named as the crash probe's factory)
BREAKERS = (
    ("broken_stores", "LineFileStore", True),
    ("broken_stores", "ChunkedLineFileStore", True),
    ("broken_stores", "BatchOneRecordAtATime", True),
    ("broken_stores", "ChunkedReadsEveryLine", True),
    ("broken_stores", "ChunkedSkipsTornLines", True),
    ("broken_stores", "OneProcessAtATime", True),
    ("broken_axes", "ProcessWideLogCache", True),
    ("broken_axes", "ProcessWideFence", True),
    ("broken_stores", "MemoryStore", False),
    ("broken", "LosesConcurrentAppends", False),
    ("broken", "IgnoresSequence", False),
    ("broken", "SecondStartReplacesLog", False),
    ("broken", "FirstAppendUnfenced", False),
)


def _env() -> dict[str, str]:
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{path}" if path else str(ROOT)}


def _pytest(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider", *args],
        cwd=cwd, env=_env(), capture_output=True, text=True, check=False,
    )  # fmt: skip


def main_job(paths: list[str], seams: list[str]) -> Outcomes:
    """One run of the main job: ``implementation × promise`` → outcome."""
    with tempfile.TemporaryDirectory(prefix="verdicts-main-") as directory:
        report = Path(directory) / "R.json"
        narrow = [arg for seam in seams for arg in ("--polyloop-seam", seam)]
        done = _pytest(
            ["--polyloop-conformance", *paths, "--polyloop-report", str(report), "-q", *narrow],
            ROOT,
        )
        if not report.exists():
            raise RuntimeError(f"the main job wrote no report:\n{done.stdout[-3000:]}")
        data = json.loads(report.read_text(encoding="utf-8"))
    return {
        f"{entry['id']} × {promise['id']}": promise["outcome"]
        for entry in data["implementations"]
        for promise in entry["promises"]
    }


def _breaker_module() -> str:
    classes = []
    for module, name, on_directory in BREAKERS:
        if on_directory:
            classes.append(f"""
                class Test{name}(testing.RunStoreContract):
                    @pytest.fixture
                    def run_store(self, tmp_path):
                        return {module}.{name}(tmp_path)

                    @pytest.fixture
                    def store_samples(self):
                        return testing.StoreSamples(factory="tests.kit.{module}:{name}")
                """)
        else:
            classes.append(f"""
                class Test{name}(testing.RunStoreContract):
                    @pytest.fixture
                    def run_store(self):
                        return {module}.{name}()
                """)
    header = "import pytest\nfrom polyloop import testing\n"
    header += "from tests.kit import broken, broken_axes, broken_stores\n"
    return header + "".join(textwrap.dedent(source) for source in classes)


def _junit(path: Path, key: Callable[[ElementTree.Element], str]) -> Outcomes:
    outcomes: Outcomes = {}
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        kinds = [child.tag for child in case]
        outcome = next(
            (k for k in ("failure", "error", "skipped") if k in kinds), "passed"
        ).replace("failure", "failed")
        outcomes[key(case)] = outcome
    return outcomes


def breakers(selected: list[str]) -> Outcomes:
    """The crash-sensitive breakers and twins as implementations: ``breaker × promise``."""
    with tempfile.TemporaryDirectory(prefix="verdicts-breakers-") as directory:
        here = Path(directory)
        (here / "test_breakers.py").write_text(_breaker_module(), encoding="utf-8")
        junit = here / "junit.xml"
        args = ["-q", "-o", "asyncio_default_fixture_loop_scope=function", "-p", "no:polyloop"]
        _pytest([*args, "-k", " or ".join(selected), f"--junitxml={junit}", "."], here)
        if not junit.exists():
            raise RuntimeError("the breakers' run wrote no JUnit XML")

        def key(case: ElementTree.Element) -> str:
            name = case.get("name", "").removeprefix("test_")
            return f"{case.get('classname', '').rpartition('.')[2]} × run_store.{name}"

        return _junit(junit, key)


def kit_tests(expression: str) -> Outcomes:
    """The selected tests of tests/kit: ``node id`` → outcome."""
    with tempfile.TemporaryDirectory(prefix="verdicts-kit-") as directory:
        junit = Path(directory) / "junit.xml"
        _pytest(["-q", "tests/kit", "-k", expression, f"--junitxml={junit}"], ROOT)
        if not junit.exists():
            raise RuntimeError("the tests/kit run wrote no JUnit XML")
        return _junit(junit, lambda case: f"{case.get('classname')}::{case.get('name')}")


def differences(rounds: list[Outcomes]) -> list[str]:
    """Every key whose outcome is not the same in every round, with the outcome of each."""
    keys = sorted(set().union(*rounds))
    lines = []
    for key in keys:
        seen = [outcomes.get(key, "(absent)") for outcomes in rounds]
        if len(set(seen)) > 1:
            lines.append(f"  {key}: " + ", ".join(f"{n + 1}={o}" for n, o in enumerate(seen)))
    return lines


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", "--rounds", type=int, default=10, help="rounds (default 10)")
    parser.add_argument(
        "--main", nargs="*", default=["tests/contract", "examples"], metavar="PATH",
        help="the main job's paths (default tests/contract examples; none: skip the main job)",
    )  # fmt: skip
    parser.add_argument("--seam", action="append", default=[], help="main job: only this seam")
    parser.add_argument(
        "--kit-k", default=KIT_TESTS, help=f"tests/kit -k expression (default {KIT_TESTS!r})"
    )
    parser.add_argument("--no-kit", action="store_true", help="skip the tests/kit tests")
    parser.add_argument(
        "--promise", action="append", default=[], choices=PROMISES,
        help="breakers: only this promise (repeatable; default all four)",
    )  # fmt: skip
    parser.add_argument("--no-breakers", action="store_true", help="skip the breakers")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    options = _arguments(argv)
    jobs: dict[str, Callable[[], Outcomes]] = {}
    if options.main:
        jobs["main"] = lambda: main_job(options.main, options.seam)
    if not options.no_breakers:
        jobs["breakers"] = lambda: breakers(options.promise or list(PROMISES))
    if not options.no_kit:
        jobs["kit"] = lambda: kit_tests(options.kit_k)
    results: dict[str, list[Outcomes]] = {name: [] for name in jobs}
    for number in range(1, options.rounds + 1):
        for name, job in jobs.items():
            started = time.perf_counter()
            try:
                outcomes = job()
            except RuntimeError as error:
                print(f"round {number} {name}: {error}", file=sys.stderr)
                return 2
            results[name].append(outcomes)
            took = time.perf_counter() - started
            print(f"round {number} {name}: {len(outcomes)} outcomes in {took:.1f} s", flush=True)
    found = False
    for name, rounds in results.items():
        lines = differences(rounds)
        found = found or bool(lines)
        verdict = f"{len(lines)} differ" if lines else "identical"
        print(f"{name}: {len(rounds[0])} outcomes × {len(rounds)} rounds: {verdict}")
        print("\n".join(lines)) if lines else None
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
