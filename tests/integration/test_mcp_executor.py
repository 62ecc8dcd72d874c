"""MCPExecutor against a real MCP server written with the SDK (``mcp_server.py``), over stdio and
over streamable HTTP on loopback: the status mapping, the published schemas, the task-ownership
trap, a server killed mid-run, and resume after a crash behind an ``ActionIntent``."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

import polyloop
from polyloop import Action, ActionOutcome, ActionStatus, StopReason
from polyloop.executors import MCPExecutor
from polyloop.models import ScriptedModel
from polyloop.parsers import JsonToolCallParser
from polyloop.stores import MemoryStore
from tests.conftest import mcp_http_server, mcp_stdio_command, require_mcp
from tests.unit._doubles import ENV_ERROR_TEXT, Crash, agent

require_mcp()

TRANSPORTS = ["stdio", "http"]


def act(tool: str, **args: Any) -> Action:
    return Action(text=f"{tool} {args}", tool_name=tool, tool_args=args)


def stdio_executor(**options: Any) -> MCPExecutor:
    command, *args = mcp_stdio_command()
    return MCPExecutor.stdio(command, args, **options)


def process_is_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"  # a zombie is gone too
    except FileNotFoundError:  # reaped since os.kill
        return True


@pytest.fixture(scope="module")
def http_server() -> Iterator[str]:
    """One HTTP server for the tests of this module that do not kill it."""
    with mcp_http_server() as (url, _):
        yield url


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=TRANSPORTS)
async def shared(request: pytest.FixtureRequest, http_server: str) -> AsyncIterator[MCPExecutor]:
    """An open executor per transport, for the tests that only call tools."""
    executor = stdio_executor() if request.param == "stdio" else MCPExecutor.http(http_server)
    async with executor:
        yield executor


@pytest.fixture
def make(http_server: str) -> Any:
    """A factory: ``make(transport, **options)`` is an unopened executor on a shared server."""

    def build(transport: str, **options: Any) -> MCPExecutor:
        if transport == "stdio":
            return stdio_executor(**options)
        return MCPExecutor.http(http_server, **options)

    return build


async def call(executor: MCPExecutor, tool: str, **args: Any) -> ActionOutcome:
    return await executor.execute(act(tool, **args))


# --------------------------------------------------------------------------- the registry


@pytest.mark.asyncio
async def test_the_registry_holds_each_listed_tool_with_its_published_schema(
    shared: MCPExecutor,
) -> None:
    registry = shared.registry

    assert {"lookup", "add", "search", "schedule", "fail", "nap", "crash"} <= {
        tool.name for tool in registry
    }
    schedule = registry.lookup("schedule")
    assert schedule is not None
    assert schedule.description.startswith("Schedule a meeting")
    assert schedule.parameters["properties"]["meeting"] == {"$ref": "#/$defs/Meeting"}
    assert schedule.parameters["$defs"]["Priority"]["enum"] == ["low", "normal", "high"]
    add = registry.lookup("add")
    assert add is not None
    assert add.parameters["properties"]["b"]["maximum"] == 1000
    assert schedule.func is None  # the executor, not the registry, calls the server


@pytest.mark.asyncio
async def test_an_agent_definition_snapshots_the_tools_the_model_is_shown(
    shared: MCPExecutor,
) -> None:
    parameters = agent(tools=shared.registry).parameters()

    by_name = {spec["name"]: spec for spec in parameters["tools"]}
    assert by_name["search"]["parameters"]["properties"]["limit"]["default"] == 3
    assert [spec["name"] for spec in parameters["tools"]] == sorted(by_name)


# --------------------------------------------------------------------------- executed


@pytest.mark.asyncio
async def test_a_tool_result_is_executed_with_its_text(shared: MCPExecutor) -> None:
    outcome = await call(shared, "lookup", key="pi")

    assert outcome == ActionOutcome(status=ActionStatus.EXECUTED, observation="3.14159")


@pytest.mark.asyncio
async def test_a_tool_result_with_is_error_is_executed_with_the_error_text(
    shared: MCPExecutor,
) -> None:
    outcome = await call(shared, "lookup", key="tau")

    assert outcome.status is ActionStatus.EXECUTED
    assert "no constant named 'tau'" in outcome.observation


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("tool", "args", "observation"),
    [
        ("search", {"query": "standup", "priority": None}, "3 hits for 'standup' (priority any)"),
        (
            "search",
            {"query": "q", "limit": 10, "priority": "high"},
            "10 hits for 'q' (priority high)",
        ),
        ("add", {"a": 41}, "42"),  # b defaults to 1
        (
            "schedule",
            {"meeting": {"title": "retro", "window": {"start_hour": 9, "end_hour": 10}}},
            "scheduled 'retro' 9-10h (normal) with nobody",
        ),
        (
            "schedule",
            {
                "meeting": {
                    "title": "plan",
                    "window": {"start_hour": 0, "end_hour": 23},
                    "priority": "low",
                    "attendees": ["ada", "alan"],
                }
            },
            "scheduled 'plan' 0-23h (low) with ada, alan",
        ),
    ],
    ids=["optional-null", "bounds-and-enum", "default", "nested-defaults", "nested-full"],
)
async def test_arguments_the_published_schema_accepts_reach_the_tool(
    shared: MCPExecutor, tool: str, args: dict[str, Any], observation: str
) -> None:
    outcome = await call(shared, tool, **args)

    assert outcome == ActionOutcome(status=ActionStatus.EXECUTED, observation=observation)


@pytest.mark.asyncio
async def test_non_text_content_is_summarised_with_its_mime_type_and_size(
    shared: MCPExecutor,
) -> None:
    pixel = await call(shared, "pixel")
    attachments = await call(shared, "attachments")

    assert pixel.observation == "[image: image/png, 70 bytes]"
    assert attachments.observation.splitlines() == [
        "see the attachments",
        "[resource file:///notes.txt: text/plain, 5 characters]",
        "hello",  # an embedded text resource is shown
        "[resource file:///blob.bin: application/octet-stream, 3 bytes]",
        "[resource link: https://example.invalid/report, unknown type]",
        "[audio: audio/wav, 4 bytes]",
    ]


# --------------------------------------------------------------------------- not executed


@pytest.mark.asyncio
async def test_an_unknown_tool_is_not_executed_and_the_available_tools_are_named(
    shared: MCPExecutor,
) -> None:
    outcome = await call(shared, "../../etc/passwd")

    assert outcome.status is ActionStatus.NOT_EXECUTED
    assert outcome.observation.startswith("Unknown tool '../../etc/passwd'; available tools: ")
    assert "'lookup'" in outcome.observation


@pytest.mark.asyncio
@pytest.mark.parametrize("name", [None, ""])
async def test_an_action_naming_no_tool_is_not_executed(
    shared: MCPExecutor, name: str | None
) -> None:
    outcome = await shared.execute(Action(text="do something", tool_name=name))

    assert outcome.status is ActionStatus.NOT_EXECUTED
    assert outcome.observation.startswith("The action names no tool")


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("tool", "args", "problem"),
    [
        ("add", {"a": "x"}, "a: 'x' is not of type 'integer'"),
        ("add", {"a": 1, "b": 5000}, "b: 5000 is greater than the maximum of 1000"),
        ("add", {}, "the arguments: 'a' is a required property"),
        ("search", {"query": ""}, "query: '' should be non-empty"),
        ("search", {"query": "q", "priority": "urgent"}, "priority: 'urgent' is not valid"),
        (
            "schedule",
            {"meeting": {"title": "t", "window": {"start_hour": 25, "end_hour": 3}}},
            "meeting.window.start_hour: 25 is greater than the maximum of 23",
        ),
        (
            "schedule",
            {"meeting": {"title": "t", "window": {"start_hour": 1, "end_hour": 3}, "priority": 1}},
            "meeting.priority: 1 is not one of ['low', 'normal', 'high']",
        ),
        (
            "schedule",
            {"meeting": {"title": "t", "window": {}, "attendees": ["a", 2]}},
            "meeting.attendees[1]: 2 is not of type 'string'",
        ),
    ],
    ids=["type", "bound", "required", "min-length", "optional-enum", "nested-bound",
         "nested-enum", "array-item"],
)  # fmt: skip
async def test_arguments_breaking_the_published_schema_are_not_executed(
    shared: MCPExecutor, tool: str, args: dict[str, Any], problem: str
) -> None:
    outcome = await call(shared, tool, **args)

    assert outcome.status is ActionStatus.NOT_EXECUTED
    assert outcome.observation.startswith(f"Invalid arguments for tool '{tool}': ")
    assert problem in outcome.observation


@pytest.mark.asyncio
async def test_arguments_breaking_the_schema_never_reach_the_server(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    async with stdio_executor(env={"POLYLOOP_MCP_NOTES": str(notes)}) as executor:
        refused = await call(executor, "remember", note=5)
        assert not notes.exists()
        accepted = await call(executor, "remember", note="five")

    assert refused.status is ActionStatus.NOT_EXECUTED
    assert accepted.status is ActionStatus.EXECUTED
    assert notes.read_text() == "five\n"


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("code", "name"), [(-32602, "INVALID_PARAMS"), (-32601, "METHOD_NOT_FOUND")]
)
async def test_a_call_the_server_refuses_is_not_executed(
    shared: MCPExecutor, code: int, name: str
) -> None:
    outcome = await call(shared, "refuse", code=code)

    assert outcome.status is ActionStatus.NOT_EXECUTED, name
    assert f"the server refused the call ({code}): refused with code {code}" in outcome.observation


# --------------------------------------------------------------------------- env error


@pytest.mark.asyncio
async def test_any_other_json_rpc_error_is_an_env_error(shared: MCPExecutor) -> None:
    outcome = await call(shared, "refuse", code=-32603)

    assert outcome.status is ActionStatus.ENV_ERROR
    assert "the server answered with error -32603" in outcome.observation


@pytest.mark.asyncio
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_call_past_the_read_timeout_is_an_env_error_and_the_session_goes_on(
    make: Any, transport: str
) -> None:
    async with make(transport, read_timeout_s=0.5) as executor:
        slow = await call(executor, "nap", seconds=30)
        after = await call(executor, "lookup", key="e")

    assert slow.status is ActionStatus.ENV_ERROR
    assert "no answer within the read timeout" in slow.observation
    assert after == ActionOutcome(status=ActionStatus.EXECUTED, observation="2.71828")


@pytest.mark.asyncio
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_server_killed_during_a_call_is_an_env_error_and_the_next_call_reconnects(
    transport: str,
) -> None:
    """Over stdio the executor starts the server again (a new process: its state is gone, which
    the killed call said with env_error); over HTTP nobody restarts it, so the next call is an
    env_error too (``test_mcp_reconnect.py`` brings a server back)."""
    async with server_for(transport) as executor:
        killed = await call(executor, "crash")
        later = await call(executor, "lookup", key="pi")

    assert killed.status is ActionStatus.ENV_ERROR
    assert later.detail is not None
    if transport == "stdio":
        assert later.status is ActionStatus.EXECUTED
        assert later.detail["reconnected"]["attempts"] == 1
    else:
        assert later.status is ActionStatus.ENV_ERROR
        assert later.detail["error"]["kind"] == "reconnect_failed"


@pytest.mark.asyncio
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_server_killed_between_calls_is_an_env_error(transport: str) -> None:
    async with server_for(transport) as executor:
        pid = int((await call(executor, "pid")).observation)
        os.kill(pid, signal.SIGKILL)
        outcome = await call(executor, "lookup", key="pi")

    assert outcome.status is ActionStatus.ENV_ERROR
    assert str(executor) in outcome.observation


@contextlib.asynccontextmanager
async def server_for(transport: str) -> AsyncIterator[MCPExecutor]:
    """An open executor on a server of its own (the test may kill it)."""
    if transport == "stdio":
        async with stdio_executor() as executor:
            yield executor
        return
    with mcp_http_server() as (url, _):
        async with MCPExecutor.http(url) as executor:
            yield executor


# --------------------------------------------------------------------------- cancellation


@pytest.mark.asyncio
async def test_a_cancelled_call_raises_cancelled_error_and_the_session_goes_on(
    shared: MCPExecutor,
) -> None:
    task = asyncio.ensure_future(call(shared, "nap", seconds=30))
    await asyncio.sleep(0.2)
    task.cancel()

    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 10)
    assert (await call(shared, "lookup", key="pi")).status is ActionStatus.EXECUTED


# --------------------------------------------------------------------------- task ownership


@pytest.mark.asyncio
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_opened_in_one_task_and_closed_in_another_without_error(
    make: Any, transport: str
) -> None:
    executor = await asyncio.create_task(make(transport).open())
    pid = int((await asyncio.create_task(call(executor, "pid"))).observation)

    await asyncio.create_task(executor.aclose())

    if transport == "stdio":
        assert process_is_gone(pid)  # the server child was shut down
    with pytest.raises(RuntimeError, match="needs an open executor"):
        await call(executor, "lookup", key="pi")


@pytest.mark.asyncio
async def test_the_sdk_client_alone_cannot_be_closed_in_another_task(http_server: str) -> None:
    """Why the executor owns its session: the trap it removes is real in the SDK it wraps."""
    from mcp import Client

    client = Client(http_server)
    await asyncio.create_task(client.__aenter__())

    with pytest.raises(RuntimeError, match="cancel scope in a different task"):
        await asyncio.create_task(client.__aexit__(None, None, None))


def test_an_executor_is_used_and_closed_from_fresh_event_loops_after_its_own_is_gone(
    caplog: pytest.LogCaptureFixture,
) -> None:
    executor = asyncio.run(stdio_executor().open())  # that loop is closed when run() returns
    outcome = asyncio.run(call(executor, "pid"))

    asyncio.run(executor.aclose())

    assert outcome.status is ActionStatus.EXECUTED
    assert process_is_gone(int(outcome.observation))
    assert "did not shut down" not in caplog.text  # a clean shutdown, not the bound running out


@pytest.mark.asyncio
async def test_aclose_twice_and_from_two_tasks_at_once_is_harmless(make: Any) -> None:
    executor = await make("http").open()

    await asyncio.gather(executor.aclose(), executor.aclose())
    await executor.aclose()

    with pytest.raises(RuntimeError, match="needs an open executor"):
        await call(executor, "lookup", key="pi")


@pytest.mark.asyncio
async def test_an_executor_never_opened_closes_without_doing_anything(make: Any) -> None:
    executor = make("stdio")

    await executor.aclose()

    with pytest.raises(RuntimeError, match="already called"):
        await executor.open()


@pytest.mark.asyncio
async def test_an_executor_is_opened_once_and_used_only_while_open(make: Any) -> None:
    executor = make("http")
    with pytest.raises(RuntimeError, match="built when the executor opens"):
        _ = executor.registry
    with pytest.raises(RuntimeError, match="needs an open executor"):
        await call(executor, "lookup", key="pi")

    async with executor:
        with pytest.raises(RuntimeError, match="already called"):
            await executor.open()

    assert "lookup" in executor.registry  # the registry outlives the session


@pytest.mark.asyncio
async def test_a_cancelled_open_raises_cancelled_error(make: Any) -> None:
    task = asyncio.ensure_future(make("stdio").open())
    await asyncio.sleep(0.1)
    task.cancel()

    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 10)


# --------------------------------------------------------------------------- opening fails


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("command", "args", "reason"),
    [
        ("/nonexistent/mcp-server", [], "FileNotFoundError"),
        (sys.executable, ["-c", "pass"], "Connection closed"),
        (sys.executable, ["-c", "print('not json-rpc')"], "MCPError"),
    ],
    ids=["no-such-command", "exits-at-once", "speaks-no-mcp"],
)
async def test_a_server_that_cannot_start_fails_open_with_connection_error(
    command: str, args: list[str], reason: str
) -> None:
    with pytest.raises(ConnectionError, match=f"could not open MCP server .*{reason}"):
        await MCPExecutor.stdio(command, args).open()


@pytest.mark.asyncio
async def test_a_server_that_never_answers_fails_open_after_open_timeout_s() -> None:
    sleeper = ["-c", "import time; time.sleep(60)"]
    silent = MCPExecutor.stdio(sys.executable, sleeper, open_timeout_s=0.5)

    with pytest.raises(ConnectionError, match=r"TimeoutError: no answer within 0.5 s"):
        await silent.open()


@pytest.mark.asyncio
async def test_nothing_listening_at_the_url_fails_open_with_connection_error() -> None:
    with (
        socket_bound_but_not_listening() as port,
        pytest.raises(ConnectionError, match=r"could not open MCP server http://127\.0\.0\.1"),
    ):
        await MCPExecutor.http(f"http://127.0.0.1:{port}/mcp").open()


@contextlib.contextmanager
def socket_bound_but_not_listening() -> Iterator[int]:
    import socket

    with socket.socket() as sock:  # holding the port keeps anyone else from listening on it
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: MCPExecutor.stdio(""), "command must be a non-empty str"),
        (lambda: MCPExecutor.stdio(None), "command must be a non-empty str"),  # type: ignore[arg-type]
        (lambda: MCPExecutor.stdio("python", "server.py"), "args must be a sequence of str"),
        (lambda: MCPExecutor.stdio("python", ["a", 1]), "args must be"),  # type: ignore[list-item]
        (lambda: MCPExecutor.stdio("python", env={"A": 1}), "env must map"),  # type: ignore[dict-item]
        (lambda: MCPExecutor.http("file:///etc/passwd"), "url must be an http:// or https://"),
        (lambda: MCPExecutor.http(""), "url must be an http:// or https://"),
        (lambda: MCPExecutor.http("http://x", read_timeout_s=0), "read_timeout_s must be"),
        (lambda: MCPExecutor.http("http://x", read_timeout_s=-1), "read_timeout_s must be"),
        (lambda: MCPExecutor.http("http://x", read_timeout_s=True), "read_timeout_s must be"),
        (lambda: MCPExecutor.http("http://x", read_timeout_s="5"), "read_timeout_s"),  # type: ignore[arg-type]
        (lambda: MCPExecutor.http("http://x", read_timeout_s=float("nan")), "read_timeout_s"),
        (lambda: MCPExecutor.http("http://x", open_timeout_s=float("inf")), "finite number"),
        (lambda: MCPExecutor.http("http://x", max_observation_chars=0), "max_observation_chars"),
        (lambda: MCPExecutor.http("http://x", max_observation_chars=True), "max_observation"),
    ],
)
def test_bad_constructor_arguments_are_a_value_error_naming_the_argument(
    build: Any, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        build()


def test_without_the_mcp_extra_construction_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "mcp", None)  # `import mcp` now raises ImportError

    with pytest.raises(ImportError, match=r"pip install 'polyloop\[mcp\]'"):
        MCPExecutor.http("http://127.0.0.1:1/mcp")


def test_importing_the_executors_loads_no_part_of_the_sdk() -> None:
    import subprocess

    sdk = {"mcp", "mcp_types", "jsonschema", "anyio", "pydantic"}
    probe = f"import sys, polyloop.executors; print(sorted({sdk!r} & set(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-I", "-c", probe], capture_output=True, text=True, check=True
    ).stdout

    assert out.strip() == "[]"


@pytest.mark.asyncio
async def test_long_observations_are_cut_to_max_observation_chars(make: Any) -> None:
    async with make("http", max_observation_chars=5) as executor:
        outcome = await call(executor, "lookup", key="pi")

    assert outcome.observation == "3.141\n[... 2 more characters truncated]"
    assert outcome.observation_truncated_chars == 2


# --------------------------------------------------------------------------- whole runs


def tool_call(tool: str, **args: Any) -> str:
    import json

    return json.dumps({"tool": tool, "arguments": args})


FINAL = '{"final_answer": "pi is 3.14159 and 2 + 3 = 5"}'


@pytest.mark.asyncio
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_run_drives_two_tool_calls_and_a_final_answer(make: Any, transport: str) -> None:
    model = ScriptedModel([tool_call("lookup", key="pi"), tool_call("add", a=2, b=3), FINAL])
    async with make(transport) as executor:
        result = await polyloop.run(
            agent(tools=executor.registry), "what are pi and 2 + 3?",
            model=model, parser=JsonToolCallParser(), executor=executor,
        )  # fmt: skip

    assert result.stop_reason is StopReason.AGENT_FINISHED
    assert result.final_answer == "pi is 3.14159 and 2 + 3 = 5"
    assert [(s.tool_name, s.action_status, s.observation) for s in result.steps[:2]] == [
        ("lookup", ActionStatus.EXECUTED, "3.14159"),
        ("add", ActionStatus.EXECUTED, "5"),
    ]
    assert result.executed_actions == 2


@pytest.mark.asyncio
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_server_killed_mid_run_stops_the_run_env_error(transport: str) -> None:
    model = ScriptedModel([tool_call("lookup", key="pi"), tool_call("crash"), FINAL])
    store = MemoryStore()
    async with server_for(transport) as executor:
        result = await polyloop.run(
            agent(tools=executor.registry), "crash it", model=model,
            parser=JsonToolCallParser(), executor=executor, store=store, run_id="killed",
        )  # fmt: skip

    assert result.stop_reason is StopReason.ENV_ERROR
    assert [s.action_status for s in result.steps] == [
        ActionStatus.EXECUTED,
        ActionStatus.ENV_ERROR,
    ]
    assert result.steps[1].observation == ENV_ERROR_TEXT
    logged = (await store.read_log("killed")).steps[1]
    assert "connection is closed" in (logged.executor_observation or "")


class DiesAfterTheCall:
    """The host process dies right after the MCP server ran the tool, before the result was
    recorded: the log ends at the ``ActionIntent`` and nobody knows the call happened."""

    def __init__(self, executor: MCPExecutor) -> None:
        self.executor = executor

    async def execute(self, action: Action) -> ActionOutcome:
        await self.executor.execute(action)
        raise Crash("the host died after the call")


@pytest.mark.asyncio
async def test_resume_after_a_crash_behind_an_action_intent_never_replays_the_call(
    tmp_path: Path,
) -> None:
    ledger = tmp_path / "ledger.txt"
    env = {"POLYLOOP_MCP_NOTES": str(ledger)}
    script = [tool_call("remember", note="paid"), '{"final_answer": "done"}']
    store = MemoryStore()
    async with stdio_executor(env=env) as executor:
        the_agent = agent(tools=executor.registry)  # replay_interrupted_actions=False
        with pytest.raises(Crash):
            await polyloop.run(
                the_agent, "pay once", model=ScriptedModel(script), parser=JsonToolCallParser(),
                executor=DiesAfterTheCall(executor), store=store, run_id="paying",
            )  # fmt: skip
    assert type((await store.read_log("paying")).records[-1]).__name__ == "ActionIntent"

    async with stdio_executor(env=env) as executor:  # a new process would open a new session
        result = await polyloop.resume(
            "paying", agent(tools=executor.registry), model=ScriptedModel(script),
            parser=JsonToolCallParser(), executor=executor, store=store,
        )  # fmt: skip

    assert result.stop_reason is StopReason.RESUME_STATE_UNKNOWN
    assert ledger.read_text() == "paid\n"  # the call ran once, before the crash


# --------------------------------------------------------------------------- published schemas


def published(name: str, schema: dict[str, Any]) -> Any:
    from types import SimpleNamespace

    return SimpleNamespace(name=name, description="", input_schema=schema, output_schema=None)


def listing_of(*tools: Any) -> Any:
    from polyloop.executors._mcp import _listing, _Member
    from polyloop.executors._mcp_connection import Endpoint

    member = _Member(None, Endpoint("http://127.0.0.1:1/mcp", None, None), listed=list(tools))
    return _listing([member], refuse_collisions=True)


def test_a_tool_published_with_an_invalid_schema_is_skipped_with_the_reason(
    caplog: pytest.LogCaptureFixture,
) -> None:
    listing = listing_of(published("fine", {"type": "object"}), published("broken", {"type": 5}))

    assert [tool.name for tool in listing.registry] == ["fine"]
    assert "not valid" in listing.skipped["broken"]
    assert "\n" not in listing.skipped["broken"]  # one line
    assert "tool 'broken' is skipped" in caplog.text


def test_a_remote_ref_in_a_published_schema_is_never_fetched() -> None:
    schema = {"type": "object", "properties": {"a": {"$ref": "https://example.invalid/s.json"}}}

    listing = listing_of(published("remote", schema))

    assert len(listing.registry) == 0
    assert "https://example.invalid/s.json" in listing.skipped["remote"]


def test_a_name_collision_found_when_tools_are_listed_again_skips_the_newcomer() -> None:
    from polyloop.executors._mcp import _listing, _Member
    from polyloop.executors._mcp_connection import Endpoint

    first = _Member("a", Endpoint("http://127.0.0.1:1/mcp", None, None))
    second = _Member("a_b", Endpoint("http://127.0.0.1:2/mcp", None, None))
    first.listed = [published("b_c", {})]
    second.listed = [published("c", {}), published("d", {})]

    listing = _listing([first, second], refuse_collisions=False)

    assert [tool.name for tool in listing.registry] == ["a_b_c", "a_b_d"]
    assert listing.routes["a_b_c"][0] is first
    assert "'b_c' of server 'a'" in listing.skipped["a_b_c"]
    assert "'c' of server 'a_b'" in listing.skipped["a_b_c"]


def test_a_changed_description_is_a_changed_tool() -> None:
    from polyloop import Tool, ToolRegistry
    from polyloop.executors._mcp import _changes

    before = ToolRegistry([Tool(name="t", description="old"), Tool(name="gone", description="")])
    after = ToolRegistry([Tool(name="t", description="new"), Tool(name="new", description="")])

    assert _changes(before, after) == {"added": ["new"], "removed": ["gone"], "changed": ["t"]}


def test_a_tool_a_server_lists_twice_is_offered_once() -> None:
    listing = listing_of(published("twice", {"type": "object"}), published("twice", {}))

    assert [tool.name for tool in listing.registry] == ["twice"]
    assert "lists it twice" in listing.skipped["twice"]


@pytest.mark.asyncio
async def test_a_call_in_flight_when_the_executor_closes_is_an_env_error(make: Any) -> None:
    executor = await make("http").open()
    in_flight = asyncio.ensure_future(call(executor, "nap", seconds=30))
    await asyncio.sleep(0.2)

    await executor.aclose()

    outcome = await asyncio.wait_for(in_flight, 10)
    assert outcome.status is ActionStatus.ENV_ERROR


# --------------------------------------------------------------------------- rendering


def block(kind: str, **fields: Any) -> Any:
    from types import SimpleNamespace

    return SimpleNamespace(type=kind, **fields)


def test_a_result_without_content_blocks_shows_its_structured_content_as_canonical_json() -> None:
    from polyloop.executors._mcp_content import render

    result = block("result", content=[], structured_content={"b": [1, 2], "a": "é"}, is_error=False)

    assert render(result, None, None).text == '{"a":"é","b":[1,2]}'


def test_blocks_of_unknown_kinds_and_bad_base64_are_summarised_not_raised(tmp_path: Path) -> None:
    from polyloop.executors._artifact_dir import ArtifactDirectory
    from polyloop.executors._mcp_content import render

    result = block(
        "result",
        content=[
            block("image", mime_type="image/png", data="%%%"),
            block("audio", mime_type="../../etc/passwd\nx", data="AAEC"),
            block("hologram"),
        ],
        structured_content=None,
        is_error=False,
    )

    rendered = render(result, None, ArtifactDirectory(tmp_path))

    lines = rendered.text.splitlines()
    assert lines[0] == "[image: image/png, 3 base64 characters, not valid base64]"
    assert lines[1].startswith("[audio: ../../etc/passwd x, 3 bytes, saved as ")
    assert lines[2] == "[hologram content]"
    saved = [path.name for path in tmp_path.iterdir()]
    assert [Path(a["file"]).name for a in rendered.artifacts] == saved
    assert saved[0].endswith(".bin")  # a MIME type never reaches the file name


def test_an_error_result_shows_its_text_even_with_structured_content() -> None:
    from polyloop.executors._mcp_content import render

    result = block(
        "result",
        content=[block("text", text="it broke")],
        structured_content={"result": 1},
        is_error=True,
    )

    assert render(result, {"properties": {"result": {}}}, None).text == "it broke"
