"""The hand-made records the kit's store and sink checks write: one builder per kind, so every
check that needs "a run's first record" or "a run's last record" builds the same valid one.

Drawn records (any text, any shape) come from :mod:`polyloop.testing.strategies` instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from polyloop.types import RunFinished, RunStarted, StopReason

__all__ = ["finished", "started"]

_HASH = "sha256:" + "0" * 64  # a well-formed hash: no store checks what it hashes
_STARTED_AT = "2026-01-01T00:00:00.000Z"
_FINISHED_AT = "2026-01-01T00:00:01.000Z"


def started(
    run_id: str,
    goal: str = "contract goal",
    *,
    parameters: Mapping[str, Any] | None = None,
    started_at: str = _STARTED_AT,
) -> RunStarted:
    """A ``RunStarted`` for ``run_id`` (parameters ``{"system_prompt": "contract"}`` unless
    given)."""
    return RunStarted(
        run_id=run_id,
        goal=goal,
        parameters=dict({"system_prompt": "contract"} if parameters is None else parameters),
        parameters_hash=_HASH,
        started_at=started_at,
    )


def finished(
    final_answer: str | None = "done",
    *,
    executed_actions: int = 0,
    stop_reason: StopReason = StopReason.AGENT_FINISHED,
) -> RunFinished:
    """A ``RunFinished`` that stops ``agent_finished`` (unless told) with ``final_answer``."""
    return RunFinished(
        stop_reason=stop_reason,
        final_answer=final_answer,
        executed_actions=executed_actions,
        finished_at=_FINISHED_AT,
    )
