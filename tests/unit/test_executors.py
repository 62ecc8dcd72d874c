"""ToolExecutor and PythonExecutor (real child processes); schemas: test_tool_schema*.py."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from polyloop import Action, ActionStatus, Tool, ToolRegistry
from polyloop.executors import PythonExecutor, ToolExecutor

pytestmark = pytest.mark.asyncio


def tool_action(name: str | None, args: dict[str, Any] | None = None) -> Action:
    return Action(text=f"call {name}", tool_name=name, tool_args=args)


class Recorder:
    """A tool function that records its calls."""

    def __init__(self, result: Any = "ok") -> None:
        self.calls: list[dict[str, Any]] = []
        self.threads: list[int] = []
        self.result = result

    def __call__(self, **kwargs: Any) -> Any:
        self.calls.append(kwargs)
        self.threads.append(threading.get_ident())
        return self.result


ADD_SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
    "additionalProperties": False,
}


def add(a: int, b: int) -> int:
    return a + b


def executor_with(*tools: Tool, **options: Any) -> ToolExecutor:
    return ToolExecutor(ToolRegistry(tools), **options)


# --------------------------------------------------------------------------- ToolExecutor


async def test_a_tool_call_is_executed_and_its_return_value_is_the_observation():
    executor = executor_with(Tool(name="add", description="", parameters=ADD_SCHEMA, func=add))
    outcome = await executor.execute(tool_action("add", {"a": 2, "b": 40}))
    assert outcome.status is ActionStatus.EXECUTED
    assert outcome.observation == "42"
    assert outcome.observation_truncated_chars == 0
    assert outcome.env_reported_completion is False


async def test_a_str_result_is_kept_as_is_and_anything_else_becomes_canonical_json():
    text = Recorder(result="plain\ntext ✓")
    data = Recorder(result={"zeta": [1, 2.5, None], "alpha": "é"})
    executor = executor_with(
        Tool(name="text", description="", func=text), Tool(name="data", description="", func=data)
    )
    assert (await executor.execute(tool_action("text"))).observation == "plain\ntext ✓"
    observation = (await executor.execute(tool_action("data"))).observation
    assert observation == '{"alpha":"é","zeta":[1,2.5,null]}'


async def test_a_sync_tool_runs_in_a_worker_thread_not_on_the_loop():
    recorder = Recorder()
    executor = executor_with(Tool(name="t", description="", func=recorder))
    await executor.execute(tool_action("t"))
    assert recorder.threads
    assert recorder.threads[0] != threading.get_ident()


async def test_an_async_tool_is_awaited():
    async def fetch(key: str) -> str:
        await asyncio.sleep(0)
        return f"value of {key}"

    executor = executor_with(Tool(name="fetch", description="", func=fetch))
    outcome = await executor.execute(tool_action("fetch", {"key": "k"}))
    assert (outcome.status, outcome.observation) == (ActionStatus.EXECUTED, "value of k")


@pytest.mark.parametrize(
    "name", ["nope", "../add", "add/../../etc/passwd", "ADD", "add ", "ü" * 500]
)
async def test_an_unknown_tool_is_not_executed_and_the_observation_names_it(name):
    recorder = Recorder()
    executor = executor_with(Tool(name="add", description="", func=recorder))
    outcome = await executor.execute(tool_action(name))
    assert outcome.status is ActionStatus.NOT_EXECUTED
    assert "Unknown tool" in outcome.observation
    assert repr(name[:80]) in outcome.observation
    assert "add" in outcome.observation  # the available tools are listed
    assert len(outcome.observation) < 400  # a huge name is cut, not echoed whole
    assert recorder.calls == []


@pytest.mark.parametrize("name", [None, ""])
async def test_an_action_naming_no_tool_is_not_executed(name):
    recorder = Recorder()
    executor = executor_with(Tool(name="t", description="", func=recorder))
    outcome = await executor.execute(Action(text="do something", tool_name=name))
    assert outcome.status is ActionStatus.NOT_EXECUTED
    assert "names no tool" in outcome.observation
    assert recorder.calls == []


async def test_none_arguments_mean_no_arguments():
    recorder = Recorder()
    executor = executor_with(Tool(name="t", description="", func=recorder))
    none = await executor.execute(tool_action("t", None))
    empty = await executor.execute(tool_action("t", {}))
    assert none.status is empty.status is ActionStatus.EXECUTED
    assert recorder.calls == [{}, {}]


async def test_none_arguments_to_a_tool_with_required_arguments_are_not_executed():
    executor = executor_with(Tool(name="add", description="", parameters=ADD_SCHEMA, func=add))
    outcome = await executor.execute(tool_action("add", None))
    assert outcome.status is ActionStatus.NOT_EXECUTED
    assert "the arguments: 'a' is a required property" in outcome.observation


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        ({"a": 1}, "the arguments: 'b' is a required property"),
        ({"a": "1", "b": 2}, "a: '1' is not of type 'integer'"),
        ({"a": True, "b": 2}, "a: True is not of type 'integer'"),
        ({"a": 1.5, "b": 2}, "a: 1.5 is not of type 'integer'"),
        ({"a": 1, "b": 2, "c": 3}, "('c' was unexpected)"),
        ({"a": None, "b": 2}, "a: None is not of type 'integer'"),
    ],
)
async def test_arguments_that_fail_the_schema_are_not_executed(args, problem):
    calls: list[tuple[int, int]] = []

    def tracked_add(a: int, b: int) -> int:
        calls.append((a, b))
        return a + b

    tool = Tool(name="add", description="", parameters=ADD_SCHEMA, func=tracked_add)
    outcome = await executor_with(tool).execute(tool_action("add", args))
    assert outcome.status is ActionStatus.NOT_EXECUTED
    assert "Invalid arguments for tool 'add'" in outcome.observation
    assert problem in outcome.observation
    assert calls == []


async def test_arguments_that_do_not_bind_to_the_signature_are_not_executed():
    executor = executor_with(Tool(name="add", description="", func=add))  # no schema
    outcome = await executor.execute(tool_action("add", {"a": 1, "c": 2}))
    assert outcome.status is ActionStatus.NOT_EXECUTED
    assert "do not match tool 'add'" in outcome.observation


async def test_a_tool_without_a_function_is_not_executed():
    executor = executor_with(Tool(name="submit", description="", completion_marker=True))
    outcome = await executor.execute(tool_action("submit"))
    assert outcome.status is ActionStatus.NOT_EXECUTED
    assert "no function" in outcome.observation


async def test_a_tool_that_raises_is_executed_with_the_error_as_observation():
    def divide(a: int, b: int) -> float:
        return a / b

    executor = executor_with(Tool(name="divide", description="", func=divide))
    outcome = await executor.execute(tool_action("divide", {"a": 1, "b": 0}))
    assert outcome.status is ActionStatus.EXECUTED
    assert outcome.observation == "ZeroDivisionError: division by zero"


async def test_a_result_json_cannot_encode_is_executed_with_a_type_error_observation():
    executor = executor_with(
        Tool(name="obj", description="", func=Recorder(result=object())),
        Tool(name="nan", description="", func=Recorder(result=float("nan"))),
    )
    for name in ("obj", "nan"):
        outcome = await executor.execute(tool_action(name))
        assert outcome.status is ActionStatus.EXECUTED
        assert outcome.observation.startswith("TypeError: tool ")
        assert "not JSON-serialisable" in outcome.observation


class Halt(BaseException):
    """A BaseException that is not an Exception."""


@pytest.mark.parametrize("exc_type", [KeyboardInterrupt, SystemExit, Halt])
async def test_base_exceptions_that_are_not_exceptions_propagate(exc_type):
    def stop() -> None:
        raise exc_type("stop")

    async def astop() -> None:
        raise exc_type("stop")

    executor = executor_with(
        Tool(name="sync", description="", func=stop), Tool(name="async", description="", func=astop)
    )
    for name in ("sync", "async"):
        with pytest.raises(exc_type):
            await executor.execute(tool_action(name))


async def test_cancelling_an_execution_raises_cancelled_error():
    started = asyncio.Event()

    async def wait_forever() -> str:
        started.set()
        await asyncio.Event().wait()
        return "never"

    executor = executor_with(Tool(name="wait", description="", func=wait_forever))
    task = asyncio.ensure_future(executor.execute(tool_action("wait")))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_long_observations_are_truncated_and_the_cut_is_counted():
    executor = executor_with(
        Tool(name="big", description="", func=Recorder(result="x" * 1000)),
        Tool(name="small", description="", func=Recorder(result="y" * 10)),
        max_observation_chars=100,
    )
    big = await executor.execute(tool_action("big"))
    assert big.observation_truncated_chars == 900
    assert big.observation.startswith("x" * 100 + "\n[... 900 more characters truncated]")
    assert big.observation.count("x") == 100
    small = await executor.execute(tool_action("small"))
    assert (small.observation, small.observation_truncated_chars) == ("y" * 10, 0)


async def test_unicode_and_huge_arguments_reach_the_tool_intact():
    recorder = Recorder()
    executor = executor_with(Tool(name="t", description="", func=recorder))
    text = "\u0000\u202e日本\U0001f600" + "z" * 1_000_000
    outcome = await executor.execute(tool_action("t", {"text": text}))
    assert outcome.status is ActionStatus.EXECUTED
    assert recorder.calls == [{"text": text}]


@pytest.mark.parametrize("limit", [0, -1, True, 1.5, "10"])
async def test_an_invalid_observation_limit_is_refused(limit):
    with pytest.raises(ValueError, match="max_observation_chars"):
        ToolExecutor(ToolRegistry(), max_observation_chars=limit)


async def test_a_tool_executor_needs_a_registry():
    with pytest.raises(TypeError, match="ToolRegistry"):
        ToolExecutor([Tool(name="t", description="")])  # type: ignore[arg-type]


# --------------------------------------------------------------------------- PythonExecutor


def code(text: str) -> Action:
    return Action(text=text)


def process_exists(pid: int) -> bool:
    """Whether ``pid`` is a running process (a killed, not yet reaped zombie is not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    if not Path("/proc/self").exists():
        return True  # no /proc: the signal check above is all we have
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False  # reaped since the signal check
    return state != "Z"


async def test_constructing_a_python_executor_starts_nothing():
    executor = PythonExecutor()
    assert executor.pid is None  # the child starts on the first execute, not here


@pytest.mark.parametrize("seconds", [0, -1, True, "1"])
async def test_an_invalid_timeout_is_refused(seconds):
    with pytest.raises(ValueError, match="timeout_s"):
        PythonExecutor(timeout_s=seconds)


async def test_state_persists_between_actions_and_a_final_expression_is_echoed():
    async with PythonExecutor(timeout_s=10) as executor:
        first = await executor.execute(code("import math\nx = 6\nprint('set')"))
        second = await executor.execute(code("x * 7 + math.floor(0.5)"))
    assert (first.status, first.observation) == (ActionStatus.EXECUTED, "set\n")
    assert (second.status, second.observation) == (ActionStatus.EXECUTED, "42\n")


async def test_code_that_raises_is_executed_with_its_traceback_and_the_session_survives():
    async with PythonExecutor(timeout_s=10) as executor:
        await executor.execute(code("kept = 'still here'"))
        raised = await executor.execute(code("print('before')\n{}['missing']"))
        syntax = await executor.execute(code("def broken(:"))
        exited = await executor.execute(code("import sys; sys.exit(3)"))
        after = await executor.execute(code("kept"))
    assert raised.status is ActionStatus.EXECUTED
    assert raised.observation.startswith("before\nTraceback (most recent call last):")
    assert "KeyError: 'missing'" in raised.observation
    assert "_python_server" not in raised.observation  # only the action's own frames
    assert syntax.status is ActionStatus.EXECUTED
    assert "SyntaxError" in syntax.observation
    assert exited.status is ActionStatus.EXECUTED
    assert "SystemExit: 3" in exited.observation
    assert after.observation == "'still here'\n"


async def test_stdin_and_raw_stdout_cannot_corrupt_the_protocol():
    async with PythonExecutor(timeout_s=10) as executor:
        reading = await executor.execute(code("input()"))
        raw = await executor.execute(
            code("import os, sys\nos.write(1, b'junk\\n')\nsys.__stdout__.write('x\\n')\n7")
        )
    assert reading.status is ActionStatus.EXECUTED
    assert "EOFError" in reading.observation
    assert (raw.status, raw.observation) == (ActionStatus.EXECUTED, "7\n")


async def test_a_timeout_is_executed_and_restarts_the_session_without_its_state():
    async with PythonExecutor(timeout_s=0.5) as executor:
        await executor.execute(code("x = 1"))
        first_pid = executor.pid
        timed_out = await executor.execute(code("while True:\n    pass"))
        pid_after_timeout = executor.pid
        after = await executor.execute(code("'x' in globals()"))
        new_pid = executor.pid
    assert first_pid is not None
    assert pid_after_timeout is None
    assert not process_exists(first_pid)
    assert new_pid not in (None, first_pid)
    assert timed_out.status is ActionStatus.EXECUTED
    assert timed_out.observation.startswith("TimeoutError: the code did not finish within 0.5 s")
    assert "definitions from earlier actions are lost" in timed_out.observation
    assert after.observation == "False\n"


async def test_a_session_that_dies_is_an_env_error_and_the_next_action_starts_afresh():
    async with PythonExecutor(timeout_s=10) as executor:
        await executor.execute(code("x = 1"))
        died = await executor.execute(code("import os; os._exit(7)"))
        after = await executor.execute(code("'x' in globals()"))
    assert died.status is ActionStatus.ENV_ERROR
    assert "exited with code 7" in died.observation
    assert (after.status, after.observation) == (ActionStatus.EXECUTED, "False\n")


async def test_a_session_killed_from_outside_is_an_env_error():
    async with PythonExecutor(timeout_s=10) as executor:
        await executor.execute(code("1"))
        assert executor.pid is not None
        os.kill(executor.pid, 9)
        outcome = await executor.execute(code("1"))
    assert outcome.status is ActionStatus.ENV_ERROR
    assert "Python session" in outcome.observation


async def test_an_answer_out_of_protocol_is_an_env_error():
    # The code finds the session's private response stream and writes garbage to it first.
    sabotage = (
        "import gc, io\n"
        "stream = next(o for o in gc.get_objects() if isinstance(o, io.TextIOWrapper)"
        " and not o.closed and o.writable() and o.fileno() > 2)\n"
        "stream.write('this is not json\\n'); stream.flush()"
    )
    async with PythonExecutor(timeout_s=10) as executor:
        outcome = await executor.execute(code(sabotage))
        assert executor.pid is None  # the confused session was stopped
    assert outcome.status is ActionStatus.ENV_ERROR
    assert "out of protocol" in outcome.observation


async def test_long_output_is_truncated_in_the_child_and_counted():
    async with PythonExecutor(timeout_s=10, max_observation_chars=50) as executor:
        outcome = await executor.execute(code("print('é' * 1000)"))
    assert outcome.status is ActionStatus.EXECUTED
    assert outcome.observation_truncated_chars == 1001 - 50
    assert outcome.observation == "é" * 50 + "\n[... 951 more characters truncated]"


async def test_unicode_and_lone_surrogates_in_code_do_not_break_the_session():
    async with PythonExecutor(timeout_s=10) as executor:
        text = await executor.execute(code("'日本\\U0001f600'"))
        lone = await executor.execute(code("'\udcff'"))
        after = await executor.execute(code("1 + 1"))
    assert text.observation == "'日本\U0001f600'\n"
    assert lone.status is ActionStatus.EXECUTED
    assert "UnicodeEncodeError" in lone.observation
    assert after.observation == "2\n"


async def test_concurrent_actions_on_one_session_run_one_after_another():
    async with PythonExecutor(timeout_s=10) as executor:
        outcomes = await asyncio.gather(
            *(executor.execute(code("n = globals().get('n', 0) + 1\nn")) for _ in range(5))
        )
    assert sorted(o.observation for o in outcomes) == [f"{i}\n" for i in range(1, 6)]


async def test_cancelling_an_action_kills_the_session_and_reraises(tmp_path: Path):
    fifo = tmp_path / "started"
    os.mkfifo(fifo)
    executor = PythonExecutor(timeout_s=30)
    try:
        await executor.execute(code("ready = True"))
        pid = executor.pid
        assert pid is not None
        task = asyncio.ensure_future(
            executor.execute(code(f"open({str(fifo)!r}, 'w').write('go')\nwhile True:\n    pass"))
        )
        assert await asyncio.to_thread(fifo.read_text) == "go"  # the child is running the code
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert executor.pid is None
        assert not process_exists(pid)
        again = await executor.execute(code("'ready' in globals()"))
        assert again.observation == "False\n"
    finally:
        await executor.aclose()


async def test_aclose_ends_the_child_and_a_later_action_starts_a_new_one():
    executor = PythonExecutor(timeout_s=10)
    await executor.execute(code("1"))
    pid = executor.pid
    assert pid is not None
    assert process_exists(pid)
    await executor.aclose()
    assert executor.pid is None
    assert not process_exists(pid)
    outcome = await executor.execute(code("2"))
    assert outcome.observation == "2\n"
    await executor.aclose()


async def test_a_session_used_from_another_event_loop_is_replaced_by_a_fresh_one():
    executor = PythonExecutor(timeout_s=10)
    try:
        await executor.execute(code("x = 1"))
        first_pid = executor.pid

        async def elsewhere() -> tuple[str, int | None]:
            outcome = await executor.execute(code("'x' in globals()"))
            pid = executor.pid
            await executor.aclose()
            return outcome.observation, pid

        observation, other_pid = await asyncio.to_thread(asyncio.run, elsewhere())
    finally:
        await executor.aclose()
    assert observation == "False\n"
    assert first_pid is not None
    assert other_pid not in (None, first_pid)
    assert not process_exists(first_pid)


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no")


@pytest.mark.parametrize(
    ("exc", "observation"),
    [
        (ValueError(), "ValueError"),
        (Unprintable(), "Unprintable: <the exception's message could not be rendered>"),
    ],
)
async def test_an_error_without_a_printable_message_still_gives_an_observation(exc, observation):
    def fail() -> None:
        raise exc

    outcome = await executor_with(Tool(name="fail", description="", func=fail)).execute(
        tool_action("fail")
    )
    assert (outcome.status, outcome.observation) == (ActionStatus.EXECUTED, observation)


async def test_a_refusal_lists_at_most_twenty_tool_names():
    tools = [Tool(name=f"tool{i:03}", description="", func=Recorder()) for i in range(50)]
    outcome = await executor_with(*tools).execute(tool_action("nope"))
    assert outcome.status is ActionStatus.NOT_EXECUTED
    assert "'tool019', and 30 more." in outcome.observation
    assert "tool020" not in outcome.observation
