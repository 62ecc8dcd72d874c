"""Tagging a fixture as a seam implementation: the ``seam(...)`` decorator and reading tags back.

A tag is plain data stored as an attribute on every object of the fixture's ``__wrapped__``
chain. pytest ≥ 8.4 wraps a fixture function in a ``FixtureFunctionDefinition`` whose
``update_wrapper`` copies the inner ``__dict__`` *outward* when ``@pytest.fixture`` is applied
last, but nothing flows *inward* when ``seam`` is applied last — so ``seam`` walks the chain
itself, and the tag is found whichever order the two decorators were written in.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

__all__ = ["LOOP_SCOPES", "SeamTag", "read_tag", "seam"]

TAG_ATTRIBUTE = "__polyloop_seam__"
MARKER_NAME = "polyloop_seam"
# pytest >= 9 refuses @pytest.mark.polyloop_seam on a fixture with this bare message.
MARKS_ON_FIXTURES = "Marks cannot be applied to fixtures"
MARKER_HINT = (
    "pytest 9 refuses marks on fixtures, @pytest.mark.polyloop_seam included: tag the fixture "
    "with @pytest_polyloop.seam(...) instead (same arguments, above or below @pytest.fixture)"
)
LOOP_SCOPES = ("function", "class", "module", "package", "session")

TagRoute = Literal["decorator", "marker", "ini"]
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True, kw_only=True)
class SeamTag:
    """What a tag says: which seam, which samples fixture, waivers, id and loop scope."""

    seam: str
    samples: str | None = None
    waive: Mapping[str, str] = field(default_factory=dict)
    id: str | None = None
    loop_scope: str | None = None
    route: TagRoute = "decorator"


def make_tag(
    name: object,
    *,
    samples: object = None,
    waive: object = None,
    id: object = None,
    loop_scope: object = None,
    route: TagRoute = "decorator",
) -> SeamTag:
    """Validate the arguments of a tag (decorator, marker or ini line) and build it.

    Raises ``TypeError``/``ValueError`` naming the argument, so a typo fails where it was made.
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise TypeError(f"seam name must be a seam name such as 'action_executor', got {name!r}")
    if samples is not None and (not isinstance(samples, str) or not samples.isidentifier()):
        raise TypeError(f"samples must be the name of a fixture (a str), got {samples!r}")
    waivers: dict[str, str] = {}
    if waive is not None:
        if not isinstance(waive, Mapping):
            raise TypeError(
                f"waive must map promise ids to reasons, e.g. "
                f"{{'{name}.some_promise': 'why'}}, got {type(waive).__name__}"
            )
        for promise_id, reason in waive.items():
            if not isinstance(promise_id, str) or not isinstance(reason, str) or not reason.strip():
                raise ValueError(f"waive[{promise_id!r}]: a waiver needs a reason, got {reason!r}")
            waivers[promise_id] = reason
    if id is not None and (not isinstance(id, str) or not id.strip() or "::" in id or "[" in id):
        raise ValueError(f"id must be a non-empty str without '::' or '[', got {id!r}")
    if loop_scope is not None and loop_scope not in LOOP_SCOPES:
        raise ValueError(f"loop_scope must be one of {', '.join(LOOP_SCOPES)}, got {loop_scope!r}")
    return SeamTag(
        seam=name, samples=samples, waive=waivers, id=id, loop_scope=loop_scope, route=route
    )


def seam(
    name: str,
    *,
    samples: str | None = None,
    waive: Mapping[str, str] | None = None,
    id: str | None = None,
    loop_scope: str | None = None,
) -> Callable[[_T], _T]:
    """Tag a fixture as an implementation of seam ``name`` (above or below ``@pytest.fixture``).

    ``samples`` names the fixture returning the seam's samples (required for seams whose suite
    needs samples: ``action_executor``, ``decision_parser``, ``model_client``); ``waive`` maps
    promise ids to the reason they are waived; ``id`` replaces the fixture name as the
    implementation id in the report; ``loop_scope`` is the pytest-asyncio loop scope the fixture
    lives in (``"module"`` for a module-scoped async fixture). With
    ``pytest --polyloop-conformance`` the plugin runs the seam's contract suite against the
    fixture. Without the flag the tag does nothing. Example::

        @pytest_polyloop.seam("action_executor", samples="my_samples")
        @pytest.fixture
        def my_executor():
            return MyExecutor()
    """
    tag = make_tag(name, samples=samples, waive=waive, id=id, loop_scope=loop_scope)

    def tag_fixture(target: _T) -> _T:
        if isinstance(target, type):  # the plugin never reads a tag on a class: refuse it
            raise TypeError(
                f"@seam({name!r}) tags a fixture, not a class: a suite subclass is found by "
                "inheriting the suite, and gets its samples by overriding the suite's samples "
                "fixture (e.g. `store_samples`) in the class body"
            )
        if not callable(target):
            raise TypeError(f"@seam({name!r}) must decorate a fixture function, got {target!r}")
        seen: set[int] = set()
        link: object = target
        while link is not None and id_of(link) not in seen:
            seen.add(id_of(link))
            try:
                setattr(link, TAG_ATTRIBUTE, tag)
            except (AttributeError, TypeError) as error:
                raise TypeError(
                    f"@seam({name!r}) cannot tag {link!r}: it must decorate a fixture function"
                ) from error
            link = getattr(link, "__wrapped__", None)
        return target

    return tag_fixture


def id_of(value: object) -> int:
    """Identity of an object (``seam`` has an argument named ``id``, which shadows the builtin)."""
    return builtins.id(value)


def read_tag(value: object) -> SeamTag | None:
    """The tag on ``value`` or anywhere down its ``__wrapped__`` chain, else ``None``.

    Also reads ``@pytest.mark.polyloop_seam(...)`` written under ``@pytest.fixture`` (only
    pytest 8 accepts that spelling); the decorator wins if both are present.
    """
    seen: set[int] = set()
    link: object = value
    marker_tag: SeamTag | None = None
    while link is not None and id_of(link) not in seen:
        seen.add(id_of(link))
        tag = _own_attribute(link, TAG_ATTRIBUTE)
        if isinstance(tag, SeamTag):
            return tag
        if marker_tag is None:
            marker_tag = _tag_from_marks(_own_attribute(link, "pytestmark"))
        link = _own_attribute(link, "__wrapped__")
    return marker_tag


def _own_attribute(value: object, name: str) -> Any:
    try:
        return getattr(value, name, None)
    except Exception:  # an object that raises on attribute access is not tagged
        return None


def _tag_from_marks(marks: object) -> SeamTag | None:
    if not isinstance(marks, list | tuple):
        return None
    for mark in marks:
        if getattr(mark, "name", None) != MARKER_NAME:
            continue
        args = tuple(getattr(mark, "args", ()))
        kwargs = dict(getattr(mark, "kwargs", {}))
        if len(args) != 1:
            raise TypeError(
                f"@pytest.mark.{MARKER_NAME} takes exactly one positional argument (the seam "
                f"name), got {args!r}; prefer @pytest_polyloop.seam(...)"
            )
        unknown = set(kwargs) - {"samples", "waive", "id", "loop_scope"}
        if unknown:
            raise TypeError(
                f"@pytest.mark.{MARKER_NAME} got unknown arguments {sorted(unknown)}; "
                "accepted: samples, waive, id, loop_scope"
            )
        return make_tag(args[0], route="marker", **kwargs)
    return None
