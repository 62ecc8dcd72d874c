"""Tool argument validation: JSON Schema Draft 2020-12, as the ecosystem writes it.

One entry point per question, used by :class:`~polyloop.tools.Tool` (at construction) and by
every executor that validates tool arguments:

* :func:`check_schema` — raise a one-line ``ValueError`` if a schema cannot be used here;
* :func:`validate` — the problems of some arguments under a schema, or ``None`` if they pass;
* :func:`violations` — the same problems as data: where, which keyword, what is wrong.

Two validators, one verdict. With the ``schema`` extra installed (``jsonschema``) every schema
is checked against the 2020-12 metaschema and arguments are validated by
``jsonschema.Draft202012Validator``. Without it, a built-in validator implements the subset
:data:`BUILTIN_KEYWORDS` and agrees with ``jsonschema`` exactly on it (an integral float such as
``2.0`` is an ``integer``; ``true`` is never a number; ``1`` equals ``1.0`` in ``enum``); a
schema using any other keyword is refused naming it and the extra — never validated as if the
keyword were absent. ``format`` is an annotation in both, not asserted: ``jsonschema``'s own
default for 2020-12, so the two validators cannot disagree on it.
"""

from __future__ import annotations

import functools
import json
import operator
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

__all__ = [
    "BUILTIN_KEYWORDS",
    "INSTALL_HINT",
    "Violation",
    "check_schema",
    "validate",
    "violations",
]

INSTALL_HINT = "pip install 'polyloop[schema]'"

_SHOWN_PROBLEMS = 5  # problems listed in one refusal; the rest are counted
_SHOWN_CHARS = 200  # one problem's text is cut here: a validator may echo a huge value

Violation = tuple[str, str, str]  # (location, the schema keyword that failed, what is wrong)
Problems = Callable[[object], list[Violation]]


def check_schema(schema: Mapping[str, Any]) -> None:
    """Raise ``ValueError`` (one line, saying what to do) if ``schema`` cannot be used here.

    Refused: a schema that is not valid JSON Schema 2020-12, a ``$ref`` that points to nothing
    (or outside the schema: nothing is ever fetched), ``$ref``\\ s that loop without validating
    anything, and — without the ``schema`` extra — any keyword outside :data:`BUILTIN_KEYWORDS`.
    """
    _compile(_canonical(schema), _jsonschema() is not None)


def validate(schema: Mapping[str, Any], args: Mapping[str, Any]) -> str | None:
    """What is wrong with ``args`` under ``schema`` (``None``: they pass).

    The text lists up to five violations, each with its location (``labels[0].color: …``), and
    counts the rest. Raises ``ValueError`` like :func:`check_schema` for an unusable schema.
    """
    problems = violations(schema, args)
    if not problems:
        return None
    shown = [
        f"{_cut(where, tail=True)}: {_cut(what)}" for where, _, what in problems[:_SHOWN_PROBLEMS]
    ]
    more = len(problems) - len(shown)
    return "; ".join(shown) + (f"; and {more} more" if more else "")


def violations(schema: Mapping[str, Any], args: Mapping[str, Any]) -> list[Violation]:
    """Every violation of ``schema`` by ``args``: ``(location, keyword, message)``, e.g.
    ``("b", "maximum", "5000 is greater than the maximum of 1000")`` (``[]``: they pass).

    Raises ``ValueError`` like :func:`check_schema` for an unusable schema.
    """
    return _compile(_canonical(schema), _jsonschema() is not None)(dict(args))


def _canonical(schema: Mapping[str, Any]) -> str:
    if not isinstance(schema, Mapping):
        raise ValueError(f"a JSON schema must be a mapping, got {type(schema).__name__}")
    try:
        return json.dumps(dict(schema), sort_keys=True, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValueError(f"the JSON schema is not JSON-serialisable: {exc}") from None


def _cut(text: str, *, tail: bool = False) -> str:
    """``text`` on one line (a message may quote a multi-line value), at most about 200 chars.

    ``tail`` keeps the end instead of the start: a location's last part is its most telling.
    """
    text = " ".join(text.split())
    if len(text) <= _SHOWN_CHARS:
        return text
    return "…" + text[-_SHOWN_CHARS:] if tail else text[:_SHOWN_CHARS] + "…"


@functools.cache
def _jsonschema() -> Any:
    """The ``jsonschema`` module, or ``None`` when the ``schema`` extra is not installed."""
    try:
        import jsonschema
    except ImportError:
        return None
    return jsonschema


@functools.lru_cache(maxsize=256)
def _compile(text: str, with_jsonschema: bool) -> Problems:
    """A function listing the problems of a value, for the schema whose canonical JSON is ``text``.

    Cached by text (not by object), so a schema mutated after construction is checked again.
    """
    schema = json.loads(text)
    try:
        if with_jsonschema:
            return _jsonschema_problems(schema)
        _check_builtin(schema, "")
    except RecursionError:
        raise ValueError("the JSON schema nests too deeply to be checked") from None
    return functools.partial(_guarded, functools.partial(_builtin_problems, schema=schema))


def _guarded(problems: Problems, value: object) -> list[Violation]:
    try:
        return problems(value)
    except RecursionError:  # a recursive schema meeting deeply nested arguments
        return [("the arguments", "depth", "nest too deeply to be validated")]


def _where(path: Iterable[object]) -> str:
    """``labels[0].color`` for the path ``["labels", 0, "color"]``; the root is "the arguments"."""
    text = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in path)
    return text.removeprefix(".") or "the arguments"


# ----------------------------------------------------------------------- with ``jsonschema``


def _jsonschema_problems(schema: dict[str, Any]) -> Problems:
    jsonschema = _jsonschema()
    validator_class = jsonschema.Draft202012Validator
    try:
        validator_class.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ValueError(
            f"not a valid JSON Schema (Draft 2020-12) at {exc.json_path}: {_cut(exc.message)}"
        ) from None
    _References(schema).check()
    validator = validator_class(schema)

    def problems(value: object) -> list[Violation]:
        from referencing.exceptions import Unresolvable  # installed with jsonschema

        try:
            return [
                (_where(e.absolute_path), str(e.validator), e.message)
                for e in validator.iter_errors(value)
            ]
        except Unresolvable as exc:  # a reference the construction check could not follow
            return [("the schema", "$ref", f"has a $ref that cannot be resolved ({exc})")]

    return functools.partial(_guarded, problems)


_IN_PLACE_ONE = ("not", "if", "then", "else")  # applied to the same value, not to a part of it
_IN_PLACE_MANY = ("allOf", "anyOf", "oneOf")
_SUB_ONE = ("additionalProperties", "items", "contains", "propertyNames", "unevaluatedItems",
            "unevaluatedProperties", "contentSchema", *_IN_PLACE_ONE)  # fmt: skip
_SUB_MANY = ("prefixItems", *_IN_PLACE_MANY)
_SUB_MAP = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")


def _subschemas(schema: object) -> Iterator[dict[str, Any]]:
    """``schema`` and every schema inside it (not the data in ``enum``, ``default``, …)."""
    if not isinstance(schema, dict):
        return
    yield schema
    for keyword in _SUB_ONE:
        yield from _subschemas(schema.get(keyword))
    for keyword in _SUB_MANY:
        for sub in _as_list(schema.get(keyword)):
            yield from _subschemas(sub)
    for keyword in _SUB_MAP:
        for sub in _as_dict(schema.get(keyword)).values():
            yield from _subschemas(sub)


def _as_list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _as_dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


class _References:
    """The ``$ref``\\ s of one schema: each points inside it, and no chain of them loops in place.

    ``jsonschema`` resolves a missing reference only when a value reaches it, and follows a loop
    until Python's recursion limit; both are refused here, when the tool is built.
    """

    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        self.nodes = list(_subschemas(root))

    def check(self) -> None:
        for node in self.nodes:
            if isinstance(node.get("$ref"), str):
                self.resolve(node["$ref"])
        finished: set[int] = set()
        for node in self.nodes:
            self._no_loop(node, set(), finished)

    def resolve(self, ref: str) -> object:
        """The schema ``ref`` names (a JSON pointer ``#/…`` or an ``$anchor``)."""
        if not ref.startswith("#"):
            raise ValueError(
                f"$ref {ref!r} points outside the schema; only references inside it ('#/...') "
                f"are followed (nothing is ever fetched)"
            )
        fragment = urllib.parse.unquote(ref[1:])
        if fragment and not fragment.startswith("/"):
            anchored = [node for node in self.nodes if node.get("$anchor") == fragment]
            if not anchored:
                raise ValueError(f"$ref {ref!r} names no $anchor in the schema")
            return anchored[0]
        target: object = self.root
        for token in fragment.split("/")[1:]:
            target = _step(target, token.replace("~1", "/").replace("~0", "~"), ref)
        return target

    def _in_place(self, node: dict[str, Any]) -> list[dict[str, Any]]:
        """The schemas applied to the very value ``node`` is applied to."""
        found: list[Any] = [node.get(keyword) for keyword in _IN_PLACE_ONE]
        found += [sub for keyword in _IN_PLACE_MANY for sub in _as_list(node.get(keyword))]
        found += list(_as_dict(node.get("dependentSchemas")).values())
        if isinstance(node.get("$ref"), str):
            found.append(self.resolve(node["$ref"]))
        return [sub for sub in found if isinstance(sub, dict)]

    def _no_loop(self, node: dict[str, Any], on_path: set[int], finished: set[int]) -> None:
        if id(node) in finished:
            return
        if id(node) in on_path:
            raise ValueError(
                "the schema's $refs loop back to themselves without validating any part of "
                "the value (validation would never end)"
            )
        on_path.add(id(node))
        for sub in self._in_place(node):
            self._no_loop(sub, on_path, finished)
        on_path.discard(id(node))
        finished.add(id(node))


def _step(target: object, token: str, ref: str) -> object:
    """One JSON-pointer step into ``target``."""
    if isinstance(target, dict) and token in target:
        return target[token]
    index = token.isascii() and token.isdigit()  # "²".isdigit() is true; int("²") refuses it
    if isinstance(target, list) and index and int(token) < len(target):
        return target[int(token)]
    raise ValueError(f"$ref {ref!r} points to nothing in the schema")


# ----------------------------------------------------------------------- built in (the subset)

_TYPES = ("array", "boolean", "integer", "null", "number", "object", "string")
# Keywords that never reject a value, and the type the metaschema gives their argument.
_ANNOTATIONS: dict[str, type] = {
    **dict.fromkeys(("title", "description", "$comment", "$schema", "format"), str),
    **dict.fromkeys(("deprecated", "readOnly", "writeOnly"), bool),
    "examples": list,
    "default": object,
}


def _is_type(value: object, name: str) -> bool:
    """JSON Schema's type test, as ``jsonschema`` makes it (``2.0`` is an integer)."""
    if isinstance(value, bool):
        return name == "boolean"
    if isinstance(value, int):
        return name in ("integer", "number")
    if isinstance(value, float):
        return name == "number" or (name == "integer" and value.is_integer())
    kinds: dict[str, type] = {"null": type(None), "string": str, "array": list, "object": dict}
    return name in kinds and isinstance(value, kinds[name])


def _equal(a: object, b: object) -> bool:
    """JSON equality as ``jsonschema`` has it: ``1 == 1.0`` but ``1 != true``."""
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b  # a list or dict against anything else is unequal here already


def _show(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


# Each assertion: (value, the keyword's argument, the whole schema, path) -> problems.
Assertion = Callable[[object, Any, dict[str, Any], list[object]], Iterator[Violation]]


def _type(
    value: object, expected: Any, schema: dict[str, Any], path: list[object]
) -> Iterator[Violation]:
    names = [expected] if isinstance(expected, str) else expected
    if not any(_is_type(value, name) for name in names):
        actual = next(name for name in _TYPES if _is_type(value, name))
        yield _where(path), "type", f"expected {' or '.join(names)}, got {actual}"


def _enum(
    value: object, options: Any, schema: dict[str, Any], path: list[object]
) -> Iterator[Violation]:
    if not any(_equal(value, option) for option in options):
        yield _where(path), "enum", f"must be one of {', '.join(_show(o) for o in options[:10])}"


def _const(
    value: object, const: Any, schema: dict[str, Any], path: list[object]
) -> Iterator[Violation]:
    if not _equal(value, const):
        yield _where(path), "const", f"must be {_show(const)}"


def _bound(
    keyword: str,
    test: Callable[[Any, Any], bool],
    words: str,
    applies_to: str,
    measure: Callable[[Any], Any],
) -> Assertion:
    """``test(measure(value), limit)`` for values of type ``applies_to``; ``words`` says why not."""

    def check(
        value: object, limit: Any, schema: dict[str, Any], path: list[object]
    ) -> Iterator[Violation]:
        if _is_type(value, applies_to) and not test(measure(value), limit):
            yield _where(path), keyword, words.format(_show(limit))

    return check


def _same(value: Any) -> Any:
    return value


def _required(
    value: object, names: Any, schema: dict[str, Any], path: list[object]
) -> Iterator[Violation]:
    if isinstance(value, dict):
        for name in names:
            if name not in value:
                yield _where(path), "required", f"missing required property {name!r}"


def _properties(
    value: object, properties: Any, schema: dict[str, Any], path: list[object]
) -> Iterator[Violation]:
    if isinstance(value, dict):
        for name, sub in properties.items():
            if name in value:
                yield from _builtin_problems(value[name], sub, [*path, name])


def _additional(
    value: object, sub: Any, schema: dict[str, Any], path: list[object]
) -> Iterator[Violation]:
    if not isinstance(value, dict):
        return
    extra = [name for name in value if name not in schema.get("properties", {})]
    if sub is False and extra:
        yield (
            _where(path),
            "additionalProperties",
            f"unexpected properties {', '.join(map(repr, sorted(extra)))}",
        )
        return
    for name in extra:
        yield from _builtin_problems(value[name], sub, [*path, name])


def _items(
    value: object, sub: Any, schema: dict[str, Any], path: list[object]
) -> Iterator[Violation]:
    if isinstance(value, list):
        for index, element in enumerate(value):
            yield from _builtin_problems(element, sub, [*path, index])


_ASSERTIONS: dict[str, Assertion] = {
    "type": _type,
    "enum": _enum,
    "const": _const,
    "minimum": _bound("minimum", operator.ge, "must be at least {}", "number", _same),
    "maximum": _bound("maximum", operator.le, "must be at most {}", "number", _same),
    "exclusiveMinimum": _bound(
        "exclusiveMinimum", operator.gt, "must be greater than {}", "number", _same
    ),
    "exclusiveMaximum": _bound(
        "exclusiveMaximum", operator.lt, "must be less than {}", "number", _same
    ),
    "minLength": _bound(
        "minLength", operator.ge, "must have at least {} characters", "string", len
    ),
    "maxLength": _bound("maxLength", operator.le, "must have at most {} characters", "string", len),
    "minItems": _bound("minItems", operator.ge, "must have at least {} items", "array", len),
    "maxItems": _bound("maxItems", operator.le, "must have at most {} items", "array", len),
    "required": _required,
    "properties": _properties,
    "additionalProperties": _additional,
    "items": _items,
}

BUILTIN_KEYWORDS = frozenset(_ASSERTIONS) | frozenset(_ANNOTATIONS)
"""The keywords the built-in validator implements (annotations such as ``format`` included)."""


def _builtin_problems(
    value: object, schema: object, path: list[object] | None = None
) -> list[Violation]:
    path = path or []
    if schema is False:
        return [(_where(path), "false", "no value is allowed here")]
    if not isinstance(schema, dict):
        return []  # ``true``
    return [
        problem
        for keyword, argument in schema.items()
        if keyword in _ASSERTIONS
        for problem in _ASSERTIONS[keyword](value, argument, schema, path)
    ]


# What the 2020-12 metaschema allows each implemented keyword's argument to be.
def _is_number(value: object) -> bool:
    return _is_type(value, "number")


def _is_count(value: object) -> bool:
    return _is_type(value, "integer") and value >= 0  # type: ignore[operator]


def _is_unique(values: list[Any]) -> bool:
    return all(not _equal(a, b) for i, a in enumerate(values) for b in values[i + 1 :])


def _is_type_argument(value: object) -> bool:
    if isinstance(value, str):
        return value in _TYPES
    return (isinstance(value, list) and bool(value) and _is_unique(value)
            and all(isinstance(v, str) and v in _TYPES for v in value))  # fmt: skip


_WELL_FORMED: dict[str, Callable[[Any], bool]] = {
    "type": _is_type_argument,
    "enum": lambda v: isinstance(v, list),
    "const": lambda v: True,
    "required": lambda v: (
        isinstance(v, list) and _is_unique(v) and all(isinstance(n, str) for n in v)
    ),
    "properties": lambda v: isinstance(v, dict),
    "additionalProperties": lambda v: isinstance(v, bool | dict),
    "items": lambda v: isinstance(v, bool | dict),
    **dict.fromkeys(("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"), _is_number),
    **dict.fromkeys(("minLength", "maxLength", "minItems", "maxItems"), _is_count),
}


def _check_builtin(schema: object, at: str) -> None:
    """Refuse what the built-in validator cannot check, or what is not valid JSON Schema."""
    where = f"the schema at {at}" if at else "the schema"
    if isinstance(schema, bool):
        return
    if not isinstance(schema, dict):
        raise ValueError(f"{where} must be a JSON-schema object or a boolean")
    for keyword, argument in schema.items():
        if keyword not in BUILTIN_KEYWORDS:
            raise ValueError(
                f"{where} uses {keyword!r}, which the built-in validator does not implement; "
                f"install the schema extra for full JSON Schema: {INSTALL_HINT}"
            )
        kind = _ANNOTATIONS.get(keyword)
        if not (_WELL_FORMED[keyword](argument) if kind is None else isinstance(argument, kind)):
            raise ValueError(f"{where}: {keyword!r} cannot be {_cut(_show(argument))}")
    prefix = f"{at}." if at else ""
    for name, sub in schema.get("properties", {}).items():
        _check_builtin(sub, f"{prefix}properties.{name}")
    for keyword in ("additionalProperties", "items"):
        if keyword in schema:
            _check_builtin(schema[keyword], f"{prefix}{keyword}")
