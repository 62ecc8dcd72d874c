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
    (contract,) = [c for c in _contracts() if c["type"] == "layers" and "containers" not in c]
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
    assert [c["type"] for c in _contracts()] == ["layers", "forbidden", "layers"]


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


# --------------------------------------------------------------------- the kit in rooms
KIT = ROOT / "polyloop" / "testing"
#: What `ls polyloop/testing/` may show besides the rooms: the package's own file and the public
#: strategies module (which re-exports the shared strategies).
_KIT_FILES = {"__init__.py", "strategies.py"}
#: Past about this many lines a kit module holds more than one reason to change.
_KIT_MODULE_LINES = 600


def _rooms_contract() -> dict[str, object]:
    (contract,) = [c for c in _contracts() if c.get("containers") == ["polyloop.testing"]]
    return contract


def _seam_rooms() -> list[str]:
    from polyloop.testing import BUILTIN_SUITES

    return sorted(f"_{seam}" for seam in BUILTIN_SUITES)


def test_the_kit_is_one_room_per_seam_over_the_shared_one() -> None:
    entries = {p.name for p in KIT.iterdir() if p.name != "__pycache__"}
    assert entries == {*_KIT_FILES, *_seam_rooms(), "_shared"}, (
        f"polyloop/testing/ holds {sorted(entries)}: one package per seam "
        f"({_seam_rooms()}), `_shared` and {sorted(_KIT_FILES)}"
    )
    for room in [*_seam_rooms(), "_shared"]:
        assert (KIT / room / "__init__.py").is_file(), f"polyloop/testing/{room} is no package"


def test_the_rooms_contract_names_every_room_and_keeps_seams_apart() -> None:
    layers = _rooms_contract()["layers"]
    assert isinstance(layers, list)
    top, seams, shared = layers
    assert top == "strategies"
    assert shared == "_shared"
    # "|": independent — no seam's room imports another's.
    assert sorted(part.strip() for part in str(seams).split("|")) == _seam_rooms()


def test_no_kit_module_is_over_about_six_hundred_lines() -> None:
    long = {
        str(path.relative_to(ROOT)): n
        for path in sorted(KIT.rglob("*.py"))
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > _KIT_MODULE_LINES
    }
    assert not long, f"kit modules over {_KIT_MODULE_LINES} lines (split by reason): {long}"


def test_the_architecture_page_shows_the_kit_rooms() -> None:
    page = (ROOT / "docs" / "explanation" / "architecture.md").read_text(encoding="utf-8")
    missing = [room for room in [*_seam_rooms(), "_shared"] if f"{room}/" not in page]
    assert not missing, f"docs/explanation/architecture.md shows no kit room {missing}"
