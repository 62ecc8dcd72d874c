"""Every module of both packages is in a layer of the import contracts (pyproject.toml,
checked by ``lint-imports``), and the architecture page names every layer's modules: a new module
that is in no layer would be checked by no contract."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FACE = ("polyloop", "polyloop.cli")  # the face: the one layer no contract needs to name


def _contracts() -> list[dict[str, object]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts: list[dict[str, object]] = config["tool"]["importlinter"]["contracts"]
    return contracts


def _layers() -> list[list[str]]:
    """The parts of each layer of the layers contract, top down."""
    (contract,) = [c for c in _contracts() if c["type"] == "layers"]
    layers = contract["layers"]
    assert isinstance(layers, list)
    return [[part.strip() for part in layer.split(":")] for layer in layers]


def _named() -> set[str]:
    return {part for layer in _layers() for part in layer}


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


def test_the_contracts_are_the_layers_and_the_root_rule() -> None:
    assert [c["type"] for c in _contracts()] == ["layers", "forbidden"]


# What `ls polyloop/` may show besides the parts the layers contract names: the package's own
# files, and the face.
_PACKAGE_FILES = {"__init__.py", "_version.py", "py.typed", "cli"}


def test_the_top_of_the_package_lists_only_the_parts() -> None:
    parts = {
        name.split(".")[1]
        for name in _named()
        if name.startswith("polyloop.") and name != "polyloop"
    }
    entries = {
        path.name.removesuffix(".py")
        for path in (ROOT / "polyloop").iterdir()
        if path.name != "__pycache__"
    }
    extra = sorted(entries - parts - {n.removesuffix(".py") for n in _PACKAGE_FILES})
    assert not extra, f"polyloop/ holds {extra}, which belong to no part of the layers contract"


def test_no_module_imports_itself_back_through_another() -> None:
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("polyloop", "pytest_polyloop")
    circles = sorted(
        " → ".join([module, *chain[1:]])
        for module in graph.modules
        for imported in graph.find_modules_directly_imported_by(module)
        if (chain := graph.find_shortest_chain(importer=imported, imported=module))
    )
    assert not circles, "import circles:\n" + "\n".join(circles)
