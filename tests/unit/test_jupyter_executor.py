"""JupyterExecutor without a kernel: refused configurations, the missing extra, and how kernel
messages become the observation (pure functions of message content)."""

from __future__ import annotations

import base64
import subprocess
import sys

import pytest

from polyloop.executors import JupyterExecutor
from polyloop.executors._jupyter_output import ObservationBuffer, mime_summary, render_message
from tests.conftest import require_extra

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


# ---------------------------------------------------------------- rendering


@pytest.mark.parametrize("size", [0, 1, 2, 3, 10_241])
def test_a_base64_image_is_summarised_with_its_decoded_size(size):
    encoded = base64.encodebytes(b"\x89" * size).decode()  # with line breaks, as some kernels send
    assert mime_summary("image/png", encoded) == f"[image/png output, {size} bytes]"


def test_text_mime_types_are_summarised_in_characters():
    assert mime_summary("text/html", "<b>hé</b>") == "[text/html output, 9 chars]"
    assert mime_summary("image/svg+xml", "<svg/>") == "[image/svg+xml output, 6 chars]"
    assert mime_summary("application/json", {"a": [1]}) == "[application/json output, 10 chars]"


def test_a_display_keeps_text_plain_beside_the_summaries():
    content = {"data": {"image/png": "AAAA", "text/plain": "<Figure>"}, "metadata": {}}
    assert render_message("display_data", content) == (
        "<Figure>\n[image/png output, 3 bytes]\n",
        True,
    )


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
    ],
)
def test_messages_that_show_nothing_render_to_none(msg_type, content):
    assert render_message(msg_type, content) is None


@pytest.mark.parametrize(
    "content",
    [
        {"data": "not a mapping"},
        {"data": {"text/plain": 5}},
        {"traceback": "not a list"},
        {"text": None},
        {},
    ],
)
@pytest.mark.parametrize("msg_type", ["stream", "execute_result", "display_data", "error"])
def test_malformed_kernel_messages_do_not_raise(msg_type, content):
    rendered = render_message(msg_type, content)
    assert rendered is not None
    assert isinstance(rendered[0], str)


def test_the_buffer_keeps_the_first_chars_and_counts_the_rest():
    buffer = ObservationBuffer(5)
    buffer.add("abc")
    buffer.add("defg")
    buffer.add("hij", new_line=True)  # after "defg": a line break first, counted as dropped too
    assert buffer.text() == "abcde"
    assert buffer.dropped == 2 + 4


def test_a_block_starts_on_a_new_line_only_when_the_output_did_not_end_one():
    buffer = ObservationBuffer(None)
    buffer.add("a\n")
    buffer.add("b\n", new_line=True)
    buffer.add("c")
    buffer.add("d\n", new_line=True)
    assert buffer.text() == "a\nb\nc\nd\n"
    assert buffer.dropped == 0
