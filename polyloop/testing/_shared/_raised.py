"""Which exceptions out of an implementation's call are its own, to be reported naming the call.

A probe reports what an implementation raised together with the call and the sample that made it
raise. ``except Exception`` is not enough: a ``SystemExit`` (``argparse`` on an unknown option,
a ``sys.exit`` in a tool's code) then reaches pytest bare, as ``SystemExit: 2``, and nobody can
tell which sample raised it. What must pass through untouched is an interrupt, a cancellation,
pytest's own outcomes and the kit's time limit.
"""

from __future__ import annotations

import asyncio

import pytest

from polyloop.testing._shared._time_limit import ProbeTimedOut

__all__ = ["PASS_THROUGH", "raised_by_the_implementation"]

#: Never the implementation's own error: let them through.
PASS_THROUGH: tuple[type[BaseException], ...] = (
    KeyboardInterrupt,
    GeneratorExit,
    asyncio.CancelledError,
    ProbeTimedOut,
    pytest.fail.Exception,
    pytest.skip.Exception,
    pytest.exit.Exception,
    pytest.xfail.Exception,
)


def raised_by_the_implementation(error: BaseException) -> bool:
    """Whether ``error``, raised out of a call into an implementation, is that call's own."""
    return not isinstance(error, PASS_THROUGH)
