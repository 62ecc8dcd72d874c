"""``ContractBase``: what every contract suite shares, and the interface the plugin relies on.

A *suite* is a subclass of :class:`ContractBase` whose own body sets ``seam`` (the five built-in
ones live in this package; a third party may add a sixth). Its ``test_*`` methods are its
*promises*: promise id ``<seam>.<name>`` for method ``test_<name>``, the docstring states the
promise and why it exists. A *concrete* subclass (yours, or one the plugin generates) inherits a
suite, overrides its fixtures, and is collected by pytest.

Class attributes read by ``pytest_polyloop``:

* ``seam: ClassVar[str]`` — the seam name, also the name of the fixture the suite needs.
* ``samples_fixture: ClassVar[str | None]`` — the samples fixture the suite needs, or ``None``.
* ``optional_samples_fixture: ClassVar[str | None] = None`` — a samples fixture the suite can
  use but does not need (its default returns ``None``); ``RunStoreContract`` has
  ``"store_samples"``. A tag's ``samples=`` for such a seam names the fixture to pass through.
* ``loop_scope: ClassVar[str] = "function"`` — the pytest-asyncio loop scope the async promise
  tests run in; set it to the scope your implementation's fixture lives in.
* ``time_limit_s: ClassVar[float | None] = None`` — the time limit, in seconds, of each phase
  (set-up, probe, tear-down) of this subclass's promise tests; ``None`` takes the session's
  (``--polyloop-timeout``, ini ``polyloop_timeout``, default 120 s), ``0`` means none. A probe
  that runs past it fails with "timed out after N s in <promise id>" (see ``_time_limit``).
* ``waive: ClassVar[Mapping[str, str]] = {}`` — promise id → reason. The kit applies it: a waived
  promise runs under ``xfail(strict=True, reason="waived: <reason>")``, so a failure is an xfail
  (outcome ``waived``) and a pass is a strict XPASS failure (``stale_waiver``). A promise test the
  subclass replaced is not put under xfail: the replacement's own result counts.

Class creation (``__init_subclass__``) of a concrete subclass adds
``pytest.mark.asyncio(loop_scope=cls.loop_scope)`` to the class's *own* ``pytestmark`` (the suites
carry none: pytest reads class marks base-first, so a mark on the suite would pin every user to
its loop scope) and rejects, with :class:`SubclassMisuse`, a ``loop_scope`` pytest-asyncio does not
know and a waiver that names an unknown or unverifiable promise or gives no reason.
"""

from __future__ import annotations

import hashlib
import inspect
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar, Literal, NoReturn, TypeVar

import hypothesis
import pytest

from polyloop import errors as _errors
from polyloop import types as _types
from polyloop._version import __version__
from polyloop.testing._shared._search import searched
from polyloop.testing._shared._time_limit import parse_time_limit
from polyloop.types import canonical_json

__all__ = [
    "ContractBase",
    "PromiseSpec",
    "RecordTypes",
    "SubclassMisuse",
    "UnusableSamples",
    "bounded_settings",
    "samples_hint",
    "suite_hash",
    "unverifiable_promise",
]

KIT_VERSION: str = __version__

PromiseKind = Literal["checked", "unverifiable"]
_F = TypeVar("_F", bound=Callable[..., Any])
_UNVERIFIABLE_ATTR = "__polyloop_unverifiable__"
_LOOP_SCOPES = ("function", "class", "module", "package", "session")


def unverifiable_promise(function: _F) -> _F:
    """Mark a promise test as *unverifiable* (it always skips through ``unverifiable(...)``).

    The mark makes the promise's kind known without running it: ``PromiseSpec.kind`` is
    ``"unverifiable"``, and a waiver naming it is refused (there is nothing to waive).
    """
    setattr(function, _UNVERIFIABLE_ATTR, True)
    return function


@dataclass(frozen=True, slots=True, kw_only=True)
class PromiseSpec:
    """One promise of a suite's catalogue.

    ``id`` is ``"<seam>.<name>"``, ``test_name`` is ``"test_<name>"``, ``doc`` is the cleaned
    docstring, ``kind`` is ``"checked"`` or ``"unverifiable"``, and ``function`` is the suite's
    own function object — ``getattr(cls, spec.test_name) is not spec.function`` tells that a
    subclass replaced the promise's test.
    """

    id: str
    name: str
    test_name: str
    doc: str
    kind: PromiseKind
    function: Callable[..., Any]


def suite_hash(promises: tuple[PromiseSpec, ...] | list[PromiseSpec]) -> str:
    """``"sha256:" + sha256(canonical_json(sorted([id, cleandoc(docstring)] ...)))``.

    Names exactly which contract text a report judged: any promise added, removed or reworded
    changes it.
    """
    pairs = sorted([spec.id, inspect.cleandoc(spec.doc)] for spec in promises)
    return "sha256:" + hashlib.sha256(canonical_json(pairs).encode("utf-8")).hexdigest()


def in_ci() -> bool:
    """Whether ``CI`` says this is a CI run; unset, empty, ``0``, ``false`` and ``no`` say not.

    The one reading of the variable: the project's own tests require their PostgreSQL server
    under it. The kit does not read it: its searches are seeded the same way with or without it
    (``_search.py``).
    """
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def bounded_settings(max_examples: int) -> hypothesis.settings:
    """The Hypothesis settings every property-based promise carries on itself.

    Never a global profile: that would change the user's own tests. ``deadline=None`` because a
    real store or sink is allowed to be slow; the function-scoped-fixture check is suppressed
    because the seam fixture is meant to be shared by the examples of one test, and the
    differing-executors check because an inherited test runs on a new instance per subclass.
    The shrink phase is off (see the comment below). Derandomized, with no example database, in
    any test that carries them (with or without ``CI``): the same code draws the same examples.
    A promise test of a concrete suite subclass runs under the session's search instead
    (:func:`~polyloop.testing._shared._search.searched`): seeded from the promise id and the
    implementation, replaying what a wide search saved, or the wide search itself.
    """
    return hypothesis.settings(
        max_examples=max_examples,
        # No shrink phase: shrinking a failure against a real store or sink can take minutes,
        # and the suite must stay bounded. The falsifying example is still printed, unshrunk.
        phases=[hypothesis.Phase.explicit, hypothesis.Phase.reuse, hypothesis.Phase.generate],
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[
            hypothesis.HealthCheck.function_scoped_fixture,
            hypothesis.HealthCheck.differing_executors,
        ],
    )


class RecordTypes:
    """What the ``records`` fixture returns: the library's types, reachable without imports.

    ``records.action_status.EXECUTED``, ``records.stop_reason.CANCELLED``, ``records.types``
    (the ``polyloop.types`` module), ``records.errors`` (``polyloop.errors``),
    ``records.record_types`` (the six record classes) and every public name of
    ``polyloop.types`` as an attribute (``records.ActionOutcome``).
    """

    action_status = _types.ActionStatus
    stop_reason = _types.StopReason
    types: ModuleType = _types
    errors: ModuleType = _errors
    record_types = _types.RECORD_TYPES

    def __getattr__(self, name: str) -> Any:
        if name in _types.__all__:
            return getattr(_types, name)
        raise AttributeError(f"records has no attribute {name!r} (see polyloop.types.__all__)")

    def __repr__(self) -> str:
        return "RecordTypes(polyloop.types)"


class ContractBase:
    """Base of every contract suite. See the module docstring for the plugin interface."""

    seam: ClassVar[str]
    samples_fixture: ClassVar[str | None] = None
    optional_samples_fixture: ClassVar[str | None] = None
    loop_scope: ClassVar[str] = "function"
    time_limit_s: ClassVar[float | None] = None
    waive: ClassVar[Mapping[str, str]] = {}

    _catalogue: ClassVar[tuple[PromiseSpec, ...]] = ()
    _is_suite: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "seam" in cls.__dict__:
            cls._is_suite = True
            cls._catalogue = _build_catalogue(cls)
            if "__test__" not in cls.__dict__:
                cls.__test__ = False  # type: ignore[attr-defined]  # a suite is not runnable until someone supplies fixtures
            return
        cls._is_suite = False
        if not any(getattr(base, "_is_suite", False) for base in cls.__mro__[1:]):
            raise TypeError(
                f"{cls.__qualname__} inherits ContractBase directly: inherit one of the suites "
                "(e.g. ActionExecutorContract), or set `seam` in the class body to define a new "
                "suite"
            )
        if "__test__" not in cls.__dict__:
            cls.__test__ = True  # type: ignore[attr-defined]
        _validate_loop_scope(cls)
        _validate_time_limit(cls)
        _validate_waivers(cls)
        _read_outer_samples(cls)
        own = cls.__dict__.get("pytestmark", [])
        own_marks = list(own) if isinstance(own, list | tuple) else [own]
        marks = [*own_marks, pytest.mark.asyncio(loop_scope=cls.loop_scope)]
        cls.pytestmark = marks  # type: ignore[attr-defined]

    @classmethod
    def promises(cls) -> tuple[PromiseSpec, ...]:
        """The catalogue of the suite this class inherits from, sorted by id.

        Built from the suite's own ``test_*`` methods, never from a subclass's overrides.
        ``ContractBase`` itself has no catalogue (empty tuple).
        """
        return cls._catalogue

    @classmethod
    def promise_for_test(cls, test_name: str) -> PromiseSpec | None:
        """The promise a test method name belongs to, or ``None``."""
        for spec in cls._catalogue:
            if spec.test_name == test_name:
                return spec
        return None

    @pytest.fixture
    def records(self) -> RecordTypes:
        """The library's types (``records.action_status.EXECUTED``, ``records.types``, …)."""
        return RecordTypes()

    @pytest.fixture(autouse=True)
    def _polyloop_waiver(self, request: pytest.FixtureRequest) -> None:
        """Run a waived promise under ``xfail(strict=True)``: fail → waived, pass → stale.

        Not a replaced promise test: the replacement's own result counts (``overridden`` if it
        passes, ``violated`` if it fails), so plain ``pytest`` stays green for a passing one.
        """
        test_name = getattr(request.node, "originalname", None) or request.node.name
        spec = type(self).promise_for_test(test_name)
        replaced = spec is not None and getattr(type(self), test_name, None) is not spec.function
        if spec is not None and spec.id in type(self).waive and not replaced:
            reason = type(self).waive[spec.id]
            request.applymarker(pytest.mark.xfail(strict=True, reason=f"waived: {reason}"))

    @pytest.fixture(autouse=True)
    def _polyloop_search(self, request: pytest.FixtureRequest) -> Iterator[None]:
        """Run a property-based promise under the session's search: seeded from the promise id
        and this implementation by default, the wide search when asked (``_search.py``)."""
        test_name = getattr(request.node, "originalname", None) or request.node.name
        spec = type(self).promise_for_test(test_name)
        if spec is None:
            yield
            return
        with searched(request, spec.id):
            yield


def _build_catalogue(suite: type[ContractBase]) -> tuple[PromiseSpec, ...]:
    seam = suite.__dict__["seam"]
    if not isinstance(seam, str) or not seam.isidentifier():
        raise TypeError(f"{suite.__qualname__}.seam must be an identifier str, got {seam!r}")
    inherited = {spec.test_name: spec for spec in suite._catalogue}
    specs: dict[str, PromiseSpec] = {}
    for test_name, spec in inherited.items():
        name = test_name.removeprefix("test_")
        specs[test_name] = PromiseSpec(
            id=f"{seam}.{name}",
            name=name,
            test_name=test_name,
            doc=spec.doc,
            kind=spec.kind,
            function=spec.function,
        )
    for test_name, function in _own_tests(suite):
        if not test_name.startswith("test_") or not callable(function):
            continue
        doc = inspect.getdoc(function)
        if not doc:
            raise TypeError(
                f"{suite.__qualname__}.{test_name} has no docstring: a promise must state what "
                "it promises and why"
            )
        name = test_name.removeprefix("test_")
        inner = getattr(getattr(function, "hypothesis", None), "inner_test", function)
        unverifiable = bool(getattr(function, _UNVERIFIABLE_ATTR, False)) or bool(
            getattr(inner, _UNVERIFIABLE_ATTR, False)
        )
        specs[test_name] = PromiseSpec(
            id=f"{seam}.{name}",
            name=name,
            test_name=test_name,
            doc=inspect.cleandoc(function.__doc__ or doc),
            kind="unverifiable" if unverifiable else "checked",
            function=function,
        )
    return tuple(sorted(specs.values(), key=lambda spec: spec.id))


def suite_of(cls: type[Any]) -> type[ContractBase]:
    """The suite ``cls`` inherits (the class whose body sets ``seam``): what a promise family's
    test names when it speaks of the suite, whichever subclass runs it."""
    return next(base for base in cls.__mro__ if "seam" in base.__dict__)


def _own_tests(suite: type[ContractBase]) -> list[tuple[str, Any]]:
    """The attributes a suite defines: its own body's, and its promise families' — the bases it
    lists that are no suite (a long suite split by promise family, one module each)."""
    families = [
        base
        for base in reversed(suite.__mro__[1:])
        if base is not object and not issubclass(base, ContractBase)
    ]
    return [item for cls in (*families, suite) for item in cls.__dict__.items()]


def samples_fixture_names(suite: type[Any]) -> tuple[str, ...]:
    """The samples fixtures of a suite: the one it needs, then the one it can use."""
    names = (
        getattr(suite, "samples_fixture", None),
        getattr(suite, "optional_samples_fixture", None),
    )
    return tuple(name for name in names if isinstance(name, str) and name)


def samples_hint(suite: type[Any], fixture: str, value: str) -> str:
    """How to give ``suite`` the samples fixture ``fixture`` returning ``value``, on every route
    that finds an implementation: a "verify it yourself" text that works for each of them."""
    seam = getattr(suite, "seam", "?")
    routes = [
        f"return {value} from a fixture named `{fixture}` — a method of your "
        f"{suite.__name__} subclass, or, for a tagged or polyloop_seams-named fixture, a "
        "fixture of that name beside it (its conftest.py or test module)"
    ]
    if fixture == (samples_fixture_names(suite) or (None,))[0]:  # what samples=... feeds
        routes.append(
            f"or name your own with @pytest_polyloop.seam({seam!r}, samples='<fixture>') "
            f"(in polyloop_seams: {seam}:<fixture>:<samples fixture>)"
        )
    return ", ".join(routes)


def _read_outer_samples(cls: type[ContractBase]) -> None:
    """Give a concrete subclass that does not override a samples fixture one that reads a
    fixture of the same name from outside the class (a conftest or the test module), and falls
    back to the suite's default only if there is none.

    Without it a class fixture shadows every outer fixture of its name: a ``store_samples``
    fixture in a conftest did nothing for a subclass or a tagged fixture, silently. With it the
    samples reach the kit the same way whichever route found the implementation.
    """
    for name in samples_fixture_names(cls):
        owner = next((base for base in cls.__mro__ if name in base.__dict__), None)
        if owner is None or "seam" not in owner.__dict__:
            continue  # overridden below the suite (by the user, or the plugin's samples=)
        default = inspect.unwrap(owner.__dict__[name])
        parameters = list(inspect.signature(default).parameters)
        if parameters == ["self"]:  # a default we can call ourselves
            setattr(cls, name, _outer_or_default(name, default))


def _outer_or_default(name: str, default: Callable[[Any], Any]) -> Any:
    def samples(self: ContractBase, request: pytest.FixtureRequest) -> Any:
        try:
            # Requested from inside the fixture `name`: pytest resolves it one level up.
            return request.getfixturevalue(name)
        except pytest.FixtureLookupError as error:
            if error.argname != name:
                raise  # the outer fixture exists and is broken: its own error counts
        return default(self)

    samples.__name__ = samples.__qualname__ = name
    samples.__doc__ = default.__doc__
    # Read by the conformance plugin: a setup error in these samples is located at the outer
    # fixture (pytest_polyloop._generate.OUTER_ATTRIBUTE names the same attribute).
    samples.__polyloop_outer__ = True  # type: ignore[attr-defined]
    return pytest.fixture(name=name)(samples)


def _validate_loop_scope(cls: type[ContractBase]) -> None:
    if cls.loop_scope not in _LOOP_SCOPES:
        raise SubclassMisuse(
            cls, f"loop_scope must be one of {', '.join(_LOOP_SCOPES)}, got {cls.loop_scope!r}"
        )


def _validate_time_limit(cls: type[ContractBase]) -> None:
    if cls.time_limit_s is None:
        return
    try:
        parse_time_limit(cls.time_limit_s, "time_limit_s")
    except ValueError as error:
        raise SubclassMisuse(cls, str(error)) from None


class SubclassMisuse(pytest.Collector.CollectError, ValueError):
    """A concrete subclass's class settings are wrong: one line, ``path:line: Class: problem``.

    A ``CollectError`` so that plain pytest prints the line, not the kit's traceback, as the
    module's collection error; the plugin turns it into a usage error (exit 4).
    """

    def __init__(self, cls: type[Any], problem: str) -> None:
        self.path, self.line = _class_location(cls)
        self.subject = cls.__qualname__
        self.problem = problem
        where = _relative(self.path) + (f":{self.line}" if self.line else "")
        super().__init__(f"{where}: {self.subject}: {problem}")


def _class_location(cls: type[Any]) -> tuple[str, int]:
    """``(source file, line of the class statement)``; the module name and 0 if unknown."""
    try:
        path = inspect.getsourcefile(cls)
        line = inspect.getsourcelines(cls)[1]
    except (OSError, TypeError):  # no source: a class made in a REPL or by exec
        return str(cls.__module__), 0
    return (path, line) if path else (str(cls.__module__), 0)


def _relative(path: str) -> str:
    try:
        return Path(path).resolve().relative_to(Path.cwd().resolve()).as_posix()
    except (ValueError, OSError):
        return path


def _validate_waivers(cls: type[ContractBase]) -> None:
    waive = cls.waive
    if not isinstance(waive, Mapping):
        raise SubclassMisuse(
            cls, f"waive must map promise ids to reasons, got {type(waive).__name__}"
        )
    catalogue = {spec.id: spec for spec in cls._catalogue}
    for promise_id, reason in waive.items():
        spec = catalogue.get(promise_id)
        if spec is None:
            known = ", ".join(sorted(catalogue))
            raise SubclassMisuse(
                cls,
                f"waive names unknown promise {promise_id!r}; the {cls.seam} promises are: {known}",
            )
        if spec.kind == "unverifiable":
            raise SubclassMisuse(
                cls,
                f"waive names {promise_id!r}, an unverifiable promise: it is never checked "
                "here, so there is nothing to waive",
            )
        if not isinstance(reason, str) or not reason.strip():
            raise SubclassMisuse(
                cls, f"waive[{promise_id!r}]: a waiver needs a reason, got {reason!r}"
            )


_T = TypeVar("_T")


class UnusableSamples(pytest.fail.Exception):  # type: ignore[misc, name-defined]
    """The samples an implementation gave are of a kind the kit cannot use (wrong type, a
    factory that cannot be imported): the implementation's setup failed, no promise did.

    A ``pytest.fail`` (one line, no traceback) in a plain ``pytest`` run; the conformance
    plugin reports the implementation once as a ``setup_error``.
    """

    def __init__(self, message: str, fixture: str | None = None) -> None:
        super().__init__(msg=message, pytrace=False)
        #: The suite's samples fixture the unusable samples came from (``store_samples``): the
        #: conformance report locates the setup error at the fixture that provides it.
        self.fixture = fixture


def require_samples(value: object, expected: type[_T], fixture: str) -> _T:
    """Raise :class:`UnusableSamples` unless the samples fixture returned ``expected``."""
    if not isinstance(value, expected):
        raise UnusableSamples(
            f"the `{fixture}` fixture must return a polyloop.testing.{expected.__name__}, got "
            f"{type(value).__name__}: build one with {expected.__name__}(...)",
            fixture,
        )
    return value


def require_seam(value: object, fixture: str, method: str, signature: str) -> None:
    """Fail with a clear message unless the seam fixture returned something with ``method``."""
    if not callable(getattr(value, method, None)):
        pytest.fail(
            f"the `{fixture}` fixture returned {type(value).__name__}, which has no "
            f"`{signature}` method",
            pytrace=False,
        )


def missing_fixture(suite: str, fixture: str, what: str) -> NoReturn:
    """The body of an unoverridden fixture: say exactly what to override and what to return."""
    pytest.fail(
        f"{suite} needs the `{fixture}` fixture: override it in your subclass "
        f"(`@pytest.fixture` method named `{fixture}`) and return {what}",
        pytrace=False,
    )
