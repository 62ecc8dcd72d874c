"""From pytest's results to one outcome per (implementation, promise).

Input is plain data (:class:`PhaseResult`, built from each ``TestReport`` — the same data
arrives from xdist workers), output is a :class:`Judgement`. No pytest objects here.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # only a type here: a passive plugin does not import the runtime
    from polyloop.report import Outcome

__all__ = [
    "Judgement",
    "PhaseResult",
    "classify",
    "group_violation",
    "phase_result",
    "teardown_failure",
]

PROPERTY_ITEM = "polyloop"
PROPERTY_SKIP = "polyloop_skip"
# {type, message, location} of an exception that kept the implementation from being built.
PROPERTY_SETUP_ERROR = "polyloop_setup_error"
# The whole violation inside an exception group (Hypothesis's FlakyFailure): the kit's message
# and the falsifying example, which the group's own one-line text and its traceback bury.
PROPERTY_VIOLATION = "polyloop_violation"
# {search, examples}: the kit's search that found a failing example (seeded, wide, replayed).
PROPERTY_SEARCH = "polyloop_search"
_STRICT_XPASS = "[XPASS(strict)]"
_WAIVED_PREFIX = "waived: "
_DETAIL_LIMIT = 4000
# The kit's own message inside an exception group: kept whole up to this (a call history).
_WHOLE_LIMIT = 16_000
_SHORT = 160
# xdist's own report for a test whose worker died (it has no user_properties of ours).
CRASH_PHASE = "???"
# pytest-rerunfailures: the outcome of a phase whose failure made it run the test again.
RERUN = "rerun"
# How Hypothesis introduces the example that broke a property ("Failing test case" since 6.1xx).
# Hypothesis's headers for a failing example: drawn, or one of the explicit examples a suite
# always runs first (the parser suite's fixed hard inputs), in the older and newer wordings.
_EXAMPLE_MARKERS = (
    "Falsifying example",
    "Failing test case",
    "Falsifying explicit example",
    "Failing explicit example",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class PhaseResult:
    """One phase (setup/call/teardown) of one contract item, as plain data; ``attempt`` counts
    pytest-rerunfailures' reruns (0: the first run)."""

    when: str
    outcome: str
    duration: float
    text: str = ""
    crash: str = ""
    skip_reason: str = ""
    wasxfail: str | None = None
    contract_skip: Mapping[str, str] | None = None
    setup_error: Mapping[str, str] | None = None
    attempt: int = 0
    violation: str | None = None  # PROPERTY_VIOLATION: the failure inside an exception group
    search: Mapping[str, str] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Judgement:
    """The outcome of one promise for one implementation, with its reasons."""

    outcome: Outcome
    duration_s: float
    detail: str | None = None
    why: str | None = None
    verify_yourself: str | None = None
    promise: str | None = None
    waiver_reason: str | None = None
    kept_by: str | None = None
    setup_error: Mapping[str, str] | None = None
    reruns: int = 0
    search: Mapping[str, str] | None = None


def phase_result(report: Any) -> PhaseResult:
    """Plain data from a pytest ``TestReport`` (works on reports rebuilt from xdist workers)."""
    skip_reason = ""
    longrepr = report.longrepr
    if report.outcome == "skipped" and isinstance(longrepr, tuple) and len(longrepr) == 3:
        skip_reason = str(longrepr[2])
    crash = ""
    reprcrash = getattr(longrepr, "reprcrash", None)
    if reprcrash is not None:
        crash = str(getattr(reprcrash, "message", ""))
    violation = None
    found: dict[str, dict[str, str]] = {}
    for name, value in report.user_properties:
        if name == PROPERTY_VIOLATION and isinstance(value, str):
            violation = str(json.loads(value))
        elif name in (PROPERTY_SKIP, PROPERTY_SETUP_ERROR, PROPERTY_SEARCH) and isinstance(
            value, str
        ):
            parts = json.loads(value)  # JSON, so junit XML shows it readably
            found[name] = {str(key): str(part) for key, part in parts.items()}
    return PhaseResult(
        when=str(report.when),
        outcome=str(report.outcome),
        duration=float(getattr(report, "duration", 0.0) or 0.0),
        text=report.longreprtext if report.outcome == "failed" else "",
        crash=crash,
        skip_reason=skip_reason,
        wasxfail=getattr(report, "wasxfail", None),
        contract_skip=found.get(PROPERTY_SKIP),
        setup_error=found.get(PROPERTY_SETUP_ERROR),
        attempt=_attempt(report),
        violation=violation,
        search=found.get(PROPERTY_SEARCH),
    )


def _attempt(report: Any) -> int:
    """pytest-rerunfailures numbers each run of a test (``report.rerun``, kept through xdist)."""
    attempt = getattr(report, "rerun", 0)
    return attempt if isinstance(attempt, int) and not isinstance(attempt, bool) else 0


def group_violation(error: BaseException) -> str | None:
    """The violation inside an exception group — Hypothesis's ``FlakyFailure`` (a failure that
    did not happen again when replayed) or several failures: the first one's own text (the
    kit's message, whole) and each falsifying example noted on it or on the group, then what
    the group said. ``None`` for an exception that is not a group."""
    if not isinstance(error, BaseExceptionGroup):
        return None
    from polyloop._base._exception_text import exception_text  # only with a failure to say

    leaf: BaseException = error
    while isinstance(leaf, BaseExceptionGroup) and leaf.exceptions:
        leaf = leaf.exceptions[0]
    if leaf.__cause__ is not None and not str(leaf):  # Hypothesis wraps a BaseException
        leaf = leaf.__cause__
    notes = [*getattr(leaf, "__notes__", ()), *getattr(error, "__notes__", ())]
    examples = [note for note in notes if str(note).lstrip().startswith(_EXAMPLE_MARKERS)]
    # A group's text is never empty (it ends "(1 sub-exception)"); its first line may be.
    said = str(error).splitlines()[0]
    # "Hypothesis test_x(<every argument>) produces unreliable results: …": the arguments are
    # the falsifying example again, as one line; the sentence is what the group adds.
    said = said[said.rindex(" produces ") + 1 :] if " produces " in said else said[:_SHORT]
    parts = [
        exception_text(leaf, limit=_WHOLE_LIMIT),
        *(str(example)[:_DETAIL_LIMIT] for example in dict.fromkeys(examples)),
        f"(Hypothesis, {type(error).__name__}" + (f": the test {said})" if said else ")"),
    ]
    return "\n".join(parts)


def _violation_detail(phase: PhaseResult) -> str:
    """The assertion message, plus the falsifying example of a Hypothesis promise — once."""
    if phase.violation is not None:  # whole: the message and the example are cut apart
        return (
            phase.violation
            if phase.when == "call"
            else f"error in {phase.when}:\n{phase.violation}"
        )
    text = phase.text
    if phase.when == CRASH_PHASE:
        return f"the worker running this test died: {text.strip().splitlines()[-1]}"
    last_line = text.strip().splitlines()[-1] if text.strip() else ""
    message = phase.crash or last_line
    parts = [message]
    # The example is added to the exception as a note: an AssertionError's crash message often
    # carries it already, and then it is not added a second time.
    if not any(marker in message for marker in _EXAMPLE_MARKERS):
        parts.append(_example(text))
    if phase.when != "call":
        parts.insert(0, f"error in {phase.when}:")
    detail = "\n".join(part for part in parts if part)
    return detail[:_DETAIL_LIMIT] or f"{phase.when} failed"


def _example(text: str) -> str:
    """Hypothesis's falsifying example in a failure's text (``""`` if there is none): in
    pytest's long form, the ``E`` lines from the first marker on, their indentation kept
    relative to it; in any other form (``--tb=native``), the text from the marker on."""
    lines = text.splitlines()
    for index, line in enumerate(lines):
        body = line[1:] if line.startswith("E ") else ""
        stripped = body.lstrip()
        if not stripped.startswith(_EXAMPLE_MARKERS):
            continue
        indent = len(body) - len(stripped)
        block = []
        for follow in lines[index:]:
            if not follow.startswith("E"):
                break  # the E lines end where pytest's location line ("path:line: Error") starts
            rest = follow[1:]
            block.append(rest[indent:] if not rest[:indent].strip() else rest.strip())
        return "\n".join(part.rstrip() for part in block if part.strip())
    found = [at for at in (text.find(marker) for marker in _EXAMPLE_MARKERS) if at != -1]
    if not found:
        return ""
    example = [line.removeprefix("E   ").rstrip() for line in text[min(found) :].splitlines()]
    return "\n".join(line for line in example if line.strip())


def _xpass_reason(phase: PhaseResult) -> str | None:
    """The xfail reason of an XPASS: ``wasxfail``, or the text after ``[XPASS(strict)]``."""
    if phase.wasxfail is not None:
        return phase.wasxfail
    _, found, reason = phase.text.partition(_STRICT_XPASS)
    return (reason.strip() or None) if found else None


def _waiver_from(reason: str | None) -> str | None:
    if reason is None:
        return None
    return reason.removeprefix(_WAIVED_PREFIX)


ParseSkip = Callable[[str], Mapping[str, str] | None]


@dataclass(frozen=True, slots=True, kw_only=True)
class _Case:
    """What the evaluators judge: one promise test's phases and what the plugin knows of it."""

    phases: Sequence[PhaseResult]
    overridden: bool
    waiver_reason: str | None
    parse_skip: ParseSkip
    duration: float


def _is_stale(phase: PhaseResult) -> bool:
    """A waived promise that held: a strict XPASS (a failed call) or a non-strict one."""
    # xdist prefixes the text with a "[gw0] linux -- Python …" line: search, not startswith.
    strict = phase.outcome == "failed" and phase.when == "call" and _STRICT_XPASS in phase.text
    return strict or (phase.outcome == "passed" and phase.wasxfail is not None)


WORKER_CRASHED = "WorkerCrashed"


def _setup_failure(phases: Sequence[PhaseResult]) -> Mapping[str, str] | None:
    """What kept the implementation from being built, if anything: a failed setup (its fixture
    or samples fixture raised), samples the kit cannot use, or a worker that died before the
    setup phase was reported (the fixture killed it: ``os._exit``, a segfault)."""
    for phase in phases:
        if phase.setup_error is not None:
            return phase.setup_error
        if phase.when == "setup" and phase.outcome == "failed":
            kind, _, message = (phase.crash or "error in setup").partition(": ")
            return {"type": kind, "message": message, "location": ""}
    crash = next((phase for phase in phases if phase.when == CRASH_PHASE), None)
    if crash is not None and not any(phase.when == "setup" for phase in phases):
        last = crash.text.strip().splitlines()[-1] if crash.text.strip() else "worker crashed"
        message = f"the worker died while building the implementation's fixtures ({last})"
        return {"type": WORKER_CRASHED, "message": message, "location": ""}
    return None


def _setup_error(case: _Case) -> Judgement | None:
    """The promise never ran: no waiver, override or baseline may turn that into anything else."""
    failure = _setup_failure(case.phases)
    if failure is None:
        return None
    return Judgement(
        outcome="setup_error",
        duration_s=case.duration,
        detail=f"setup error: {failure['type']}: {failure['message']}",
        setup_error=failure,
        waiver_reason=case.waiver_reason,
    )


def _violated(case: _Case) -> Judgement | None:
    """A real failure or error, also of an overridden test: it must not hide behind that."""
    failure = next((p for p in case.phases if p.outcome == "failed" and not _is_stale(p)), None)
    if failure is None:
        return None
    return Judgement(
        outcome="violated",
        duration_s=case.duration,
        detail=_violation_detail(failure),
        waiver_reason=case.waiver_reason,
        search=failure.search,
    )


def _overridden(case: _Case) -> Judgement | None:
    """The promise test was replaced, so the promise was not checked as written."""
    if not case.overridden:
        return None
    return Judgement(
        outcome="overridden", duration_s=case.duration, waiver_reason=case.waiver_reason
    )


def _stale_waiver(case: _Case) -> Judgement | None:
    """A waived promise that holds: the waiver should go."""
    stale = next((phase for phase in case.phases if _is_stale(phase)), None)
    if stale is None:
        return None
    return Judgement(
        outcome="stale_waiver",
        duration_s=case.duration,
        detail="the promise held although it is waived: remove the waiver",
        waiver_reason=case.waiver_reason or _waiver_from(_xpass_reason(stale)),
    )


def _skipped(case: _Case) -> Judgement | None:
    """The first skip decides: a waiver's xfail, a contract skip, or a plain skip."""
    phase = next((phase for phase in case.phases if phase.outcome == "skipped"), None)
    if phase is None:
        return None
    if phase.wasxfail is not None:
        waiver_reason = case.waiver_reason or _waiver_from(phase.wasxfail)
        return Judgement(outcome="waived", duration_s=case.duration, waiver_reason=waiver_reason)
    parts = phase.contract_skip or case.parse_skip(phase.skip_reason)
    if parts is not None and parts.get("outcome") in ("unverifiable", "not_applicable"):
        return Judgement(
            outcome="unverifiable" if parts["outcome"] == "unverifiable" else "not_applicable",
            duration_s=case.duration,
            promise=parts.get("promise"),
            why=parts.get("why"),
            verify_yourself=parts.get("verify_yourself"),
            kept_by=parts.get("kept_by"),
        )
    why = phase.skip_reason.removeprefix("Skipped: ") or "skipped"
    return Judgement(outcome="not_applicable", duration_s=case.duration, why=why)


# In order of precedence (the first judgement wins); a test none of them judges ``held``.
_EVALUATORS: tuple[Callable[[_Case], Judgement | None], ...] = (
    _setup_error,
    _violated,
    _overridden,
    _stale_waiver,
    _skipped,
)


def classify(
    phases: Sequence[PhaseResult],
    *,
    overridden: bool = False,
    waiver_reason: str | None = None,
    parse_skip: ParseSkip = lambda text: None,
) -> Judgement | None:
    """The outcome of one promise test from its phases; ``None`` if it never finished.

    A failing teardown is not the promise's (see :func:`teardown_failure`); a test whose worker
    died (xdist's ``when="???"`` report) is ``violated``. A test pytest-rerunfailures ran again
    is judged by its last run alone, and the judgement counts the reruns.

    Order of precedence (:data:`_EVALUATORS`): a setup that failed (or samples the kit cannot
    use, or a worker that died in setup) is ``setup_error``; a real failure or error is
    ``violated`` (also for an overridden test: a failure must not hide behind "overridden");
    then ``overridden`` (the promise was not checked as written); then a pass under a waiver
    is ``stale_waiver``, a failure under one ``waived``; then the skips; else ``held``.
    """
    reruns = max((phase.attempt for phase in phases), default=0)
    # A phase that was rerun is no result (a crash rerun is rescheduled, maybe never reported).
    last = [phase for phase in phases if phase.attempt == reruns and phase.outcome != RERUN]
    if not any(phase.when in ("teardown", CRASH_PHASE) for phase in last):
        return None  # never reported, or never finished (a worker died mid-test): missing
    judged = [phase for phase in last if teardown_failure([phase]) is None]
    case = _Case(
        phases=judged,
        overridden=overridden,
        waiver_reason=waiver_reason,
        parse_skip=parse_skip,
        duration=round(sum(phase.duration for phase in phases), 6),
    )
    judgement = next(filter(None, (evaluate(case) for evaluate in _EVALUATORS)), None)
    judgement = judgement or Judgement(outcome="held", duration_s=case.duration)
    return dataclasses.replace(judgement, reruns=reruns)


def teardown_failure(phases: Sequence[PhaseResult]) -> str | None:
    """``"teardown failed: …"`` if a fixture failed to clean up after this test, else ``None``.

    That is the implementation's fixture failing (e.g. an anyio cancel scope exited in another
    task), not the promise: pytest runs it after whichever promise happened to come last.
    """
    failed = next((p for p in phases if p.when == "teardown" and p.outcome == "failed"), None)
    if failed is None:
        return None
    last_line = failed.text.strip().splitlines()[-1] if failed.text.strip() else ""
    return f"teardown failed: {failed.crash or last_line or 'error in teardown'}"
