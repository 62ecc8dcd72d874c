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

The boundary catalogue — the values real code breaks on, which the contract suites sweep
explicitly wherever they feed content, sizes or counts to an implementation — is here too, for
your own tests (loop over a tuple, or give its values as ``@example``, to meet every one):

* :data:`BOUNDARY_NUMBERS` and :data:`BOUNDARY_NUMBER_TEXTS` — ``0``, ``-0.0``, ``±1``, the
  edges of 32-, 53-, 63- and 64-bit integers, integers just under and over
  :data:`INT_DIGIT_LIMIT` digits (``sys.get_int_max_str_digits()``), ``NaN``, ``±Infinity``,
  ``1e308``, ``5e-324``; as text also exponents, leading zeros, numbers written as strings and
  ``true``/``false`` beside ``1``/``0``;
* :data:`BOUNDARY_TEXTS` — empty and whitespace-only text, lone surrogates, characters whose
  case mapping changes the length (:data:`CASE_CHANGING_TEXT`: ``ß``, ``ﬁ``, ``İ``), combining
  and NFC/NFD pairs, zero-width and bidi marks, NUL and control characters, CR, LF, CRLF,
  U+2028/U+2029, a BOM, astral characters, words other formats read as keywords, dates or
  numbers (``yes``, ``off``, ``null``, ``0x1F``, ``1_000``) and format characters (``{0}``,
  ``%s``, ``$x``);
* structure — :func:`nesting_depths` (1, and just under, at and over 32, 64, 100, 128, 256,
  512, 1 000 and the recursion limit), :func:`nested_json` and :func:`nested_value` (built
  without recursion), :data:`EMPTY_CONTAINERS`, :data:`DUPLICATE_KEYS_JSON`, :func:`many_keys`;
* :data:`BOUNDARY_COUNTS` (0, 1, around 64, 100, 128, 256, 500, 1 000, 1 024, 4 096, 10 000)
  and :data:`BOUNDARY_BYTE_SIZES` (around 2, 4, 8, 16, 64 KiB and 1 MiB);
* :data:`BOUNDARY_TIMES` — either side of daylight-saving changes, a leap day, 2038-01-19,
  the far past and future, offsets of ±14 h;
* strategies that draw each catalogue often and the rest of the type as well:
  :func:`boundary_numbers`, :func:`boundary_texts`, :func:`boundary_counts`,
  :func:`boundary_byte_sizes`, :func:`boundary_times`. :func:`texts`, :func:`record_texts`,
  :func:`counts`, :func:`timestamps` and the JSON values draw from the catalogue too.

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

from polyloop.testing._shared._boundaries import (
    BOUNDARY_BYTE_SIZES,
    BOUNDARY_COUNTS,
    BOUNDARY_NUMBER_TEXTS,
    BOUNDARY_NUMBERS,
    BOUNDARY_TEXTS,
    BOUNDARY_TIMES,
    CASE_CHANGING_TEXT,
    DUPLICATE_KEYS_JSON,
    EMPTY_CONTAINERS,
    INT_DIGIT_LIMIT,
    boundary_byte_sizes,
    boundary_counts,
    boundary_numbers,
    boundary_texts,
    boundary_times,
    digits,
    many_keys,
    nested_json,
    nested_value,
    nesting_depths,
)
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
    "BOUNDARY_BYTE_SIZES",
    "BOUNDARY_COUNTS",
    "BOUNDARY_NUMBERS",
    "BOUNDARY_NUMBER_TEXTS",
    "BOUNDARY_TEXTS",
    "BOUNDARY_TIMES",
    "CASE_CHANGING_TEXT",
    "DUPLICATE_KEYS_JSON",
    "EMPTY_CONTAINERS",
    "FIELD_TEXTS",
    "INT_DIGIT_LIMIT",
    "LINE_ENDINGS",
    "MAX_LONG_TEXT_BYTES",
    "NASTY_TEXTS",
    "action_intent_records",
    "action_outcomes",
    "action_statuses",
    "actions",
    "agent_definitions",
    "big_records",
    "boundary_byte_sizes",
    "boundary_counts",
    "boundary_numbers",
    "boundary_texts",
    "boundary_times",
    "budgets",
    "counts",
    "digits",
    "events",
    "final_answers",
    "invalid_decisions",
    "json_objects",
    "json_values",
    "long_reply_texts",
    "long_texts",
    "many_keys",
    "messages",
    "model_call_intent_records",
    "model_replied_records",
    "model_replies",
    "nested_json",
    "nested_value",
    "nesting_depths",
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
