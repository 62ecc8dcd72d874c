"""Issue 37 §2: the kit compares what an implementation hands back by type and value.

``42 == 42.0 == True`` in Python, and a record, a row or a usage dict compares its fields with
``==``: a store whose index hands back ``42.0`` for the ``42`` in its log "agreed" with it. Every
comparison of an implementation's output goes through ``mismatch``, which walks nested values
and names the field and both values with their types.
"""

from __future__ import annotations

import dataclasses
import re
import textwrap

import pytest

from polyloop._base._run_index import summarize_log
from polyloop.testing._event_sink._suite import _delivery_problems
from polyloop.testing._run_store._index_probe import probe_calls, row_problems
from polyloop.testing._shared._shapes import mismatch
from polyloop.types import Event, ModelReplied, ModelReply, RunLog
from tests.kit._sandbox import run_sandbox


def test_a_float_for_an_int_inside_a_usage_dict_is_a_mismatch_naming_both_types() -> None:
    expected = ModelReplied(step_index=0, reply=ModelReply(text="hi", usage={"tokens": 42}))
    got = ModelReplied(step_index=0, reply=ModelReply(text="hi", usage={"tokens": 42.0}))
    assert expected == got  # what ``==`` alone said
    found = mismatch(expected, got, "record")
    assert found == "record.reply.usage['tokens']: expected int 42, got float 42.0"


@pytest.mark.parametrize(
    ("expected", "got", "said"),
    [
        ([1, True], [1, 1], "value[1]: expected bool True, got int 1"),
        ({"a": [0.0]}, {"a": [0]}, "value['a'][0]: expected float 0.0, got int 0"),
        (
            "straße",
            "strasse",
            "value: expected str 'straße', got str 'strasse' (first difference at code point "
            "4: U+00DF vs U+0073)",
        ),
        (
            "\u00e9",  # é, one code point (NFC)
            "e\u0301",  # é, two (NFD): equal to the eye, not to the reference
            "value: expected str '\u00e9', got str 'e\u0301' (first difference at code point 0: "
            "U+00E9 vs U+0065)",
        ),
        ({1: "x"}, {True: "x"}, "value: expected keys [int 1], got keys [bool True]"),
        ({"a": 1}, {"b": 1}, "value: expected keys [str 'a'], got keys [str 'b']"),
    ],
)
def test_each_mismatch_names_the_field_and_both_values_with_their_types(
    expected: object, got: object, said: str
) -> None:
    assert mismatch(expected, got, "value") == said


def test_equal_values_of_equal_types_agree_nan_included() -> None:
    value = {"a": [1, 2.5, True, None, "x", float("nan")], "b": {"c": ()}}
    assert (
        mismatch(value, {"a": [1, 2.5, True, None, "x", float("nan")], "b": {"c": ()}}, "v") is None
    )


def test_an_index_row_with_a_float_for_an_int_of_its_log_disagrees() -> None:
    calls, _, finish = probe_calls("run-exact")
    log = RunLog(records=(*(record for batch in calls for record in batch), finish))
    row = summarize_log("run-exact", log)
    assert row is not None
    as_real = dataclasses.replace(row, usage={k: float(v) for k, v in row.usage.items()})
    assert as_real == row  # what ``==`` alone said
    problems = row_problems(as_real, log, "run-exact", "after the finish")
    assert problems, "a row with 406.0 for the log's 406 agreed with it"
    assert "(usage['prompt_tokens']: expected int 406, got float 406.0)" in problems[0]


def test_an_index_handing_back_floats_is_caught_and_its_json_twin_is_clean(
    pytester: pytest.Pytester,
) -> None:
    body = "from tests.kit import broken_stores\n" + "".join(
        textwrap.dedent(f"""
            class Test{name}(testing.RunStoreContract):
                @pytest.fixture
                def run_store(self):
                    return broken_stores.{name}()
            """)
        for name in ("IndexUsageInRealColumn", "IndexUsageAsJsonText")
    )
    outcomes = run_sandbox(pytester, body, "-k", "index_agrees_with_log")
    caught = outcomes[("TestIndexUsageInRealColumn", "test_index_agrees_with_log")]
    assert caught.outcome == "failed", caught
    said = r"usage\['\w+_tokens'\]: expected int (406|28), got float (406|28)\.0"
    assert re.search(said, caught.longrepr), caught.longrepr
    twin = outcomes[("TestIndexUsageAsJsonText", "test_index_agrees_with_log")]
    assert twin.outcome == "passed", twin.longrepr


def _event(sequence: object, tokens: object) -> Event:
    reply = ModelReply(text="hi", usage={"tokens": tokens})  # type: ignore[dict-item]
    return Event(run_id="r", sequence=sequence, record=ModelReplied(step_index=0, reply=reply))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("delivered", "said"),
    [
        (
            _event(1, 42.0),
            "run r sequence 1.record.reply.usage['tokens']: expected int 42, got float 42.0",
        ),
        (_event(True, 42), "run r sequence True.sequence: expected int 1, got bool True"),
    ],
)
def test_an_event_delivered_with_a_float_or_a_bool_for_an_int_is_delivered_changed(
    delivered: Event, said: str
) -> None:
    problems = _delivery_problems([_event(1, 42)], [delivered])
    assert problems == [f"1 events were delivered changed; first: {said}"]
