"""The conformance report format: one home for its schema, outcomes, reader and renderers.

``pytest --polyloop-conformance --polyloop-report PATH.json`` writes a report (schema
``polyloop-conformance/2``, described by the shipped ``report.schema.json``); this module reads
and checks one (:func:`load_report`, which also reads ``polyloop-conformance/1`` reports),
renders it as terminal text or Markdown and diffs two.
Standard library only, so it works where neither pytest nor the test kit is installed: the
plugin writes with it, ``polyloop report`` reads with it.

>>> from polyloop.report import OUTCOMES, SCHEMA
>>> SCHEMA, OUTCOMES[:3]
('polyloop-conformance/2', ('held', 'violated', 'setup_error'))
"""

from polyloop.report._diff import DELIBERATE, ReportDiff, diff_reports, render_diff
from polyloop.report._format import (
    GLYPHS,
    OUTCOMES,
    READABLE_SCHEMAS,
    SCHEMA,
    MergeError,
    Outcome,
    ReportError,
    load_report,
    outcomes_by_key,
    schema,
)
from polyloop.report._matrix import badge, render_html, render_matrix_markdown, render_matrix_text
from polyloop.report._merge import merge_reports
from polyloop.report._text import render_markdown, render_text

__all__ = [
    "DELIBERATE",
    "GLYPHS",
    "OUTCOMES",
    "READABLE_SCHEMAS",
    "SCHEMA",
    "MergeError",
    "Outcome",
    "ReportDiff",
    "ReportError",
    "badge",
    "diff_reports",
    "load_report",
    "merge_reports",
    "outcomes_by_key",
    "render_diff",
    "render_html",
    "render_markdown",
    "render_matrix_markdown",
    "render_matrix_text",
    "render_text",
    "schema",
]
