"""The how-to guide's worked example is real: its code is the example folder, and it passes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from polyloop.testing import parse_skip_reason
from tests.kit._sandbox import SANDBOX_ARGS

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "how-to" / "conformance-by-subclassing.md"
EXAMPLE = ROOT / "examples" / "conformance_by_subclassing"
FILE_BLOCK = re.compile(r"<!-- file: (?P<path>\S+) -->\n```python\n(?P<code>.*?)```\n", re.DOTALL)


def _guide_blocks() -> dict[str, str]:
    return {m["path"]: m["code"] for m in FILE_BLOCK.finditer(GUIDE.read_text("utf-8"))}


def test_the_guide_shows_every_example_file_verbatim() -> None:
    blocks = _guide_blocks()
    example_files = sorted(
        str(p.relative_to(ROOT)) for p in EXAMPLE.glob("*.py") if p.name != "__init__.py"
    )
    assert sorted(blocks) == example_files
    for path, code in blocks.items():
        assert code == (ROOT / path).read_text("utf-8"), f"{GUIDE.name} shows an old {path}"


def test_the_worked_example_keeps_every_promise_it_claims(pytester: pytest.Pytester) -> None:
    for path in EXAMPLE.glob("*.py"):
        pytester.makepyfile(**{path.stem: path.read_text("utf-8")})
    result = pytester.runpytest_inprocess(*SANDBOX_ARGS, "-rs")
    result.assert_outcomes(passed=30, skipped=2)
    assert "30 passed, 2 skipped" in GUIDE.read_text("utf-8")
    skips = [
        parse_skip_reason(line) or {} for line in result.outlines if line.startswith("SKIPPED")
    ]
    assert [parts.get("outcome") for parts in skips] == ["unverifiable", "unverifiable"]
    # One is the executor's environment (the calculator has none), one is kept by polyloop.
    assert sorted("kept_by" in parts for parts in skips) == [False, True]


def test_the_example_store_bug_the_guide_describes_is_caught(pytester: pytest.Pytester) -> None:
    calculator = (EXAMPLE / "calculator.py").read_text("utf-8")
    fixed = 'lines = self._committed(run_id).decode("utf-8").split("\\n")'
    assert fixed in calculator
    broken = 'lines = self._committed(run_id).decode("utf-8").splitlines()'
    pytester.makepyfile(
        calculator=calculator.replace(fixed, broken),
        test_calculator_conformance=(EXAMPLE / "test_calculator_conformance.py").read_text("utf-8"),
    )
    # The bug needs U+2028 or U+0085 in a record; a fixed seed makes meeting one certain.
    result = pytester.runpytest_inprocess(
        *SANDBOX_ARGS,
        "-k",
        "TestJsonLinesStore and round_trips",
        "--hypothesis-seed=0",
    )
    result.assert_outcomes(failed=1)
    assert "Draw 1 (records)" in result.stdout.str()


def test_the_example_parser_bug_the_guide_describes_is_caught(pytester: pytest.Pytester) -> None:
    calculator = (EXAMPLE / "calculator.py").read_text("utf-8")
    fix = calculator[calculator.index("        except RecursionError:") :]
    fix = fix[: fix.index("\n        if not isinstance(args, dict)") + 1]
    pytester.makepyfile(
        calculator=calculator.replace(fix, ""),
        test_calculator_conformance=(EXAMPLE / "test_calculator_conformance.py").read_text("utf-8"),
    )
    result = pytester.runpytest_inprocess(*SANDBOX_ARGS, "-k", "TestCallParser and never_raises")
    result.assert_outcomes(failed=1)
    assert "parse() raised RecursionError" in result.stdout.str()
    assert "parse() raised RecursionError" in GUIDE.read_text("utf-8")
