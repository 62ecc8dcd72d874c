"""``artifacts_dir`` is one option with one rule: ``JupyterExecutor`` and ``MCPExecutor`` check
it alike (same exception, same message) and save files alike (``_artifact_dir``)."""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.conftest import require_extra


def refusal(build: Any, value: object) -> tuple[type[BaseException], str]:
    with pytest.raises((TypeError, ValueError)) as raised:
        build(value)
    return type(raised.value), str(raised.value)


def jupyter(value: object) -> object:
    from polyloop.executors import JupyterExecutor

    return JupyterExecutor(artifacts_dir=value)  # type: ignore[arg-type]


def mcp(value: object) -> object:
    from polyloop.executors import MCPExecutor

    return MCPExecutor.http("http://127.0.0.1:9/mcp", artifacts_dir=value)  # type: ignore[arg-type]


class BytesPath:
    def __fspath__(self) -> bytes:
        return b"/tmp/x"


def bad_values(tmp_path: Path) -> list[object]:
    file = tmp_path / "file"
    file.write_text("x")
    return [
        "",
        "   ",
        5,
        b"/tmp/x",
        BytesPath(),
        str(file),
        file,
        str(file / "below"),
        str(tmp_path / "a\x00b"),
        str(tmp_path / "\ud800"),
        str(tmp_path / ("x" * 5000)),
    ]


def test_both_executors_refuse_each_bad_artifacts_dir_with_the_same_message(
    tmp_path: Path,
) -> None:
    require_extra("jupyter")
    require_extra("mcp")
    for value in bad_values(tmp_path):
        from_jupyter = refusal(jupyter, value)
        from_mcp = refusal(mcp, value)
        assert from_mcp == from_jupyter, value
        assert from_mcp[1].startswith("artifacts_dir"), from_mcp
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]  # nothing was created


def test_both_executors_take_a_missing_directory_alike(tmp_path: Path) -> None:
    require_extra("jupyter")
    require_extra("mcp")
    relative = Path("out") / "nested"
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        made = [jupyter(relative).artifacts_dir, mcp(relative).artifacts_dir]  # type: ignore[attr-defined]
    finally:
        os.chdir(cwd)
    assert made == [tmp_path / "out" / "nested"] * 2  # absolute: a later chdir does not move it
    assert made[0].is_dir()


def test_an_mcp_binary_is_saved_as_a_jupyter_output_is(tmp_path: Path) -> None:
    require_extra("mcp")
    from polyloop.executors._artifact_dir import ArtifactDirectory
    from polyloop.executors._mcp_content import render

    raw = b"\x89PNG\r\n\x1a\n"
    mp3 = b"ID3"
    blocks = [
        SimpleNamespace(type="image", mime_type="IMAGE/PNG", data=base64.b64encode(raw).decode()),
        SimpleNamespace(type="audio", mime_type="audio/mp3", data=base64.b64encode(mp3).decode()),
        SimpleNamespace(type="image", mime_type=None, data=base64.b64encode(b"?").decode()),
    ]
    result = SimpleNamespace(content=blocks, structured_content=None, is_error=False)
    directory = ArtifactDirectory(tmp_path)
    expected = directory.save(raw, ".png")  # what JupyterExecutor writes for an image/png
    inode = (tmp_path / expected.name).stat().st_ino

    rendered = render(result, None, directory)

    names = [Path(row["file"]).name for row in rendered.artifacts]
    assert names == [
        expected.name,
        hashlib.sha256(mp3).hexdigest() + ".mp3",
        hashlib.sha256(b"?").hexdigest() + ".bin",
    ]
    assert (tmp_path / expected.name).stat().st_ino == inode  # written once, not again
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".partial-")]


def test_an_mcp_binary_that_cannot_be_saved_is_said_so_not_raised(tmp_path: Path) -> None:
    require_extra("mcp")
    from polyloop.executors._artifact_dir import ArtifactDirectory
    from polyloop.executors._mcp_content import render

    blocker = tmp_path / "gone"
    blocker.write_text("a file where the directory was")
    data = base64.b64encode(b"abc").decode()
    result = SimpleNamespace(
        content=[SimpleNamespace(type="image", mime_type="image/png", data=data)],
        structured_content=None,
        is_error=False,
    )

    rendered = render(result, None, ArtifactDirectory(blocker))

    assert rendered.text.startswith("[image: image/png, 3 bytes, not saved: ")
    assert rendered.artifacts == []
