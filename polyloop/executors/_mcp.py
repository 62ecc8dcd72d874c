"""MCPExecutor: the tools of an MCP server as actions, through the official ``mcp`` SDK.

The SDK's clients are anyio context managers that must be left in the task that entered them.
So the executor never enters them in the caller's task: :class:`_Connection` runs the whole
client context (transport and session) in one task of an event loop on a thread of its own, and
every call crosses over to it. Opening in one task and closing in another, or closing from a
fresh event loop after the opening loop is gone, then needs nothing special.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import concurrent.futures
import contextlib
import logging
import math
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Self, TypedDict, Unpack

from polyloop._closing import AsyncClosing
from polyloop._exception_text import exception_text
from polyloop._timeout import checked_timeout_s, shown_timeout
from polyloop.executors._observation_cap import checked_max_observation_chars
from polyloop.executors._tool import _shown, invalid_arguments, truncate_observation, unknown_tool
from polyloop.tools import Tool, ToolRegistry
from polyloop.types import Action, ActionOutcome, ActionStatus, canonical_json

if TYPE_CHECKING:
    import mcp_types

__all__ = ["MCPExecutor"]

_INSTALL_HINT = "MCPExecutor needs the MCP SDK: pip install 'polyloop[mcp]'"
_LOGGER = logging.getLogger("polyloop.executors.mcp")
_CLOSE_BOUND_S = 15.0  # the SDK's stdio shutdown waits at most 2 + 2 + 2 s for a stuck server
_LIST_PAGE_CAP = 100  # a server whose tools/list pagination never ends cannot hang open()


def _require_sdk() -> None:
    try:
        import mcp  # noqa: F401
    except ImportError as exc:
        raise ImportError(_INSTALL_HINT) from exc


class _Connection:
    """An ``mcp.Client`` owned by one task of an event loop running on a thread of its own.

    The caller's side (``open``, ``call``, ``stop``, ``close``) talks to the owner only through
    thread-safe futures and ``call_soon_threadsafe``; everything of the SDK stays on the owner's
    loop.
    """

    def __init__(
        self, server: object, *, read_timeout_s: float | None, open_timeout_s: float | None
    ) -> None:
        self._server = server
        self._read_timeout_s = read_timeout_s
        self._open_timeout_s = open_timeout_s
        self._client: Any = None  # an entered mcp.Client, touched only on the owner's loop
        self._lost = ""  # why the connection ended by itself (owner's loop writes, callers read)
        self._stopping = False  # set by stop(); read by the owner when its loop starts
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._opening: Any = None  # the anyio cancel scope around the handshake, while it runs
        self._ready: concurrent.futures.Future[list[mcp_types.Tool]] = concurrent.futures.Future()
        self._done: concurrent.futures.Future[None] = concurrent.futures.Future()

    async def open(self) -> list[mcp_types.Tool]:
        """Start the owner thread; return the server's tools once the session is up."""
        threading.Thread(target=self._thread, name="polyloop-mcp", daemon=True).start()
        try:
            return await asyncio.wrap_future(self._ready)
        except BaseException:
            self.stop()  # a failed or cancelled open leaves no thread or server behind
            raise

    def _thread(self) -> None:
        try:
            asyncio.run(self._main())
        finally:  # whatever ended the thread, open() must not wait for it forever
            self._fail_open(ConnectionError("the MCP client thread ended"))
            self._done.set_result(None)

    async def _main(self) -> None:
        import anyio

        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        if not self._stopping:  # else stop() came before the loop existed: never connect
            with anyio.CancelScope() as scope:
                if self._open_timeout_s is not None:
                    scope.deadline = anyio.current_time() + self._open_timeout_s
                self._opening = scope
                await self._own()
            if scope.cancelled_caught and not self._stop.is_set():
                waited = shown_timeout(self._open_timeout_s)
                self._fail_open(TimeoutError(f"no answer within {waited} s"))
        self._fail_open(ConnectionError("the executor was closed while it was opening"))
        if not self._stopping:  # until aclose(), calls get "connection closed" from _call
            await self._stop.wait()

    async def _own(self) -> None:
        from mcp import Client

        assert self._stop is not None
        try:
            # `server` is anything mcp.Client accepts (checked by the SDK, not typed here)
            connecting = Client(self._server, read_timeout_seconds=self._read_timeout_s)  # type: ignore[arg-type]
            async with connecting as client:
                tools = await _list_tools(client)
                self._opening.deadline = math.inf  # the open timeout covers the handshake only
                self._opening = None
                self._client = client
                if self._stop.is_set() or not self._ready.set_running_or_notify_cancel():
                    return
                self._ready.set_result(tools)
                await self._stop.wait()
        except Exception as exc:  # the transport failed: open() raises it, or calls report it
            self._lost = exception_text(exc)
            self._fail_open(exc)
            _LOGGER.debug("MCP connection ended: %s", self._lost, exc_info=True)
        finally:
            self._client = None

    def _fail_open(self, exc: BaseException) -> None:
        if not self._ready.done() and self._ready.set_running_or_notify_cancel():
            self._ready.set_exception(exc)

    async def call(self, name: str, args: dict[str, Any]) -> mcp_types.CallToolResult:
        """``tools/call`` on the owner's loop; raises what the SDK raises."""
        assert self._loop is not None, "open() returned, so the owner's loop runs"
        future = asyncio.run_coroutine_threadsafe(self._call(name, args), self._loop)
        return await asyncio.wrap_future(future)

    async def _call(self, name: str, args: dict[str, Any]) -> mcp_types.CallToolResult:
        if self._client is None:
            lost = f"the connection was lost ({self._lost})" if self._lost else ""
            raise ConnectionError(lost or "the connection is closed")
        result: mcp_types.CallToolResult = await self._client.call_tool(name, args)
        return result

    def stop(self) -> None:
        """Tell the owner to leave the client context and end its thread (does not wait)."""
        self._stopping = True
        if self._loop is not None:
            with contextlib.suppress(RuntimeError):  # the owner's loop already ended
                self._loop.call_soon_threadsafe(self._halt)

    def _halt(self) -> None:  # on the owner's loop
        assert self._stop is not None
        self._stop.set()
        if self._opening is not None:  # still in the handshake: abandon it
            self._opening.cancel()

    async def close(self) -> None:
        """Stop the owner and wait for its thread to end, at most ``_CLOSE_BOUND_S``."""
        self.stop()
        try:
            await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(self._done)), _CLOSE_BOUND_S)
        except TimeoutError:
            _LOGGER.warning("the MCP client did not shut down within %g s", _CLOSE_BOUND_S)


async def _list_tools(client: Any) -> list[mcp_types.Tool]:
    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    for _ in range(_LIST_PAGE_CAP):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            return tools
    raise ConnectionError(f"tools/list returned more than {_LIST_PAGE_CAP} pages")


# --------------------------------------------------------------------------- what comes back

# JSON-RPC codes (mcp_types.jsonrpc): the server refused the call, so the tool did not run
_INVALID_PARAMS, _METHOD_NOT_FOUND = -32602, -32601
_CONNECTION_CLOSED, _REQUEST_TIMEOUT = -32000, -32001


def _size(data: str) -> str:
    """The decoded size of base64 ``data``, for a summary line."""
    try:
        return f"{len(base64.b64decode(data, validate=True))} bytes"
    except (binascii.Error, ValueError):
        return f"{len(data)} base64 characters, not valid base64"


def _render_block(block: Any) -> str:
    """One content block of a tool result as text: text as is, everything else summarised."""
    kind = getattr(block, "type", None)
    if kind == "text":
        return str(block.text)
    if kind in ("image", "audio"):
        return f"[{kind}: {block.mime_type}, {_size(block.data)}]"
    if kind == "resource_link":
        return f"[resource link: {block.uri}, {block.mime_type or 'unknown type'}]"
    if kind == "resource":
        contents = block.resource
        mime = contents.mime_type or "unknown type"
        text = getattr(contents, "text", None)
        size = f"{len(text)} characters" if isinstance(text, str) else _size(contents.blob)
        return f"[resource {contents.uri}: {mime}, {size}]"
    return f"[{kind or 'unknown'} content]"


def _render(result: Any) -> str:
    """A tool result's content blocks, one per line (structured content if there are none)."""
    parts = [_render_block(block) for block in result.content]
    if not parts and result.structured_content is not None:
        try:
            parts = [canonical_json(result.structured_content)]
        except (TypeError, ValueError, RecursionError):
            parts = [repr(result.structured_content)]
    return "\n".join(parts)


def _error_status(exc: Exception) -> tuple[ActionStatus, str]:
    """How an exception from ``tools/call`` maps to a status, and what to say about it."""
    from mcp import MCPError

    if not isinstance(exc, MCPError):  # transport failures, a result the SDK could not decode
        return ActionStatus.ENV_ERROR, exception_text(exc)
    if exc.code in (_INVALID_PARAMS, _METHOD_NOT_FOUND):
        return ActionStatus.NOT_EXECUTED, f"the server refused the call ({exc.code}): {exc}"
    if exc.code == _CONNECTION_CLOSED:
        return ActionStatus.ENV_ERROR, f"the connection is closed ({exc})"
    if exc.code == _REQUEST_TIMEOUT:
        return ActionStatus.ENV_ERROR, f"no answer within the read timeout ({exc})"
    return ActionStatus.ENV_ERROR, f"the server answered with error {exc.code}: {exc}"


# --------------------------------------------------------------------------- the arguments


def _registry(tools: Sequence[Any]) -> ToolRegistry:
    """The registry the model is shown (``Tool`` checks each published schema)."""
    return ToolRegistry(
        Tool(name=t.name, description=t.description or "", parameters=t.input_schema) for t in tools
    )


# --------------------------------------------------------------------------- the executor


def _outcome(status: ActionStatus, text: str, limit: int | None) -> ActionOutcome:
    shown, cut = truncate_observation(text, limit)
    return ActionOutcome(status=status, observation=shown, observation_truncated_chars=cut)


class _Options(TypedDict, total=False):
    """The keyword options ``stdio()`` and ``http()`` pass on to the constructor unchanged."""

    read_timeout_s: float | None
    open_timeout_s: float | None
    max_observation_chars: int | None


class MCPExecutor(AsyncClosing):
    """The tools of one MCP server as actions: ``Action.tool_name`` is called with
    ``Action.tool_args`` over the official ``mcp`` SDK (extra ``polyloop[mcp]``).

    Build it with :meth:`stdio` or :meth:`http` (or pass anything ``mcp.Client`` accepts), then
    ``async with executor:`` (or ``await executor.open()`` … ``await executor.aclose()``). Opening
    connects, and builds :attr:`registry` from ``tools/list``: give it to
    ``AgentDefinition(tools=...)`` so the tools the model is shown are part of the run's
    parameters.

    Status mapping:

    * ``not_executed`` — no tool named, a tool the server did not list, arguments that fail the
      tool's published ``inputSchema`` (checked as ``ToolExecutor`` checks them, before anything
      is sent), or the server refused the call (JSON-RPC ``INVALID_PARAMS``/``METHOD_NOT_FOUND``).
    * ``executed`` — the server returned a tool result, also one with ``isError`` (the tool ran
      and failed: the model can correct it). The observation is the result's text parts, one per
      line; images, audio and resources are summarised as ``[image: image/png, 70 bytes]``.
    * ``env_error`` — the connection is closed (server process dead, HTTP server gone), no
      answer within ``read_timeout_s``, any other JSON-RPC error, or a transport failure.
      Returned, never raised.

    ``CancelledError`` passes through at once (the SDK sends the server a cancellation).
    The SDK's client lives in a task of an event loop on a thread of its own, so the executor
    may be opened in one task and closed in another, and closed from a fresh event loop after
    the one that opened it is gone.
    """

    def __init__(
        self,
        server: object,
        *,
        read_timeout_s: float | None = 60.0,
        open_timeout_s: float | None = 30.0,
        max_observation_chars: int | None = 100_000,
    ) -> None:
        _require_sdk()
        self.server = server
        self.read_timeout_s = checked_timeout_s("read_timeout_s", read_timeout_s)
        self.open_timeout_s = checked_timeout_s("open_timeout_s", open_timeout_s)
        self.max_observation_chars = checked_max_observation_chars(max_observation_chars)
        self._connection: _Connection | None = None
        self._closed = False
        self._registry: ToolRegistry | None = None

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        **options: Unpack[_Options],
    ) -> MCPExecutor:
        """A server started as a child process, speaking MCP over its stdin/stdout.

        ``env`` is merged over the SDK's minimal default environment (``HOME``, ``PATH``, …),
        not over ``os.environ``. The child's stderr goes to this process's stderr. ``options``
        (``read_timeout_s``, ``open_timeout_s``, ``max_observation_chars``) are the constructor's.
        """
        _require_sdk()
        from mcp import StdioServerParameters

        if not isinstance(command, str) or not command:
            raise ValueError("command must be a non-empty str")
        if isinstance(args, str) or not all(isinstance(a, str) for a in args):
            raise ValueError("args must be a sequence of str (not one str)")
        if env is not None and not all(
            isinstance(k, str) and isinstance(v, str) for k, v in dict(env).items()
        ):
            raise ValueError("env must map str to str")
        params = StdioServerParameters(
            command=command, args=list(args), env=None if env is None else dict(env)
        )
        return cls(params, **options)

    @classmethod
    def http(
        cls,
        url: str,
        **options: Unpack[_Options],
    ) -> MCPExecutor:
        """A server reached over streamable HTTP at ``url`` (e.g. ``http://127.0.0.1:8000/mcp``).

        ``options`` (``read_timeout_s``, ``open_timeout_s``, ``max_observation_chars``) are the
        constructor's.
        """
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError(f"url must be an http:// or https:// URL, got {url!r}")
        return cls(url, **options)

    async def open(self) -> Self:
        """Connect, list the tools and build :attr:`registry`; once per executor.

        Raises ``ConnectionError`` (from the SDK's or the transport's own exception) when the
        server cannot be started or reached, or does not answer within ``open_timeout_s``.
        """
        if self._connection is not None or self._closed:
            raise RuntimeError(
                "MCPExecutor.open() was already called, or the executor was closed: an executor "
                "opens once; make a new one"
            )
        self._connection = connection = _Connection(
            self.server, read_timeout_s=self.read_timeout_s, open_timeout_s=self.open_timeout_s
        )
        try:
            tools = await connection.open()
        except Exception as exc:
            raise ConnectionError(
                f"could not open MCP server {self}: {exception_text(exc)}"
            ) from exc
        try:
            self._registry = _registry(tools)
        except BaseException:
            await self.aclose()
            raise
        return self

    async def __aenter__(self) -> Self:
        return await self.open()

    @property
    def registry(self) -> ToolRegistry:
        """The server's tools as listed when the executor opened (``func`` is ``None``: this
        executor, not the registry, calls them)."""
        if self._registry is None:
            raise RuntimeError(
                "MCPExecutor.registry is built when the executor opens: use "
                "`async with MCPExecutor.stdio(...) as executor:` or `await executor.open()`"
            )
        return self._registry

    async def execute(self, action: Action) -> ActionOutcome:
        connection = self._connection
        if connection is None or self._closed or self._registry is None:
            raise RuntimeError("MCPExecutor.execute() needs an open executor (see open())")
        refusal = self._refusal(action)
        if refusal is not None:
            return _outcome(ActionStatus.NOT_EXECUTED, refusal, self.max_observation_chars)
        assert action.tool_name is not None
        try:
            result = await connection.call(action.tool_name, dict(action.tool_args or {}))
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is None or task.cancelling():  # our caller was cancelled: let it through
                raise
            return self._env_error("the executor was closed during the call")
        except Exception as exc:
            status, why = _error_status(exc)
            return _outcome(status, f"MCP server {self}: {why}", self.max_observation_chars)
        text = _render(result)
        if result.is_error and not text.strip():
            text = f"tool {_shown(action.tool_name)} reported an error without a message"
        return _outcome(ActionStatus.EXECUTED, text, self.max_observation_chars)

    def _env_error(self, why: str) -> ActionOutcome:
        return _outcome(ActionStatus.ENV_ERROR, f"MCP server {self}: {why}", None)

    def _refusal(self, action: Action) -> str | None:
        """Why the call must not be sent, or ``None``."""
        registry = self.registry
        unknown = unknown_tool(registry, action.tool_name)
        if unknown is not None:
            return unknown
        tool = registry.lookup(action.tool_name or "")
        assert tool is not None  # unknown_tool checked it
        return invalid_arguments(tool, action.tool_args or {})

    async def aclose(self) -> None:
        """Leave the session and end its thread (a stdio server is asked to exit, then killed
        after the SDK's grace periods). Waits at most 15 s; twice, or never opened: no-op."""
        self._closed = True
        if self._connection is not None:
            await self._connection.close()

    def __str__(self) -> str:
        server = self.server
        command = getattr(server, "command", None)
        if isinstance(command, str):  # StdioServerParameters
            return " ".join([command, *getattr(server, "args", [])])
        return server if isinstance(server, str) else type(server).__name__

    def __repr__(self) -> str:
        return f"MCPExecutor({str(self)!r})"
