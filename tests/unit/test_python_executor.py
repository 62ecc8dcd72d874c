"""PythonExecutor: the child's environment, its bounded output and its bounded line cache."""

from __future__ import annotations

import errno
import os
import re
from typing import Any

import pytest

from polyloop import Action, ActionStatus, ToolRegistry
from polyloop.executors import PythonExecutor, ToolExecutor, _python_server
from polyloop.executors._child_env import PASSED_VARIABLES
from polyloop.executors._session_limits import SessionLimits

pytestmark = pytest.mark.asyncio

LIST_ENVIRONMENT = "import os\nprint(sorted(os.environ.items()))"


async def environment_of(executor: PythonExecutor) -> dict[str, str]:
    async with executor:
        outcome = await executor.execute(Action(text=LIST_ENVIRONMENT))
    assert outcome.status is ActionStatus.EXECUTED, outcome.observation
    return dict(eval(outcome.observation))  # a printed list of str pairs


async def test_the_child_does_not_see_the_parents_secrets_by_default(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    child = await environment_of(PythonExecutor(timeout_s=10))
    assert "OPENAI_API_KEY" not in child
    assert child["PATH"] == "/usr/bin:/bin"


async def test_only_the_listed_variables_pass_and_env_adds_or_replaces(monkeypatch):
    monkeypatch.setenv("LANG", "C.UTF-8")
    monkeypatch.setenv("POLYLOOP_PARENT_ONLY", "1")
    child = await environment_of(PythonExecutor(timeout_s=10, env={"LANG": "C", "MINE": "yes"}))
    assert set(child) - {"MINE"} <= set(PASSED_VARIABLES) | {"LC_CTYPE"}  # Python may set it
    assert (child["LANG"], child["MINE"]) == ("C", "yes")
    assert "POLYLOOP_PARENT_ONLY" not in child


async def test_inherit_env_passes_the_whole_parent_environment(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    child = await environment_of(PythonExecutor(timeout_s=10, inherit_env=True, env={"X": "1"}))
    assert (child["OPENAI_API_KEY"], child["X"]) == ("sk-secret", "1")


async def test_the_environment_is_read_when_the_session_starts_not_at_construction(monkeypatch):
    executor = PythonExecutor(timeout_s=10)
    monkeypatch.setenv("PATH", "/late/bin:/usr/bin")
    assert (await environment_of(executor))["PATH"] == "/late/bin:/usr/bin"


@pytest.mark.parametrize(
    ("env", "error"),
    [
        ("PATH=/bin", TypeError),
        ([("A", "b")], TypeError),
        ({1: "x"}, TypeError),
        ({"A": 1}, TypeError),
        ({"A": None}, TypeError),
        ({"": "x"}, ValueError),
        ({"A=B": "x"}, ValueError),
        ({"A\0": "x"}, ValueError),
        ({"A": "x\0y"}, ValueError),
    ],
)
async def test_a_malformed_env_is_refused_at_construction(env: Any, error: type[Exception]):
    with pytest.raises(error, match="env"):
        PythonExecutor(env=env)


@pytest.mark.parametrize("flag", ["yes", 1, None])
async def test_inherit_env_must_be_a_bool(flag: Any):
    with pytest.raises(TypeError, match="inherit_env"):
        PythonExecutor(inherit_env=flag)


@pytest.mark.parametrize("cap", [0, -5, True, 2.5, "100"])
async def test_both_executors_refuse_the_same_bad_observation_cap(cap: Any):
    messages = []
    for build in (
        lambda: PythonExecutor(max_observation_chars=cap),
        lambda: ToolExecutor(ToolRegistry(), max_observation_chars=cap),
    ):
        with pytest.raises(ValueError, match="max_observation_chars") as caught:
            build()
        messages.append(str(caught.value))
    assert messages[0] == messages[1]


async def test_the_child_output_is_capped_while_it_is_printed_so_memory_stays_bounded():
    printing = "for _ in range(300):\n    print('x' * 999_999)"
    async with PythonExecutor(timeout_s=60, max_observation_chars=1000) as executor:
        outcome = await executor.execute(Action(text=printing))
        status = await executor.execute(Action(text="print(open('/proc/self/status').read())"))
    assert outcome.observation_truncated_chars == 300 * 1_000_000 - 1000
    assert outcome.observation.startswith("x" * 1000 + "\n[... ")
    peak = re.search(r"VmHWM:\s+(\d+) kB", status.observation)
    assert peak is not None, status.observation
    assert int(peak.group(1)) * 1024 < 100 * 2**20, f"peak RSS {peak.group(1)} kB"


async def test_only_the_last_actions_sources_stay_in_the_line_cache():
    kept = _python_server.SOURCES_KEPT
    count = "import linecache\nsum(k.startswith('<action-') for k in list(linecache.cache))"
    async with PythonExecutor(timeout_s=10) as executor:
        await executor.execute(Action(text="def boom():\n    raise ValueError('boom')"))
        for _ in range(kept - 2):
            await executor.execute(Action(text="None"))
        recent = await executor.execute(Action(text="boom()"))  # action number `kept`
        for _ in range(5):
            await executor.execute(Action(text="None"))
        old = await executor.execute(Action(text="boom()"))
        counted = await executor.execute(Action(text=count))
    assert "raise ValueError('boom')" in recent.observation  # still a recent action's source
    assert "ValueError: boom" in old.observation
    assert "raise ValueError('boom')" not in old.observation  # its source was let go
    assert counted.observation == f"{kept}\n"


async def test_output_and_traceback_share_the_cap_and_every_dropped_character_is_counted():
    async with PythonExecutor(timeout_s=10, max_observation_chars=10) as executor:
        outcome = await executor.execute(Action(text="print('abc', end='')\n1/0"))
    assert outcome.observation.startswith("abcTraceback"[:10] + "\n[... ")
    assert outcome.observation_truncated_chars > 0
    assert (
        outcome.observation
        == "abcTraceba" + f"\n[... {outcome.observation_truncated_chars} more characters truncated]"
    )


async def test_the_capped_stream_refuses_bytes_like_a_text_stream():
    async with PythonExecutor(timeout_s=10) as executor:
        outcome = await executor.execute(Action(text="import sys\nsys.stdout.write(b'x')"))
    assert "TypeError: write() argument must be str, not bytes" in outcome.observation


# --------------------------------------------------------------------------- limits: bad input


@pytest.mark.parametrize("name", ["cpu_time_s", "memory_bytes", "max_processes", "max_file_bytes"])
@pytest.mark.parametrize("value", [0, -1, True, 1.5, "10"])
async def test_a_malformed_limit_is_refused_at_construction(name: str, value: Any):
    with pytest.raises(ValueError, match=name):
        PythonExecutor(**{name: value})


@pytest.mark.parametrize("network", ["no", 0, None])
async def test_network_must_be_a_bool(network: Any):
    with pytest.raises(TypeError, match="network"):
        PythonExecutor(network=network)


async def test_limits_a_platform_cannot_provide_are_named():
    assert SessionLimits().unavailable(platform="darwin", uid=0) is None  # no limit: no demand
    off_linux = SessionLimits(memory_bytes=10**9).unavailable(platform="darwin", uid=501)
    assert off_linux is not None
    assert "need Linux" in off_linux
    offline = SessionLimits(network=False).unavailable(platform="win32", uid=None)
    assert offline is not None
    assert "'win32'" in offline
    as_root = SessionLimits(max_processes=10).unavailable(platform="linux", uid=0)
    assert as_root is not None
    assert "not enforce for root" in as_root
    assert SessionLimits(max_processes=10).unavailable(platform="linux", uid=1000) is None


@pytest.mark.skipif(os.getuid() != 0, reason="the root refusal needs root")
async def test_max_processes_as_root_is_refused_at_construction():
    with pytest.raises(OSError, match="RLIMIT_NPROC, which Linux does not enforce for root"):
        PythonExecutor(max_processes=10)


async def test_a_refused_network_namespace_says_why_and_what_to_do():
    calls: list[int] = []

    def refuse(flags: int) -> int:
        calls.append(flags)
        return errno.EPERM

    refusal = _python_server.isolate_network(unshare=refuse)
    assert calls == [
        _python_server.CLONE_NEWNET,
        _python_server.CLONE_NEWNET | _python_server.CLONE_NEWUSER,
    ]
    assert refusal is not None
    assert "refused (unshare: Operation not permitted)" in refusal
    assert "user namespaces" in refusal
    assert "network=True" in refusal


async def test_a_granted_network_namespace_needs_no_user_namespace():
    calls: list[int] = []

    def grant(flags: int) -> int:
        calls.append(flags)
        return 0

    assert _python_server.isolate_network(unshare=grant) is None
    assert calls == [_python_server.CLONE_NEWNET]
