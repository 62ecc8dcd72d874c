"""PythonExecutor: a persistent Python session in a child process."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import os
import signal
import sys
from collections.abc import Mapping
from typing import Any

from polyloop._closing import AsyncClosing
from polyloop.executors import _python_server
from polyloop.executors._tool import truncation_marker
from polyloop.types import Action, ActionOutcome, ActionStatus

__all__ = ["PythonExecutor"]

_SERVER_SOURCE: str | None = None


def _server_source() -> str:
    global _SERVER_SOURCE
    if _SERVER_SOURCE is None:
        _SERVER_SOURCE = inspect.getsource(_python_server)
    return _SERVER_SOURCE


class _SessionBroken(Exception):
    """The child is dead or spoke something other than the protocol (→ ``env_error``)."""


def _checked(response: object, ident: int) -> tuple[str, int]:
    """The observation and truncated count of a well-formed response to request ``ident``."""
    if (
        isinstance(response, dict)
        and response.get("id") == ident
        and isinstance(response.get("observation"), str)
        and isinstance(response.get("truncated_chars"), int)
    ):
        return response["observation"], response["truncated_chars"]
    raise _SessionBroken(f"The Python session answered out of protocol: {str(response)[:200]}.")


def _env_error(observation: str) -> ActionOutcome:
    return ActionOutcome(status=ActionStatus.ENV_ERROR, observation=observation)


class PythonExecutor(AsyncClosing):
    """Runs ``Action.text`` as Python code in one persistent session (a child process).

    The session is ``sys.executable -c <server>`` speaking line-delimited JSON over its stdin
    and stdout (see :mod:`polyloop.executors._python_server`). Variables, imports and
    definitions persist from one action to the next. The child starts lazily on the first
    ``execute`` — nothing loop-bound is created in ``__init__`` — and ends with ``aclose()`` (or
    ``async with``). The observation is what the code printed (stdout and stderr), then the
    traceback if it raised, or the ``repr`` of a final expression's value (as in a REPL).

    Status mapping:

    * ``executed`` — the code ran, whatever its result: it printed, it raised (the traceback,
      ``SyntaxError`` and ``SystemExit`` included), or it **timed out**.
    * ``env_error`` — the session itself broke: the child could not start, died (``os._exit``,
      a segfault, killed from outside) or answered with something that is not the protocol.
      The child is reaped; the next ``execute`` starts a fresh session (state lost).
    * ``not_executed`` — never: any text is code to run.

    **A timeout is ``executed``, and the session is restarted.** After ``timeout_s`` seconds
    the child is killed and the observation says so and says that earlier state is lost; the
    next action gets a fresh session. Why not ``env_error``: an endless loop is the *code's*
    fault, like an exception, and the model can correct it — ``env_error`` ends the run where
    the model could have recovered (the boundary of seed decision 1 is "can the environment
    go on serving?", and after a restart it can). The cost: output printed before the timeout
    is lost, and a session that hangs for an environmental reason looks like slow code.

    ``max_observation_chars`` (default 100 000; ``None``: unlimited) is applied in the child,
    so a response line stays bounded; the count goes to ``observation_truncated_chars``.

    Cancellation: a cancelled ``execute`` kills the child (its state is lost, since the code
    was interrupted at an unknown point), waits for it to exit and re-raises
    ``CancelledError``. Concurrent ``execute`` calls on one executor run one after another.
    A session belongs to the event loop that started it: used from a new loop, the old child
    is killed and a fresh session started.
    """

    def __init__(
        self,
        *,
        timeout_s: float = 30.0,
        max_observation_chars: int | None = 100_000,
        start_timeout_s: float = 30.0,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
    ) -> None:
        for name, value in (("timeout_s", timeout_s), ("start_timeout_s", start_timeout_s)):
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise ValueError(f"{name} must be a number > 0, got {value!r}")
        if max_observation_chars is not None and (
            isinstance(max_observation_chars, bool)
            or not isinstance(max_observation_chars, int)
            or max_observation_chars < 1
        ):
            raise ValueError("max_observation_chars must be an int >= 1 or None")
        self.timeout_s = float(timeout_s)
        self.start_timeout_s = float(start_timeout_s)
        self.max_observation_chars = max_observation_chars
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self._proc: asyncio.subprocess.Process | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock: asyncio.Lock | None = None
        self._next_id = 0

    @property
    def pid(self) -> int | None:
        """The current child's process id, or ``None`` when no session is running."""
        proc = self._proc
        return proc.pid if proc is not None and proc.returncode is None else None

    # ------------------------------------------------------------------ the seam

    async def execute(self, action: Action) -> ActionOutcome:
        lock = self._lock_for_running_loop()
        async with lock:
            return await self._execute(action.text)

    async def _execute(self, code: str) -> ActionOutcome:
        try:
            proc = await self._ensure_session()
        except _SessionBroken as exc:
            return _env_error(str(exc))
        self._next_id += 1
        ident = self._next_id
        request = {"id": ident, "code": code, "max_output_chars": self.max_observation_chars}
        line = (json.dumps(request, ensure_ascii=True) + "\n").encode("ascii")
        try:
            async with asyncio.timeout(self.timeout_s):
                observation, cut = _checked(await self._exchange(proc, line), ident)
        except TimeoutError:
            await self._kill()
            return ActionOutcome(
                status=ActionStatus.EXECUTED,
                observation=(
                    f"TimeoutError: the code did not finish within {self.timeout_s:g} s and was "
                    "stopped. The Python session restarts for the next action: variables, "
                    "imports and definitions from earlier actions are lost."
                ),
            )
        except _SessionBroken as exc:
            await self._kill()
            return _env_error(f"{exc} Its state is lost; the next action starts a new session.")
        except BaseException:  # cancellation: the session is mid-action, its state unknown
            await self._kill()
            raise
        if cut > 0:
            observation += truncation_marker(cut)
        return ActionOutcome(
            status=ActionStatus.EXECUTED,
            observation=observation,
            observation_truncated_chars=cut,
        )

    # ------------------------------------------------------------------ the protocol

    async def _exchange(self, proc: asyncio.subprocess.Process, line: bytes) -> Any:
        assert proc.stdin is not None
        try:
            proc.stdin.write(line)
            await proc.stdin.drain()
        except (ConnectionError, OSError) as exc:
            raise await self._died(proc, f"The Python session stopped reading ({exc})") from None
        return await self._read_message(proc)

    async def _read_message(self, proc: asyncio.subprocess.Process) -> Any:
        assert proc.stdout is not None
        try:
            raw = await proc.stdout.readline()
        except (ValueError, asyncio.LimitOverrunError):
            raise _SessionBroken("The Python session sent an over-long line.") from None
        except (ConnectionError, OSError) as exc:
            raise await self._died(proc, f"The Python session's output broke ({exc})") from None
        if not raw.endswith(b"\n"):
            raise await self._died(proc, "The Python session ended unexpectedly")
        try:
            return json.loads(raw)
        except ValueError:
            raise _SessionBroken(
                f"The Python session answered out of protocol: {raw[:200]!r}."
            ) from None

    async def _died(self, proc: asyncio.subprocess.Process, what: str) -> _SessionBroken:
        try:
            async with asyncio.timeout(1.0):
                code = await proc.wait()
        except TimeoutError:
            return _SessionBroken(f"{what}.")
        return _SessionBroken(f"{what}: the process exited with code {code}.")

    # ------------------------------------------------------------------ the session

    def _lock_for_running_loop(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._lock is None:
            self._abandon()  # a child started by another loop cannot be driven from this one
            self._loop = loop
            self._lock = asyncio.Lock()
        return self._lock

    async def _ensure_session(self) -> asyncio.subprocess.Process:
        proc = self._proc
        if proc is not None and proc.returncode is None:
            return proc
        self._proc = None
        limit = 1 << 30 if self.max_observation_chars is None else self.max_observation_chars * 12
        try:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-c",
                _server_source(),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL,
                env=self.env,
                cwd=self.cwd,
                limit=max(limit + 4096, 1 << 16),
            )
        except OSError as exc:
            raise _SessionBroken(f"The Python session could not start: {exc}.") from None
        self._proc = proc
        try:
            async with asyncio.timeout(self.start_timeout_s):
                hello = await self._read_message(proc)
        except TimeoutError:
            await self._kill()
            raise _SessionBroken(
                f"The Python session did not start within {self.start_timeout_s:g} s."
            ) from None
        except BaseException:  # broken, or cancelled while starting: leave no child behind
            await self._kill()
            raise
        if not isinstance(hello, dict) or hello.get("ready") is not True:
            await self._kill()
            raise _SessionBroken("The Python session started out of protocol.")
        return proc

    async def _kill(self) -> None:
        """Kill the child and wait for it to exit; the next action starts a new session."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        await proc.wait()

    def _abandon(self) -> None:
        """Kill the child without waiting (its loop may be gone)."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(OSError):
                os.kill(proc.pid, getattr(signal, "SIGKILL", signal.SIGTERM))

    async def aclose(self) -> None:
        """End the session: close its input, give it a moment to exit, then kill it."""
        proc = self._proc
        if proc is None:
            return
        if self._loop is not asyncio.get_running_loop():
            self._abandon()
            return
        if proc.returncode is None and proc.stdin is not None:
            proc.stdin.close()
            try:
                async with asyncio.timeout(2.0):
                    await proc.wait()
            except TimeoutError:
                pass
        await self._kill()

    def __repr__(self) -> str:
        return f"PythonExecutor(timeout_s={self.timeout_s:g}, pid={self.pid})"
