"""The batch command's signals: the first drains, the second stops at once, the others are
ignored — at the C level from the second one on (and once an interrupted batch ends), so a late
Ctrl-C cannot kill the process while it shuts down (it did: three SIGINTs 5 ms apart ended the
process with -SIGINT after its summary, because Python resets its own handlers to the default
at exit).

Changed with the drain: the first signal used to turn both signals into ``SIG_IGN`` at once;
now the handler stays until the second, which must reach the batch to stop it at once."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator

import pytest

from polyloop.cli._batch import _Signals


@pytest.fixture(autouse=True)
def restored() -> Iterator[None]:
    previous = {n: signal.getsignal(n) for n in (signal.SIGINT, signal.SIGTERM)}
    yield
    for number, handler in previous.items():
        signal.signal(number, handler)


def test_the_first_signal_is_the_one_kept_and_both_are_ignored_after_the_second() -> None:
    signals = _Signals()
    signal.signal(signal.SIGINT, signals.handle)
    signal.signal(signal.SIGTERM, signals.handle)
    signals.handle(signal.SIGTERM, None)
    assert signal.getsignal(signal.SIGINT) == signals.handle  # the second must still count
    signals.handle(signal.SIGINT, None)
    assert signals.caught is signal.SIGTERM
    assert signals.again
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN  # survives interpreter shutdown
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN


def test_a_signal_before_the_batch_runs_interrupts_it_as_soon_as_it_starts() -> None:
    signals = _Signals()
    signals.handle(signal.SIGINT, None)

    async def started() -> bool:
        event = asyncio.Event()
        signals.interrupt_on(event)
        return event.is_set()

    assert asyncio.run(started())


def test_a_signal_while_it_runs_wakes_the_loop() -> None:
    signals = _Signals()

    async def interrupted() -> bool:
        event = asyncio.Event()
        signals.interrupt_on(event)
        asyncio.get_running_loop().call_later(0.01, signals.handle, signal.SIGINT, None)
        await asyncio.wait_for(event.wait(), 5)
        return event.is_set()

    assert asyncio.run(interrupted())
    assert signals.caught is signal.SIGINT


def test_the_second_signal_stops_at_once() -> None:
    signals = _Signals()

    async def stopped() -> tuple[bool, bool]:
        drain, stop_now = asyncio.Event(), asyncio.Event()
        signals.interrupt_on(drain, stop_now)
        loop = asyncio.get_running_loop()
        loop.call_later(0.01, signals.handle, signal.SIGINT, None)
        await asyncio.wait_for(drain.wait(), 5)
        early = stop_now.is_set()
        loop.call_later(0.01, signals.handle, signal.SIGINT, None)
        await asyncio.wait_for(stop_now.wait(), 5)
        return early, stop_now.is_set()

    assert asyncio.run(stopped()) == (False, True)


def test_a_signal_after_the_loop_closed_is_ignored() -> None:
    signals = _Signals()

    async def nothing() -> None:
        signals.interrupt_on(asyncio.Event())

    asyncio.run(nothing())  # the loop is closed now
    signal.signal(signal.SIGINT, signals.handle)
    os.kill(os.getpid(), signal.SIGINT)  # first: recorded, the closed loop is not touched
    os.kill(os.getpid(), signal.SIGINT)  # later ones: ignored, no KeyboardInterrupt
    assert signals.caught is signal.SIGINT
