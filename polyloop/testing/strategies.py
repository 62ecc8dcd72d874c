"""Public Hypothesis strategies for every polyloop value type, record and event.

Use them in your own tests of an implementation (``from polyloop.testing import strategies as
pst``); the contract suites use the same ones. Every strategy leans towards the values that
break serialisation and comparisons in practice:

* ``0`` next to ``None``, ``""`` next to ``None`` (a store that maps one onto the other loses
  information a resume needs: ``step_index=0`` is the first step, ``call_id=None`` is "no id");
* control characters (``\\x00``, ``\\x1b``, ``\\r``), zero-width and right-to-left marks, astral
  characters (emoji, mathematical letters). :func:`texts` never draws a lone surrogate (a
  parser's or a model's input is text); every text field of a *record or an event* does
  (:func:`record_texts`), since Python strings and JSON carry them and a run records them
  (``bytes.decode(errors="surrogateescape")`` makes one of a stray byte);
* CJK, emoji sequences, combining marks and astral planes in record and event fields, and events
  of up to 1 MiB (:func:`long_texts`: built from drawn pieces, since Hypothesis caps one draw);
* long text and large integers (``2**53 + 1`` is not representable as a double; ``2**63 - 1`` is
  the largest SQL ``BIGINT``).

Integers in records are kept in ``0 … 2**63 - 1`` and floats in JSON data are exact binary
fractions, so every value here has one faithful representation in JSON, SQLite and PostgreSQL.

Reply and text strategies for parsers (what a model can really send, lone surrogates included —
a ``str`` can hold one, and a reply decoded with ``errors="surrogateescape"`` does):

* :func:`wild_texts` — any ``str``: CJK, emoji sequences, combining marks, astral characters,
  control characters, mixed line endings (:data:`LINE_ENDINGS`) and lone surrogates;
* :func:`long_reply_texts` — such text well past 64 KiB (Hypothesis caps one draw, so it is
  built by repeating drawn pieces), and runs of one opener (``[[[…``) nested deeper than any
  recursion;
* :func:`wild_model_replies` — replies with wild text in every string field;
* :func:`replies_around` — variants of replies in *your* format: several calls in one reply,
  words swapped, line endings swapped, nasty text spliced in or around, long padding.

Example, a test of your own parser::

    from hypothesis import given
    from polyloop import ModelReply
    from polyloop.testing import strategies as pst

    SAMPLE = ModelReply(text='CALL add {"a": 1, "b": 2}')

    @given(reply=pst.replies_around(SAMPLE))
    def test_parse_is_total(reply):
        MyParser().parse(reply)  # must return a decision, never raise
"""

from __future__ import annotations

from polyloop.testing._shared._draw_replies import (
    replies_around,
    wild_model_replies,
)
from polyloop.testing._shared._draw_texts import (
    FIELD_TEXTS,
    LINE_ENDINGS,
    MAX_LONG_TEXT_BYTES,
    NASTY_TEXTS,
    counts,
    long_reply_texts,
    long_texts,
    non_empty_texts,
    optional_texts,
    record_texts,
    run_ids,
    texts,
    timestamps,
    wild_texts,
)
from polyloop.testing._shared._draw_values import (
    action_intent_records,
    action_outcomes,
    action_statuses,
    actions,
    agent_definitions,
    big_records,
    budgets,
    events,
    final_answers,
    invalid_decisions,
    json_objects,
    json_values,
    messages,
    model_call_intent_records,
    model_replied_records,
    model_replies,
    parsed_replies,
    records,
    run_finished_records,
    run_log_objects,
    run_logs,
    run_results,
    run_started_records,
    step_completed_records,
    step_records,
    stop_reasons,
    synthetic_observations,
    tools,
    usage_numbers,
)

__all__ = [
    "FIELD_TEXTS",
    "LINE_ENDINGS",
    "MAX_LONG_TEXT_BYTES",
    "NASTY_TEXTS",
    "action_intent_records",
    "action_outcomes",
    "action_statuses",
    "actions",
    "agent_definitions",
    "big_records",
    "budgets",
    "counts",
    "events",
    "final_answers",
    "invalid_decisions",
    "json_objects",
    "json_values",
    "long_reply_texts",
    "long_texts",
    "messages",
    "model_call_intent_records",
    "model_replied_records",
    "model_replies",
    "non_empty_texts",
    "optional_texts",
    "parsed_replies",
    "record_texts",
    "records",
    "replies_around",
    "run_finished_records",
    "run_ids",
    "run_log_objects",
    "run_logs",
    "run_results",
    "run_started_records",
    "step_completed_records",
    "step_records",
    "stop_reasons",
    "synthetic_observations",
    "texts",
    "timestamps",
    "tools",
    "usage_numbers",
    "wild_model_replies",
    "wild_texts",
]
