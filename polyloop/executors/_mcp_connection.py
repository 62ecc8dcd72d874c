"""One MCP server's session, owned by a task of an event loop on a thread of its own.

The SDK's clients are anyio context managers that must be left in the task that entered them.
So the executor never enters them in the caller's task: :class:`Connection` runs the whole
client context (transport and session) in one task of an event loop on a thread of its own, and
every call crosses over to it. Opening in one task and closing in another, or closing from a
fresh event loop after the opening loop is gone, then needs nothing special.

Besides calls, the owner watches what the server says on its own: a changed tool list (a
``subscriptions/listen`` stream on 2026-era connections, ``notifications/tools/list_changed``
on earlier ones) bumps :attr:`Connection.tool_list_changes`; an HTTP ``401``/``403`` is kept in
:attr:`Connection.refused_credentials`, because the SDK reports it only as an internal error.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import math
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from polyloop._base._exception_text import exception_text
from polyloop._base._timeout import shown_timeout

if TYPE_CHECKING:
    import mcp_types

__all__ = ["Connection", "Endpoint", "Progress"]

_LOGGER = logging.getLogger("polyloop.executors.mcp")
_CLOSE_BOUND_S = 15.0  # the SDK's stdio shutdown waits at most 2 + 2 + 2 s for a stuck server
_LIST_PAGE_CAP = 100  # a server whose tools/list pagination never ends cannot hang open()
_HTTP_READ_S = 300.0  # the SDK's own read timeout for an HTTP response stream
_T = TypeVar("_T")

#: What a progress callback receives: progress, total (or None), message (or None).
Progress = Callable[[float, "float | None", "str | None"], None]


@dataclass(frozen=True, slots=True)
class Endpoint:
    """How to reach one server: what ``mcp.Client`` accepts (a URL is reached over streamable
    HTTP with ``headers`` and ``auth``), and the timeouts of its session."""

    server: object
    read_timeout_s: float | None
    open_timeout_s: float | None
    headers: Mapping[str, str] | None = None
    auth: object = None  # an httpx2.Auth, as the SDK's HTTP transport takes it
    call_timeouts_s: Mapping[str, float] = field(default_factory=dict)
    reconnect_attempts: int = 3  # connections tried, one after the other, when this one is lost
    reconnect_backoff_s: float = 0.2  # the wait before the second attempt, doubled after each

    def call_timeout_s(self, tool: str) -> float | None:
        return self.call_timeouts_s.get(tool, self.read_timeout_s)


@dataclass(frozen=True, slots=True)
class RefusedCredentials:
    """An HTTP answer that refused the request's credentials."""

    status: int
    reason: str
    challenge: str  # the WWW-Authenticate header, "" when absent


class Connection:
    """An ``mcp.Client`` owned by one task of an event loop running on a thread of its own.

    The caller's side (``open``, ``call``, ``list_tools``, ``stop``, ``close``) talks to the owner
    only through thread-safe futures and ``call_soon_threadsafe``; everything of the SDK stays on
    the owner's loop. Counters and fields the owner writes are read by the caller without a
    lock: each is one reference or int, replaced whole.
    """

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self.tool_list_changes = 0  # bumped by the owner each time the server says so
        self.refused_credentials: RefusedCredentials | None = None  # the last 401/403, if any
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
                if self.endpoint.open_timeout_s is not None:
                    scope.deadline = anyio.current_time() + self.endpoint.open_timeout_s
                self._opening = scope
                await self._own()
            if scope.cancelled_caught and not self._stop.is_set():
                waited = shown_timeout(self.endpoint.open_timeout_s)
                self._fail_open(TimeoutError(f"no answer within {waited} s"))
        self._fail_open(ConnectionError("the executor was closed while it was opening"))
        if not self._stopping:  # until aclose(), calls get "connection closed" from _call
            await self._stop.wait()

    async def _own(self) -> None:
        import anyio
        from mcp import Client

        assert self._stop is not None
        try:
            async with contextlib.AsyncExitStack() as stack:
                server = await self._transport(stack)
                # `server` is anything mcp.Client accepts (checked by the SDK, not typed here)
                connecting = Client(
                    server,  # type: ignore[arg-type]
                    read_timeout_seconds=self.endpoint.read_timeout_s,
                    message_handler=self._on_message,
                )
                client = await stack.enter_async_context(connecting)
                changes = await self._subscribe(client, stack)  # before listing: miss nothing
                tools = await _list_tools(client)
                self._opening.deadline = math.inf  # the open timeout covers the handshake only
                self._opening = None
                self._client = client
                if self._stop.is_set() or not self._ready.set_running_or_notify_cancel():
                    return
                self._ready.set_result(tools)
                async with anyio.create_task_group() as watching:
                    if changes is not None:
                        watching.start_soon(self._watch_tool_list, changes)
                    await self._stop.wait()
                    watching.cancel_scope.cancel()
        except Exception as exc:  # the transport failed: open() raises it, or calls report it
            self._lost = exception_text(exc)
            self._fail_open(exc)
            _LOGGER.debug("MCP connection ended: %s", self._lost, exc_info=True)
        finally:
            self._client = None

    async def _transport(self, stack: contextlib.AsyncExitStack) -> object:
        """What ``mcp.Client`` connects to: a URL becomes a streamable-HTTP transport over an
        HTTP client of ours (headers, auth, and a hook that sees a refused credential)."""
        server = self.endpoint.server
        if not isinstance(server, str):
            return server
        import httpx2
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import MCP_DEFAULT_TIMEOUT, create_mcp_http_client

        endpoint = self.endpoint
        longest = max([endpoint.read_timeout_s or 0.0, *endpoint.call_timeouts_s.values()])
        read = max(_HTTP_READ_S, longest + MCP_DEFAULT_TIMEOUT)  # never cut a call it allows
        http = create_mcp_http_client(
            headers=None if self.endpoint.headers is None else dict(self.endpoint.headers),
            timeout=httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=read),
            auth=self.endpoint.auth,  # type: ignore[arg-type]  # checked at construction
        )
        http.event_hooks = {"response": [self._saw_response]}
        await stack.enter_async_context(http)
        return streamable_http_client(server, http_client=http)

    async def _saw_response(self, response: Any) -> None:
        status = response.status_code
        if status in (401, 403):
            self.refused_credentials = RefusedCredentials(
                status, str(response.reason_phrase), response.headers.get("www-authenticate", "")
            )
        elif status < 400:  # an auth flow that retried and got through
            self.refused_credentials = None

    async def _on_message(self, message: Any) -> None:
        """Server notifications on a handshake-era session (2026-era ones use the listen stream)."""
        import mcp_types

        if isinstance(message, mcp_types.ToolListChangedNotification):
            self.tool_list_changes += 1

    async def _subscribe(self, client: Any, stack: contextlib.AsyncExitStack) -> Any:
        """A ``subscriptions/listen`` stream of tool list changes, or ``None`` (an earlier
        protocol, where ``_on_message`` hears them; a server that offers no stream)."""
        from mcp.client.subscriptions import ListenNotSupportedError

        try:
            return await stack.enter_async_context(client.listen(tools_list_changed=True))
        except ListenNotSupportedError:
            return None
        except Exception as exc:  # a server without the stream still serves its tools
            _LOGGER.debug("MCP tool list changes are not watched: %s", exception_text(exc))
            return None

    async def _watch_tool_list(self, changes: Any) -> None:
        try:
            async for _ in changes:
                self.tool_list_changes += 1
        except Exception as exc:  # the stream dropped: calls will say if the session did too
            _LOGGER.debug("MCP tool list changes are no longer watched: %s", exception_text(exc))

    def _fail_open(self, exc: BaseException) -> None:
        if not self._ready.done() and self._ready.set_running_or_notify_cancel():
            self._ready.set_exception(exc)

    async def call(
        self, name: str, args: dict[str, Any], progress: Progress
    ) -> mcp_types.CallToolResult:
        """``tools/call`` on the owner's loop; raises what the SDK raises. ``progress`` is called
        on the owner's thread for each progress notification of the call."""
        return await self._on_owner(self._call(name, args, progress))

    async def list_tools(self) -> list[mcp_types.Tool]:
        """``tools/list`` again (every page), on the owner's loop."""
        return await self._on_owner(self._list_again())

    async def _on_owner(self, work: Awaitable[_T]) -> _T:
        assert self._loop is not None, "open() returned, so the owner's loop runs"
        future = asyncio.run_coroutine_threadsafe(_awaited(work), self._loop)
        return await asyncio.wrap_future(future)

    def _connected(self) -> Any:
        if self._client is None:
            lost = f"the connection was lost ({self._lost})" if self._lost else ""
            raise ConnectionError(lost or "the connection is closed")
        return self._client

    async def _call(
        self, name: str, args: dict[str, Any], progress: Progress
    ) -> mcp_types.CallToolResult:
        client = self._connected()

        async def report(done: float, total: float | None, message: str | None) -> None:
            progress(done, total, message)

        result: mcp_types.CallToolResult = await client.call_tool(
            name,
            args,
            read_timeout_seconds=self.endpoint.call_timeout_s(name),
            progress_callback=report,
        )
        return result

    async def _list_again(self) -> list[mcp_types.Tool]:
        return await _list_tools(self._connected())

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


async def _awaited(work: Awaitable[_T]) -> _T:
    return await work


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
