"""docs/reference/models.md says what the bundled model clients do: its example runs, and the
retry arithmetic it states is the installed ``openai`` client's."""

from __future__ import annotations

import pytest

from tests.docs.test_docs_examples import ROOT, python_blocks, run_blocks

PAGE = ROOT / "docs" / "reference" / "models.md"


def test_the_scripted_model_example_prints_what_its_comment_says() -> None:
    first = python_blocks(PAGE)[0]
    assert "# first scripted-0" in first
    assert run_blocks([first]).strip() == "first scripted-0"


def test_the_retry_arithmetic_is_the_installed_clients() -> None:
    constants = pytest.importorskip("openai._constants")
    text = PAGE.read_text(encoding="utf-8")

    assert "min(0.5 × 2^n, 8)" in text
    assert (constants.INITIAL_RETRY_DELAY, constants.MAX_RETRY_DELAY) == (0.5, 8.0)
    assert "at most 120 s" in text
    assert constants.MAX_RETRY_AFTER_DELAY == 120
