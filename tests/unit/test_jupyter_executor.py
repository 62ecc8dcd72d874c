"""JupyterExecutor without a kernel: refused configurations, the missing extra, how kernel
messages become the observation (pure functions of message content, and the cell's output list
with nbclient's update and clear rules), and the content-addressed artifacts directory."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from polyloop import Action, ActionStatus
from polyloop.executors import JupyterExecutor
from polyloop.executors._artifact_dir import (
    ArtifactDirectory,
    SavedArtifact,
    checked_artifacts_dir,
    extension_for,
)
from polyloop.executors._jupyter_output import (
    CellOutputs,
    RichOutput,
    display_id_of,
    render_data,
    render_message,
    rich_output_line,
    rich_outputs,
)
from tests.conftest import require_extra
from tests.unit._hostile_errors import (
    HUGE_MESSAGE,
    Unprintable,
    is_capped_and_clean,
    unprintable_text,
)

HINT = "pip install 'polyloop[jupyter]'"


def test_polyloop_executors_imports_without_the_jupyter_extra():
    probe = (
        "import sys\n"
        "sys.modules['jupyter_client'] = None  # an import of it now raises ImportError\n"
        "import polyloop.executors\n"
        "try:\n"
        "    polyloop.executors.JupyterExecutor()\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert completed.stdout.strip() == (
        "JupyterExecutor needs jupyter_client and ipykernel: " + HINT
    )


def test_constructing_without_jupyter_client_raises_the_install_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "jupyter_client", None)
    with pytest.raises(ImportError, match=r"polyloop\[jupyter\]") as raised:
        JupyterExecutor()
    assert raised.value.__cause__ is None  # one line, not an import traceback


@pytest.mark.parametrize("kernel_name", ["", "   ", 3, None, b"python3"])
def test_a_kernel_name_that_is_not_a_non_empty_string_is_refused(kernel_name):
    with pytest.raises(ValueError, match="kernel_name must be a non-empty str"):
        JupyterExecutor(kernel_name)


def test_a_kernel_that_is_not_installed_is_refused_naming_the_installed_ones():
    require_extra("jupyter")
    with pytest.raises(ValueError, match=r"no Jupyter kernel named 'no-such-kernel'.*python3"):
        JupyterExecutor("no-such-kernel")


@pytest.mark.parametrize("name", ["timeout_s", "start_timeout_s"])
@pytest.mark.parametrize("value", [0, -1, float("nan"), True, "2"])
def test_a_timeout_that_is_not_a_positive_number_is_refused(name, value):
    with pytest.raises(ValueError, match=name):
        JupyterExecutor(**{name: value})


@pytest.mark.parametrize("value", [0, -5, True, 2.5, "10"])
def test_a_bad_max_observation_chars_is_refused(value):
    with pytest.raises(ValueError, match="max_observation_chars"):
        JupyterExecutor(max_observation_chars=value)


@pytest.mark.parametrize(
    ("env", "error"),
    [
        (["A=1"], TypeError),
        ({"A": 1}, TypeError),
        ({"": "x"}, ValueError),
        ({"A=B": "x"}, ValueError),
    ],
)
def test_a_malformed_env_is_refused(env, error):
    with pytest.raises(error, match="env"):
        JupyterExecutor(env=env)


def test_inherit_env_must_be_a_bool():
    with pytest.raises(TypeError, match="inherit_env"):
        JupyterExecutor(inherit_env="yes")  # type: ignore[arg-type]


def test_construction_starts_nothing():
    require_extra("jupyter")
    executor = JupyterExecutor()
    assert executor.pid is None
    assert repr(executor) == "JupyterExecutor('python3', timeout_s=30, pid=None)"


# ---------------------------------------------------------------- errors shown to the model


class BrokenChannel:
    """A kernel whose ZeroMQ channel raises ``error`` on the first use."""

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.closed = False

    async def alive(self) -> bool:
        return True

    async def drain_replies(self) -> None:
        raise self.error

    async def close(self) -> None:
        self.closed = True


@pytest.mark.asyncio
@pytest.mark.parametrize("error", [Unprintable(), ValueError(HUGE_MESSAGE)])
async def test_a_broken_channel_is_shown_to_the_model_safely(error: Exception) -> None:
    require_extra("jupyter")
    executor = JupyterExecutor()
    executor._lock_for_running_loop()  # as a kernel started in this loop would have it
    executor._kernel = broken = BrokenChannel(error)  # type: ignore[assignment]

    outcome = await executor.execute(Action(text="1"))

    assert outcome.status is ActionStatus.ENV_ERROR
    assert broken.closed
    note = outcome.observation
    assert note.startswith("The connection to the Jupyter kernel broke (")
    assert note.endswith("Its state is lost; the next action starts a new kernel.")
    if isinstance(error, Unprintable):
        assert f"broke ({unprintable_text(error)})." in note
    else:
        assert "broke (ValueError: \\x1b[31mxxx" in note
        assert is_capped_and_clean(note, around=200)


@pytest.mark.asyncio
@pytest.mark.parametrize("error", [Unprintable(), ValueError(HUGE_MESSAGE)])
async def test_a_kernel_start_that_fails_is_shown_to_the_model_safely(
    error: Exception, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_extra("jupyter")
    from polyloop.executors import _jupyter

    async def fails(self: object, timeout_s: float | None, **launch: object) -> None:
        raise error

    monkeypatch.setattr(_jupyter._Kernel, "start", fails)
    async with JupyterExecutor() as executor:
        outcome = await executor.execute(Action(text="1"))

    assert outcome.status is ActionStatus.ENV_ERROR
    note = outcome.observation
    assert note.startswith("The Jupyter kernel 'python3' could not start: ")
    if isinstance(error, Unprintable):
        assert f"could not start: {unprintable_text(error)}" in note
    else:
        assert "could not start: ValueError: \\x1b[31mxxx" in note
        assert is_capped_and_clean(note, around=200)


# ---------------------------------------------------------------- rendering


@pytest.mark.parametrize("size", [0, 1, 2, 3, 10_241])
def test_a_base64_image_is_decoded_to_its_bytes(size):
    payload = bytes(range(256)) * (size // 256) + b"\x89" * (size % 256)
    encoded = base64.encodebytes(payload).decode()  # with line breaks, as some kernels send
    [output] = rich_outputs({"image/png": encoded, "text/plain": "<Image>"})
    assert output == RichOutput("image/png", payload, ".png")


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("not base64!", "not valid base64"),
        ("AAA", "not valid base64"),  # wrong padding
        ("AAAé", "not valid base64"),  # a character outside ASCII
        ("\ud800AAA", "not valid base64"),
        (12, "a int, not base64 text"),
        (None, "a NoneType, not base64 text"),
        (["AAAA"], "a list, not base64 text"),
    ],
)
def test_a_binary_output_that_is_not_base64_text_is_named_with_the_problem(value, problem):
    [output] = rich_outputs({"image/png": value})
    assert output == RichOutput("image/png", None, problem=problem)
    assert rich_output_line(output) == f"[image/png output, not saved: {problem}]"


def test_text_outputs_are_their_utf8_bytes_and_a_lone_surrogate_is_escaped():
    outputs = rich_outputs(
        {"text/html": "<b>hé</b>", "image/svg+xml": "<svg/>", "text/markdown": "a\ud800"}
    )
    assert outputs == [
        RichOutput("text/html", "<b>hé</b>".encode(), ".html"),
        RichOutput("image/svg+xml", b"<svg/>", ".svg"),  # +xml: text, not base64
        RichOutput("text/markdown", b"a\\ud800", ".md"),
    ]


@pytest.mark.parametrize("value", [{"a": [1, None]}, [1, 2], "a string", 3.5, None])
def test_a_json_output_is_the_json_it_holds(value):
    [output] = rich_outputs({"application/json": value})
    assert output.content is not None
    assert json.loads(output.content) == value
    assert output.extension == ".json"


def test_json_with_a_lone_surrogate_is_still_valid_utf8_json():
    [output] = rich_outputs({"application/vnd.custom+json": {"k": "\udc80"}})
    assert output.content is not None
    assert json.loads(output.content.decode("utf-8")) == {"k": "\udc80"}


@pytest.mark.parametrize("value", [["<b>", "</b>"], {"a": 1}, 5, None])
def test_a_text_output_that_is_not_a_string_is_named_not_guessed(value):
    [output] = rich_outputs({"text/html": value})
    assert output.content is None
    assert output.problem == f"a {type(value).__name__}, not text"


@pytest.mark.parametrize(
    "mime",
    [
        "../../etc/passwd",
        "image/png/../../x",
        "",
        "image",
        "/png",
        "text/html\n[fake]",
        "a b/c",
        "image/pñg",
        "image/\ud800",
        "x/" + "y" * 200,
        5,
    ],
)
def test_a_key_that_is_not_a_mime_type_is_never_a_file_type(mime):
    [output] = rich_outputs({mime: "x"})
    assert output.content is None
    assert output.problem == "not a MIME type"
    assert "\n" not in rich_output_line(output)


def test_text_plain_is_not_a_rich_output_and_a_bundle_that_is_not_a_mapping_has_none():
    assert rich_outputs({"text/plain": "x"}) == []
    assert rich_outputs(["image/png"]) == []
    assert rich_outputs(None) == []


@pytest.mark.parametrize(
    ("mime", "binary", "extension"),
    [
        ("image/png", True, ".png"),
        ("IMAGE/PNG", True, ".png"),
        ("image/jpeg", True, ".jpg"),
        ("image/svg+xml", False, ".svg"),
        ("text/html", False, ".html"),
        ("application/json", False, ".json"),
        ("text/markdown", False, ".md"),
        ("application/vnd.plotly.v1+json", False, ".json"),
        ("application/x-thing+xml", False, ".xml"),
        ("image/x-made-up", True, ".bin"),
        ("text/x-made-up", False, ".txt"),
    ],
)
def test_the_extension_comes_from_a_table_never_from_the_mime_text(mime, binary, extension):
    assert extension_for(mime, binary=binary) == extension


def test_a_rich_output_line_names_the_file_the_type_and_the_size():
    output = RichOutput("image/png", b"12345", ".png")
    saved = SavedArtifact("ab.png", 5)
    assert rich_output_line(output, saved=saved) == "[image/png output, 5 bytes, saved as ab.png]"
    assert rich_output_line(output, not_saved="no artifacts directory") == (
        "[image/png output, 5 bytes, not saved: no artifacts directory]"
    )


def test_a_display_keeps_text_plain_then_one_line_per_rich_output():
    data = {"image/png": "AAAA", "text/plain": "<Figure>"}
    assert render_data(data, ["[png line]"]) == "<Figure>\n[png line]\n"
    assert render_data({"text/plain": 5}, []) == "5\n"
    assert render_data("not a mapping", []) == ""


@pytest.mark.parametrize(
    ("content", "display_id"),
    [
        ({"transient": {"display_id": "d1"}}, "d1"),
        ({"transient": {"display_id": 5}}, None),
        ({"transient": "d1"}, None),
        ({}, None),
    ],
)
def test_only_a_string_display_id_is_taken(content, display_id):
    assert display_id_of(content) == display_id


def test_a_traceback_loses_its_ansi_colours():
    content = {
        "ename": "E",
        "evalue": "v",
        "traceback": ["\x1b[0;31mE\x1b[0m: v", "\x1b[1;32mline"],
    }
    assert render_message("error", content) == ("E: v\nline\n", True)


def test_an_error_without_a_traceback_is_its_name_and_value():
    assert render_message("error", {"ename": "E", "evalue": "v"}) == ("E: v\n", True)


@pytest.mark.parametrize(
    ("msg_type", "content"),
    [
        ("status", {"execution_state": "busy"}),
        ("execute_input", {"code": "1"}),
        ("stream", "not a mapping"),
        ("comm_open", {}),
        ("clear_output", {"wait": False}),
        ("display_data", {"data": {"text/plain": "x"}}),  # displays are render_data's
    ],
)
def test_messages_that_render_message_does_not_show_render_to_none(msg_type, content):
    assert render_message(msg_type, content) is None


@pytest.mark.parametrize(
    "content",
    [{"traceback": "not a list"}, {"text": None}, {"text": 5}, {}],
)
@pytest.mark.parametrize("msg_type", ["stream", "error"])
def test_malformed_kernel_messages_do_not_raise(msg_type, content):
    rendered = render_message(msg_type, content)
    assert rendered is not None
    assert isinstance(rendered[0], str)


# ---------------------------------------------------------------- the cell's outputs


def test_the_outputs_keep_the_first_chars_and_count_the_rest():
    outputs = CellOutputs(5)
    outputs.add("abc")
    outputs.add("defg")
    outputs.add("hij", new_line=True)  # after "defg": a line break first, counted as dropped too
    assert outputs.text() == "abcde"
    assert outputs.dropped == 2 + 4


def test_a_block_starts_on_a_new_line_only_when_the_output_did_not_end_one():
    outputs = CellOutputs(None)
    outputs.add("a\n")
    outputs.add("b\n", new_line=True)
    outputs.add("c")
    outputs.add("d\n", new_line=True)
    assert outputs.text() == "a\nb\nc\nd\n"
    assert outputs.dropped == 0


def test_an_update_replaces_the_display_where_it_stands():
    outputs = CellOutputs(None)
    outputs.add("before\n")
    outputs.add("v1\n", new_line=True, display_id="d")
    outputs.add("after")
    outputs.update("d", "version 2\n")
    assert outputs.text() == "before\nversion 2\nafter"


def test_a_display_shown_again_under_its_id_updates_every_earlier_one():
    outputs = CellOutputs(None)
    outputs.add("v1\n", new_line=True, display_id="d")
    outputs.add("x\n")
    outputs.update("d", "v2\n")  # what the executor does first for a display with a known id
    outputs.add("v2\n", new_line=True, display_id="d")
    assert outputs.text() == "v2\nx\nv2\n"


def test_an_update_of_an_unknown_display_changes_nothing():
    outputs = CellOutputs(None)
    outputs.add("a\n", new_line=True, display_id="d")
    outputs.update("other", "b\n")
    assert outputs.text() == "a\n"


def test_an_update_after_a_stream_without_a_newline_starts_its_own_line():
    outputs = CellOutputs(None)
    outputs.add("a")
    outputs.add("v1\n", new_line=True, display_id="d")
    outputs.update("d", "v2\n")
    assert outputs.text() == "a\nv2\n"


def test_clear_output_forgets_what_came_before_and_its_count():
    outputs = CellOutputs(3)
    outputs.add("abcdef")
    outputs.clear(wait=False)
    outputs.add("xy")
    assert (outputs.text(), outputs.dropped) == ("xy", 0)


def test_clear_output_with_wait_clears_when_the_next_output_comes():
    outputs = CellOutputs(None)
    outputs.add("old\n", new_line=True, display_id="d")
    outputs.clear(wait=True)
    assert outputs.text() == "old\n"  # nothing new yet: the old output still shows
    outputs.update("d", "updated\n")  # an update is not a new output: the clear still waits
    assert outputs.text() == "updated\n"
    outputs.add("new")
    assert outputs.text() == "new"
    outputs.update("d", "gone\n")  # the display was cleared: nothing to update
    assert outputs.text() == "new"


def test_a_display_shown_in_this_request_is_known_even_after_a_clear():
    outputs = CellOutputs(None)
    outputs.add("a\n", new_line=True, display_id="d")
    outputs.clear(wait=False)
    assert outputs.has_shown("d")
    assert not outputs.has_shown("earlier")


def test_a_growing_update_gets_only_the_room_left_and_the_rest_is_counted():
    outputs = CellOutputs(6)
    outputs.add("ab\n", new_line=True, display_id="d")
    outputs.add("cd\n")
    outputs.update("d", "0123456789\n")  # 3 chars of room were its own, 0 are free
    assert outputs.text() == "012cd\n"
    assert outputs.dropped == 8


def test_a_shrinking_update_frees_room_and_its_old_count_is_forgotten():
    outputs = CellOutputs(4)
    outputs.add("0123456789", display_id="d")
    outputs.update("d", "ab")
    assert (outputs.text(), outputs.dropped) == ("ab", 0)


def test_many_small_outputs_are_stored_as_one_run():
    outputs = CellOutputs(10)
    for _ in range(10_000):
        outputs.add("x\n")
    assert len(outputs._outputs) == 1
    assert outputs.dropped == 20_000 - 10


# ---------------------------------------------------------------- the artifacts directory


@pytest.mark.parametrize(("value", "error"), [(5, TypeError), (b"/tmp/x", TypeError)])
def test_an_artifacts_dir_that_is_not_a_str_path_is_a_type_error(value, error):
    with pytest.raises(error, match="artifacts_dir must be a str"):
        checked_artifacts_dir(value)


@pytest.mark.parametrize("value", ["", "   "])
def test_an_empty_artifacts_dir_is_refused(value):
    with pytest.raises(ValueError, match="artifacts_dir must be a non-empty path"):
        checked_artifacts_dir(value)


def test_an_artifacts_dir_that_is_a_file_is_refused(tmp_path):
    file = tmp_path / "file"
    file.write_text("x")
    with pytest.raises(ValueError, match="is a file, not a directory"):
        checked_artifacts_dir(file)


@pytest.mark.parametrize("name", ["a\x00b", "\ud800", "file/below"])
def test_an_artifacts_dir_that_cannot_be_a_directory_is_one_value_error(tmp_path, name):
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="cannot be used as a directory"):
        checked_artifacts_dir(str(tmp_path) + "/" + name)


def test_a_missing_artifacts_dir_is_created_and_kept_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = checked_artifacts_dir(Path("out") / "nested")
    assert path == tmp_path / "out" / "nested"
    assert (tmp_path / "out" / "nested").is_dir()
    assert checked_artifacts_dir(None) is None


def test_a_saved_artifact_is_named_by_its_content_hash_and_written_once(tmp_path):
    directory = ArtifactDirectory(tmp_path)
    content = b"\x89PNG..."
    first = directory.save(content, ".png")
    inode = os.stat(tmp_path / first.name).st_ino

    second = directory.save(content, ".png")

    assert first == second == SavedArtifact(hashlib.sha256(content).hexdigest() + ".png", 7)
    assert (tmp_path / first.name).read_bytes() == content
    assert os.stat(tmp_path / first.name).st_ino == inode  # not written again
    assert os.listdir(tmp_path) == [first.name]  # no partial file left behind


def test_an_artifact_file_gets_the_mode_any_new_file_gets(tmp_path):
    old = os.umask(0o027)
    try:
        saved = ArtifactDirectory(tmp_path).save(b"x", ".txt")
    finally:
        os.umask(old)
    assert (tmp_path / saved.name).stat().st_mode & 0o777 == 0o640


def test_a_path_like_that_gives_bytes_is_a_type_error():
    class BytesPath:
        def __fspath__(self) -> bytes:
            return b"/tmp/x"

    with pytest.raises(TypeError, match="artifacts_dir must be a str path"):
        checked_artifacts_dir(BytesPath())  # type: ignore[arg-type]


def test_a_removed_artifacts_dir_is_made_again_and_an_unusable_one_is_an_os_error(tmp_path):
    directory = ArtifactDirectory(tmp_path / "gone")
    saved = directory.save(b"x", ".txt")
    assert (tmp_path / "gone" / saved.name).read_bytes() == b"x"

    (tmp_path / "gone" / saved.name).unlink()
    (tmp_path / "gone").rmdir()
    (tmp_path / "gone").write_text("a file now")
    with pytest.raises(NotADirectoryError):  # an OSError: the executor says "not saved: <why>"
        directory.save(b"y", ".txt")


def test_the_executor_refuses_a_bad_artifacts_dir_and_creates_a_missing_one(tmp_path):
    require_extra("jupyter")
    with pytest.raises(TypeError, match="artifacts_dir"):
        JupyterExecutor(artifacts_dir=3)  # type: ignore[arg-type]
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="is a file"):
        JupyterExecutor(artifacts_dir=tmp_path / "file")
    executor = JupyterExecutor(artifacts_dir=tmp_path / "new")
    assert executor.artifacts_dir == tmp_path / "new"
    assert (tmp_path / "new").is_dir()
    assert JupyterExecutor().artifacts_dir is None


# ---------------------------------------------------------------- restart and interrupt


@pytest.mark.parametrize("method", ["restart", "interrupt"])
def test_restart_and_interrupt_before_the_kernel_started_are_a_clear_error(method):
    require_extra("jupyter")
    executor = JupyterExecutor()

    async def call() -> None:
        async with executor:
            await getattr(executor, method)()

    with pytest.raises(RuntimeError, match=rf"{method}\(\): no kernel session is open"):
        asyncio.run(call())
    assert executor.pid is None  # nothing was started by the refused call
