"""Reference pages open with a short table of what they cover, and the runtime reference lists
the append rules of a ``RunStore`` where the seam is described, in the order the stores apply
them (issue #32 §6)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from polyloop import ModelCallIntent, Record, RunFinished, StopReason
from polyloop.errors import RunAlreadyExists, RunAlreadyFinished, RunConflict
from polyloop.stores._rules import check_append
from tests.unit._index_runs import started

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "docs" / "reference").glob("*.md"))


def _slug(heading: str) -> str:
    from markdown.extensions.toc import slugify  # type: ignore[import-untyped]

    return str(slugify(heading, "-"))


@pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
def test_a_reference_page_opens_with_a_table_of_every_section(page: Path) -> None:
    pytest.importorskip("markdown")
    text = page.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert lines[0].startswith("# ")
    opening = text.split("\n## ", 1)[0]
    assert "<!-- covers -->\n| section | what it covers |" in opening, page.name
    rows = re.findall(r"^\| \[(.+?)\]\(#([^)]+)\) \| (.+) \|$", opening, re.M)
    headings = re.findall(r"^## (.+)$", text, re.M)
    assert [title for title, _, _ in rows] == headings  # every section, in order
    for title, anchor, covers in rows:
        assert anchor == _slug(title), title
        assert covers.strip(), title


FINISHED = RunFinished(
    stop_reason=StopReason.AGENT_FINISHED,
    final_answer="a",
    executed_actions=0,
    finished_at="2026-01-01T00:00:00.000Z",
)
INTENT = ModelCallIntent(step_index=0, prompt_chars=1)
# (the rule's row in the table, an append that breaks it and every later rule when possible)
# (sequence, length, finished)
CASES: dict[int, tuple[Record, tuple[int, int, bool]]] = {
    1: (started("r"), (5, 1, True)),
    2: (INTENT, (5, 2, True)),
    3: (INTENT, (5, 0, False)),
    4: (INTENT, (0, 0, False)),
}
ERRORS = {
    "RunAlreadyExists": RunAlreadyExists,
    "RunAlreadyFinished": RunAlreadyFinished,
    "RunConflict": RunConflict,
}


def test_the_runtime_reference_lists_the_append_rules_in_the_order_stores_apply_them() -> None:
    text = (ROOT / "docs" / "reference" / "runtime.md").read_text(encoding="utf-8")
    seam = text.split("**The `RunStore` seam.**", 1)[1].split("**The inline commit**", 1)[0]
    table = re.findall(r"^\| (\d) \| (.+?) \| `(\w+)` \|$", seam, re.M)
    assert [int(number) for number, _, _ in table] == [1, 2, 3, 4]
    for number, _, error in table:
        record, (sequence, length, finished) = CASES[int(number)]
        with pytest.raises(ERRORS[error]):
            check_append("r", record, sequence=sequence, length=length, finished=finished)
