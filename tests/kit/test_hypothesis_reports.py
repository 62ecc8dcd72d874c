"""Issue 37 §5: what a violation found inside a Hypothesis search says.

An event-sink failure printed Hypothesis's "Generating overly large repr" warning: the
falsifying example held the fixed 300 KiB step (and drawn events of up to 1 MiB), printed whole.
The kit's draws print as a summary that names each field and cuts long texts.
"""

from __future__ import annotations

import warnings

from hypothesis import given, settings
from hypothesis.errors import HypothesisWarning
from hypothesis.internal.reflection import repr_call
from hypothesis.vendor.pretty import pretty

from polyloop.testing._event_sink._suite import _DRAWN, _FIXED, _FIXED_EVENTS


def _promise(self: object, event_sink: object, events: object) -> None:
    """Stands for a promise Hypothesis calls with a drawn ``events``."""


def test_a_failing_event_sink_example_prints_short_and_without_a_warning() -> None:
    drawn = _FIXED_EVENTS  # accepts_every_event_kind's explicit example
    with warnings.catch_warnings():
        warnings.simplefilter("error", HypothesisWarning)  # "Generating overly large repr"
        said = repr_call(_promise, (None, "sink"), {"events": drawn})
    assert len(said) < 30_000, len(said)
    printed = pretty(drawn)  # "Failing test case: …" is printed this way
    assert len(printed) < 30_000
    assert "StepCompleted(step=StepRecord(step_index=" in printed
    assert "characters)" in printed  # the 300 KiB text, cut, says how long it was


@settings(max_examples=5, deadline=None, database=None)
@given(drawn=_DRAWN)
def test_the_delivery_draw_prints_short_too(drawn: object) -> None:
    from polyloop.testing._shared._shapes import Drawn, brief

    assert isinstance(drawn, Drawn)
    assert pretty(Drawn(_FIXED)) == brief(tuple(_FIXED))
