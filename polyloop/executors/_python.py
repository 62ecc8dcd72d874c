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

from polyloop._base._closing import AsyncClosing
from polyloop._base._timeout import checked_timeout_s, shown_timeout
from polyloop.executors import _python_server
from polyloop.executors._child_env import checked_env, child_environment
from polyloop.executors._observation_cap import checked_max_observation_chars
from polyloop.executors._session_limits import SessionLimits
from polyloop.executors._tool import truncation_marker
from polyloop.types import Action, ActionOutcome, ActionStatus

__all__ = ["PythonExecutor"]

_SERVER_SOURCE: str | None = None


def _server_source() -> str:
    global _SERVER_SOURCE
    if _SERVER_SOURCE is None:
        _SERVER_SOURCE = inspect.getsource(_python_server)
    return _SERVER_SOURCE


_GRACE_S = 1.0  # aclose(): how long a child may take to exit after its input is closed
_REAP_S = 1.0  # after SIGKILL to the group: how long to wait for the child's exit status
_SIGXCPU = getattr(signal, "SIGXCPU", None)


class _SessionBroken(Exception):
    """The child is dead or spoke something other than the protocol (→ ``env_error``)."""

    def __init__(self, message: str, returncode: int | None = None) -> None:
        super().__init__(message)
        self.returncode = returncode


class _Protocol(asyncio.subprocess.SubprocessStreamProtocol):
    """asyncio's stream protocol, plus an event set as soon as the child exits."""

    def __init__(self, limit: int, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=limit, loop=loop)
        self.exited = asyncio.Event()

    def process_exited(self) -> None:
        super().process_exited()
        self.exited.set()


class _Session:
    """One child process: its asyncio handle and the transport whose pipes we close ourselves."""

    def __init__(self, transport: asyncio.SubprocessTransport, protocol: _Protocol) -> None:
        self.transport = transport
        self.protocol = protocol
        self.proc = asyncio.subprocess.Process(transport, protocol, asyncio.get_running_loop())
        self.pid = self.proc.pid

    async def exit_code(self, seconds: float) -> int | None:
        """The child's exit code once it exited, or ``None`` after ``seconds``.

        Not ``proc.wait()``: that also waits until the pipes close, and a grandchild that
        inherited them may keep them open for ever.
        """
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self.protocol.exited.wait()
        return self.proc.returncode

    def kill_group(self) -> None:
        """SIGKILL the child's whole process group: the child and every grandchild in it."""
        with contextlib.suppress(OSError):  # ESRCH: the group is already empty
            if hasattr(os, "killpg"):
                os.killpg(self.pid, signal.SIGKILL)
            else:
                os.kill(self.pid, signal.SIGTERM)


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
      The child is reaped; the next ``execute`` starts a fresh session (state lost). A child
      that died *between* actions is found by the next ``execute``, which returns ``env_error``
      saying so (it does not run the action); the one after gets the fresh session.
    * ``not_executed`` — never: any text is code to run.

    **A timeout is ``executed``, and the session is restarted.** After ``timeout_s`` seconds
    the child is killed and the observation says so and says that earlier state is lost; the
    next action gets a fresh session. Why not ``env_error``: an endless loop is the *code's*
    fault, like an exception, and the model can correct it — ``env_error`` ends the run where
    the model could have recovered (the boundary of seed decision 1 is "can the environment
    go on serving?", and after a restart it can). The cost: output printed before the timeout
    is lost, and a session that hangs for an environmental reason looks like slow code.

    ``max_observation_chars`` (default 100 000; ``None``: unlimited) is applied in the child
    while the code prints (the rest is only counted), so the child's memory and a response
    line stay bounded; the count goes to ``observation_truncated_chars``.

    The child runs in a process group of its own: a timeout, cancellation and ``aclose()`` kill
    the whole group (grandchildren the code forked included) and wait at most about a second
    for the child's exit status, never for pipes a grandchild still holds.

    Environment: only the variables in ``_child_env.PASSED_VARIABLES`` (``PATH``, ``HOME``,
    ``LANG``, ``LC_ALL``, ``LC_CTYPE``, ``TMPDIR``, ``TZ``, ``SYSTEMROOT``) pass from the parent;
    ``env`` adds or replaces; ``inherit_env=True`` passes the parent's whole environment.

    Limits (Linux; ``None``/``True``: none): ``cpu_time_s`` (CPU seconds for the whole session;
    beyond them the session is stopped — ``executed``, restarted like a timeout),
    ``memory_bytes`` (address space: ``MemoryError``), ``max_processes`` (RLIMIT_NPROC: every
    process of the user counts; root is exempt, so refused for root), ``max_file_bytes`` (a
    larger write fails with ``OSError``), ``network=False`` (a new, empty network namespace).
    A limit this machine cannot provide raises ``OSError`` at construction, or gives
    ``env_error`` naming it at start. Hardening against runaway code, not a sandbox.

    Cancellation: a cancelled ``execute`` kills the child's group (its state is lost, since
    the code was interrupted at an unknown point) and re-raises ``CancelledError``.
    Concurrent ``execute`` calls on one executor run one after another.
    A session belongs to the event loop that started it: used from a new loop, the old child
    is killed and a fresh session started.
    """

    def __init__(
        self,
        *,
        timeout_s: float | None = 30.0,
        max_observation_chars: int | None = 100_000,
        start_timeout_s: float | None = 30.0,
        env: Mapping[str, str] | None = None,
        inherit_env: bool = False,
        cwd: str | os.PathLike[str] | None = None,
        cpu_time_s: int | None = None,
        memory_bytes: int | None = None,
        max_processes: int | None = None,
        max_file_bytes: int | None = None,
        network: bool = True,
    ) -> None:
        if not isinstance(inherit_env, bool):
            raise TypeError(f"inherit_env must be a bool, got {type(inherit_env).__name__}")
        self.timeout_s = checked_timeout_s("timeout_s", timeout_s)
        self.start_timeout_s = checked_timeout_s("start_timeout_s", start_timeout_s)
        self.max_observation_chars = checked_max_observation_chars(max_observation_chars)
        self.env = checked_env(env)
        self.inherit_env = inherit_env
        self.cwd = cwd
        self.limits = SessionLimits(
            cpu_time_s, memory_bytes, max_processes, max_file_bytes, network
        )
        self.limits.require_available()
        self._session: _Session | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock: asyncio.Lock | None = None
        self._next_id = 0

    @property
    def pid(self) -> int | None:
        """The current child's process id, or ``None`` when no session is running."""
        session = self._session
        return session.pid if session is not None and session.proc.returncode is None else None

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
            return _stopped(f"the code did not finish within {shown_timeout(self.timeout_s)} s")
        except _SessionBroken as exc:
            await self._kill()
            if _SIGXCPU is not None and exc.returncode == -_SIGXCPU:
                return _stopped(
                    f"the session used up its CPU time (cpu_time_s={self.limits.cpu_time_s})"
                )
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
            raise await self._died(f"The Python session stopped reading ({exc})") from None
        return await self._read_message(proc)

    async def _readline(self, proc: asyncio.subprocess.Process) -> bytes:
        """The child's next line, or ``b""`` once it exited (a grandchild may hold the pipe)."""
        assert proc.stdout is not None
        assert self._session is not None  # proc is this session's child
        reading = asyncio.ensure_future(proc.stdout.readline())
        exited = asyncio.ensure_future(self._session.protocol.exited.wait())
        try:
            await asyncio.wait({reading, exited}, return_when=asyncio.FIRST_COMPLETED)
            if not reading.done():  # exited: a line written just before is still to be read
                await asyncio.wait({reading}, timeout=_REAP_S)
            return reading.result() if reading.done() else b""
        finally:
            reading.cancel()
            exited.cancel()

    async def _read_message(self, proc: asyncio.subprocess.Process) -> Any:
        try:
            raw = await self._readline(proc)
        except (ValueError, asyncio.LimitOverrunError):
            raise _SessionBroken("The Python session sent an over-long line.") from None
        except (ConnectionError, OSError) as exc:
            raise await self._died(f"The Python session's output broke ({exc})") from None
        if not raw.endswith(b"\n"):
            raise await self._died("The Python session ended unexpectedly")
        try:
            return json.loads(raw)
        except ValueError:
            raise _SessionBroken(
                f"The Python session answered out of protocol: {raw[:200]!r}."
            ) from None

    async def _died(self, what: str) -> _SessionBroken:
        session = self._session
        code = None if session is None else await session.exit_code(_REAP_S)
        if code is None:
            return _SessionBroken(f"{what}.")
        return _SessionBroken(f"{what}: the process exited with code {code}.", code)

    # ------------------------------------------------------------------ the session

    def _lock_for_running_loop(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._lock is None:
            self._abandon()  # a child started by another loop cannot be driven from this one
            self._loop = loop
            self._lock = asyncio.Lock()
        return self._lock

    async def _spawn(self) -> _Session:
        limit = 1 << 30 if self.max_observation_chars is None else self.max_observation_chars * 12
        loop = asyncio.get_running_loop()
        try:
            transport, protocol = await loop.subprocess_exec(
                lambda: _Protocol(max(limit + 4096, 1 << 16), loop),
                sys.executable,
                "-c",
                _server_source(),
                self.limits.to_json(),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL,
                env=child_environment(self.env, inherit_env=self.inherit_env),
                cwd=self.cwd,
                start_new_session=True,  # its own process group: one killpg ends every grandchild
            )
        except OSError as exc:
            raise _SessionBroken(f"The Python session could not start: {exc}.") from None
        return _Session(transport, protocol)

    async def _ensure_session(self) -> asyncio.subprocess.Process:
        session = self._session
        if session is not None and session.proc.returncode is None:
            return session.proc
        if session is not None:  # it died between actions: say so once, not start afresh quietly
            await self._kill()
            raise _SessionBroken(_died_idle(session.proc.returncode))
        session = self._session = await self._spawn()
        try:
            async with asyncio.timeout(self.start_timeout_s):
                hello = await self._read_message(session.proc)
        except TimeoutError:
            await self._kill()
            raise _SessionBroken(
                f"The Python session did not start within {shown_timeout(self.start_timeout_s)} s."
            ) from None
        except BaseException:  # broken, or cancelled while starting: leave no child behind
            await self._kill()
            raise
        if not isinstance(hello, dict) or hello.get("ready") is not True:
            await self._kill()
            raise _SessionBroken(_refusal(hello))
        return session.proc

    async def _kill(self) -> None:
        """Kill the child's process group; wait (bounded) for its exit; close its pipes."""
        session, self._session = self._session, None
        if session is None:
            return
        session.kill_group()
        await session.exit_code(_REAP_S)
        session.transport.close()  # a grandchild that left the group may still hold the pipes

    def _abandon(self) -> None:
        """Kill the child's group without waiting (its loop may be gone)."""
        session, self._session = self._session, None
        if session is not None:
            session.kill_group()

    async def aclose(self) -> None:
        """End the session: close its input, give it a moment to exit, then kill its group."""
        session = self._session
        if session is None:
            return
        if self._loop is not asyncio.get_running_loop():
            self._abandon()
            return
        if session.proc.returncode is None and session.proc.stdin is not None:
            session.proc.stdin.close()
            await session.exit_code(_GRACE_S)
        await self._kill()  # also when the child exited: its grandchildren must not outlive it

    def __repr__(self) -> str:
        return f"PythonExecutor(timeout_s={shown_timeout(self.timeout_s)}, pid={self.pid})"


def _stopped(why: str) -> ActionOutcome:
    """``executed``: the code was stopped and the session restarts (see the class docstring)."""
    return ActionOutcome(
        status=ActionStatus.EXECUTED,
        observation=(
            f"TimeoutError: {why} and was stopped. The Python session restarts for the next "
            "action: variables, imports and definitions from earlier actions are lost."
        ),
    )


def _died_idle(returncode: int | None) -> str:
    """The message for a session found dead at the start of an action."""
    code = returncode or 0
    how = f"killed by signal {-code}" if code < 0 else f"exited with code {code}"
    return (
        f"The Python session died between actions ({how}): its state is lost "
        "(variables, imports and definitions); the next action starts a new session."
    )


def _refusal(hello: object) -> str:
    """The message for a child that did not say it is ready."""
    if isinstance(hello, dict) and hello.get("ready") is False:
        return f"The Python session could not apply its limits: {str(hello.get('error'))[:500]}"
    return "The Python session started out of protocol."
