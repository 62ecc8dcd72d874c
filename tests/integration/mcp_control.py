"""The test MCP server taken down and brought back from outside, over stdio and over HTTP.

Over stdio the executor starts the server itself, so "down" is a gate
(``mcp_gated_server.py``): while its file exists the server process exits at once, and the
running one is killed. Over HTTP the server process is killed and started again on the same
loopback port.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from polyloop import Action, ActionStatus
from polyloop.executors import MCPExecutor
from tests.conftest import MCP_SERVER, _free_loopback_port, _wait_until_listening

GATED_SERVER = Path(__file__).resolve().with_name("mcp_gated_server.py")


class HttpServer:
    """The test MCP server over HTTP on a fixed loopback port, killed and started at will."""

    def __init__(self) -> None:
        self.port = _free_loopback_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with tempfile.TemporaryFile() as log:
            self.process = subprocess.Popen(
                [sys.executable, str(MCP_SERVER), "--http", str(self.port)],
                stdout=log,
                stderr=log,
            )
            _wait_until_listening(self.port, self.process, log)

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=30)
            self.process = None


class Server:
    """One server behind one executor, for one transport: ``down()`` takes it down for as long
    as the test likes, ``up()`` brings it back, ``stop()`` ends it for good."""

    def __init__(self, transport: str, gate: Path) -> None:
        self.transport = transport
        self.gate = gate
        self.http = HttpServer() if transport == "http" else None

    def executor(self, **options: Any) -> MCPExecutor:
        if self.http is not None:
            return MCPExecutor.http(self.http.url, **options)
        return MCPExecutor.stdio(sys.executable, [str(GATED_SERVER), str(self.gate)], **options)

    async def down(self, executor: MCPExecutor) -> None:
        if self.http is not None:
            await asyncio.to_thread(self.http.kill)
            return
        self.gate.touch()  # before the kill: no new server process can start from now on
        outcome = await executor.execute(Action(text="pid", tool_name="pid", tool_args={}))
        assert outcome.status is ActionStatus.EXECUTED, outcome
        pid = int(outcome.observation)
        assert pid != os.getpid()
        os.kill(pid, signal.SIGKILL)
        await wait_dead(pid)

    async def up(self) -> None:
        if self.http is not None:
            await asyncio.to_thread(self.http.start)
        else:
            self.gate.unlink(missing_ok=True)

    def stop(self) -> None:
        if self.http is not None:
            self.http.kill()


def _gone(pid: int) -> bool:
    """Whether ``pid`` is gone or a zombie (killed, not yet reaped by its parent)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in "ZX"
    except (FileNotFoundError, ProcessLookupError):
        return True


async def wait_dead(pid: int) -> None:
    for _ in range(1000):  # SIGKILL is delivered asynchronously
        if _gone(pid):
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"the MCP server {pid} outlived SIGKILL by 10 s")
