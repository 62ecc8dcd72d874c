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

from polyloop._base._closing import AsyncClosing
from polyloop._base._exception_text import exception_text
from polyloop._base._timeout import checked_timeout_s, shown_timeout
from polyloop.executors._artifact_dir import ArtifactDirectory, checked_artifacts_dir
from polyloop.executors._child_env import checked_env, child_environment
from polyloop.executors._jupyter_output import (
    DATA_MESSAGES,
    CellOutputs,
    RichOutput,
    display_id_of,
    render_data,
    render_message,
    rich_output_line,
    rich_outputs,
)
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

    def __init__(self, manager: AsyncKernelManager, serial: int) -> None:
        self.manager = manager
        self.serial = serial  # the how-manyth kernel of its executor: restart() replaces older
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

    async def next_message(self, msg_id: str) -> dict[str, Any]:
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


def _outcome(output: CellOutputs, *notes: str, broken: bool = False) -> ActionOutcome:
    observation = output.text()
    dropped = output.dropped
    if dropped:
        observation += truncation_marker(dropped)
    note = "\n".join(n for n in notes if n)
    if note:
        observation += ("\n" if observation and not observation.endswith("\n") else "") + note
    return ActionOutcome(
        status=ActionStatus.ENV_ERROR if broken else ActionStatus.EXECUTED,
        observation=observation,
        observation_truncated_chars=dropped,
    )


_STATE_LOST = "Its state is lost; the next action starts a new kernel."
_INTERRUPTED = "interrupt() was called while the code ran; the kernel keeps its state."
_RESTARTED = (
    "restart() was called while the code ran: the code was stopped and the kernel restarted. "
    "Its state is lost."
)
_NO_DIRECTORY = "no artifacts directory"


def _save_all(artifacts: ArtifactDirectory, outputs: list[RichOutput]) -> list[str]:
    """Save each output that has content; the observation's line for each."""
    lines = []
    for output in outputs:
        if output.content is None:
            lines.append(rich_output_line(output))
            continue
        try:
            saved = artifacts.save(output.content, output.extension)
        except OSError as exc:  # disk full, directory not writable: the code still ran
            lines.append(rich_output_line(output, not_saved=exc.strerror or str(exc)))
        else:
            lines.append(rich_output_line(output, saved=saved))
    return lines


class _Cell:
    """One execute request in flight: its outputs, and what was asked of it from outside."""

    def __init__(self, kernel: _Kernel, outputs: CellOutputs) -> None:
        self.kernel = kernel
        self.outputs = outputs
        self.msg_id = ""
        self.running = False  # execute_input came: the code runs, a SIGINT now interrupts it
        self.interrupt_pending = False  # interrupt() came before that: sent when it does
        self.interrupted = False  # interrupt() was called while it ran
        self.restarted = False  # restart() killed its kernel under it


class JupyterExecutor(AsyncClosing):
    """Runs ``Action.text`` in a Jupyter kernel (any installed kernel, by name).

    The kernel starts lazily on the first ``execute`` (``AsyncKernelManager`` from
    ``jupyter_client``) and keeps variables, imports and definitions from action to action; it
    ends with ``aclose()`` (or ``async with``). The observation is the request's outputs as a
    notebook shows them when the cell is done (nbclient's rules: an ``update_display_data``
    replaces the display it names, ``clear_output`` empties what came before): stdout and
    stderr, results and displays (their ``text/plain``), and the error's traceback (ANSI colours
    stripped). Every other MIME type of a result or display — ``image/png``, ``image/svg+xml``,
    ``text/html``, ``application/json``, ``text/markdown``, … — is one line: with
    ``artifacts_dir``, ``[image/png output, 12345 bytes, saved as <sha256>.png]`` (the file is
    written there, named by the SHA-256 of its content, once); without,
    ``[image/png output, 12345 bytes, not saved: no artifacts directory]``; a value that is not
    what its type says (bad base64, a list where text belongs) is named, not saved.

    Status mapping:

    * ``executed`` — the code ran, whatever its result: it printed, it raised, it **timed
      out**, or it was stopped by ``interrupt()`` or ``restart()``. On a timeout the kernel is
      *interrupted* (SIGINT to its process group): it keeps its state, and the observation is
      the output so far, the ``KeyboardInterrupt`` and a line saying the code timed out. A kernel
      that does not go idle within about a second of the interrupt is killed and restarted for
      the next action, and the observation says its state is lost.
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
        artifacts_dir: str | os.PathLike[str] | None = None,
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
        self.artifacts_dir = checked_artifacts_dir(artifacts_dir)  # last: it may create it
        self._artifacts = (
            None if self.artifacts_dir is None else ArtifactDirectory(self.artifacts_dir)
        )
        self._kernel: _Kernel | None = None
        self._kernels_started = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock: asyncio.Lock | None = None
        self._cell: _Cell | None = None
        self._session_open = False  # from the first execute() to aclose()

    @property
    def pid(self) -> int | None:
        """The running kernel's process id, or ``None`` when no kernel is running."""
        kernel = self._kernel
        return None if kernel is None or kernel.exit_code() is not None else kernel.pid

    # ------------------------------------------------------------------ the seam

    async def execute(self, action: Action) -> ActionOutcome:
        lock = self._lock_for_running_loop()
        self._session_open = True
        async with lock:
            return await self._execute(action.text)

    async def _execute(self, code: str) -> ActionOutcome:
        outputs = CellOutputs(self.max_observation_chars)
        try:
            kernel = await self._ready_kernel()
        except _KernelBroken as exc:
            return _outcome(outputs, str(exc), broken=True)
        self._cell = cell = _Cell(kernel, outputs)
        try:
            return await self._run(cell, code)
        finally:
            self._cell = None

    async def _run(self, cell: _Cell, code: str) -> ActionOutcome:
        kernel, outputs = cell.kernel, cell.outputs
        try:
            await kernel.drain_replies()
            async with asyncio.timeout(self.timeout_s):
                # set before any await that could time out: execute() only queues the request
                cell.msg_id = kernel.client.execute(code, allow_stdin=False, stop_on_error=False)
                await self._collect(cell)
        except TimeoutError:
            if cell.restarted:
                return _outcome(outputs, _RESTARTED)
            why = f"TimeoutError: the code did not finish within {shown_timeout(self.timeout_s)} s"
            return _outcome(outputs, self._interrupted_note(cell), await self._interrupt(cell, why))
        except _KernelBroken as exc:
            if cell.restarted:  # the death restart() caused: not the environment's failure
                return _outcome(outputs, _RESTARTED)
            await self._discard(kernel)
            return _outcome(outputs, f"{exc} {_STATE_LOST}", broken=True)
        except Exception as exc:  # ZeroMQ refused a send or receive: the channel is broken
            if cell.restarted:
                return _outcome(outputs, _RESTARTED)
            await self._discard(kernel)
            note = (
                f"The connection to the Jupyter kernel broke ({exception_text(exc)}). {_STATE_LOST}"
            )
            return _outcome(outputs, note, broken=True)
        except BaseException:  # cancellation: stop the code, keep the kernel if it goes idle
            if not cell.restarted:
                await self._interrupt(cell, "cancelled")
            raise
        return _outcome(outputs, self._interrupted_note(cell))

    @staticmethod
    def _interrupted_note(cell: _Cell) -> str:
        return _INTERRUPTED if cell.interrupted else ""

    async def _interrupt(self, cell: _Cell, why: str) -> str:
        """Interrupt the running code; the note saying whether the kernel kept its state."""
        kernel = cell.kernel
        try:
            await kernel.manager.interrupt_kernel()
            async with asyncio.timeout(_INTERRUPT_GRACE_S):
                await self._collect(cell)  # the KeyboardInterrupt, then idle
        except Exception:  # still busy, dead, or its channel broke: replace it
            if cell.restarted:
                return _RESTARTED
            await self._discard(kernel)
            return f"{why} and did not stop when interrupted: the kernel was stopped. {_STATE_LOST}"
        except BaseException:  # cancelled again while waiting: leave no kernel in doubt
            self._abandon(kernel)
            raise
        return f"{why} and was interrupted; the kernel keeps its state."

    # ------------------------------------------------------------------ the outputs

    async def _collect(self, cell: _Cell) -> None:
        """Add the outputs of ``cell``'s request until the kernel is idle again."""
        while True:
            msg = await cell.kernel.next_message(cell.msg_id)
            msg_type, content = str(msg.get("msg_type")), msg.get("content")
            if not isinstance(content, Mapping):
                continue
            if msg_type == "status":
                if content.get("execution_state") == "idle":
                    return
                continue
            if not cell.running:  # execute_input, or an output of a kernel that sends none
                await self._code_started(cell)
            if msg_type in DATA_MESSAGES:
                await self._show_data(cell.outputs, msg_type, content)
            elif msg_type == "clear_output":
                cell.outputs.clear(wait=bool(content.get("wait")))  # nbclient's truthiness
            else:
                rendered = render_message(msg_type, content)
                if rendered is not None:
                    cell.outputs.add(rendered[0], new_line=rendered[1])

    @staticmethod
    async def _code_started(cell: _Cell) -> None:
        cell.running = True
        if cell.interrupt_pending:  # a SIGINT before now would have found the kernel idle
            cell.interrupt_pending = False
            with contextlib.suppress(Exception):  # a kernel gone meanwhile: the next read says so
                await cell.kernel.manager.interrupt_kernel()

    async def _show_data(
        self, outputs: CellOutputs, msg_type: str, content: Mapping[str, object]
    ) -> None:
        """A result or display: shown in its place, its rich outputs saved (nbclient's rules: a
        ``display_id`` shown before is updated everywhere; an update adds nothing new — except
        for a display of an earlier action, whose observation can no longer change)."""
        data = content.get("data")
        text = render_data(data, await self._rich_output_lines(rich_outputs(data)))
        display_id = display_id_of(content)
        update = msg_type == "update_display_data"
        if update and (display_id is None or not outputs.has_shown(display_id)):
            # an earlier action's display: its observation is history, so the update shows here
            outputs.add(text, new_line=True, display_id=display_id)
            return
        if display_id is not None:
            outputs.update(display_id, text)
        if not update:
            outputs.add(text, new_line=True, display_id=display_id)

    async def _rich_output_lines(self, outputs: list[RichOutput]) -> list[str]:
        artifacts = self._artifacts
        if artifacts is None:
            return [rich_output_line(o, not_saved=_NO_DIRECTORY) for o in outputs]
        if not any(o.content is not None for o in outputs):
            return [rich_output_line(o) for o in outputs]
        # one trip off the event loop for the whole bundle: an image can be megabytes
        return await asyncio.to_thread(_save_all, artifacts, outputs)

    # ------------------------------------------------------------------ interrupt and restart

    async def interrupt(self) -> bool:
        """Interrupt the code that is running now, as Jupyter's interrupt button does.

        The kernel gets ``SIGINT`` (or an ``interrupt_request`` when its spec asks for message
        interrupts), so the code raises ``KeyboardInterrupt`` and the kernel **keeps its state**.
        The ``execute()`` that runs the code returns as usual — ``executed``, its observation the
        output so far, the ``KeyboardInterrupt`` traceback and the line "interrupt() was called
        while the code ran; the kernel keeps its state." Code that ignores ``SIGINT`` runs on
        until ``timeout_s``, where the timeout's rules apply. An interrupt that reaches the
        kernel as it begins the request can stop it before the code's first line (IPython's
        own handling), with the note but no traceback.

        Returns ``True`` when code was running (or its request was on its way: the interrupt is
        sent as soon as the kernel starts running it), ``False`` when the kernel was idle, which
        leaves it untouched. Call it from a task on the event loop that runs the kernel.
        ``RuntimeError`` before the first ``execute()`` or after ``aclose()``.
        """
        self._require_session("interrupt")
        if self._loop is not asyncio.get_running_loop():
            raise RuntimeError(
                "JupyterExecutor.interrupt() must be called from the event loop that runs the "
                "kernel (the loop of the last execute())"
            )
        cell = self._cell
        if cell is None or cell.restarted:
            return False
        cell.interrupted = True
        if not cell.running:
            cell.interrupt_pending = True
            return True
        with contextlib.suppress(Exception):  # a kernel gone meanwhile: its execute() says so
            await cell.kernel.manager.interrupt_kernel()
        return True

    async def restart(self) -> None:
        """Replace the kernel with a new one: its **state is lost** (variables, imports,
        definitions), what it wrote to disk and the artifacts directory are kept, and the
        executor is usable at once; it returns when the new kernel answers.

        The old kernel's process group is killed at once, so code running in it stops: that
        ``execute()`` returns ``executed`` with the output so far and the line "restart() was
        called while the code ran: the code was stopped and the kernel restarted. Its state is
        lost." ``execute()`` calls waiting their turn run in the new kernel.

        ``RuntimeError`` before the first ``execute()`` or after ``aclose()``, or when the new
        kernel cannot start (the next ``execute()`` tries again).
        """
        self._require_session("restart")
        lock = self._lock_for_running_loop()
        requested_after = self._kernels_started  # a kernel started after this call is new
        old, self._kernel = self._kernel, None
        cell = self._cell
        if cell is not None and cell.kernel is old:
            cell.restarted = True
        if old is not None:
            old.kill_group()  # the running code stops now, not when its execute() would end
        try:
            async with lock:  # the execute() in flight returns first: it sees its kernel die
                if old is not None:
                    closing, old = old, None
                    await closing.close()
                await self._replace_kernel_started_before(requested_after)
        finally:
            if old is not None:  # cancelled while waiting: no connection file left behind
                old.abandon()

    async def _replace_kernel_started_before(self, requested_after: int) -> None:
        """Start the new kernel, unless an ``execute()`` started one since ``restart()`` was
        called (it is new already)."""
        current = self._kernel
        if current is not None and current.serial <= requested_after:
            await self._discard(current)  # it began starting before restart() was called
            current = None
        if current is None:
            try:
                self._kernel = await self._start()
            except _KernelBroken as exc:
                raise RuntimeError(f"JupyterExecutor.restart(): {exc}") from None

    def _require_session(self, method: str) -> None:
        if not self._session_open:
            raise RuntimeError(
                f"JupyterExecutor.{method}(): no kernel session is open — the first execute() "
                "starts the kernel and aclose() ends it"
            )

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
            await self._discard(kernel)
            raise _KernelBroken(f"{died} {_STATE_LOST}")
        return kernel

    async def _start(self) -> _Kernel:
        self._kernels_started += 1
        manager = _jupyter_client().AsyncKernelManager(kernel_name=self.kernel_name)
        kernel = _Kernel(manager, self._kernels_started)
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
                    f"The Jupyter kernel {self.kernel_name!r} could not start: "
                    f"{exception_text(exc)}"
                ) from None
            raise
        return kernel

    async def _discard(self, kernel: _Kernel | None = None) -> None:
        """Close ``kernel`` (default: the current one), forgetting it if it is the current one;
        a kernel ``restart()`` replaced meanwhile is the restart's to close."""
        if kernel is None:
            kernel = self._kernel
        if kernel is None or kernel is not self._kernel:
            return
        self._kernel = None
        await kernel.close()

    def _abandon(self, kernel: _Kernel | None = None) -> None:
        if kernel is None:
            kernel = self._kernel
        if kernel is None or kernel is not self._kernel:
            return
        self._kernel = None
        kernel.abandon()

    async def aclose(self) -> None:
        """Kill the kernel's process group (grandchildren included) and wait for the kernel.

        ``restart()`` and ``interrupt()`` are refused after it; a later ``execute()`` starts a
        new kernel."""
        self._session_open = False
        if self._kernel is not None and self._loop is not asyncio.get_running_loop():
            self._abandon()
        await self._discard()

    def __repr__(self) -> str:
        return (
            f"JupyterExecutor({self.kernel_name!r}, "
            f"timeout_s={shown_timeout(self.timeout_s)}, pid={self.pid})"
        )
