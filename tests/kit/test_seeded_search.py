"""The same code gets the same verdict (issue 37 §4.1): every Hypothesis search of the kit is
seeded from the promise id and the implementation, with or without ``CI``.

A suite's property-based promise is one function shared by every implementation's subclass.
Before, it drew at random outside CI (one implementation was caught in 3 of 6 runs), and under
CI ``derandomize`` seeded it from the function's source alone — every implementation got the same
draws. Here a suite of our own records its draws, and a breaker caught only by some draws
(``n % 5 == 0``) runs as eight implementations, twice, without and with ``CI``.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from tests.kit._sandbox import run_sandbox

_IMPLEMENTATIONS = 8

_BODY = """
from pathlib import Path

from hypothesis import given, strategies as st

from polyloop.testing import ContractBase, bounded_settings

DRAWS = Path(__file__).with_name("draws.txt")


class DrawSuite(ContractBase):
    seam = "draws"

    @bounded_settings(max_examples=4)
    @given(n=st.integers(min_value=1, max_value=2**40))
    async def test_caught_by_some_draws(self, n):
        \"\"\"A breaker caught only when a draw is a multiple of 5; the draws are recorded.\"\"\"
        with DRAWS.open("a") as file:
            file.write(f"{type(self).__name__} {n}\\n")
        assert n % 5, f"drew {n}"


""" + "".join(
    f"class TestImpl{index}(DrawSuite):\n    pass\n\n\n" for index in range(_IMPLEMENTATIONS)
)


def _run(pytester: pytest.Pytester) -> tuple[dict[str, str], dict[str, list[str]]]:
    draws_file = Path(pytester.path, "draws.txt")
    draws_file.unlink(missing_ok=True)
    outcomes = run_sandbox(pytester, _BODY)
    draws: dict[str, list[str]] = defaultdict(list)
    for line in draws_file.read_text().splitlines():
        name, value = line.split()
        draws[name].append(value)
    verdicts = {key[0]: got.outcome for key, got in outcomes.items()}
    return verdicts, dict(draws)


@pytest.mark.parametrize("ci", ["", "true"], ids=["without-CI", "under-CI"])
def test_two_runs_give_each_implementation_the_same_draws_and_verdict(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ci: str
) -> None:
    monkeypatch.setenv("CI", ci)
    first_verdicts, first_draws = _run(pytester)
    second_verdicts, second_draws = _run(pytester)

    assert len(first_verdicts) == _IMPLEMENTATIONS
    assert first_verdicts == second_verdicts
    assert first_draws == second_draws


def test_different_implementations_get_different_draws(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", "true")
    verdicts, draws = _run(pytester)

    assert len({tuple(values) for values in draws.values()}) == _IMPLEMENTATIONS, draws
    # The breaker is caught for some implementations and not for others: the draws decide.
    assert set(verdicts.values()) == {"passed", "failed"}, verdicts
