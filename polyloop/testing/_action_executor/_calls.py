"""How the action-executor suite calls an executor: bounded calls and hooks, call sequences,
the echo ladder and the checks of a cut observation."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn

import pytest

from polyloop._base._exception_text import exception_text
from polyloop.ports import ActionExecutor
from polyloop.testing._shared._base import (
    UnusableSamples,
    require_samples,
    require_seam,
)
from polyloop.testing._shared._raised import raised_by_the_implementation
from polyloop.testing._shared._samples import ActionSamples
from polyloop.testing._shared._shapes import (
    SHORT,
    action_outcome_problems,
    short,
)
from polyloop.testing._shared._skips import unverifiable
from polyloop.types import Action, ActionOutcome, ActionStatus

__all__ = [
    "CALL_BOUND_S",
    "ECHO_AGAIN_UP_TO",
    "ECHO_ALPHABET",
    "ECHO_LADDER",
    "ECHO_LENGTHS",
    "ENV_ERROR_BOUND_S",
    "LIBRARY_TESTS",
    "SEQUENCE_ROUNDS",
    "SIGNATURE",
    "STATUS_PROMISE",
    "TRIGGERS",
    "CallSequence",
    "Named",
    "RaisedInCall",
    "bounded_call",
    "bounded_hook",
    "call_after_break",
    "check_cut",
    "common_head",
    "echo_text",
    "execute",
    "failing",
    "history",
    "no_keeps_printing",
    "refused",
    "require_action",
    "require_status",
    "shown_characters",
    "status_sequence",
]


LIBRARY_TESTS = "polyloop's own loop tests"


TRIGGERS = (
    "execute() reports executed when the action ran (even if it failed), not_executed "
    "when it never entered execution, env_error when the environment is broken"
)


# How long a broken environment may take to be noticed: an executor's own timeouts decide it,
# this only keeps a hanging executor from hanging the suite.
ENV_ERROR_BOUND_S = 60.0


# The bound on one execute() or one hook in the call sequences: a leaked lock or pool slot must
# make call N a violation, not a hung session.
CALL_BOUND_S = 60.0


# Rounds of the one-executor call sequence, each in a drawn order, after every sample twice
# back to back: a pool of up to this many sessions that leaks one per failing call runs dry
# within the sequence.
SEQUENCE_ROUNDS = 8


# Echoed text lengths when the sample gives no cap: the no-cut path is checked for truth.
ECHO_LENGTHS = (0, 1, 200, 4099)


# Echoed always (issue 30, size): 0, 1 and just under, at and over the page, buffer and cap
# sizes common in real code — a cap nobody declared, a pipe read once, a marker added at the cap.
ECHO_LADDER = tuple(
    n + d for n in (64, 100, 128, 256, 1000, 1024, 4096, 16384, 65536) for d in (-1, 0, 1)
)


# Echoed again, longest first, after the rising pass (issue 30, sequence): a shorter output
# after a longer one on the same executor shows a reused buffer's stale tail.
ECHO_AGAIN_UP_TO = 4_097


# The echoed text: non-ASCII code points only (CJK, Cyrillic, Latin-1, a combining mark, astral
# emoji), so a count in bytes or UTF-16 units differs from one in characters, and no truncation
# marker (ASCII in practice) can be mistaken for a shown character of the text.
ECHO_ALPHABET = "漢дé😀字ж\u0301ü🙂ß語𝔸ñ"


Named = tuple[str, Action]


SIGNATURE = "async execute(action) -> ActionOutcome"


async def execute(executor: ActionExecutor, samples: object, which: str) -> ActionOutcome:
    require_seam(executor, "action_executor", "execute", SIGNATURE)
    checked = require_samples(samples, ActionSamples, "action_samples")
    where = f"execute(action_samples.{which})"
    return await bounded_call(executor, getattr(checked, which), where)


def require_action(value: object, what: str) -> None:
    if not isinstance(value, Action):
        raise UnusableSamples(
            f"action_samples.{what} returned {type(value).__name__}, not a polyloop Action",
            "action_samples",
        )


def failing(samples: ActionSamples) -> list[Named]:
    """``executes_but_errors`` and every ``more_executes_but_errors``, with their sample names."""
    more = samples.more_executes_but_errors
    return [
        ("executes_but_errors", samples.executes_but_errors),
        *((f"more_executes_but_errors[{i}]", action) for i, action in enumerate(more)),
    ]


def refused(samples: ActionSamples) -> list[Named]:
    """``refused`` and every ``more_refused`` (none without ``refused``)."""
    if samples.refused is None:
        return []
    more = samples.more_refused
    return [("refused", samples.refused), *((f"more_refused[{i}]", a) for i, a in enumerate(more))]


async def bounded_call(executor: ActionExecutor, action: Action, where: str) -> ActionOutcome:
    """``execute(action)`` within ``CALL_BOUND_S``; a well-formed outcome, or the test fails."""
    bound = asyncio.timeout(CALL_BOUND_S)
    try:
        async with bound:
            outcome = await executor.execute(action)
    except TimeoutError:
        if not bound.expired():
            raise RaisedInCall(where, TimeoutError()) from None
        pytest.fail(
            f"{where} did not return within {CALL_BOUND_S:g} s: a lock or pooled session the "
            "earlier calls took and never gave back makes a later call wait forever",
            pytrace=False,
        )
    except BaseException as error:  # a SystemExit too: the detail names the sample
        if not raised_by_the_implementation(error):
            raise
        raise RaisedInCall(where, error) from error
    problems = action_outcome_problems(outcome, where)
    assert not problems, "\n".join(problems)
    return outcome


async def bounded_hook(hook: Callable[[Any], Awaitable[None]], executor: object, name: str) -> None:
    bound = asyncio.timeout(CALL_BOUND_S)
    try:
        async with bound:
            await hook(executor)
    except TimeoutError:
        if not bound.expired():
            raise
        pytest.fail(f"action_samples.{name} did not return within {CALL_BOUND_S:g} s")


class RaisedInCall(pytest.fail.Exception):  # type: ignore[misc, name-defined]
    """``execute()`` raised: a failure whose message names the call and its sample."""

    def __init__(self, where: str, error: BaseException) -> None:
        super().__init__(f"{where} raised {exception_text(error, limit=SHORT)}", pytrace=False)


def status_sequence(samples: ActionSamples, promise: str) -> list[Named]:
    """Every sample twice back to back, then :data:`SEQUENCE_ROUNDS` rounds of every sample,
    each round in an order drawn from a generator seeded with ``promise`` (the same sequence
    on every run). One fixed interleaving repeated sends each sample to the same parity of a
    call counter whenever a round's length is even: a status that flips every second call
    (two sandboxes in turn, one of them lost) looks constant per sample."""
    order = [*failing(samples), ("executes_cleanly", samples.executes_cleanly), *refused(samples)]
    draw = random.Random(promise)  # a str seed is hashed with SHA-512: stable across processes
    sequence = [named for named in order for _ in range(2)]
    for _ in range(SEQUENCE_ROUNDS):
        sequence += draw.sample(order, len(order))
    return sequence


def history(calls: list[str]) -> str:
    return "; ".join(calls)


# The promise a sample's status belongs to, when it is wrong before the environment was touched.
STATUS_PROMISE = {
    "executes_cleanly": "the sample executes_cleanly must come back executed",
    "failing": "action_executor.action_error_is_a_normal_observation_not_an_env_error",
    "refused": "action_executor.status_trigger_conditions",
}


class CallSequence:
    """One executor called through every sample, judged call by call; the whole history, by
    phase, is kept for the failure message."""

    def __init__(self, executor: ActionExecutor, samples: ActionSamples) -> None:
        self.executor = executor
        self.samples = samples
        self.clean: Named = ("executes_cleanly", samples.executes_cleanly)
        self.refused = {which for which, _ in refused(samples)}
        self.calls: list[tuple[str, str]] = []  # (phase, "sample → status")

    def history(self) -> str:
        phases: dict[str, list[str]] = {}
        for when, call in self.calls:
            phases.setdefault(when, []).append(call)
        return "; ".join(f"[{when}] {', '.join(calls)}" for when, calls in phases.items())

    async def call(self, which: str, action: Action, when: str) -> ActionOutcome:
        where = f"call {len(self.calls) + 1} ({when}), execute(action_samples.{which})"
        try:
            outcome = await bounded_call(self.executor, action, where)
        except RaisedInCall as raised:
            pytest.fail(f"{raised.msg}; the calls before: {self.history()}", pytrace=False)
        except AssertionError as wrong:  # a malformed outcome: named with the calls before it
            pytest.fail(f"{where}: {wrong}; the calls before: {self.history()}", pytrace=False)
        self.calls.append((when, f"{which} → {outcome.status.value}"))
        return outcome

    async def everything(self, when: str, *, judge: bool = True, restored: bool = False) -> None:
        """Every sample once; with ``judge``, each on its normal status — before any break too,
        so a sample wrong from the start is blamed on its own promise, not on the recovery."""
        samples = self.samples
        for which, action in [self.clean, *failing(samples), *refused(samples)]:
            outcome = await self.call(which, action, when)
            want = ActionStatus.NOT_EXECUTED if which in self.refused else ActionStatus.EXECUTED
            if not judge or outcome.status is want:
                continue
            got = (
                f"execute(action_samples.{which}) came back {outcome.status.value}, not "
                f"{want.value} (observation {short(outcome.observation)})"
            )
            cause = ""
            if restored:
                blame = "the executor does not recover with its environment"
            else:
                kind = "refused" if which in self.refused else "executes_cleanly"
                kind = "failing" if "executes_but_errors" in which else kind
                blame = (
                    f"the sample is wrong before the environment was touched, so this is not "
                    f"a failure to recover: {STATUS_PROMISE[kind]}"
                )
                # A knock-on of a promise of its own: the report counts the cause once.
                cause = (
                    f"same cause as {STATUS_PROMISE[kind]}: " if kind != "executes_cleanly" else ""
                )
            pytest.fail(
                f"{cause}{when}, {got}: {blame}; the calls so far: {self.history()}",
                pytrace=False,
            )

    async def broken(self, when: str) -> None:
        """Break the environment; then every sample must return env_error (a refused one may
        be not_executed)."""
        samples = self.samples
        assert samples.break_environment is not None
        await bounded_hook(samples.break_environment, self.executor, "break_environment")
        for which, action in [self.clean, *failing(samples), self.clean, *refused(samples)]:
            outcome = await self.call(which, action, f"environment broken, {when}")
            allowed = {ActionStatus.ENV_ERROR}
            if which in self.refused:
                allowed.add(ActionStatus.NOT_EXECUTED)
            assert outcome.status in allowed, (
                f"with its environment broken ({when}), execute(action_samples.{which}) came "
                f"back {outcome.status.value}, not env_error (observation "
                f"{short(outcome.observation)}); the calls so far: {self.history()}"
            )


def echo_text(length: int) -> str:
    """The text ``truncated_chars_counts_what_was_cut`` echoes: ``length`` non-ASCII characters."""
    alphabet = ECHO_ALPHABET
    return "".join(alphabet[(i + i // len(alphabet)) % len(alphabet)] for i in range(length))


def common_head(a: str, b: str) -> int:
    """The length of the longest common prefix of ``a`` and ``b``."""
    n = min(len(a), len(b))
    low, high = 0, n  # a[:low] == b[:low]; binary search keeps a 2 MB comparison fast
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def shown_characters(text: str, observation: str) -> int:
    """How many characters of ``text`` ``observation`` shows: its longest common head with
    ``text`` plus, after that head, its longest common tail (a marker may sit between, before
    or after them)."""
    head = common_head(text, observation)
    tail = common_head(text[head:][::-1], observation[head:][::-1])
    return head + tail


def no_keeps_printing(promise: str) -> NoReturn:
    """``cancelled_action_does_not_leak`` without its sample: unverifiable, saying how to give
    it."""
    unverifiable(
        promise=promise,
        why=(
            "the suite cannot write an action that runs for seconds and prints in an "
            "arbitrary executor's language"
        ),
        verify_yourself=(
            "give ActionSamples(keeps_printing=<function marker -> an Action that "
            "prints marker on a line of its own every 10 ms or so for at least 3 s>) "
            "and the kit checks this; or, in a test of your own, cancel such an action "
            "mid-way and check that the next actions' observations never show its output"
        ),
    )


async def call_after_break(
    executor: ActionExecutor, which: str, action: Action, number: int
) -> ActionOutcome:
    """Call ``number`` after the environment broke: a well-formed outcome within
    ``ENV_ERROR_BOUND_S``, never an exception, or the test fails."""
    where = f"call {number} after action_samples.break_environment"
    bound = asyncio.timeout(ENV_ERROR_BOUND_S)
    try:
        async with bound:
            outcome = await executor.execute(action)
    except BaseException as error:
        if not raised_by_the_implementation(error):
            raise
        if isinstance(error, TimeoutError) and bound.expired():
            pytest.fail(
                f"{where}, execute(action_samples.{which}), did not return within "
                f"{ENV_ERROR_BOUND_S:g} s",
                pytrace=False,
            )
        pytest.fail(
            f"{where}, execute(action_samples.{which}) raised "
            f"{exception_text(error, limit=SHORT)} — a broken environment must "
            "be returned as ActionOutcome(status=env_error), on every call",
            pytrace=False,
        )
    problems = action_outcome_problems(outcome, f"execute() {where}")
    assert not problems, "\n".join(problems)
    return outcome


def require_status(outcome: ActionOutcome, want: ActionStatus, call: str, why: str = "") -> None:
    """``call`` returned ``want``, or the test fails saying what it returned and showed."""
    assert outcome.status is want, (
        f"{call} returned status {outcome.status.value}, not {want.value}{why} "
        f"(observation {short(outcome.observation)})"
    )


def check_cut(where: str, text: str, outcome: ActionOutcome) -> None:
    """The echo's observation shows exactly ``len(text) - observation_truncated_chars``
    characters of ``text`` (all of it, unchanged, when nothing was cut)."""
    cut, observation, length = outcome.observation_truncated_chars, outcome.observation, len(text)
    if cut == 0:
        assert observation == text, (
            f"{where} reports 0 characters truncated, but the observation is not the "
            f"text: {len(observation)} characters, the first difference at index "
            f"{common_head(text, observation)} "
            f"(observation {short(observation)})"
        )
        return
    shown = shown_characters(text, observation)
    assert cut <= length, (
        f"{where} reports {cut} characters truncated of a text of {length} characters"
    )
    assert shown + cut == length, (
        f"{where} reports {cut} characters truncated, but its observation shows "
        f"{shown} of the text's {length} characters, so {length - shown} were cut "
        f"(observation {short(observation)})"
    )
