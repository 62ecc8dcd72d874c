"""Every module of both packages is in a layer of the import contracts (pyproject.toml,
checked by ``lint-imports``), and the architecture page names every layer's modules: a new module
that is in no layer would be checked by no contract."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FACE = ("polyloop", "polyloop.cli")  # the face: the one layer no contract needs to name


def _contracts() -> list[dict[str, object]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts: list[dict[str, object]] = config["tool"]["importlinter"]["contracts"]
    return contracts


def _named() -> set[str]:
    names: set[str] = set()
    for contract in _contracts():
        for key in ("source_modules", "forbidden_modules"):
            modules = contract[key]
            assert isinstance(modules, list)
            names.update(m.removesuffix(".**") for m in modules)
    return names


def _modules() -> list[str]:
    found = []
    for package in ("polyloop", "pytest_polyloop"):
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found


def _in_layer(module: str, named: set[str]) -> bool:
    return any(module == n or module.startswith(n + ".") for n in named - {"polyloop"})


def test_every_module_is_in_a_layer_some_contract_names() -> None:
    named = _named()
    loose = [
        m
        for m in _modules()
        if not _in_layer(m, named) and m not in FACE and not m.startswith("polyloop.cli.")
    ]
    assert not loose, (
        f"modules in no layer of [tool.importlinter] (pyproject.toml): {loose}; add each to "
        "its layer's lists there and in docs/explanation/architecture.md"
    )


def test_the_architecture_page_names_every_layer_module() -> None:
    page = (ROOT / "docs" / "explanation" / "architecture.md").read_text(encoding="utf-8")
    missing = [
        n for n in sorted(_named() - {"polyloop"}) if f"`{n.rsplit('.', 1)[-1]}`" not in page
    ]
    assert not missing, f"docs/explanation/architecture.md names no layer for {missing}"


def test_the_contracts_are_the_never_edges_and_the_root_rule() -> None:
    # the seven edges of issue 24, the two of the batch runner, and the root rule
    assert [c["type"] for c in _contracts()] == ["forbidden"] * 10
