"""The action-executor suite.

The two executors this seam was designed around look nothing alike: one hands a block of code to
a long-lived session and always reports ``executed``; the other dispatches tool calls through a
registry and reports ``not_executed`` for an unknown tool. Every promise here must hold for both,
which is why the suite executes only the two actions the implementer supplies.
"""

from __future__ import annotations

from functools import partial

import pytest

from polyloop.ports import ActionExecutor
from polyloop.testing._action_executor._calls import (
    ECHO_AGAIN_UP_TO,
    ECHO_LADDER,
    ECHO_LENGTHS,
    LIBRARY_TESTS,
    SEQUENCE_ROUNDS,
    SIGNATURE,
    TRIGGERS,
    CallSequence,
    bounded_call,
    bounded_hook,
    call_after_break,
    check_cut,
    echo_text,
    execute,
    failing,
    history,
    no_keeps_printing,
    refused,
    require_action,
    require_status,
    status_sequence,
)
from polyloop.testing._action_executor._cancel_leak import (
    CANCEL_AFTER_S,
    WATCH_S,
    Leak,
    cancelled_output_leak,
    fresh_marker,
)
from polyloop.testing._shared._base import (
    ContractBase,
    RecordTypes,
    missing_fixture,
    require_samples,
    require_seam,
    unverifiable_promise,
)
from polyloop.testing._shared._cancel import assert_cancellation_propagates
from polyloop.testing._shared._samples import ActionSamples
from polyloop.testing._shared._shapes import (
    assert_correctable,
    short,
)
from polyloop.testing._shared._skips import kept_by_polyloop, not_applicable, unverifiable
from polyloop.types import Action, ActionOutcome, ActionStatus

__all__ = ["ActionExecutorContract"]


class ActionExecutorContract(ContractBase):
    """Inherit this, override ``action_executor`` and ``action_samples``.

    ``action_samples`` returns :class:`~polyloop.testing.ActionSamples`: two actions in your
    executor's language — one that executes cleanly and one that executes but whose own code
    fails. Both must come back ``executed``.
    """

    seam = "action_executor"
    samples_fixture = "action_samples"

    @pytest.fixture
    def action_executor(self) -> ActionExecutor:
        """Your executor. Override this fixture and return an instance."""
        missing_fixture(
            "ActionExecutorContract",
            "action_executor",
            "an instance of your executor (any object with "
            "`async execute(action: Action) -> ActionOutcome`)",
        )

    @pytest.fixture
    def action_samples(self) -> ActionSamples:
        """Two actions in your executor's language. Override this fixture."""
        missing_fixture(
            "ActionExecutorContract",
            "action_samples",
            "polyloop.testing.ActionSamples(executes_cleanly=Action(...), "
            "executes_but_errors=Action(...)) — two actions in your executor's own language; "
            "both must really run, the second one's own code fails (raises, exits non-zero), "
            "and neither may touch a real external side effect",
        )

    async def test_returns_all_five_fields(
        self, action_executor: ActionExecutor, action_samples: ActionSamples
    ) -> None:
        """``execute`` returns an ``ActionOutcome`` with all five fields, each of its declared type.

        The library copies these five fields into five columns of the step record. A missing or
        mistyped field turns into a default or a wrong value that looks exactly like a real one in
        the trajectory — afterwards nobody can tell "the executor did not say" from "the value
        was this". A duck-typed result or a status given as a plain string breaks it; so does an
        outcome patched after construction.
        """
        require_seam(action_executor, "action_executor", "execute", SIGNATURE)
        samples = require_samples(action_samples, ActionSamples, "action_samples")
        for name, action in [("executes_cleanly", samples.executes_cleanly), *failing(samples)]:
            await bounded_call(action_executor, action, f"execute(action_samples.{name})")

    async def test_completion_signal_is_a_plain_boolean(
        self, action_executor: ActionExecutor, action_samples: ActionSamples
    ) -> None:
        """``env_reported_completion`` is a real ``bool``; always ``False`` is legal, not a fault.

        Most environments have no completion signal and report ``False`` every time. An earlier
        design let it be ``None`` for "could not ask" and treated that as an environment error —
        every run against such an environment would then have died on its first step. A third
        value (``None``, ``0``, ``"yes"``) also breaks ``if outcome.env_reported_completion``
        in ways nobody sees: ``"no"`` is truthy.
        """
        require_seam(action_executor, "action_executor", "execute", SIGNATURE)
        samples = require_samples(action_samples, ActionSamples, "action_samples")
        for which, action in [("executes_cleanly", samples.executes_cleanly), *failing(samples)]:
            outcome = await bounded_call(
                action_executor, action, f"execute(action_samples.{which})"
            )
            value = outcome.env_reported_completion
            assert type(value) is bool, (
                f"execute(action_samples.{which}).env_reported_completion is "
                f"{type(value).__name__} {short(value)}, not a bool"
            )

    async def test_action_error_is_a_normal_observation_not_an_env_error(
        self, action_executor: ActionExecutor, action_samples: ActionSamples, records: RecordTypes
    ) -> None:
        """An action whose own code fails is ``executed`` with a non-empty observation.

        Code that raises, a command that exits non-zero, an SQL syntax error: the model reads the
        error and corrects itself on the next step. Reporting it as ``env_error`` stops the run
        where the model could have recovered, and the trajectory does not show that it could
        have. Only a broken environment (connection lost, session gone) is ``env_error``. An
        empty observation hides the error the model needs to see. Typical culprits: mapping
        every non-zero exit code to ``env_error``, or returning stdout and dropping stderr. It
        holds whatever the error's type: checked on ``executes_but_errors`` and on each of
        ``more_executes_but_errors`` — code of the action's own that raises ``TypeError``,
        ``ValueError`` or ``AttributeError`` is still the action's error, even where the
        executor catches that type around the call to spot bad arguments.
        """
        require_seam(action_executor, "action_executor", "execute", SIGNATURE)
        samples = require_samples(action_samples, ActionSamples, "action_samples")
        for which, action in failing(samples):
            outcome = await bounded_call(
                action_executor, action, f"execute(action_samples.{which})"
            )
            assert outcome.status is records.action_status.EXECUTED, (
                f"the failing sample action_samples.{which} came back {outcome.status!r}: an "
                "action's own error must be reported as executed (an observation the model can "
                f"correct), not as {outcome.status!s} (observation {short(outcome.observation)})"
            )
            assert_correctable(
                outcome.observation,
                f"the observation of the failing sample action_samples.{which} (executed)",
            )

    async def test_repeated_execution_keeps_status(
        self, action_executor: ActionExecutor, action_samples: ActionSamples
    ) -> None:
        """Executing the same action again gives the same status (observations may differ).

        A resumed run may replay an interrupted action, and an analysis groups trajectories by
        status. An executor whose status drifts on the second call ("already ran" → not
        executed, a cached failure → env error) makes a replayed step stop or continue for
        reasons that have nothing to do with the action. One executor runs a long sequence
        that mixes every sample — the failing ones, the clean one and the refused ones: each
        twice back to back, then in rounds, each round in an order drawn from a seed fixed by
        this promise (the same on every run) — because what one call leaves behind shows only
        on a later one: a pooled session or lock not given back on the failing path, a
        counter, a session left in a bad state, a status that flips every second call (one
        fixed interleaving sends each sample to the same parity). Each call is bounded: a call
        that never returns is a violation too.
        """
        require_seam(action_executor, "action_executor", "execute", SIGNATURE)
        samples = require_samples(action_samples, ActionSamples, "action_samples")
        first: dict[str, ActionStatus] = {}
        calls: list[str] = []
        for which, action in status_sequence(
            samples, f"{self.seam}.repeated_execution_keeps_status"
        ):
            where = f"call {len(calls) + 1} on one executor, execute(action_samples.{which})"
            outcome = await bounded_call(action_executor, action, where)
            calls.append(f"{which} → {outcome.status.value}")
            status = first.setdefault(which, outcome.status)
            assert outcome.status is status, (
                f"{where} came back {outcome.status.value}, but {status.value} the first "
                f"time (observation {short(outcome.observation)}); the calls on this "
                f"executor (each sample twice back to back, then {SEQUENCE_ROUNDS} rounds in "
                f"orders drawn from a seed fixed by the promise): {history(calls)}"
            )

    async def test_truncated_chars_is_non_negative(
        self, action_executor: ActionExecutor, action_samples: ActionSamples
    ) -> None:
        """``observation_truncated_chars`` is an ``int`` ≥ 0: how many characters were cut.

        It is summed per run to show how much the model did not see. A negative number makes
        those sums lie (a run looks like it lost less than it did) and is meaningless as a
        count. The usual culprit is a subtraction the wrong way round
        (``len(shown) - len(original)``).
        """
        for which in ("executes_cleanly", "executes_but_errors"):
            outcome = await execute(action_executor, action_samples, which)
            assert outcome.observation_truncated_chars >= 0, (
                f"execute(action_samples.{which}).observation_truncated_chars is "
                f"{outcome.observation_truncated_chars}, a negative count"
            )

    async def test_cancellation_propagates_and_is_not_swallowed(
        self, action_executor: ActionExecutor, action_samples: ActionSamples
    ) -> None:
        """Cancelling a running ``execute`` raises ``CancelledError``; it is not swallowed.

        An executor that swallows the cancellation keeps the run's task alive while its caller
        believes it stopped: container leases, connections and temp directories leak silently,
        and the loop cannot record the run as cancelled. Both samples are cancelled at several
        depths — a few event-loop ticks, then fractions of an uncancelled call — because the
        usual culprit swallows it only around its main await, after a quick first one (a
        connect, a lock, a process start), or only on one path (the erroring one).
        ``not_applicable`` when every probe found the call already finished: it has no await
        point at which to swallow anything, and a verdict that depended on speed would be flaky.
        """
        require_seam(action_executor, "action_executor", "execute", SIGNATURE)
        samples = require_samples(action_samples, ActionSamples, "action_samples")
        await assert_cancellation_propagates(
            {
                f"execute(action_samples.{which})": partial(
                    action_executor.execute, getattr(samples, which)
                )
                for which in ("executes_cleanly", "executes_but_errors")
            },
            promise="a cancelled execute() lets CancelledError through",
            what="execute() of either sample",
        )

    async def test_cancelled_action_does_not_leak(
        self, action_executor: ActionExecutor, action_samples: ActionSamples
    ) -> None:
        """A cancelled ``execute`` leaves nothing behind that shows in a later action: no
        output of the cancelled action reaches another action's observation.

        The loop cancels an action on a step deadline or a stop, then executes the next one on
        the same executor. Cancelling the awaiting task does not stop code the executor runs in
        a thread: if it runs on and writes into a buffer the executor shares between actions,
        the model reads its output as the result of the next action. Checked when
        ``ActionSamples.keeps_printing`` is given: that action, printing a fresh marker every
        few milliseconds for seconds, is cancelled after 0.3 s; then ``executes_cleanly`` runs
        back to back for a second (each call bounded) and no observation may show the marker.
        """
        samples = require_samples(action_samples, ActionSamples, "action_samples")
        promise = "no output of a cancelled action shows in a later action's observation"
        if samples.keeps_printing is None:
            no_keeps_printing(promise)
        require_seam(action_executor, "action_executor", "execute", SIGNATURE)
        marker = fresh_marker()
        printing = samples.keeps_printing(marker)
        require_action(printing, "keeps_printing(marker)")
        where = "execute(action_samples.executes_cleanly) after the cancel"
        found = await cancelled_output_leak(
            lambda: action_executor.execute(printing),
            partial(bounded_call, action_executor, samples.executes_cleanly, where),
            marker,
        )
        if isinstance(found, ActionOutcome):
            not_applicable(
                promise=promise,
                why=(
                    f"execute(action_samples.keeps_printing(marker)) returned within "
                    f"{CANCEL_AFTER_S:g} s (status {found.status.value}): this executor ended "
                    "the action before it could be cancelled mid-way"
                ),
                verify_yourself=(
                    "if your executor can run an action for longer, give a keeps_printing "
                    "action that runs for at least 3 s"
                ),
            )
        assert not isinstance(found, Leak), (
            f"the output of a cancelled action leaked: the marker {marker!r}, printed by "
            f"execute(action_samples.keeps_printing(marker)) cancelled after {CANCEL_AFTER_S:g} "
            f"s, shows in the observation of call {found.call} of "
            f"execute(action_samples.executes_cleanly) made back to back after the cancel (for "
            f"{WATCH_S:g} s): {short(found.observation, 300)} — the cancelled code went on "
            "running and wrote where the next action's output is collected"
        )

    async def test_status_trigger_conditions(
        self, action_executor: ActionExecutor, action_samples: ActionSamples
    ) -> None:
        """``executed`` when the action ran (even if it failed), ``not_executed`` when it never
        entered execution, ``env_error`` when the environment itself is broken.

        These are the executor's own judgements. A suite facing an arbitrary implementation
        cannot force it into the last two: probing with a made-up tool name would fail a correct
        executor whose action language has no tool names and always reports ``executed``. So
        the implementer hands over an action to refuse (``ActionSamples.refused``, and more in
        ``more_refused``: an argument missing, one too many, one of the wrong type) and the
        suite demands ``not_executed`` for each; ``executed`` for actions whose own code fails
        is ``action_error_is_a_normal_observation_not_an_env_error``, ``env_error`` is
        ``failure_is_a_return_value``.
        """
        samples = require_samples(action_samples, ActionSamples, "action_samples")
        if samples.never_refuses:
            not_applicable(
                promise=TRIGGERS,
                why="ActionSamples(never_refuses=True) declares that this executor has no "
                "refusal path (any action is run), so not_executed never applies",
                verify_yourself="nothing to check while the executor refuses nothing",
            )
        if samples.refused is None:
            unverifiable(
                promise=TRIGGERS,
                why=(
                    "the suite cannot push an arbitrary executor into not_executed without "
                    "inventing inputs in a language it does not know"
                ),
                verify_yourself=(
                    "give ActionSamples(refused=<an action your executor must refuse>) — or "
                    "never_refuses=True — and the kit checks this; env_error is checked by "
                    f"failure_is_a_return_value; what the loop does with each status is guarded "
                    f"by {LIBRARY_TESTS}"
                ),
            )
        for which, action in refused(samples):
            outcome = await bounded_call(
                action_executor, action, f"execute(action_samples.{which})"
            )
            require_status(
                outcome,
                ActionStatus.NOT_EXECUTED,
                f"execute(action_samples.{which})",
                ": the action you said it refuses was judged as run",
            )

    async def test_failure_is_a_return_value(
        self, action_executor: ActionExecutor, action_samples: ActionSamples
    ) -> None:
        """A broken environment is reported as ``ActionOutcome(status=env_error)``, not raised.

        An exception from ``execute`` is not caught by the library: it propagates out of
        ``run()``, the log ends at the ``ActionIntent`` and a resume has to decide whether the
        action happened. A return value lets the run stop cleanly with ``env_error``. Checked
        when ``ActionSamples.break_environment`` is given: the executor first runs every sample
        (so a cache or a pooled session holds something), then the hook breaks its environment;
        ``execute(executes_cleanly)`` must then return ``env_error`` — not a cached
        ``executed`` — and the calls after it (every sample again) must each return, never
        raise: the session an executor dropped on the first failure must not turn the second
        call into an ``AttributeError``.
        """
        samples = require_samples(action_samples, ActionSamples, "action_samples")
        if samples.break_environment is None:
            unverifiable(
                promise="a broken environment is returned as status env_error, never raised",
                why=(
                    "the suite cannot break an arbitrary implementation's environment portably, "
                    "and implementations without one would be judged on a failure they cannot "
                    "have"
                ),
                verify_yourself=(
                    "give ActionSamples(break_environment=<async hook(executor) that kills its "
                    "session or drops its connection>) and the kit checks this; that a raised "
                    f"exception propagates out of run() is guarded by {LIBRARY_TESTS}"
                ),
            )
        require_seam(action_executor, "action_executor", "execute", SIGNATURE)
        clean = ("executes_cleanly", samples.executes_cleanly)
        for which, action in [clean, *failing(samples), *refused(samples)]:
            await bounded_call(action_executor, action, f"execute(action_samples.{which})")
        await bounded_hook(samples.break_environment, action_executor, "break_environment")
        after = [clean, *failing(samples), clean, *refused(samples)]
        for number, (which, action) in enumerate(after, start=1):
            outcome = await call_after_break(action_executor, which, action, number)
            if number == 1:
                require_status(
                    outcome,
                    ActionStatus.ENV_ERROR,
                    "after action_samples.break_environment, execute()",
                )

    async def test_environment_recovers_when_restored(
        self, action_executor: ActionExecutor, action_samples: ActionSamples
    ) -> None:
        """While its environment is broken every call returns ``env_error``; once the
        environment is restored, the same executor serves again.

        A run that stopped on ``env_error`` is resumed once the database or the sandbox is
        back, often with the same long-lived executor. An executor that answers a call in a
        broken environment with ``executed`` (a cached result, a stale pooled session) writes a
        step that never happened into the trajectory; one that latches its failure (a circuit
        breaker that never closes, a dead connection kept in the pool) stops every later run.
        Checked when ``ActionSamples.restore_environment`` is given (it declares that a break
        lasts until it runs): every sample is first executed once and must get its normal
        status (one that is wrong before any break is reported naming the promise it breaks,
        not as a failure to recover); then, twice, the environment is broken, every sample is
        executed —
        each call must return ``env_error`` (a refused one may be ``not_executed``), none may
        raise or come back ``executed`` — then restored, after which every sample must get its
        normal status again: ``executed`` for the clean and the failing ones, ``not_executed``
        for the refused ones.
        """
        samples = require_samples(action_samples, ActionSamples, "action_samples")
        if samples.break_environment is None or samples.restore_environment is None:
            unverifiable(
                promise=(
                    "while the environment is broken every call returns env_error, and once it "
                    "is restored the executor serves again"
                ),
                why=(
                    "the suite cannot break or restore an arbitrary implementation's "
                    "environment, nor tell whether a break lasts"
                ),
                verify_yourself=(
                    "give ActionSamples(break_environment=<async hook(executor) that breaks "
                    "it until restored>, restore_environment=<async hook(executor) that undoes "
                    "the break>) and the kit checks this; or, in a test of your own, break the "
                    "environment, call execute() several times (each must return env_error), "
                    "restore it and check that the next calls are executed again"
                ),
            )
        require_seam(action_executor, "action_executor", "execute", SIGNATURE)
        run = CallSequence(action_executor, samples)
        await run.everything("before any break")
        for cycle in (1, 2):
            await run.broken(f"break {cycle}, not restored yet")
            await bounded_hook(samples.restore_environment, action_executor, "restore_environment")
            for again in (1, 2):
                when = f"after action_samples.restore_environment (break {cycle}, round {again})"
                await run.everything(when, restored=True)

    async def test_every_call_returns_env_error_while_broken(
        self, action_executor: ActionExecutor, action_samples: ActionSamples
    ) -> None:
        """After its environment broke, *every* call returns ``env_error`` — not only the first
        — until the environment is back; none raises, none comes back ``executed``.

        The loop stops a run on ``env_error``, but a resumed run, a retry wrapper or a second
        run sharing the executor calls again. An executor that reports the break once and then
        answers from a stale pooled session, a read replica or a result cache writes steps that
        never happened into the trajectory; one that drops its dead connection and forgets to
        reconnect raises on the second call. Checked when the samples declare that the break
        lasts — ``ActionSamples(break_lasts=True)``, or a ``restore_environment`` hook: every
        sample is run, the environment is broken, and every sample is run again — each must
        return ``env_error`` (a refused one may be ``not_executed``).
        """
        samples = require_samples(action_samples, ActionSamples, "action_samples")
        if samples.break_environment is None or not (
            samples.break_lasts or samples.restore_environment is not None
        ):
            unverifiable(
                promise=(
                    "after the environment broke, every call returns env_error until it is back"
                ),
                why=(
                    "the suite cannot break an arbitrary implementation's environment, and "
                    "whether a break outlives the session it killed is the implementation's "
                    "own business (an executor may start a new session on the next call)"
                ),
                verify_yourself=(
                    "give ActionSamples(break_environment=<async hook(executor) that breaks "
                    "it for the rest of the test>, break_lasts=True) — or a "
                    "restore_environment hook — and the kit checks this; or, in a test of your "
                    "own, break the environment and check that several calls in a row each "
                    "return env_error"
                ),
            )
        require_seam(action_executor, "action_executor", "execute", SIGNATURE)
        run = CallSequence(action_executor, samples)
        await run.everything("before the break", judge=False)  # statuses: other promises
        await run.broken("broken for good")

    async def test_truncated_chars_counts_what_was_cut(
        self, action_executor: ActionExecutor, action_samples: ActionSamples
    ) -> None:
        """``observation_truncated_chars`` is the number of characters of the output the
        observation does not show: nothing cut means the whole output, unchanged.

        The count is summed per run to show how much the model did not see. Counted in bytes
        (UTF-8 output), against another cap than the one applied, or with the marker's own
        length mixed in, the sums are wrong without looking wrong. Checked when
        ``ActionSamples.echo`` is given: texts of non-ASCII characters (CJK, emoji, a combining
        mark, astral-plane letters) are echoed — just under, at and past ``truncates_at`` when
        it is given, and at 0, 1 and just under, at and over 64, 100, 128, 256, 1 000, 1 024,
        4 096, 16 384 and 65 536 characters, rising, then the shorter ones again longest first
        on the same executor — and for each, with ``cut`` the reported count, the observation
        must be the text itself when ``cut`` is 0, and otherwise show exactly
        ``len(text) - cut`` of its characters: its longest common head with the text plus its
        longest common tail after that head (a truncation marker may stand before, between or
        after them).
        """
        samples = require_samples(action_samples, ActionSamples, "action_samples")
        if samples.echo is None:
            unverifiable(
                promise=(
                    "observation_truncated_chars is the number of characters of the output the "
                    "observation does not show"
                ),
                why=(
                    "the suite cannot know what an arbitrary action outputs in full, so it "
                    "cannot tell a true count from a false one (it checks the sign only, in "
                    "truncated_chars_is_non_negative)"
                ),
                verify_yourself=(
                    "give ActionSamples(echo=<function text -> an Action whose whole output "
                    "is text>, truncates_at=<your cap>) and the kit checks this; or, in a test "
                    "of your own, run an action printing a known non-ASCII text longer than "
                    "your cap and check len(text) - observation_truncated_chars characters of "
                    "it are shown"
                ),
            )
        require_seam(action_executor, "action_executor", "execute", SIGNATURE)
        cap = samples.truncates_at
        lengths = ECHO_LENGTHS if cap is None else (0, cap - 1, cap, cap + 1, 2 * cap + 3)
        rising = sorted({*lengths, *ECHO_LADDER})
        again = [n for n in reversed(rising) if n <= max(ECHO_AGAIN_UP_TO, 2 * (cap or 0) + 3)]
        for length in [*rising, *again]:
            text = echo_text(length)
            action = samples.echo(text)
            if not isinstance(action, Action):
                pytest.fail(
                    f"action_samples.echo(text) returned {type(action).__name__}, not a "
                    "polyloop Action",
                    pytrace=False,
                )
            where = f"execute(action_samples.echo(<{length} non-ASCII characters>))"
            outcome = await bounded_call(action_executor, action, where)
            assert outcome.status is ActionStatus.EXECUTED, (
                f"{where} came back {outcome.status.value}: the echo sample must run "
                f"(observation {short(outcome.observation)})"
            )
            check_cut(where, text, outcome)

    @unverifiable_promise
    async def test_observation_substitution_happens_in_the_library(
        self, action_executor: ActionExecutor
    ) -> None:
        """For ``not_executed``/``env_error`` the history gets the library's synthetic text.

        The executor just fills ``observation`` as usual; the loop keeps that text in
        ``StepCompleted.executor_observation`` for audit and shows the model the agent's
        configured synthetic observation, so what the model sees is part of the parameter
        snapshot. The substitution is a property of a whole run, not of this seam.
        """
        kept_by_polyloop(
            promise=(
                "for not_executed and env_error the model sees the library's synthetic "
                "observation and the executor's own text is kept only for audit"
            ),
            why="the substitution happens in the loop after execute() returns, not in the executor",
            guarded_by=("docs/reference/runtime.md#what-each-step-records",),
        )
