"""The OpenTelemetry how-to's example runs and prints the span tree the page shows."""

from __future__ import annotations

import re

from tests.conftest import require_extra
from tests.docs.test_docs_examples import ROOT, python_blocks, run_blocks

PAGE = ROOT / "docs" / "how-to" / "trace-with-opentelemetry.md"


def shown_output(text: str) -> list[str]:
    """The ``text`` block right after "It prints:"."""
    (block,) = re.findall(r"It prints:\n\n```text\n(.*?)```", text, flags=re.S)
    return str(block).splitlines()


def test_the_otel_howto_example_prints_the_span_tree_the_page_shows() -> None:
    require_extra("otel")
    # The example and the production set-up; the third, the batch's module, is saved by the
    # reader and run by tests/docs/test_how_tos_run_whole.py.
    *blocks, batch_module = python_blocks(PAGE)
    assert len(blocks) == 2
    assert "def seams(" in batch_module

    printed = run_blocks(blocks)

    assert printed.splitlines() == shown_output(PAGE.read_text(encoding="utf-8"))
    assert printed.splitlines()[:2] == ["handle request", "  invoke_agent shouter"]


def test_the_howto_pins_the_semantic_conventions_version_the_code_follows() -> None:
    require_extra("otel")
    from polyloop._telemetry._instrumentation import SEMCONV_VERSION

    text = PAGE.read_text(encoding="utf-8")
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")

    assert f"semantic conventions v{SEMCONV_VERSION}" in text
    assert f"semantic conventions v{SEMCONV_VERSION}" in changelog
