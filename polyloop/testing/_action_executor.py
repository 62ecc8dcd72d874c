"""The action-executor suite.

The two executors this seam was designed around look nothing alike: one hands a block of code to
a long-lived session and always reports ``executed``; the other dispatches tool calls through a
registry and reports ``not_executed`` for an unknown tool. Every promise here must hold for both,
which is why the suite executes only the two actions the implementer supplies.
"""

from __future__ import annotations

import asyncio
from functools import partial

import pytest

from polyloop._exception_text import exception_text
from polyloop.ports import ActionExecutor
from polyloop.testing._base import (
    ContractBase,
    RecordTypes,
    missing_fixture,
    require_samples,
    require_seam,
    unverifiable_promise,
)
from polyloop.testing._cancel import assert_cancellation_propagates
from polyloop.testing._samples import ActionSamples
from polyloop.testing._shapes import SHORT, action_outcome_problems, short
from polyloop.testing._skips import kept_by_polyloop, not_applicable, unverifiable
from polyloop.types import ActionOutcome, ActionStatus

__all__ = ["ActionExecutorContract"]

_LIBRARY_TESTS = "polyloop's own loop tests"
_TRIGGERS = (
    "execute() reports executed when the action ran (even if it failed), not_executed "
    "when it never entered execution, env_error when the environment is broken"
)
# How long a broken environment may take to be noticed: an executor's own timeouts decide it,
# this only keeps a hanging executor from hanging the suite.
_ENV_ERROR_BOUND_S = 60.0


async def _execute(executor: ActionExecutor, samples: object, which: str) -> ActionOutcome:
    require_seam(executor, "action_executor", "execute", "async execute(action) -> ActionOutcome")
    checked = require_samples(samples, ActionSamples, "action_samples")
    action = getattr(checked, which)
    outcome = await executor.execute(action)
    problems = action_outcome_problems(outcome, f"execute(action_samples.{which})")
    assert not problems, "\n".join(problems)
    return outcome


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
        for which in ("executes_cleanly", "executes_but_errors"):
            await _execute(action_executor, action_samples, which)

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
        for which in ("executes_cleanly", "executes_but_errors"):
            outcome = await _execute(action_executor, action_samples, which)
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
        every non-zero exit code to ``env_error``, or returning stdout and dropping stderr.
        """
        outcome = await _execute(action_executor, action_samples, "executes_but_errors")
        assert outcome.status is records.action_status.EXECUTED, (
            f"the failing sample came back {outcome.status!r}: an action's own error must be "
            "reported as executed (an observation the model can correct), not as "
            f"{outcome.status!s}"
        )
        assert outcome.observation.strip() != "", (
            "the failing sample came back executed with an empty observation: the model has "
            "nothing to correct itself from"
        )

    async def test_repeated_execution_keeps_status(
        self, action_executor: ActionExecutor, action_samples: ActionSamples
    ) -> None:
        """Executing the same action again gives the same status (observations may differ).

        A resumed run may replay an interrupted action, and an analysis groups trajectories by
        status. An executor whose status drifts on the second call ("already ran" → not
        executed, a cached failure → env error) makes a replayed step stop or continue for
        reasons that have nothing to do with the action.
        """
        for which in ("executes_cleanly", "executes_but_errors"):
            statuses = [
                (await _execute(action_executor, action_samples, which)).status for _ in range(3)
            ]
            assert len(set(statuses)) == 1, (
                f"action_samples.{which} executed three times came back with statuses "
                f"{[str(s) for s in statuses]}"
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
            outcome = await _execute(action_executor, action_samples, which)
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
        require_seam(action_executor, "action_executor", "execute", "async execute(action)")
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

    async def test_status_trigger_conditions(
        self, action_executor: ActionExecutor, action_samples: ActionSamples
    ) -> None:
        """``executed`` when the action ran (even if it failed), ``not_executed`` when it never
        entered execution, ``env_error`` when the environment itself is broken.

        These are the executor's own judgements. A suite facing an arbitrary implementation
        cannot force it into the last two: probing with a made-up tool name would fail a correct
        executor whose action language has no tool names and always reports ``executed``. So
        the implementer hands over an action to refuse (``ActionSamples.refused``) and the suite
        demands ``not_executed`` for it; ``env_error`` is ``failure_is_a_return_value``.
        """
        samples = require_samples(action_samples, ActionSamples, "action_samples")
        if samples.never_refuses:
            not_applicable(
                promise=_TRIGGERS,
                why="ActionSamples(never_refuses=True) declares that this executor has no "
                "refusal path (any action is run), so not_executed never applies",
                verify_yourself="nothing to check while the executor refuses nothing",
            )
        if samples.refused is None:
            unverifiable(
                promise=_TRIGGERS,
                why=(
                    "the suite cannot push an arbitrary executor into not_executed without "
                    "inventing inputs in a language it does not know"
                ),
                verify_yourself=(
                    "give ActionSamples(refused=<an action your executor must refuse>) — or "
                    "never_refuses=True — and the kit checks this; env_error is checked by "
                    f"failure_is_a_return_value; what the loop does with each status is guarded "
                    f"by {_LIBRARY_TESTS}"
                ),
            )
        outcome = await _execute(action_executor, samples, "refused")
        assert outcome.status is ActionStatus.NOT_EXECUTED, (
            f"execute(action_samples.refused) returned status {outcome.status.value}, not "
            f"not_executed: the action you said it refuses was judged as run "
            f"(observation {short(outcome.observation)})"
        )

    async def test_failure_is_a_return_value(
        self, action_executor: ActionExecutor, action_samples: ActionSamples
    ) -> None:
        """A broken environment is reported as ``ActionOutcome(status=env_error)``, not raised.

        An exception from ``execute`` is not caught by the library: it propagates out of
        ``run()``, the log ends at the ``ActionIntent`` and a resume has to decide whether the
        action happened. A return value lets the run stop cleanly with ``env_error``. Checked
        when ``ActionSamples.break_environment`` is given: after the hook broke the executor's
        environment, ``execute(executes_cleanly)`` must return ``env_error``.
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
                    f"exception propagates out of run() is guarded by {_LIBRARY_TESTS}"
                ),
            )
        require_seam(action_executor, "action_executor", "execute", "async execute(action)")
        await samples.break_environment(action_executor)
        try:
            async with asyncio.timeout(_ENV_ERROR_BOUND_S):
                outcome = await action_executor.execute(samples.executes_cleanly)
        except Exception as error:
            pytest.fail(
                "after action_samples.break_environment, execute() raised "
                f"{exception_text(error, limit=SHORT)} — a broken environment must be "
                "returned as ActionOutcome(status=env_error)",
                pytrace=False,
            )
        problems = action_outcome_problems(outcome, "execute() after break_environment")
        assert not problems, "\n".join(problems)
        assert outcome.status is ActionStatus.ENV_ERROR, (
            f"after action_samples.break_environment, execute() returned status "
            f"{outcome.status.value}, not env_error (observation {short(outcome.observation)})"
        )

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
