"""The base every part stands on: one module per shared rule, standard library only.

How values are written and read (``_canonical_json``, ``_utf8_json``, ``_codec``), which run ids
and tool schemas are valid (``_run_id``, ``_schema``), the run index's data and its rules
(``_run_index``: the seam's ``RunQuery``/``RunSummary``/``RunStats`` and how records make a row),
how a value or an exception is shown to a person (``_shown``, ``_exception_text``), and the
runtime's small shared rules (``_timeout``, ``_closing``, ``_extras``). Nothing here imports any
other part of polyloop except ``polyloop.types``/``polyloop.errors``/``polyloop.tools``.
"""
