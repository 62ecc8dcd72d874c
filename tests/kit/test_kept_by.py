"""Promises the library keeps itself carry who keeps them (``kept_by``) through the skip."""

from __future__ import annotations

import pickle

import pytest

from polyloop.testing import ContractSkip, kept_by_polyloop
from polyloop.testing._shared._skips import parse_skip_reason

GUARDS = (
    "docs/reference/runtime.md#events",
    "event_sink.delivery_failure_is_isolated_by_the_library",
)


def test_kept_by_polyloop_is_an_unverifiable_skip_naming_the_guarding_tests() -> None:
    with pytest.raises(ContractSkip) as caught:
        kept_by_polyloop(promise="the loop isolates it", why="it is the loop's", guarded_by=GUARDS)
    parts = caught.value.as_dict()
    assert parts["outcome"] == "unverifiable"
    assert parts["kept_by"] == ", ".join(GUARDS)
    assert "polyloop keeps this promise" in parts["verify_yourself"]
    assert parse_skip_reason(str(caught.value.msg))["kept_by"] == ", ".join(GUARDS)  # type: ignore[index]


def test_a_plain_skip_has_no_kept_by_and_the_field_survives_pickling() -> None:
    plain = ContractSkip(outcome="unverifiable", promise="p", why="w", verify_yourself="v")
    assert "kept_by" not in plain.as_dict()
    kept = ContractSkip(
        outcome="unverifiable", promise="p", why="w", verify_yourself="v", kept_by=GUARDS
    )
    assert pickle.loads(pickle.dumps(kept)).kept_by == GUARDS


@pytest.mark.parametrize(
    "kept_by",
    [
        "docs/reference/runtime.md#events",  # not a tuple
        ("",),
        ("not a reference",),
        (3,),
        # On main these were accepted: files a user who installed the package does not have.
        ("tests/unit/test_events.py::test_sink_exceptions_are_counted",),
        ("polyloop/_loop/_run.py",),
        ("docs/../tests/unit/test_events.py",),
    ],
)
def test_kept_by_must_be_a_tuple_of_references_a_user_can_follow(kept_by: object) -> None:
    with pytest.raises(ValueError, match="kept_by must be a tuple of references a user can"):
        ContractSkip(
            outcome="unverifiable",
            promise="p",
            why="w",
            verify_yourself="v",
            kept_by=kept_by,  # type: ignore[arg-type]
        )


def test_no_user_facing_text_of_the_package_names_a_file_it_does_not_install() -> None:
    """Every string literal in the installed packages: none names polyloop's own tests (on
    main, kept_by_polyloop(...) named tests/unit/test_events.py::...)."""
    import ast
    import re
    from pathlib import Path

    import polyloop
    import pytest_polyloop

    # polyloop's own test tree (a user's own tests/conftest.py is fine to name in a hint)
    not_installed = re.compile(r"\btests/(unit|kit|plugin|contract|integration|docs)\b|::test_")
    found = []
    for package in (polyloop, pytest_polyloop):
        root = Path(str(package.__file__)).parent
        for module in sorted(root.rglob("*.py")):
            tree = ast.parse(module.read_text(encoding="utf-8"))
            docstrings = {
                id(node.body[0].value)
                for node in ast.walk(tree)
                if isinstance(
                    node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
                )
                and node.body
                and isinstance(node.body[0], ast.Expr)
                and isinstance(node.body[0].value, ast.Constant)
            }
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.Constant)
                    and isinstance(node.value, str)
                    and id(node) not in docstrings
                    and not_installed.search(node.value)
                ):
                    found.append(f"{module.relative_to(root.parent)}:{node.lineno}: {node.value!r}")
    assert found == []
