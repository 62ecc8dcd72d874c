"""MCPExecutor as an MCP user expects it, against real SDK servers (``mcp_server.py``) over stdio
and streamable HTTP on loopback: broken tools among good ones, refusal reasons as data (in the
log, the events and ``polyloop show``), content kept (text resources, files by content hash,
structured content), HTTP headers, auth and per-call timeouts, several servers behind one
executor, a tool list that changes between steps, and progress notifications."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import io
import json
import logging
import re
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

import polyloop
from polyloop import Action, ActionOutcome, ActionStatus, StepCompleted
from polyloop.cli import main
from polyloop.events import MemorySink
from polyloop.executors import MCPExecutor
from polyloop.models import ScriptedModel
from polyloop.parsers import JsonToolCallParser
from polyloop.stores import MemoryStore, open_store
from tests.conftest import mcp_http_server, mcp_stdio_command, require_mcp
from tests.unit._doubles import NOT_EXECUTED_TEXT, agent

require_mcp()

TRANSPORTS = ["stdio", "http"]
TOKEN = "s3cret-token"


def act(tool: str, **args: Any) -> Action:
    return Action(text=f"{tool} {args}", tool_name=tool, tool_args=args)


def tool_call(tool: str, **args: Any) -> str:
    return json.dumps({"tool": tool, "arguments": args})


@contextlib.contextmanager
def reachable(transport: str, *options: str) -> Iterator[dict[str, Any]]:
    """How to build an executor on a server of its own: ``MCPExecutor.stdio``/``http`` args."""
    if transport == "stdio":
        command, *args = mcp_stdio_command(*options)
        yield {"build": MCPExecutor.stdio, "args": (command, args)}
        return
    with mcp_http_server(*options) as (url, _):
        yield {"build": MCPExecutor.http, "args": (url,)}


@contextlib.asynccontextmanager
async def opened(
    transport: str, *server_options: str, **options: Any
) -> AsyncIterator[MCPExecutor]:
    with reachable(transport, *server_options) as how:
        async with how["build"](*how["args"], **options) as executor:
            yield executor


async def call(executor: MCPExecutor, tool: str, **args: Any) -> ActionOutcome:
    return await executor.execute(act(tool, **args))


# --------------------------------------------------------------------------- broken tools


@pytest.mark.asyncio
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_server_with_broken_tools_among_good_ones_opens_and_skips_only_the_broken(
    transport: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="polyloop.executors.mcp"):
        async with opened(transport, "--broken") as executor:
            good = await call(executor, "lookup", key="pi")
            skipped = await call(executor, "broken_type", x=1)
            names = {tool.name for tool in executor.registry}
            why = executor.skipped_tools

    assert good.observation == "3.14159"
    assert "lookup" in names
    assert not names & {"broken_type", "remote_ref"}
    assert skipped.status is ActionStatus.NOT_EXECUTED
    assert "'intger' is not valid" in why["broken_type"]
    assert "https://example.invalid/x.json" in why["remote_ref"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("'broken_type' is skipped" in w and "intger" in w for w in warnings)
    assert any("'remote_ref' is skipped" in w and "points outside" in w for w in warnings)


# --------------------------------------------------------------------------- refusal reasons


@pytest.mark.asyncio
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_each_refusal_says_why_as_data(transport: str) -> None:
    async with opened(transport) as executor:
        invalid = await call(executor, "add", a="x", b=5000)
        unknown = await call(executor, "delete", key="pi")
        server = await call(executor, "refuse", code=-32602)

    assert invalid.detail == {
        "refusal": {
            "kind": "invalid_arguments",
            "tool": "add",
            "violations": [
                {"path": "a", "rule": "type", "message": "'x' is not of type 'integer'"},
                {
                    "path": "b",
                    "rule": "maximum",
                    "message": "5000 is greater than the maximum of 1000",
                },
            ],
        }
    }
    assert unknown.detail is not None
    assert unknown.detail["refusal"]["kind"] == "unknown_tool"
    assert unknown.detail["refusal"]["tool"] == "delete"
    assert {"lookup", "add", "refuse"} <= set(unknown.detail["refusal"]["available"])
    assert server.detail == {
        "refusal": {
            "kind": "server_refused",
            "tool": "refuse",
            "code": -32602,
            "message": "refused with code -32602",
        }
    }


@pytest.mark.asyncio
async def test_a_refusal_reason_is_logged_emitted_and_shown_while_the_model_sees_the_synthetic_text(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    store = open_store(url)
    sink = MemorySink()
    model = ScriptedModel([tool_call("add", a=1, b=5000), '{"final_answer": "gave up"}'])
    command, *args = mcp_stdio_command()
    async with MCPExecutor.stdio(command, args) as executor:
        result = await polyloop.run(
            agent(tools=executor.registry), "add", model=model, parser=JsonToolCallParser(),
            executor=executor, store=store, events=sink, run_id="refused",
        )  # fmt: skip
    logged = (await store.read_log("refused")).steps[0]
    await store.aclose()  # type: ignore[attr-defined]
    with contextlib.redirect_stdout(io.StringIO()) as printed:  # main() runs its own loop
        status = await asyncio.to_thread(main, ["show", "refused", "--store", url])

    assert result.steps[0].observation == NOT_EXECUTED_TEXT  # the history is reproducible
    refusal = {"kind": "invalid_arguments", "tool": "add", "violations": [
        {"path": "b", "rule": "maximum", "message": "5000 is greater than the maximum of 1000"}
    ]}  # fmt: skip
    assert logged.executor_detail == {"refusal": refusal}
    emitted = [e.record for e in sink.events if isinstance(e.record, StepCompleted)]
    assert emitted[0].executor_detail == {"refusal": refusal}
    shown = printed.getvalue()
    assert status == 0
    assert '      refusal: {"kind":"invalid_arguments","tool":"add","violations":[{"message":' in (
        shown
    )


# --------------------------------------------------------------------------- content


@pytest.mark.asyncio
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_an_embedded_text_resource_is_shown_in_the_observation(transport: str) -> None:
    async with opened(transport) as executor:
        outcome = await call(executor, "attachments")

    assert outcome.observation.splitlines()[1:3] == [
        "[resource file:///notes.txt: text/plain, 5 characters]",
        "hello",
    ]


@pytest.mark.asyncio
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_images_audio_and_blobs_are_saved_by_content_hash_and_the_observation_names_them(
    transport: str, tmp_path: Path
) -> None:
    from tests.integration.mcp_server import PIXEL_PNG

    artifacts = tmp_path / "artifacts"  # created on first use
    async with opened(transport, artifacts_dir=artifacts) as executor:
        pixel = await call(executor, "pixel")
        again = await call(executor, "pixel")
        attachments = await call(executor, "attachments")

    png = artifacts / f"{hashlib.sha256(PIXEL_PNG).hexdigest()}.png"
    assert png.read_bytes() == PIXEL_PNG
    assert pixel.observation == f"[image: image/png, 70 bytes, saved as {png}]"
    assert again.observation == pixel.observation  # the same content, the same one file
    assert pixel.detail == {
        "artifacts": [{"file": str(png), "mime_type": "image/png", "bytes": 70, "sha256": png.stem}]
    }
    wav = artifacts / f"{hashlib.sha256(b'RIFF').hexdigest()}.wav"
    blob = artifacts / f"{hashlib.sha256(bytes([0, 1, 2])).hexdigest()}.bin"
    assert wav.read_bytes() == b"RIFF"
    assert blob.read_bytes() == bytes([0, 1, 2])
    lines = attachments.observation.splitlines()
    saved_blob = f"[resource file:///blob.bin: application/octet-stream, 3 bytes, saved as {blob}]"
    assert saved_blob in lines
    assert f"[audio: audio/wav, 4 bytes, saved as {wav}]" in lines
    assert sorted(p.name for p in artifacts.iterdir()) == sorted([png.name, wav.name, blob.name])


@pytest.mark.asyncio
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_structured_content_is_the_observation_when_the_server_sends_it(
    transport: str,
) -> None:
    async with opened(transport) as executor:
        forecast = await call(executor, "forecast", city="Oslo")
        both = await call(executor, "both")
        plain = await call(executor, "add", a=1, b=2)  # {"result": 3}: the SDK's wrapper

    assert forecast.observation == '{"city":"Oslo","days":3}'
    assert both.observation == '{"a":"é","b":[1,2]}'  # not "the text block"
    assert plain.observation == "3"


# --------------------------------------------------------------------------- HTTP


class Bearer:
    """An auth object as the SDK's HTTP transport takes it (an ``httpx2.Auth``)."""

    def __new__(cls, token: str) -> Any:
        import httpx2

        class _Bearer(httpx2.Auth):
            def auth_flow(self, request: Any) -> Any:
                request.headers["Authorization"] = f"Bearer {token}"
                yield request

        return _Bearer()


@pytest.fixture(scope="module")
def guarded() -> Iterator[str]:
    """One HTTP server that wants the bearer token (the revoke test starts its own)."""
    with mcp_http_server("--token", TOKEN) as (url, _):
        yield url


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "credentials",
    [{"headers": {"Authorization": f"Bearer {TOKEN}"}}, {"auth": Bearer(TOKEN)}],
    ids=["headers", "auth"],
)
async def test_headers_or_an_auth_object_reach_the_server(
    guarded: str, credentials: dict[str, Any]
) -> None:
    async with MCPExecutor.http(guarded, **credentials) as executor:
        outcome = await call(executor, "lookup", key="pi")

    assert outcome.observation == "3.14159"


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("credentials", "status"),
    [({}, "401 Unauthorized"), ({"headers": {"Authorization": "Bearer wrong"}}, "403 Forbidden")],
    ids=["none", "wrong"],
)
async def test_refused_credentials_fail_open_with_a_connection_error_naming_authentication(
    guarded: str, credentials: dict[str, Any], status: str
) -> None:
    with pytest.raises(ConnectionError, match=f"authentication failed: .*HTTP {status}"):
        await MCPExecutor.http(guarded, **credentials).open()


@pytest.mark.asyncio
async def test_credentials_refused_mid_session_are_an_env_error_naming_authentication() -> None:
    with mcp_http_server("--token", TOKEN) as (url, _):
        async with MCPExecutor.http(url, auth=Bearer(TOKEN)) as executor:
            await call(executor, "revoke")
            outcome = await call(executor, "lookup", key="pi")

    assert outcome.status is ActionStatus.ENV_ERROR
    assert "authentication failed: the server answered HTTP 403 Forbidden" in outcome.observation
    assert outcome.detail == {
        "error": {
            "kind": "authentication",
            "status": 403,
            "challenge": 'Bearer realm="polyloop-test"',
        }
    }


@pytest.mark.asyncio
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_per_call_timeout_overrides_the_read_timeout_for_its_tool_only(
    transport: str,
) -> None:
    async with opened(transport, read_timeout_s=0.5, call_timeouts_s={"nap": 10}) as executor:
        long_nap = await call(executor, "nap", seconds=1)
        still_short = await call(executor, "count", to=0)
    async with opened(transport, call_timeouts_s={"nap": 0.5}) as executor:
        started = time.monotonic()
        cut = await call(executor, "nap", seconds=30)
        waited = time.monotonic() - started

    assert long_nap.observation == "slept 1.0 s"
    assert still_short.observation == "counted to 0"
    assert cut.status is ActionStatus.ENV_ERROR
    assert "no answer within the read timeout of 0.5 s" in cut.observation
    assert cut.detail is not None
    assert cut.detail["error"]["kind"] == "timeout"
    assert waited < 20


# --------------------------------------------------------------------------- several servers


@pytest.mark.asyncio
async def test_several_servers_behind_one_executor_each_with_its_prefix() -> None:
    command, *args = mcp_stdio_command()
    with mcp_http_server() as (url, _):
        combined = MCPExecutor.combine(
            {"local": MCPExecutor.stdio(command, args), "remote": MCPExecutor.http(url)}
        )
        async with combined as executor:
            local = await call(executor, "local_pid")
            remote = await call(executor, "remote_pid")
            bare = await call(executor, "pid")
            names = {tool.name for tool in executor.registry}

    assert {"local_lookup", "remote_lookup", "local_pid", "remote_pid"} <= names
    assert not {name for name in names if not name.startswith(("local_", "remote_"))}
    assert local.status is remote.status is ActionStatus.EXECUTED
    assert local.observation != remote.observation  # two server processes
    assert bare.status is ActionStatus.NOT_EXECUTED
    assert str(executor).startswith("local=")


@pytest.mark.asyncio
async def test_one_server_that_cannot_open_fails_the_open_and_closes_the_others() -> None:
    def sessions() -> int:
        return sum(thread.name == "polyloop-mcp" for thread in threading.enumerate())

    command, *args = mcp_stdio_command()
    before = sessions()
    combined = MCPExecutor.combine(
        {"good": MCPExecutor.stdio(command, args), "gone": MCPExecutor.stdio("/nonexistent/x")}
    )

    with pytest.raises(ConnectionError, match="could not open MCP server /nonexistent/x"):
        await combined.open()

    for _ in range(400):  # aclose() waited for each thread; it may not have quite exited yet
        if sessions() == before:
            break
        await asyncio.sleep(0.05)
    assert sessions() == before


def in_process(*names: str) -> Any:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("in-process")
    for name in names:
        server.add_tool(lambda: "ok", name=name, description=name)
    return server


@pytest.mark.asyncio
async def test_a_tool_name_two_servers_would_share_is_refused_at_open_naming_both() -> None:
    combined = MCPExecutor.combine(
        {"a": MCPExecutor(in_process("b_c")), "a_b": MCPExecutor(in_process("c"))}
    )

    with pytest.raises(ValueError, match="'a_b_c' is published twice") as caught:
        await combined.open()

    assert "'b_c' of server 'a'" in str(caught.value)
    assert "'c' of server 'a_b'" in str(caught.value)
    with pytest.raises(RuntimeError, match="needs an open executor"):
        await call(combined, "a_b_c")


# --------------------------------------------------------------------------- tool list changes


async def until_the_tools_change(executor: MCPExecutor) -> ActionOutcome:
    """Call a cheap tool until an outcome records a changed tool list (the notification
    travels on its own stream: it may arrive after the call that caused it)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        outcome = await call(executor, "lookup", key="e")
        if outcome.detail is not None and "tools_changed" in outcome.detail:
            return outcome
        await asyncio.sleep(0.05)
    raise AssertionError("no tools_changed within 20 s")


@pytest.mark.asyncio
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_changed_tool_list_is_fetched_again_between_steps_and_recorded(
    transport: str,
) -> None:
    async with opened(transport) as executor:
        before = await call(executor, "shout", text="hi")
        await call(executor, "grow", name="shout")
        changed = await until_the_tools_change(executor)
        after = await call(executor, "shout", text="hi")
        registry = executor.registry

    assert before.status is ActionStatus.NOT_EXECUTED
    assert changed.detail == {"tools_changed": {"added": ["shout"], "removed": [], "changed": []}}
    assert changed.observation == "2.71828"
    assert after.observation == "hi"
    assert "shout" in registry


@pytest.mark.asyncio
async def test_a_handshake_era_session_hears_the_change_as_a_notification(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import functools

    import mcp

    legacy = functools.partial(mcp.Client, mode="legacy")  # the initialize handshake, 2025 era
    monkeypatch.setattr(mcp, "Client", legacy)
    async with opened("stdio") as executor:
        await call(executor, "grow", name="wave")
        changed = await until_the_tools_change(executor)

    assert changed.detail == {"tools_changed": {"added": ["wave"], "removed": [], "changed": []}}


@pytest.mark.asyncio
async def test_a_tool_list_change_is_kept_in_the_run_log() -> None:
    store = MemoryStore()
    script = [tool_call("grow", name="wave")] + [tool_call("lookup", key="e")] * 30
    command, *args = mcp_stdio_command()
    async with MCPExecutor.stdio(command, args) as executor:
        await polyloop.run(
            agent(tools=executor.registry, max_steps=30), "grow", model=ScriptedModel(script),
            parser=JsonToolCallParser(), executor=executor, store=store, run_id="grown",
        )  # fmt: skip

    details = [s.executor_detail for s in (await store.read_log("grown")).steps]
    assert {"tools_changed": {"added": ["wave"], "removed": [], "changed": []}} in details


# --------------------------------------------------------------------------- progress


@pytest.mark.asyncio
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_progress_notifications_are_kept_and_passed_on_live(transport: str) -> None:
    heard: list[tuple[Any, ...]] = []
    threads: set[int] = set()

    def on_progress(tool: str, done: float, total: float | None, message: str | None) -> None:
        heard.append((tool, done, total, message))
        threads.add(threading.get_ident())

    async with opened(transport, on_progress=on_progress) as executor:
        outcome = await call(executor, "count", to=3)
        await asyncio.sleep(0)  # callbacks scheduled on this loop run before the next await

    assert outcome.observation == "counted to 3"
    assert outcome.detail == {
        "progress": {
            "notifications": 3,
            "last": [
                {"progress": float(n), "total": 3.0, "message": f"counted {n}"} for n in (1, 2, 3)
            ],
        }
    }
    assert heard == [("count", float(n), 3.0, f"counted {n}") for n in (1, 2, 3)]
    assert threads == {threading.get_ident()}  # on the caller's event loop


# --------------------------------------------------------------------------- bad input


def http(**options: Any) -> MCPExecutor:
    return MCPExecutor.http("http://x", **options)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: http(headers={"Bad Name": "v"}), "not an HTTP header"),
        (lambda: http(headers={"": "v"}), "not an HTTP header"),
        (lambda: http(headers={"X": "a\r\nInjected: 1"}), "on one line"),
        (lambda: http(auth="Bearer t"), "auth must be an httpx2.Auth"),
        (lambda: MCPExecutor.stdio("python", headers={"X": "v"}), "apply to a server"),  # type: ignore[call-arg]
        (lambda: MCPExecutor(in_process("t"), auth=Bearer("t")), "apply to a server reached by"),
        (lambda: http(call_timeouts_s={"nap": 0}), r"call_timeouts_s\['nap'\]"),
        (lambda: http(call_timeouts_s={"nap": None}), "got None"),
        (lambda: http(call_timeouts_s={"": 1}), "non-empty str"),
        (lambda: http(call_timeouts_s=5), "must map tool names"),
        (lambda: http(artifacts_dir=""), "artifacts_dir must be a non-empty path"),
        (lambda: http(artifacts_dir="\udc00"), "cannot be used as a directory"),
        (lambda: http(artifacts_dir=__file__), "is a file, not a directory"),
        (lambda: http(on_progress="print"), "on_progress must be"),
        (lambda: MCPExecutor.combine({}), "non-empty mapping"),
        (lambda: MCPExecutor.combine({"../x": http()}), "prefix must be"),
        (lambda: MCPExecutor.combine({"": http()}), "prefix must be"),
        (lambda: MCPExecutor.combine({"\udc00": http()}), "prefix must be"),
        (lambda: MCPExecutor.combine({"a": "http://x"}), "single-server MCPExecutor"),  # type: ignore[dict-item]
        (
            lambda: MCPExecutor.combine({
                "a": MCPExecutor.combine({"b": http(),
                                          "c": http()})
            }),
            "single-server MCPExecutor",
        ),
        (
            lambda: MCPExecutor.combine({"a": MCPExecutor.combine({"b": http()})}),
            "single-server MCPExecutor",
        ),
    ],
)  # fmt: skip
def test_bad_new_options_are_refused_naming_the_option(build: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build()


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ({"X": None}, "headers must map str to str, got 'X': NoneType"),
        ([("X", "v")], "headers must be a mapping of str to str or None, got list"),
    ],
)
def test_headers_of_the_wrong_type_are_refused_as_env_is(headers: Any, message: str) -> None:
    with pytest.raises(TypeError, match=re.escape(message)):
        http(headers=headers)


@pytest.mark.asyncio
async def test_an_opened_executor_cannot_join_a_combination() -> None:
    executor = MCPExecutor(in_process("t"))
    async with executor:
        with pytest.raises(ValueError, match="already opened"):
            MCPExecutor.combine({"a": executor})
