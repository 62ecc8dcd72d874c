"""The stopping order, decided here and nowhere else. Pure functions of loop state: no I/O.

One iteration of a run (``polyloop._loop._run._Driver.iterate`` calls these, in this order):

A  budget admission      :func:`admit`          steps ≥ max → step_budget; executed ≥ max →
                                                 action_budget (both at once → step_budget)
B  context               :func:`fits`           prompt_chars > max → context_overflow
                                                 (no intent, no step: nothing was called)
C  model call            (I/O in the loop)      an exception → a step, then llm_error
D  parse                 :func:`settle`         invalid → failures + 1; at max →
                                                 parse_failed_repeatedly; else back to A
E  final answer          :func:`settle`         agent_finished
F  action                (I/O in the loop)      any valid decision resets the failure counter
G  completion            :func:`settle`         env_error → env_error; executed and (completion
                                                 flag or completion-marker tool) → task_completed;
                                                 not_executed → no completion check
H  back to A

Three stop reasons come from outside the iteration, at whatever ``await`` the run is in
(``polyloop._loop._run._Driver.guarded``; a commit in flight always lands first):
``cancelled`` — ``run()`` was cancelled deliberately (a batch's Ctrl-C is not that: it
interrupts and writes no finish); ``time_limit`` — the per-run time limit of ``run_many``
elapsed; ``resume_state_unknown`` — a resume met an action intent it may not replay. One more
is the caller's choice at D: ``parser_error`` — the parser raised and ``run()``/``resume()`` was
told ``end_on_parser_error=True`` (``_Driver.end_for_parser``; no counter is consulted).

Budgets are settled at the *start* of the next iteration (A), so a run that completes on its
last allowed step ends ``task_completed``, not ``step_budget``: the two would have trajectories
of the same length and could never be told apart afterwards.

:func:`settle` is used both live and by ``resume()`` to re-decide a logged step, so a resumed
run stops exactly where an uninterrupted one would have.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from polyloop.types import ActionStatus, AgentDefinition, Budget, StepRecord, StopReason


@dataclass(frozen=True, slots=True)
class Counters:
    """Loop state the stopping order reads.

    ``steps`` and ``executed_actions`` are separate budgets (one user counts attempts, another
    effective work); ``parse_failures`` is *consecutive* failures and resets, the others never do.
    """

    steps: int = 0
    executed_actions: int = 0
    parse_failures: int = 0


def admit(budget: Budget, counters: Counters) -> StopReason | None:
    """A — may another step start?"""
    if counters.steps >= budget.max_steps:
        return StopReason.STEP_BUDGET
    if counters.executed_actions >= budget.max_executed_actions:
        return StopReason.ACTION_BUDGET
    return None


def fits(budget: Budget, prompt_chars: int) -> StopReason | None:
    """B — does the assembled prompt fit? Never truncate: truncation is silent prefix damage."""
    if prompt_chars > budget.max_prompt_chars:
        return StopReason.CONTEXT_OVERFLOW
    return None


def settle(
    agent: AgentDefinition, counters: Counters, step: StepRecord, *, model_failed: bool
) -> tuple[Counters, StopReason | None]:
    """C–G — the counters after a recorded step, and the stop it causes (``None``: back to A)."""
    counters = replace(counters, steps=counters.steps + 1)
    if model_failed:  # C
        return counters, StopReason.LLM_ERROR
    if not step.parse_ok:  # D: the environment was not touched, so no completion check
        counters = replace(counters, parse_failures=counters.parse_failures + 1)
        if counters.parse_failures >= agent.budget.max_consecutive_parse_failures:
            return counters, StopReason.PARSE_FAILED_REPEATEDLY
        return counters, None
    counters = replace(counters, parse_failures=0)  # F: any valid decision resets the counter
    if step.action_status is None:  # E
        return counters, StopReason.AGENT_FINISHED
    if step.action_status is ActionStatus.ENV_ERROR:  # G
        return counters, StopReason.ENV_ERROR
    if step.action_status is ActionStatus.NOT_EXECUTED:  # G: never entered execution
        return counters, None
    counters = replace(counters, executed_actions=counters.executed_actions + 1)
    marker = agent.tools is not None and agent.tools.is_completion_marker(step.tool_name)
    if step.env_reported_completion or marker:  # G
        return counters, StopReason.TASK_COMPLETED
    return counters, None
