"""The two hooks ``pytest_polyloop`` adds to pytest (registered with ``pytest_addhooks``).

A plugin or conftest implements them like any pytest hook; since they only exist when this
plugin is loaded, a third-party implementation should say ``@pytest.hookimpl(optionalhook=True)``
so it does not break a session that runs without ``pytest_polyloop``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pytest_polyloop._registry import SeamRegistry


@pytest.hookspec(historic=True)
def pytest_polyloop_register_seams(registry: SeamRegistry) -> None:
    """Register contract suites: ``registry.add(name, suite, samples_fixture)``.

    Called once per session with ``--polyloop-conformance``, *historically*: a plugin or conftest
    registered later (a conftest deep in the tree is loaded during collection) still receives
    the call. The five built-in seams are registered through this hook too, so a third party's
    sixth seam is handled exactly like them: tagged fixtures of that seam get the suite
    generated, run and reported. ``registry.leave_out(name, hint=..., extra=..., seam=...)``
    lists an implementation this machine cannot judge (a missing extra) in the report.

    :param registry: the session's :class:`pytest_polyloop.SeamRegistry`.
    """


@pytest.hookspec
def pytest_polyloop_report(report: dict[str, Any], config: pytest.Config) -> None:
    """Receive the finished conformance report (schema ``polyloop-conformance/2``).

    Called once, on the process that holds the merged results (the xdist controller under
    ``-n``), after the verdict is decided and before the JSON/Markdown files are written.
    Implement it to add a format or upload the report; do not mutate it.

    :param report: the report as plain JSON-ready data (see ``report.schema.json``).
    :param config: the pytest config.
    """
