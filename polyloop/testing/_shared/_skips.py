"""The two outcomes beyond pass/fail: a promise that cannot be checked here, or does not apply.

Both are pytest skips, so a plain ``pytest -rs`` run shows them with a readable reason. The
reason is built from three structured parts (the promise / why it cannot be checked here / how
to check it yourself) and the exception keeps those parts as attributes, so the conformance
plugin can read them from ``call.excinfo`` instead of parsing text. :func:`parse_skip_reason`
recovers them from the text for reports that only kept ``longrepr``.
"""

from __future__ import annotations

import re
from typing import Literal, NoReturn

import pytest

__all__ = [
    "ContractSkip",
    "kept_by_polyloop",
    "not_applicable",
    "parse_skip_reason",
    "unverifiable",
]

SkipOutcome = Literal["unverifiable", "not_applicable"]

_VERIFY = " — verify it yourself: "
_WHY = {
    "unverifiable": " — cannot be checked here: ",
    "not_applicable": " — not applicable to this implementation: ",
}
_SKIPPED_PREFIX = "Skipped: "
# The verify-yourself text of a promise polyloop keeps itself; parse_skip_reason reads it back.
_KEPT_BY = "nothing to do in your implementation: polyloop keeps this promise, documented in "
_SUMMARY_PREFIX = re.compile(r"^SKIPPED \[\d+\] \S+?:\d+: ")


class ContractSkip(pytest.skip.Exception):  # type: ignore[misc, name-defined]
    """A promise was skipped as ``unverifiable`` or ``not_applicable``; carries the three parts.

    ``outcome`` is ``"unverifiable"`` (never checkable at the seam layer; the text says where it
    *is* guarded) or ``"not_applicable"`` (this implementation lacks the capability the promise
    is about). ``promise``, ``why`` and ``verify_yourself`` are the structured text; the message
    pytest shows as the skip reason is
    ``"<promise> — cannot be checked here: <why> — verify it yourself: <verify_yourself>"``
    (``not applicable to this implementation:`` for ``not_applicable``).

    ``kept_by`` is empty unless the library keeps the promise itself (see
    :func:`kept_by_polyloop`): then it holds where the promise is documented (a page of the
    docs, ``docs/…/page.md#section``, or a promise id), never a file a user does not have,
    and ``verify_yourself`` says there is nothing to do.
    """

    def __init__(
        self,
        *,
        outcome: SkipOutcome,
        promise: str,
        why: str,
        verify_yourself: str,
        kept_by: tuple[str, ...] = (),
    ):
        if outcome not in _WHY:
            raise ValueError(
                f"ContractSkip outcome must be 'unverifiable' or 'not_applicable', got {outcome!r}"
            )
        for name, text in (
            ("promise", promise),
            ("why", why),
            ("verify_yourself", verify_yourself),
        ):
            if not isinstance(text, str) or not text.strip():
                raise ValueError(f"ContractSkip {name} must be a non-empty str, got {text!r}")
            for marker in (_VERIFY, *_WHY.values()):
                if marker in text:
                    raise ValueError(
                        f"ContractSkip {name} must not contain {marker.strip()!r}: "
                        "it separates the three parts of the skip reason"
                    )
        self.outcome: SkipOutcome = outcome
        self.promise = promise
        self.why = why
        self.verify_yourself = verify_yourself
        self.kept_by = _checked_references(kept_by)
        message = f"{promise}{_WHY[outcome]}{why}{_VERIFY}{verify_yourself}"
        # Report the skip at the test item (the user's class), not at this helper's raise line.
        super().__init__(msg=message, pytrace=False, _use_item_location=True)

    def as_dict(self) -> dict[str, str]:
        """The structured parts: ``outcome``, ``promise``, ``why``, ``verify_yourself``, and
        ``kept_by`` (where it is documented, joined by ``", "``) when the library keeps it."""
        parts = {
            "outcome": self.outcome,
            "promise": self.promise,
            "why": self.why,
            "verify_yourself": self.verify_yourself,
        }
        if self.kept_by:
            parts["kept_by"] = ", ".join(self.kept_by)
        return parts

    def __reduce__(self) -> tuple[object, ...]:
        # Keyword-only constructor: teach pickle (xdist, multiprocessing) how to rebuild it.
        return (_rebuild, (self.as_dict(),))


# pytest renders a skip's reason as "<exception type>: <message>" and strips only "Skipped: ",
# exactly as it does for its own Skipped (whose module is also "builtins"). Without this a plain
# `pytest -rs` line would start with "polyloop.testing._shared._skips.ContractSkip: ".
ContractSkip.__module__ = "builtins"
ContractSkip.__qualname__ = "Skipped"


def _rebuild(parts: dict[str, str]) -> ContractSkip:
    fields = dict(parts)
    kept_by = tuple(filter(None, fields.pop("kept_by", "").split(", ")))
    return ContractSkip(**fields, kept_by=kept_by)  # type: ignore[arg-type]


# What `kept_by` may name: a page of the documentation (with its section), or a promise id.
# Not a test, a module or any other file of the repository: those are not installed with the
# package, and a user reading a report cannot open them.
_REFERENCE = re.compile(r"docs/[\w./-]+\.md(#[\w-]+)?|[a-z][a-z_]*\.[a-z0-9_]+")


def _checked_references(kept_by: object) -> tuple[str, ...]:
    if not isinstance(kept_by, tuple) or not all(
        isinstance(reference, str) and _REFERENCE.fullmatch(reference) for reference in kept_by
    ):
        raise ValueError(
            "ContractSkip kept_by must be a tuple of references a user can follow: a docs page "
            f"(docs/reference/runtime.md#events) or a promise id (seam.name), got {kept_by!r}"
        )
    return kept_by


def unverifiable(*, promise: str, why: str, verify_yourself: str) -> NoReturn:
    """Skip: this promise can never be checked at the seam layer.

    Say in ``why`` what makes it uncheckable here and in ``verify_yourself`` where it *is*
    guarded (the library's own tests, a fault-injection test of your own, review).
    """
    raise ContractSkip(
        outcome="unverifiable", promise=promise, why=why, verify_yourself=verify_yourself
    )


def not_applicable(*, promise: str, why: str, verify_yourself: str) -> NoReturn:
    """Skip: this implementation lacks the capability the promise is about (decided at runtime).

    Example: an executor that returns within one event-loop tick cannot swallow a cancellation,
    so the cancellation promise says nothing about it.
    """
    raise ContractSkip(
        outcome="not_applicable", promise=promise, why=why, verify_yourself=verify_yourself
    )


def kept_by_polyloop(*, promise: str, why: str, guarded_by: tuple[str, ...]) -> NoReturn:
    """Skip: the library keeps this promise itself, so the implementer has nothing to check.

    An ``unverifiable`` skip whose ``kept_by`` (``guarded_by``) names where the promise is
    documented: a docs page with its section (``docs/reference/runtime.md#events``) or a promise
    id — never polyloop's own tests, which are not installed with the package. A report shows
    it as kept by polyloop, not as "verify it yourself".
    """
    raise ContractSkip(
        outcome="unverifiable",
        promise=promise,
        why=why,
        verify_yourself=_KEPT_BY + ", ".join(guarded_by),
        kept_by=guarded_by,
    )


def parse_skip_reason(text: object) -> dict[str, str] | None:
    """Recover ``{outcome, promise, why, verify_yourself}`` from a :class:`ContractSkip` reason.

    Accepts the bare message, the ``"Skipped: …"`` form pytest stores in a report's
    ``longrepr``, or a whole ``-rs`` summary line. Returns ``None`` for any other skip reason.
    A promise polyloop keeps itself also gets ``kept_by`` (the guarding test ids, ``", "``-joined).
    """
    if not isinstance(text, str):
        return None
    body = text.strip()
    prefix_at = body.find(_SKIPPED_PREFIX)
    if prefix_at != -1:
        body = body[prefix_at + len(_SKIPPED_PREFIX) :]
    else:
        body = _SUMMARY_PREFIX.sub("", body, count=1)
        body = body.split("ContractSkip: ", 1)[-1]
    for outcome, why_marker in _WHY.items():
        before, found, rest = body.partition(why_marker)
        if not found:
            continue
        why, found_verify, verify_yourself = rest.rpartition(_VERIFY)
        if not found_verify or not before or not why or not verify_yourself:
            return None
        parts = {"outcome": outcome, "promise": before, "why": why}
        parts["verify_yourself"] = verify_yourself
        if verify_yourself.startswith(_KEPT_BY):
            parts["kept_by"] = verify_yourself.removeprefix(_KEPT_BY)
        return parts
    return None
