"""polyloop.testing — the contract kit: one inheritable suite per seam.

Inherit a suite, override its fixtures, and pytest checks every promise of the seam against
your implementation::

    class TestMyExecutor(ActionExecutorContract):
        @pytest.fixture
        def action_executor(self):
            return MyExecutor()

        @pytest.fixture
        def action_samples(self):
            return ActionSamples(executes_cleanly=..., executes_but_errors=...)

Needs the ``testing`` extra (pytest, pytest-asyncio, hypothesis): ``pip install
polyloop[testing]``. The runtime core never imports this package.

Public surface: the five suites and :class:`ContractBase`; the samples types (the optional
:class:`StoreSamples` and :class:`EventSinkSamples`, and the optional fields of the others, turn
the failure and delivery promises on); the skip helpers :func:`unverifiable` /
:func:`not_applicable` / :func:`kept_by_polyloop` and :class:`ContractSkip`; the catalogue
interface :class:`PromiseSpec`, :func:`suite_hash`, :data:`BUILTIN_SUITES`,
:data:`KIT_VERSION`; :class:`SubclassMisuse` (a subclass's bad waiver); the Hypothesis
strategies in :mod:`polyloop.testing.strategies`; and :class:`RunStoreStateMachine`, which
drives any store against the kit's own model of the append rules.
"""

from __future__ import annotations

try:
    import hypothesis  # noqa: F401
    import pytest
except ImportError as _missing:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        f"polyloop.testing needs the 'testing' extra ({_missing.name} is not installed): "
        "pip install 'polyloop[testing]'"
    ) from _missing

# Rewrite the suites' asserts (pytest shows the compared values) — must precede their import.
pytest.register_assert_rewrite(
    "polyloop.testing._action_executor",
    "polyloop.testing._decision_parser",
    "polyloop.testing._model_client",
    "polyloop.testing._event_sink",
    "polyloop.testing._run_store",
    "polyloop.testing._shared",
)

from polyloop.testing import strategies  # noqa: E402
from polyloop.testing._action_executor._suite import ActionExecutorContract  # noqa: E402
from polyloop.testing._decision_parser._suite import DecisionParserContract  # noqa: E402
from polyloop.testing._event_sink._suite import EventSinkContract  # noqa: E402
from polyloop.testing._model_client._suite import ModelClientContract  # noqa: E402
from polyloop.testing._run_store._stateful import RunStoreStateMachine  # noqa: E402
from polyloop.testing._run_store._suite import RunStoreContract  # noqa: E402
from polyloop.testing._shared._base import (  # noqa: E402
    KIT_VERSION,
    ContractBase,
    PromiseSpec,
    RecordTypes,
    SubclassMisuse,
    UnusableSamples,
    bounded_settings,
    samples_hint,
    suite_hash,
    unverifiable_promise,
)
from polyloop.testing._shared._samples import (  # noqa: E402
    GOLDEN_VARIATIONS,
    ActionSamples,
    EventSinkSamples,
    GoldenRequest,
    ModelSamples,
    ParserSamples,
    StoreSamples,
)
from polyloop.testing._shared._skips import (  # noqa: E402
    ContractSkip,
    kept_by_polyloop,
    not_applicable,
    parse_skip_reason,
    unverifiable,
)

#: Seam name → built-in suite. The plugin registers these through its own hook, like a sixth.
BUILTIN_SUITES: dict[str, type[ContractBase]] = {
    suite.seam: suite
    for suite in (
        ModelClientContract,
        DecisionParserContract,
        ActionExecutorContract,
        EventSinkContract,
        RunStoreContract,
    )
}

__all__ = [
    "BUILTIN_SUITES",
    "GOLDEN_VARIATIONS",
    "KIT_VERSION",
    "ActionExecutorContract",
    "ActionSamples",
    "ContractBase",
    "ContractSkip",
    "DecisionParserContract",
    "EventSinkContract",
    "EventSinkSamples",
    "GoldenRequest",
    "ModelClientContract",
    "ModelSamples",
    "ParserSamples",
    "PromiseSpec",
    "RecordTypes",
    "RunStoreContract",
    "RunStoreStateMachine",
    "StoreSamples",
    "SubclassMisuse",
    "UnusableSamples",
    "bounded_settings",
    "kept_by_polyloop",
    "not_applicable",
    "parse_skip_reason",
    "samples_hint",
    "strategies",
    "suite_hash",
    "unverifiable",
    "unverifiable_promise",
]
