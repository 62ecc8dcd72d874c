"""What users install is what the project tests: the built wheel carries every module and every
file the runtime reads at run time, its metadata names the plugin and the console script, and the
version is written in one place only."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

from polyloop._version import __version__

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("polyloop", "pytest_polyloop")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from this checkout (offline: the build backend comes from [dev])."""
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), "."],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=300,
    )
    [built] = out.glob("*.whl")
    return built


def tracked_package_files() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", *PACKAGES], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return sorted(path for path in listed if "__pycache__" not in path)


def test_the_wheel_carries_every_file_of_both_packages(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    tracked = tracked_package_files()
    assert "polyloop/report/report.schema.json" in tracked
    assert "polyloop/py.typed" in tracked
    assert "pytest_polyloop/py.typed" in tracked
    assert [path for path in tracked if path not in names] == []


def test_the_wheels_metadata_names_the_version_the_plugin_and_the_script(wheel: Path) -> None:
    archive = zipfile.ZipFile(wheel)
    info = f"polyloop-{__version__}.dist-info"
    metadata = Parser().parsestr(archive.read(f"{info}/METADATA").decode("utf-8"))
    assert metadata["Version"] == __version__
    extras = set(metadata.get_all("Provides-Extra") or [])
    assert {"testing", "postgres", "openai", "schema", "mcp", "otel", "jupyter"} <= extras
    entry_points = archive.read(f"{info}/entry_points.txt").decode("utf-8")
    assert re.search(r"^\[pytest11\]\npolyloop = pytest_polyloop\.plugin$", entry_points, re.M)
    assert re.search(r"^\[console_scripts\]\npolyloop = polyloop\.cli:main$", entry_points, re.M)


def test_the_runtime_reads_its_files_from_the_unpacked_wheel(wheel: Path, tmp_path: Path) -> None:
    """Unpacked alone on sys.path (-I: no checkout, no site-packages), the package finds its
    report schema and its py.typed markers through importlib.resources."""
    zipfile.ZipFile(wheel).extractall(tmp_path)
    probe = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "from importlib import resources\n"
        "import polyloop, polyloop.report\n"
        "assert polyloop.__file__.startswith(sys.argv[1]), polyloop.__file__\n"
        "print(polyloop.report.schema()['$id'] if '$id' in polyloop.report.schema() else 'ok')\n"
        "print(all(resources.files(p).joinpath('py.typed').is_file()\n"
        "          for p in ('polyloop', 'pytest_polyloop')))\n"
        "print(polyloop.__version__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", probe, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1:] == ["True", __version__]


def test_the_version_is_written_once() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
    assert "version" not in project["project"]
    assert project["project"]["dynamic"] == ["version"]
    assert project["tool"]["hatch"]["version"]["path"] == "polyloop/_version.py"
    written = [
        str(path.relative_to(ROOT))
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if re.search(r"^__version__\s*[:=]", path.read_text("utf-8"), re.M)
    ]
    assert written == ["polyloop/_version.py"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__)


def test_the_kit_reports_the_one_version() -> None:
    import polyloop
    from polyloop.testing import KIT_VERSION

    assert KIT_VERSION == polyloop.__version__ == __version__


def test_the_docs_name_the_current_versions_wheel() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    text = "".join(page.read_text("utf-8") for page in pages)
    wheels = set(re.findall(r"polyloop-[^\s'\]/]+\.whl", text))
    assert wheels == {f"polyloop-{__version__}-py3-none-any.whl"}


def test_the_testing_extra_brings_what_the_docs_suggest_using() -> None:
    """`-n auto` is suggested for the conformance job: pytest-xdist comes with `testing`, and
    .ci/run builds and checks the artifacts with tools of `dev`."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"][
        "optional-dependencies"
    ]
    names = {
        extra: {re.split(r"[<>=\[ ]", req)[0] for req in reqs} for extra, reqs in extras.items()
    }
    assert "pytest-xdist" in names["testing"]
    assert {"build", "twine", "hatchling"} <= names["dev"]
