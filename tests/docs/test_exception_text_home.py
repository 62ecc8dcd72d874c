""" "ExcType: message" has one home, ``polyloop._base._exception_text``: no module of the runtime,
the kit or the plugin builds it by hand.

A hand-built ``f"{type(error).__name__}: {error}"`` skips what the home guarantees — a
``__str__`` that raises or runs for megabytes, control characters, an exception group shown by
its cause — and every copy drifts on its own. The check walks the source with ``ast``: an
f-string that names the type of an exception caught by an ``except … as`` clause of the same
function is such a copy, whatever the message part says.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("polyloop", "pytest_polyloop")
HOME = ROOT / "polyloop" / "_base" / "_exception_text.py"


def _type_named(node: ast.expr) -> str | None:
    """The variable whose type's name ``node`` reads: ``type(x).__name__``,
    ``type(x).__qualname__``, ``x.__class__.__name__``."""
    if not isinstance(node, ast.Attribute) or node.attr not in ("__name__", "__qualname__"):
        return None
    inner = node.value
    if (
        isinstance(inner, ast.Call)
        and isinstance(inner.func, ast.Name)
        and inner.func.id == "type"
        and len(inner.args) == 1
        and isinstance(inner.args[0], ast.Name)
    ):
        return inner.args[0].id
    if (
        isinstance(inner, ast.Attribute)
        and inner.attr == "__class__"
        and isinstance(inner.value, ast.Name)
    ):
        return inner.value.id
    return None


def _builds_text(node: ast.AST) -> bool:
    """An f-string, a ``"…" % …`` or a ``"…".format(…)``."""
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        return isinstance(node.left, ast.Constant) and isinstance(node.left.value, str)
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
        and isinstance(node.func.value, ast.Constant)
    )


def hand_built(source: str, filename: str = "<source>") -> list[str]:
    """``file:line`` of each f-string naming a caught exception's type by hand."""
    found = []
    tree = ast.parse(source, filename)
    scopes = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    for scope in [tree, *scopes]:
        caught = {
            handler.name
            for handler in ast.walk(scope)
            if isinstance(handler, ast.ExceptHandler) and handler.name
        }
        for node in ast.walk(scope):
            if _builds_text(node) and any(
                isinstance(inner, ast.Attribute) and _type_named(inner) in caught
                for inner in ast.walk(node)
            ):
                found.append(f"{filename}:{getattr(node, 'lineno', 0)}")
    return sorted(set(found))


def _sources() -> list[Path]:
    return [
        path
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if path != HOME
    ]


def test_no_module_builds_exception_text_by_hand() -> None:
    found = [
        where
        for path in _sources()
        for where in hand_built(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    ]
    assert not found, (
        'f-strings building "ExcType: message" by hand (use exception_text or '
        f"exception_message from polyloop._base._exception_text): {found}"
    )


@pytest.mark.parametrize(
    "body",
    [
        'f"{type(error).__name__}: {error}"',
        'f"raised {type(error).__qualname__} ({error!s})"',
        'f"{error.__class__.__name__}: {str(error)[:300]}"',
        '"%s: %s" % (type(error).__name__, error)',
        '"{}: {}".format(type(error).__name__, error)',
    ],
)
def test_the_check_finds_a_hand_built_one(body: str) -> None:
    source = (
        f"def f():\n    try:\n        pass\n    except Exception as error:\n        return {body}\n"
    )
    assert hand_built(source) == ["<source>:5"]


def test_the_check_leaves_a_value_s_type_alone() -> None:
    source = (
        "from polyloop._base._exception_text import exception_text\n"
        "def f(value):\n"
        "    try:\n"
        "        pass\n"
        "    except Exception as error:\n"
        "        return exception_text(error)\n"
        '    return f"got {type(value).__name__}: {value!r}"\n'
    )
    assert hand_built(source) == []


def test_the_check_leaves_a_caught_type_compared_alone() -> None:
    source = (
        "def f():\n"
        "    try:\n"
        "        pass\n"
        "    except Exception as error:\n"
        "        return {'raised': type(error).__name__}\n"
    )
    assert hand_built(source) == []
