"""Generated suites: one subclass of the seam's suite per implementation, and its collectors.

The generated class overrides the suite's seam fixture (and samples fixture) with a fixture
that takes the user's tagged fixture *by name as a real argument*, so pytest resolves it like
any fixture dependency: a parametrised fixture fans out to one implementation per param, an
async fixture is set up by pytest-asyncio in its own loop scope.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

import pytest

from pytest_polyloop._discovery import Implementation
from pytest_polyloop._registry import RegisteredSeam

__all__ = [
    "GENERATED_ATTRIBUTE",
    "OUTER_ATTRIBUTE",
    "PASSTHROUGH_ATTRIBUTE",
    "generate_suite",
    "implementation_of",
    "is_generated",
    "suite_name",
]

GENERATED_ATTRIBUTE = "__polyloop_implementation__"
# On a generated fixture that only returns another one: the name of that one.
PASSTHROUGH_ATTRIBUTE = "__polyloop_passthrough__"
# On the kit's samples fixture that returns the fixture of its name one level up, if any
# (polyloop.testing._shared._base._outer_or_default sets it).
OUTER_ATTRIBUTE = "__polyloop_outer__"
_NOT_NAME = re.compile(r"[^0-9A-Za-z_]+")


def suite_name(suite: type[Any], implementation_id: str) -> str:
    """``<Suite>__<id>`` with only ``[0-9A-Za-z_]``: addressable on the command line and by
    ``--lf`` (a ``[`` or ``::`` inside a collector name breaks both)."""
    return f"{suite.__name__}__{_NOT_NAME.sub('_', implementation_id).strip('_') or 'impl'}"


def _passthrough_fixture(name: str, source: str) -> Any:
    """A fixture ``name`` that returns the fixture ``source``, requested as a real argument."""

    def passthrough(self: object, **requested: object) -> object:
        return requested[source]

    setattr(passthrough, PASSTHROUGH_ATTRIBUTE, source)
    passthrough.__name__ = name
    passthrough.__qualname__ = name
    passthrough.__doc__ = f"The implementation under test: the value of the `{source}` fixture."
    passthrough.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
            inspect.Parameter(source, inspect.Parameter.KEYWORD_ONLY),
        ]
    )
    return pytest.fixture(name=name)(passthrough)


def generate_suite(
    implementation: Implementation, registered: RegisteredSeam, module_name: str
) -> type[Any]:
    """The suite subclass for one implementation (the kit adds the asyncio mark and waivers)."""
    suite = registered.suite
    name = suite_name(suite, implementation.id)
    namespace: dict[str, Any] = {
        "__module__": module_name,
        "__qualname__": name,
        "__doc__": f"{suite.__name__} run against the `{implementation.fixture}` fixture.",
        "__test__": True,
        GENERATED_ATTRIBUTE: implementation,
        "waive": dict(implementation.waive),
        "loop_scope": implementation.loop_scope,
        registered.suite.seam: _passthrough_fixture(suite.seam, implementation.fixture),
    }
    target = registered.samples_target
    if target is not None and implementation.samples is not None:
        namespace[target] = _passthrough_fixture(target, implementation.samples)
    generated: type[Any] = type(name, (suite,), namespace)
    return generated


def is_generated(cls: object) -> bool:
    """Whether ``cls`` is a class this module generated."""
    return isinstance(cls, type) and GENERATED_ATTRIBUTE in cls.__dict__


def implementation_of(cls: type[Any]) -> Implementation:
    """The implementation a generated class was made for."""
    implementation: Implementation = cls.__dict__[GENERATED_ATTRIBUTE]
    return implementation
