"""The time limit on every contract item's phases: where it comes from and how a timeout reads.

The watchdog itself lives in the kit (``polyloop.testing._shared._time_limit``): this module picks
the limit for an item — the subclass's ``time_limit_s``, else ``--polyloop-timeout``, else the ini
key ``polyloop_timeout``, else the kit's default — and turns a :class:`ProbeTimedOut` into one
readable line for the report. It is active whenever the plugin is loaded, with or without
``--polyloop-conformance``, and only for items of a contract suite's concrete subclass.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

import pytest

__all__ = ["configure", "phase_limit", "timed_out_text"]

_LIMIT_KEY = pytest.StashKey[float | None]()
_FIRED_KEY = pytest.StashKey[dict[str, Any]]()
_KIT_MODULE = "polyloop.testing._shared._time_limit"
_PHASES = {"setup": " (setting up the implementation)", "call": "", "teardown": " (tearing down)"}


def configure(config: pytest.Config) -> None:
    """Read the session's limit once; a bad value is a usage error (exit 4)."""
    option = config.getoption("polyloop_timeout", None)
    value, source = (
        (option, "--polyloop-timeout")
        if option is not None
        else (config.getini("polyloop_timeout") or None, "polyloop_timeout (ini)")
    )
    if value is None:
        config.stash[_LIMIT_KEY] = _kit_default()
        return
    try:
        config.stash[_LIMIT_KEY] = _parse(value, source)
    except ValueError as error:
        raise pytest.UsageError(f"polyloop: {error}") from None


def _kit_default() -> float | None:
    try:
        from polyloop.testing._shared._time_limit import DEFAULT_TIME_LIMIT_S
    except ImportError:  # the testing extra is missing: there are no contract items to limit
        return None
    return DEFAULT_TIME_LIMIT_S


def _parse(value: object, source: str) -> float | None:
    # The kit's parser when it is importable; the same rule without it (a passive plugin).
    try:
        from polyloop.testing._shared._time_limit import parse_time_limit
    except ImportError:
        return None
    return parse_time_limit(value, source)


def _promise_id(item: pytest.Item) -> tuple[type[Any], str] | None:
    cls = getattr(item, "cls", None)
    if cls is None or getattr(cls, "_is_suite", True) or not hasattr(cls, "promise_for_test"):
        return None
    spec = cls.promise_for_test(getattr(item, "originalname", None) or item.name)
    return None if spec is None else (cls, spec.id)


def phase_limit(item: pytest.Item, phase: str) -> Any:
    """A context manager that bounds one phase of a contract item; a no-op for other items.

    Whether it fired is kept on the item for :func:`timed_out_text`: the exception it raised
    may reach pytest wrapped (Hypothesis wraps one raised while it draws) or not at all.
    """
    found = _promise_id(item)
    if found is None or _KIT_MODULE not in sys.modules:
        return nullcontext()
    cls, promise_id = found
    own = getattr(cls, "time_limit_s", None)
    seconds = (own or None) if own is not None else item.config.stash.get(_LIMIT_KEY, None)
    return _bounded(item, phase, seconds, promise_id + _PHASES[phase])


@contextmanager
def _bounded(item: pytest.Item, phase: str, seconds: float | None, what: str) -> Iterator[None]:
    kit = sys.modules[_KIT_MODULE]
    with kit.time_limit(seconds, what) as watchdog:
        item.stash.setdefault(_FIRED_KEY, {})[phase] = watchdog
        yield


def timed_out_text(item: pytest.Item, phase: str) -> str | None:
    """The report's text for a phase whose watchdog fired: one line, then where it struck."""
    watchdog = item.stash.get(_FIRED_KEY, {}).get(phase)
    return watchdog.text() if watchdog is not None and watchdog.fired else None
