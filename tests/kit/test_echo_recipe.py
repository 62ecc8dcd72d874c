"""The echo recipe of the kit reference works for a code executor whose ``print`` ignores
``end`` (issue 30: ``print(text, end="")`` then ends every echo with a newline, and a correct
executor fails ``truncated_chars_counts_what_was_cut``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.kit._sandbox import run_sandbox

_PAGE = Path(__file__).parents[2] / "docs" / "reference" / "contract-kit.md"

_EXECUTOR = '''
import contextlib
import io
from polyloop import Action, ActionOutcome, ActionStatus


class SandboxPrintExecutor:
    """Runs Python code with a sandbox's own print, which collects lines and ignores end."""

    async def execute(self, action):
        out = io.StringIO()

        def sandbox_print(*values, sep=" ", end="\\\\n", file=None, flush=False):
            out.write(sep.join(str(value) for value in values) + "\\\\n")

        try:
            with contextlib.redirect_stdout(out):
                exec(action.text, {"print": sandbox_print})
        except Exception as error:
            out.write(f"{type(error).__name__}: {error}")
        return ActionOutcome(status=ActionStatus.EXECUTED, observation=out.getvalue())


class TestSandboxPrint(testing.ActionExecutorContract):
    @pytest.fixture
    def action_executor(self):
        return SandboxPrintExecutor()

    @pytest.fixture
    def action_samples(self):
        return testing.ActionSamples(
            executes_cleanly=Action(text="x = 1"),
            executes_but_errors=Action(text="1 / 0"),
            echo=ECHO,
        )
'''


def _recipe() -> str:
    page = _PAGE.read_text("utf-8")
    found = re.search(r"For a code executor, [^`]*`(echo=lambda text: [^`]*)`", page)
    assert found is not None, "the kit reference has no code-executor echo recipe"
    return found[1].removeprefix("echo=")


def test_the_references_echo_recipe_holds_for_an_executor_whose_print_ignores_end(
    pytester: pytest.Pytester,
) -> None:
    body = "from polyloop import Action\nECHO = " + _recipe() + "\n" + _EXECUTOR
    outcomes = run_sandbox(pytester, body, "-k", "truncated_chars_counts_what_was_cut")
    got = outcomes[("TestSandboxPrint", "test_truncated_chars_counts_what_was_cut")]
    assert got.outcome == "passed", got.longrepr


def test_the_old_print_recipe_fails_that_executor(pytester: pytest.Pytester) -> None:
    # What the reference used to say: the sandbox's print adds a newline to every echo.
    old = "lambda text: Action(text=f'print({text!r}, end=\"\")')"
    body = "from polyloop import Action\nECHO = " + old + "\n" + _EXECUTOR
    outcomes = run_sandbox(pytester, body, "-k", "truncated_chars_counts_what_was_cut")
    got = outcomes[("TestSandboxPrint", "test_truncated_chars_counts_what_was_cut")]
    assert got.outcome == "failed", got.longrepr
