"""JupyterExecutor: code run in a Jupyter kernel (extra ``jupyter``: jupyter_client, ipykernel)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import signal
import subprocess
from collections.abc import Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any

from polyloop._closing import AsyncClosing
from polyloop._timeout import checked_timeout_s, shown_timeout
from polyloop.executors._child_env import checked_env, child_environment
from polyloop.executors._jupyter_output import ObservationBuffer, render_message
from polyloop.executors._observation_cap import checked_max_observation_chars
from polyloop.executors._tool import truncation_marker
from polyloop.types import Action, ActionOutcome, ActionStatus

if TYPE_CHECKING:
    from jupyter_client.asynchronous.client import AsyncKernelClient
    from jupyter_client.manager import AsyncKernelManager

__all__ = ["JupyterExecutor"]

_INSTALL_HINT = (
    "JupyterExecutor needs jupyter_client and ipykernel: pip install 'polyloop[jupyter]'"
)
_POLL_S = 0.2  # how often a wait for the kernel's output checks that the kernel process lives
_INTERRUPT_GRACE_S = 1.0  # after an interrupt: how long the kernel may take to go idle
_SHUTDOWN_S = 6.0  # jupyter_client waits up to 5 s for a killed kernel's exit status


def _jupyter_client() -> ModuleType:
    try:
        import jupyter_client
    except ImportError:
        raise ImportError(_INSTALL_HINT) from None
    return jupyter_client


def _check_kernel_installed(kernel_name: str) -> None:
    """``ValueError`` naming the installed kernels when ``kernel_name`` is not one of them."""
    from jupyter_client.kernelspec import KernelSpecManager

    installed = KernelSpecManager().find_kernel_specs()
    if kernel_name in installed:
        return
    if kernel_name == "python3":  # the native kernel is found only where ipykernel is installed
        raise ImportError(_INSTALL_HINT)
    raise ValueError(
        f"no Jupyter kernel named {kernel_name!r} is installed; installed: "
        f"{', '.join(sorted(installed)) or 'none'} (see `jupyter kernelspec list`)"
    )


class _KernelBroken(Exception):
    """The kernel could not start, or its process is gone (→ ``env_error``)."""


class _Kernel:
    """One running kernel: its manager, its client and the process group it leads."""

    def __init__(self, manager: AsyncKernelManager) -> None:
        self.manager = manager
        self._client: AsyncKernelClient | None = None
        self.pid: int | None = None
        self.pgid: int | None = None

    async def start(self, timeout_s: float | None, **launch: Any) -> None:
        """Launch the kernel and wait until it answers (jupyter_client bounds neither wait)."""
        async with asyncio.timeout(timeout_s):
            await self.manager.start_kernel(**launch)
            self.pid = getattr(self.manager.provisioner, "pid", None)
            self.pgid = getattr(self.manager.provisioner, "pgid", None)
            self._client = self.manager.client()
            self._client.start_channels()
            await self._client.wait_for_ready(timeout=timeout_s)

    @property
    def client(self) -> AsyncKernelClient:
        assert self._client is not None, "the kernel was not started"
        return self._client

    def exit_code(self) -> int | None:
        process = getattr(self.manager.provisioner, "process", None)
        return None if process is None else process.poll()

    async def alive(self) -> bool:
        return bool(await self.manager.is_alive())

    async def collect(self, msg_id: str, output: ObservationBuffer) -> None:
        """Add the outputs of request ``msg_id`` to ``output`` until the kernel is idle again."""
        while True:
            msg = await self._next_message(msg_id)
            msg_type, content = msg.get("msg_type"), msg.get("content")
            if msg_type == "status" and isinstance(content, Mapping):
                if content.get("execution_state") == "idle":
                    return
                continue
            rendered = render_message(str(msg_type), content)
            if rendered is not None:
                output.add(rendered[0], new_line=rendered[1])

    async def _next_message(self, msg_id: str) -> dict[str, Any]:
        """The next iopub message answering ``msg_id`` (others are stale: an earlier, interrupted
        request's); ``_KernelBroken`` once the kernel process is gone."""
        while True:
            try:
                msg = await self.client.get_iopub_msg(timeout=_POLL_S)
            except queue.Empty:
                if not await self.alive():
                    raise _KernelBroken(self.died_message()) from None
                continue
            parent = msg.get("parent_header")
            if isinstance(parent, Mapping) and parent.get("msg_id") == msg_id:
                return msg

    def died_message(self) -> str:
        code = self.exit_code()
        return "The Jupyter kernel died" + ("." if code is None else f" (exit code {code}).")

    async def drain_replies(self) -> None:
        """Drop the shell replies waiting (the outputs came on iopub), so they do not pile up."""
        with contextlib.suppress(queue.Empty):
            while True:
                await self.client.get_shell_msg(timeout=0)

    def kill_group(self) -> None:
        """SIGKILL the kernel's process group: the kernel and every grandchild it started."""
        if self.pgid is None:  # cancelled while starting: the process may exist already
            self.pgid = getattr(self.manager.provisioner, "pgid", None)
        if self.pgid is not None and hasattr(os, "killpg"):
            with contextlib.suppress(OSError):  # ESRCH: the group is already empty
                os.killpg(self.pgid, signal.SIGKILL)

    def abandon(self) -> None:
        """Kill without awaiting anything (the kernel's event loop may be gone)."""
        if self._client is not None:
            self._client.stop_channels()
        self.kill_group()
        with contextlib.suppress(Exception):
            self.manager.cleanup_connection_file()

    async def close(self) -> None:
        """Kill the group, let jupyter_client reap the kernel and remove its connection file."""
        if self._client is not None:
            self._client.stop_channels()
        self.kill_group()
        with contextlib.suppress(Exception):  # it is dead either way; this is bookkeeping
            async with asyncio.timeout(_SHUTDOWN_S):
                await self.manager.shutdown_kernel(now=True)
        self.kill_group()  # a grandchild forked while the group was being killed


def _outcome(output: ObservationBuffer, note: str = "", *, broken: bool = False) -> ActionOutcome:
    observation = output.text()
    if output.dropped:
        observation += truncation_marker(output.dropped)
    if note:
        observation += ("\n" if observation and not observation.endswith("\n") else "") + note
    return ActionOutcome(
        status=ActionStatus.ENV_ERROR if broken else ActionStatus.EXECUTED,
        observation=observation,
        observation_truncated_chars=output.dropped,
    )


_STATE_LOST = "Its state is lost; the next action starts a new kernel."


class JupyterExecutor(AsyncClosing):
    """Runs ``Action.text`` in a Jupyter kernel (any installed kernel, by name).

    The kernel starts lazily on the first ``execute`` (``AsyncKernelManager`` from
    ``jupyter_client``) and keeps variables, imports and definitions from action to action; it
    ends with ``aclose()`` (or ``async with``). The observation is the request's outputs in the
    order the kernel sent them: stdout and stderr, results (``text/plain``), displays, and the
    error's traceback (ANSI colours stripped). Rich outputs are named with their size —
    ``[image/png output, 12345 bytes]``, ``[text/html output, 812 chars]`` — beside the
    ``text/plain`` form when the kernel sent one.

    Status mapping:

    * ``executed`` — the code ran, whatever its result: it printed, it raised, or it **timed
      out**. On a timeout the kernel is *interrupted* (SIGINT to its process group): it keeps its
      state, and the observation is the output so far, the ``KeyboardInterrupt`` and a line
      saying the code timed out. A kernel that does not go idle within about a second of the
      interrupt is killed and restarted for the next action, and the observation says its state
      is lost.
    * ``env_error`` — the kernel could not start or its process died (``os._exit``, a crash,
      killed from outside). The observation says its state is lost; the next ``execute`` starts
      a new kernel.
    * ``not_executed`` — never: any text is code to run.

    ``max_observation_chars`` (default 100 000; ``None``: unlimited) caps the observation as in
    ``PythonExecutor``: beyond the cap output is only counted, into
    ``observation_truncated_chars``. The kernel's environment is ``PythonExecutor``'s default:
    only the variables in ``_child_env.PASSED_VARIABLES`` pass from the parent, ``env`` adds or
    replaces, ``inherit_env=True`` passes everything (the kernel spec's own ``env`` is applied
    on top by jupyter_client).

    The kernel runs in a process group of its own; ``aclose()`` kills the whole group, so
    processes the code forked die with the kernel. Cancellation interrupts the kernel like a
    timeout (state kept), then re-raises ``CancelledError``. Concurrent ``execute`` calls run
    one after another. A kernel belongs to the event loop that started it: used from a new
    loop, the old kernel is killed and a new one started.
    """

    def __init__(
        self,
        kernel_name: str = "python3",
        *,
        timeout_s: float | None = 30.0,
        max_observation_chars: int | None = 100_000,
        start_timeout_s: float | None = 60.0,
        env: Mapping[str, str] | None = None,
        inherit_env: bool = False,
        cwd: str | os.PathLike[str] | None = None,
    ) -> None:
        if not isinstance(kernel_name, str) or not kernel_name.strip():
            raise ValueError(f"kernel_name must be a non-empty str, got {kernel_name!r}")
        if not isinstance(inherit_env, bool):
            raise TypeError(f"inherit_env must be a bool, got {type(inherit_env).__name__}")
        self.kernel_name = kernel_name
        self.timeout_s = checked_timeout_s("timeout_s", timeout_s)
        self.start_timeout_s = checked_timeout_s("start_timeout_s", start_timeout_s)
        self.max_observation_chars = checked_max_observation_chars(max_observation_chars)
        self.env = checked_env(env)
        self.inherit_env = inherit_env
        self.cwd = None if cwd is None else os.fspath(cwd)
        _jupyter_client()  # after the checks: a bad value is refused the same with or without it
        _check_kernel_installed(kernel_name)
        self._kernel: _Kernel | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock: asyncio.Lock | None = None

    @property
    def pid(self) -> int | None:
        """The running kernel's process id, or ``None`` when no kernel is running."""
        kernel = self._kernel
        return None if kernel is None or kernel.exit_code() is not None else kernel.pid

    # ------------------------------------------------------------------ the seam

    async def execute(self, action: Action) -> ActionOutcome:
        lock = self._lock_for_running_loop()
        async with lock:
            return await self._execute(action.text)

    async def _execute(self, code: str) -> ActionOutcome:
        output = ObservationBuffer(self.max_observation_chars)
        try:
            kernel = await self._ready_kernel()
        except _KernelBroken as exc:
            return _outcome(output, str(exc), broken=True)
        msg_id = ""  # set before any await that could time out: execute() only queues it
        try:
            await kernel.drain_replies()
            async with asyncio.timeout(self.timeout_s):
                msg_id = kernel.client.execute(code, allow_stdin=False, stop_on_error=False)
                await kernel.collect(msg_id, output)
        except TimeoutError:
            why = f"TimeoutError: the code did not finish within {shown_timeout(self.timeout_s)} s"
            return _outcome(output, await self._interrupt(kernel, msg_id, output, why))
        except _KernelBroken as exc:
            await self._discard()
            return _outcome(output, f"{exc} {_STATE_LOST}", broken=True)
        except Exception as exc:  # ZeroMQ refused a send or receive: the channel is broken
            await self._discard()
            note = f"The connection to the Jupyter kernel broke ({exc!r}). {_STATE_LOST}"
            return _outcome(output, note, broken=True)
        except BaseException:  # cancellation: stop the code, keep the kernel if it goes idle
            await self._interrupt(kernel, msg_id, output, "cancelled")
            raise
        return _outcome(output)

    async def _interrupt(
        self, kernel: _Kernel, msg_id: str, output: ObservationBuffer, why: str
    ) -> str:
        """Interrupt the running code; the note saying whether the kernel kept its state."""
        try:
            await kernel.manager.interrupt_kernel()
            async with asyncio.timeout(_INTERRUPT_GRACE_S):
                await kernel.collect(msg_id, output)  # the KeyboardInterrupt, then idle
        except Exception:  # still busy, dead, or its channel broke: replace it
            await self._discard()
            return f"{why} and did not stop when interrupted: the kernel was stopped. {_STATE_LOST}"
        except BaseException:  # cancelled again while waiting: leave no kernel in doubt
            self._abandon()
            raise
        return f"{why} and was interrupted; the kernel keeps its state."

    # ------------------------------------------------------------------ the kernel

    def _lock_for_running_loop(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._lock is None:
            self._abandon()  # a kernel client bound to another loop cannot be driven from this one
            self._loop = loop
            self._lock = asyncio.Lock()
        return self._lock

    async def _ready_kernel(self) -> _Kernel:
        """The running kernel, or a new one; ``_KernelBroken`` when the last one died."""
        kernel = self._kernel
        if kernel is None:
            self._kernel = kernel = await self._start()
            return kernel
        if not await kernel.alive():
            died = kernel.died_message()  # before the shutdown forgets the exit code
            await self._discard()
            raise _KernelBroken(f"{died} {_STATE_LOST}")
        return kernel

    async def _start(self) -> _Kernel:
        kernel = _Kernel(_jupyter_client().AsyncKernelManager(kernel_name=self.kernel_name))
        try:
            await kernel.start(
                self.start_timeout_s,
                env=child_environment(self.env, inherit_env=self.inherit_env),
                cwd=self.cwd,
                stdout=subprocess.DEVNULL,  # the kernel's own logging is not the code's output
                stderr=subprocess.DEVNULL,
            )
        except BaseException as exc:  # timed out, broken, or cancelled: leave no kernel behind
            await kernel.close()
            if isinstance(exc, TimeoutError):
                raise _KernelBroken(
                    f"The Jupyter kernel {self.kernel_name!r} did not start within "
                    f"{shown_timeout(self.start_timeout_s)} s."
                ) from None
            if isinstance(exc, Exception):
                raise _KernelBroken(
                    f"The Jupyter kernel {self.kernel_name!r} could not start: {exc}"
                ) from None
            raise
        return kernel

    async def _discard(self) -> None:
        kernel, self._kernel = self._kernel, None
        if kernel is not None:
            await kernel.close()

    def _abandon(self) -> None:
        kernel, self._kernel = self._kernel, None
        if kernel is not None:
            kernel.abandon()

    async def aclose(self) -> None:
        """Kill the kernel's process group (grandchildren included) and wait for the kernel."""
        if self._kernel is not None and self._loop is not asyncio.get_running_loop():
            self._abandon()
        await self._discard()

    def __repr__(self) -> str:
        return (
            f"JupyterExecutor({self.kernel_name!r}, "
            f"timeout_s={shown_timeout(self.timeout_s)}, pid={self.pid})"
        )
