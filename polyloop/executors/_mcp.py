"""MCPExecutor: the tools of one or several MCP servers as actions, through the official ``mcp``
SDK.

Each server's session lives in :mod:`polyloop.executors._mcp_connection` (a task of an event
loop on a thread of its own); what a tool result becomes is
:mod:`polyloop.executors._mcp_content`. This module is the executor: the tools the model is
shown, the checks before a call, and the outcome of a call — its status, its text and its
``detail`` (why it was refused, what the server reported on the way).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Self, TypedDict, Unpack

from polyloop._base._closing import AsyncClosing
from polyloop._base._exception_text import exception_text
from polyloop._base._timeout import checked_timeout_s, shown_timeout
from polyloop._telemetry._progress import ProgressEvents, progress_events
from polyloop.executors._artifact_dir import ArtifactDirectory, checked_artifacts_dir
from polyloop.executors._mcp_connection import Connection, Endpoint
from polyloop.executors._mcp_content import render
from polyloop.executors._observation_cap import checked_max_observation_chars
from polyloop.executors._str_mapping import checked_str_mapping
from polyloop.executors._tool import (
    Refusal,
    _shown,
    invalid_arguments,
    truncate_observation,
    unknown_tool,
)
from polyloop.tools import Tool, ToolRegistry
from polyloop.types import Action, ActionOutcome, ActionStatus

if TYPE_CHECKING:
    import mcp_types

__all__ = ["MCPExecutor"]

_INSTALL_HINT = "MCPExecutor needs the MCP SDK: pip install 'polyloop[mcp]'"
_LOGGER = logging.getLogger("polyloop.executors.mcp")
_PREFIX = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")  # joined to a tool name with "_"
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # an HTTP token (RFC 9110)
_PROGRESS_KEPT = 100  # progress notifications kept in one outcome's detail (the last ones)
_MESSAGE_CHARS = 500  # a server's message in a detail is cut here
_MAX_ATTEMPTS = 100  # reconnect_attempts: more would keep one call waiting for minutes
_MAX_BACKOFF_S = 60.0

#: ``on_progress(tool, progress, total, message)``: a live progress notification of a call,
#: called on the event loop that called ``execute()``.
OnProgress = Callable[[str, float, "float | None", "str | None"], object]


def _require_sdk() -> None:
    try:
        import mcp  # noqa: F401
    except ImportError as exc:
        raise ImportError(_INSTALL_HINT) from exc


def _cut(text: str) -> str:
    return text if len(text) <= _MESSAGE_CHARS else text[:_MESSAGE_CHARS] + "…"


# --------------------------------------------------------------------------- what went wrong

# JSON-RPC codes (mcp_types.jsonrpc): the server refused the call, so the tool did not run
_INVALID_PARAMS, _METHOD_NOT_FOUND = -32602, -32601
_CONNECTION_CLOSED, _REQUEST_TIMEOUT = -32000, -32001
#: The failures that leave the session unusable: the next call opens a new one.
_BROKEN = frozenset({"transport", "connection_closed"})


@dataclass(frozen=True, slots=True)
class _Failure:
    """A ``tools/call`` that raised: its status, the text that says why, the same as data."""

    status: ActionStatus
    why: str
    detail: dict[str, Any]


def _failure(exc: Exception, tool: str, connection: Connection) -> _Failure:
    """How an exception from ``tools/call`` maps to a status, and what to say about it."""
    from mcp import MCPError

    refused = connection.refused_credentials
    if refused is not None:  # the SDK reports a 401/403 as an internal error: say what it was
        challenge = f"; the server asks for: {_cut(refused.challenge)}" if refused.challenge else ""
        return _Failure(
            ActionStatus.ENV_ERROR,
            f"authentication failed: the server answered HTTP {refused.status} {refused.reason}"
            f"{challenge} (check the headers or auth given to MCPExecutor.http)",
            {"kind": "authentication", "status": refused.status, "challenge": refused.challenge},
        )
    if not isinstance(exc, MCPError):  # transport failures, a result the SDK could not decode
        text = exception_text(exc)
        return _Failure(ActionStatus.ENV_ERROR, text, {"kind": "transport", "message": _cut(text)})
    message = _cut(str(exc))
    if exc.code in (_INVALID_PARAMS, _METHOD_NOT_FOUND):
        return _Failure(
            ActionStatus.NOT_EXECUTED,
            f"the server refused the call ({exc.code}): {exc}",
            {"kind": "server_refused", "tool": tool, "code": exc.code, "message": message},
        )
    if exc.code == _CONNECTION_CLOSED:
        return _Failure(
            ActionStatus.ENV_ERROR,
            f"the connection is closed ({exc})",
            {"kind": "connection_closed", "message": message},
        )
    if exc.code == _REQUEST_TIMEOUT:
        waited = connection.endpoint.call_timeout_s(tool)
        return _Failure(
            ActionStatus.ENV_ERROR,
            f"no answer within the read timeout of {shown_timeout(waited)} s ({exc})",
            {"kind": "timeout", "timeout_s": waited, "message": message},
        )
    return _Failure(
        ActionStatus.ENV_ERROR,
        f"the server answered with error {exc.code}: {exc}",
        {"kind": "server_error", "code": exc.code, "message": message},
    )


# --------------------------------------------------------------------------- the servers


@dataclass(slots=True)
class _Member:
    """One server behind the executor: its prefix (``None``: the only server, no prefix), how to
    reach it, its session once open, and its last ``tools/list``."""

    prefix: str | None
    endpoint: Endpoint
    connection: Connection | None = None
    listed: list[mcp_types.Tool] = field(default_factory=list)
    seen_changes: int = 0  # the connection's tool_list_changes when `listed` was fetched
    broke: str | None = None  # why the last call found the connection broken (→ reconnect)
    _lock: asyncio.Lock | None = None  # taken by a reconnection; one per event loop
    _lock_loop: asyncio.AbstractEventLoop | None = None

    def lock(self) -> asyncio.Lock:
        """The lock a reconnection holds, so that concurrent calls open one session, not several
        (made anew for each event loop: a lock serves the loop it was first used on)."""
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock_loop is not loop:
            self._lock, self._lock_loop = asyncio.Lock(), loop
        return self._lock

    def exposed(self, name: str) -> str:
        """The name the model is shown for this server's tool ``name``."""
        return name if self.prefix is None else f"{self.prefix}_{name}"

    def __str__(self) -> str:
        server = self.endpoint.server
        command = getattr(server, "command", None)
        if isinstance(command, str):  # StdioServerParameters
            return " ".join([command, *getattr(server, "args", [])])
        return server if isinstance(server, str) else type(server).__name__

    def origin(self, name: str) -> str:
        """Where a tool comes from, for a message: ``'forecast' of server 'weather' (…)``."""
        if self.prefix is None:
            return f"{_shown(name)} of {self}"
        return f"{_shown(name)} of server {self.prefix!r} ({self})"


@dataclass(frozen=True, slots=True)
class _Listing:
    """The tools the model is shown, where each one is served, and the ones left out."""

    registry: ToolRegistry
    routes: dict[str, tuple[_Member, str]]  # shown name -> (server, the server's own name)
    output_schemas: dict[str, object]
    skipped: dict[str, str]  # shown name -> why it is not offered


def _listing(
    members: Sequence[_Member],
    *,
    refuse_collisions: bool,
    warned: Mapping[str, str] | None = None,
) -> _Listing:
    """Every server's tools under their shown names; a tool that cannot be offered is skipped
    with a warning (once: not again when ``warned`` has it for the same reason).
    ``refuse_collisions``: two servers showing one name is a ``ValueError``."""
    tools: list[Tool] = []
    routes: dict[str, tuple[_Member, str]] = {}
    schemas: dict[str, object] = {}
    skipped: dict[str, str] = {}
    for member in members:
        for listed in member.listed:
            shown = member.exposed(listed.name)
            taken = routes.get(shown)
            why = None
            if taken is not None and taken[0] is member:
                why = f"{member} lists it twice"
            elif taken is not None:
                why = (
                    f"the tool name {_shown(shown)} is published twice: by "
                    f"{taken[0].origin(taken[1])} and by {member.origin(listed.name)}"
                )
                if refuse_collisions:
                    raise ValueError(why + "; give the servers prefixes that keep names apart")
            else:
                try:
                    tool = Tool(
                        name=shown,
                        description=listed.description or "",
                        parameters=listed.input_schema,
                    )
                except ValueError as exc:
                    why = f"its input schema cannot be used: {exc}"
            if why is not None:
                if (warned or {}).get(shown) != why:
                    _LOGGER.warning(
                        "MCP server %s: tool %s is skipped: %s", member, _shown(shown), why
                    )
                skipped[shown] = why
                continue
            tools.append(tool)
            routes[shown] = (member, listed.name)
            schemas[shown] = listed.output_schema
    return _Listing(ToolRegistry(tools), routes, schemas, skipped)


def _changes(before: ToolRegistry, after: ToolRegistry) -> dict[str, list[str]]:
    """Which shown tools appeared, went, or changed what the model is told about them."""
    old = {tool.name: tool.spec() for tool in before}
    new = {tool.name: tool.spec() for tool in after}
    return {
        "added": sorted(new.keys() - old.keys()),
        "removed": sorted(old.keys() - new.keys()),
        "changed": sorted(name for name in old.keys() & new.keys() if old[name] != new[name]),
    }


# --------------------------------------------------------------------------- checked options


def _checked_call_timeouts(value: object) -> dict[str, float]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"call_timeouts_s must map tool names to seconds, got {value!r}")
    checked: dict[str, float] = {}
    for name, seconds in value.items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"call_timeouts_s: a tool name must be a non-empty str, got {name!r}")
        limit = checked_timeout_s(f"call_timeouts_s[{name!r}]", seconds)
        if limit is None:
            raise ValueError(f"call_timeouts_s[{name!r}] must be a finite number > 0, got None")
        checked[name] = limit
    return checked


def _checked_headers(value: object) -> dict[str, str] | None:
    checked = checked_str_mapping("headers", value)
    for name, text in (checked or {}).items():
        if not _HEADER_NAME.fullmatch(name):
            raise ValueError(f"headers: {name!r} is not an HTTP header name")
        if any(c in text for c in "\r\n\0"):
            raise ValueError(f"headers[{name!r}] must be a str on one line, got {text!r}")
    return checked


def _checked_auth(value: object) -> object:
    if value is None:
        return None
    import httpx2

    if not isinstance(value, httpx2.Auth):
        raise ValueError(
            f"auth must be an httpx2.Auth (as the SDK's HTTP transport takes it, e.g. "
            f"mcp.client.auth.OAuthClientProvider), got {type(value).__name__}"
        )
    return value


def _checked_attempts(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_ATTEMPTS:
        raise ValueError(
            f"reconnect_attempts must be an int in [0, {_MAX_ATTEMPTS}] (0: never reconnect), "
            f"got {value!r}"
        )
    return value


def _checked_backoff(value: object) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 <= value <= _MAX_BACKOFF_S  # NaN fails both comparisons
    ):
        raise ValueError(
            f"reconnect_backoff_s must be a number of seconds in [0, {_MAX_BACKOFF_S:g}], "
            f"got {value!r}"
        )
    return float(value)


def _checked_prefix(prefix: object) -> str:
    if not isinstance(prefix, str) or not _PREFIX.fullmatch(prefix):
        raise ValueError(
            f"a server prefix must be 1 to 64 ASCII letters, digits, '_' or '-' (starting with a "
            f"letter or digit), got {prefix!r}"
        )
    return prefix


# --------------------------------------------------------------------------- the executor


class _Options(TypedDict, total=False):
    """The keyword options ``stdio()`` and ``http()`` pass on to the constructor unchanged."""

    read_timeout_s: float | None
    open_timeout_s: float | None
    max_observation_chars: int | None
    call_timeouts_s: Mapping[str, float] | None
    artifacts_dir: str | os.PathLike[str] | None
    on_progress: OnProgress | None
    reconnect_attempts: int
    reconnect_backoff_s: float


class MCPExecutor(AsyncClosing):
    """The tools of an MCP server (or of several, see :meth:`combine`) as actions:
    ``Action.tool_name`` is called with ``Action.tool_args`` over the official ``mcp`` SDK
    (extra ``polyloop[mcp]``).

    Build it with :meth:`stdio` or :meth:`http` (or pass anything ``mcp.Client`` accepts), then
    ``async with executor:`` (or ``await executor.open()`` … ``await executor.aclose()``). Opening
    connects, and builds :attr:`registry` from ``tools/list``: give it to
    ``AgentDefinition(tools=...)`` so the tools the model is shown are part of the run's
    parameters. A tool whose input schema cannot be used is left out with a warning
    (:attr:`skipped_tools` says why); the others stay usable.

    Status mapping:

    * ``not_executed`` — no tool named, a tool the server did not list, arguments that fail the
      tool's published ``inputSchema`` (checked as ``ToolExecutor`` checks them, before anything
      is sent), or the server refused the call (JSON-RPC ``INVALID_PARAMS``/``METHOD_NOT_FOUND``).
      ``ActionOutcome.detail["refusal"]`` says why as data.
    * ``executed`` — the server returned a tool result, also one with ``isError`` (the tool ran
      and failed: the model can correct it). The observation is the result's structured content
      when it has some, else its text parts, one per line; embedded text resources are included;
      images, audio and binary resources are saved in ``artifacts_dir`` (named by their SHA-256)
      or, without one, summarised as ``[image: image/png, 70 bytes]``.
    * ``env_error`` — the connection is closed (server process dead, HTTP server gone), the
      server refused the credentials (HTTP 401/403), no answer within the call's timeout, any
      other JSON-RPC error, or a transport failure. ``detail["error"]`` says which. Returned,
      never raised.

    A lost session is not kept dead. The call that finds it lost returns ``env_error`` (the
    server's state may be gone with it; the call is not sent again: the tool may have run), and
    the next call to that server opens a new session: at most ``reconnect_attempts`` tries, each
    bounded by ``open_timeout_s``, waiting ``reconnect_backoff_s`` before the second and twice
    as long before each next one. It lists the tools again and compares them with the last
    listing: ``detail["reconnected"]`` records the reconnection (``attempts``, and why the old
    session was ``lost``), ``detail["tools_changed"]`` what the model would now be shown
    differently, and the call is checked against the new listing (a tool the server no longer
    lists is refused, ``not_executed``). While the server stays down every call returns
    ``env_error`` with ``detail["error"]["kind"]`` ``"reconnect_failed"``;
    ``reconnect_attempts=0`` keeps a lost session dead.

    ``detail`` also holds ``"progress"`` (the call's progress notifications, which also reach
    ``on_progress`` and the current OpenTelemetry span's events live), ``"artifacts"``
    (the files written) and ``"tools_changed"`` (the tool list the server changed since the
    last call, refreshed before this one). ``CancelledError`` passes through at once (the SDK
    sends the server a cancellation). The SDK's client lives in a task of an event loop on a
    thread of its own, so the executor may be opened in one task and closed in another, and
    closed from a fresh event loop after the one that opened it is gone.
    """

    def __init__(
        self,
        server: object,
        *,
        read_timeout_s: float | None = 60.0,
        open_timeout_s: float | None = 30.0,
        max_observation_chars: int | None = 100_000,
        call_timeouts_s: Mapping[str, float] | None = None,
        artifacts_dir: str | os.PathLike[str] | None = None,
        on_progress: OnProgress | None = None,
        headers: Mapping[str, str] | None = None,
        auth: object = None,
        reconnect_attempts: int = 3,
        reconnect_backoff_s: float = 0.2,
    ) -> None:
        _require_sdk()
        if (headers is not None or auth is not None) and not isinstance(server, str):
            raise ValueError("headers and auth apply to a server reached by URL (see http())")
        endpoint = Endpoint(
            server=server,
            read_timeout_s=checked_timeout_s("read_timeout_s", read_timeout_s),
            open_timeout_s=checked_timeout_s("open_timeout_s", open_timeout_s),
            headers=_checked_headers(headers),
            auth=_checked_auth(auth),
            call_timeouts_s=_checked_call_timeouts(call_timeouts_s),
            reconnect_attempts=_checked_attempts(reconnect_attempts),
            reconnect_backoff_s=_checked_backoff(reconnect_backoff_s),
        )
        self.server = server
        self.read_timeout_s = endpoint.read_timeout_s
        self.open_timeout_s = endpoint.open_timeout_s
        self._setup([_Member(None, endpoint)], max_observation_chars, artifacts_dir, on_progress)

    def _setup(
        self,
        members: list[_Member],
        max_observation_chars: int | None,
        artifacts_dir: str | os.PathLike[str] | None,
        on_progress: OnProgress | None,
    ) -> None:
        if on_progress is not None and not callable(on_progress):
            raise ValueError(f"on_progress must be callable or None, got {on_progress!r}")
        self.max_observation_chars = checked_max_observation_chars(max_observation_chars)
        self.on_progress = on_progress
        self.artifacts_dir = checked_artifacts_dir(artifacts_dir)  # last: it may create it
        self._artifacts = (
            None if self.artifacts_dir is None else ArtifactDirectory(self.artifacts_dir)
        )
        self._members = members
        self._opened = False
        self._closed = False
        self._listing: _Listing | None = None

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
        are the constructor's.
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
        *,
        headers: Mapping[str, str] | None = None,
        auth: object = None,
        **options: Unpack[_Options],
    ) -> MCPExecutor:
        """A server reached over streamable HTTP at ``url`` (e.g. ``http://127.0.0.1:8000/mcp``).

        ``headers`` are sent with every request (``{"Authorization": "Bearer …"}``); ``auth`` is
        an ``httpx2.Auth`` as the SDK takes it (``mcp.client.auth.OAuthClientProvider``). A
        server that answers 401 or 403 fails ``open()`` with a ``ConnectionError``, and a call
        with ``env_error``, each naming authentication. ``options`` are the constructor's.
        """
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError(f"url must be an http:// or https:// URL, got {url!r}")
        return cls(url, headers=headers, auth=auth, **options)

    @classmethod
    def combine(
        cls,
        servers: Mapping[str, MCPExecutor],
        *,
        max_observation_chars: int | None = 100_000,
        artifacts_dir: str | os.PathLike[str] | None = None,
        on_progress: OnProgress | None = None,
    ) -> MCPExecutor:
        """Several servers behind one executor: ``{"weather": MCPExecutor.stdio(...), ...}``.

        Each server's tools are shown as ``<prefix>_<tool>`` (``weather_forecast``). The given
        executors must be unopened single-server ones; their connection options (timeouts,
        headers, auth, ``call_timeouts_s`` by the server's own tool names) are kept, the rest
        (``max_observation_chars``, ``artifacts_dir``, ``on_progress``) is this call's. Opening
        opens every server, and raises ``ValueError`` naming both tools when two servers would
        show the same name.
        """
        if not isinstance(servers, Mapping) or not servers:
            raise ValueError("combine() needs a non-empty mapping of prefix to MCPExecutor")
        members = []
        for prefix, executor in servers.items():
            if not isinstance(executor, MCPExecutor) or executor._members[0].prefix is not None:
                raise ValueError(
                    f"combine(): {prefix!r} must map to a single-server MCPExecutor, "
                    f"got {type(executor).__name__}"
                )
            if executor._opened or executor._closed:
                raise ValueError(f"combine(): the executor for {prefix!r} was already opened")
            members.append(_Member(_checked_prefix(prefix), executor._members[0].endpoint))
        combined = cls.__new__(cls)
        combined.server = {member.prefix: member.endpoint.server for member in members}
        combined.read_timeout_s = None
        combined.open_timeout_s = None
        combined._setup(members, max_observation_chars, artifacts_dir, on_progress)
        return combined

    async def open(self) -> Self:
        """Connect to every server, list the tools and build :attr:`registry`; once per executor.

        Raises ``ConnectionError`` (naming the server and the cause) when a server cannot be
        started or reached, refuses the credentials (401/403), speaks no MCP, or does not
        answer within ``open_timeout_s``; ``ValueError`` when two combined servers would show
        one tool name. Nothing stays open after a failure.
        """
        if self._opened or self._closed:
            raise RuntimeError(
                "MCPExecutor.open() was already called, or the executor was closed: an executor "
                "opens once; make a new one"
            )
        self._opened = True
        for member in self._members:
            member.connection = Connection(member.endpoint)
        try:
            await asyncio.gather(*(self._open_one(member) for member in self._members))
            self._listing = _listing(self._members, refuse_collisions=True)
        except BaseException:
            await self.aclose()
            raise
        return self

    async def _open_one(self, member: _Member) -> None:
        connection = member.connection
        assert connection is not None
        try:
            member.listed = await connection.open()
        except Exception as exc:
            refused = connection.refused_credentials
            why = exception_text(exc)
            if refused is not None:
                why = (
                    f"authentication failed: the server answered HTTP {refused.status} "
                    f"{refused.reason} (check the headers or auth given to MCPExecutor.http)"
                )
            raise ConnectionError(f"could not open MCP server {member}: {why}") from exc
        member.seen_changes = connection.tool_list_changes

    async def __aenter__(self) -> Self:
        return await self.open()

    @property
    def registry(self) -> ToolRegistry:
        """The tools the model may call, as last listed (``func`` is ``None``: this executor,
        not the registry, calls them). Refreshed before a call when a server said its tool list
        changed."""
        return self._current().registry

    @property
    def skipped_tools(self) -> Mapping[str, str]:
        """Tools a server listed that are not offered (by shown name), and why."""
        return dict(self._current().skipped)

    def _current(self) -> _Listing:
        if self._listing is None:
            raise RuntimeError(
                "MCPExecutor.registry is built when the executor opens: use "
                "`async with MCPExecutor.stdio(...) as executor:` or `await executor.open()`"
            )
        return self._listing

    async def execute(self, action: Action) -> ActionOutcome:
        if self._listing is None or self._closed:
            raise RuntimeError("MCPExecutor.execute() needs an open executor (see open())")
        detail: dict[str, Any] = {}
        changed = await self._refresh()
        if changed is not None:
            detail["tools_changed"] = changed
        refusal = self._refusal(action)
        if refusal is not None:
            return self._outcome(ActionStatus.NOT_EXECUTED, refusal.text, detail, refusal=refusal)
        assert action.tool_name is not None
        member, _ = self._current().routes[action.tool_name]
        if member.broke is not None:
            failed = await self._reconnect(member, detail)
            if failed is not None:
                return failed
            refusal = self._refusal(action)  # against the tools the new session listed
            if refusal is not None:
                text = refusal.text
                return self._outcome(ActionStatus.NOT_EXECUTED, text, detail, refusal=refusal)
        member, name = self._current().routes[action.tool_name]
        return await self._call(member, name, action, detail)

    async def _reconnect(self, member: _Member, detail: dict[str, Any]) -> ActionOutcome | None:
        """Open a new session to a server whose session was lost: up to ``reconnect_attempts``
        tries, waiting ``reconnect_backoff_s`` (doubled each time) between them; its tools are
        listed again and compared. ``None`` once connected (``detail["reconnected"]`` says so),
        else the ``env_error`` outcome to return."""
        async with member.lock():
            why = member.broke
            if why is None:  # another call reconnected while this one waited
                return None
            assert member.connection is not None
            await member.connection.close()  # the old session's thread (and child) end
            endpoint, last = member.endpoint, ""
            for attempt in range(1, endpoint.reconnect_attempts + 1):
                if attempt > 1:
                    await asyncio.sleep(endpoint.reconnect_backoff_s * 2 ** (attempt - 2))
                connection = Connection(endpoint)
                try:
                    member.listed = await connection.open()
                except Exception as exc:  # open() left nothing running
                    last = exception_text(exc)
                    continue
                member.connection, member.broke = connection, None
                member.seen_changes = connection.tool_list_changes
                detail["reconnected"] = {"attempts": attempt, "lost": _cut(why)}
                changed = self._listed_again()
                if changed is not None:
                    earlier = detail.get("tools_changed", {})  # a refresh before this call
                    detail["tools_changed"] = {
                        k: sorted({*earlier.get(k, ()), *v}) for k, v in changed.items()
                    }
                _LOGGER.info("MCP server %s: reconnected (attempt %d)", member, attempt)
                return None
        tried = endpoint.reconnect_attempts
        failed = f"{tried} attempts to reconnect failed, the last: {last}" if tried else ""
        text = f"MCP server {member}: the connection was lost ({why}); " + (
            failed or "reconnecting is off (reconnect_attempts=0)"
        )
        detail["error"] = {
            "kind": "reconnect_failed",
            "attempts": tried,
            "lost": _cut(why),
            "message": _cut(last),
        }
        return self._outcome(ActionStatus.ENV_ERROR, text, detail)

    async def _call(
        self, member: _Member, name: str, action: Action, detail: dict[str, Any]
    ) -> ActionOutcome:
        assert member.connection is not None
        assert action.tool_name is not None
        progress = _ProgressLog(
            action.tool_name, self.on_progress, asyncio.get_running_loop(), progress_events()
        )
        try:
            result = await member.connection.call(name, dict(action.tool_args or {}), progress)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is None or task.cancelling():  # our caller was cancelled: let it through
                raise
            why = f"MCP server {member}: the executor was closed during the call"
            detail["error"] = {"kind": "closed"}
            return self._outcome(ActionStatus.ENV_ERROR, why, progress.into(detail))
        except Exception as exc:
            failure = _failure(exc, name, member.connection)
            if failure.detail["kind"] in _BROKEN:  # not retried (the tool may have run): the
                member.broke = failure.why  # next call reconnects
            key = "refusal" if failure.status is ActionStatus.NOT_EXECUTED else "error"
            detail[key] = failure.detail
            text = f"MCP server {member}: {failure.why}"
            return self._outcome(failure.status, text, progress.into(detail))
        schema = self._current().output_schemas.get(action.tool_name)
        if self._artifacts is None:
            rendered = render(result, schema, None)
        else:  # writing files: off the event loop
            rendered = await asyncio.to_thread(render, result, schema, self._artifacts)
        text = rendered.text
        if result.is_error and not text.strip():
            text = f"tool {_shown(action.tool_name)} reported an error without a message"
        if rendered.artifacts:
            detail["artifacts"] = rendered.artifacts
        return self._outcome(ActionStatus.EXECUTED, text, progress.into(detail))

    def _outcome(
        self,
        status: ActionStatus,
        text: str,
        detail: dict[str, Any],
        *,
        refusal: Refusal | None = None,
    ) -> ActionOutcome:
        if refusal is not None:
            detail["refusal"] = refusal.detail
        shown, cut = truncate_observation(text, self.max_observation_chars)
        return ActionOutcome(
            status=status,
            observation=shown,
            observation_truncated_chars=cut,
            detail=detail or None,
        )

    def _refusal(self, action: Action) -> Refusal | None:
        """Why the call must not be sent, or ``None``."""
        registry = self.registry
        unknown = unknown_tool(registry, action.tool_name)
        if unknown is not None:
            return unknown
        tool = registry.lookup(action.tool_name or "")
        assert tool is not None  # unknown_tool checked it
        return invalid_arguments(tool, action.tool_args or {})

    async def _refresh(self) -> dict[str, Any] | None:
        """Between steps: list again the tools of each server that said they changed, and say
        what the model would now be shown differently (``None``: nothing changed)."""
        stale = [
            m
            for m in self._members
            if m.connection is not None and m.connection.tool_list_changes != m.seen_changes
        ]
        if not stale:
            return None
        for member in stale:
            assert member.connection is not None
            member.seen_changes = member.connection.tool_list_changes  # a later change: again
            try:
                member.listed = await member.connection.list_tools()
            except Exception as exc:  # the call that follows reports the broken connection
                _LOGGER.warning(
                    "MCP server %s: listing the changed tools failed: %s",
                    member,
                    exception_text(exc),
                )
        return self._listed_again()

    def _listed_again(self) -> dict[str, Any] | None:
        """Rebuild :attr:`registry` from each server's last ``tools/list``; what changed for the
        model (``None``: nothing)."""
        before = self._current()
        after = _listing(self._members, refuse_collisions=False, warned=before.skipped)
        self._listing = after
        changes = _changes(before.registry, after.registry)
        if not any(changes.values()):
            return None
        _LOGGER.info("MCP tools changed: %s", changes)
        return changes

    async def aclose(self) -> None:
        """Leave every session and end its thread (a stdio server is asked to exit, then killed
        after the SDK's grace periods). Waits at most 15 s; twice, or never opened: no-op."""
        self._closed = True
        connections = [m.connection for m in self._members if m.connection is not None]
        await asyncio.gather(*(connection.close() for connection in connections))

    def __str__(self) -> str:
        if len(self._members) == 1 and self._members[0].prefix is None:
            return str(self._members[0])
        return ", ".join(f"{m.prefix}={m}" for m in self._members)

    def __repr__(self) -> str:
        return f"MCPExecutor({str(self)!r})"


def _number(value: object) -> float | None:
    """A server's progress figure as JSON can hold it (``NaN``, ``inf``, junk: ``None``)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return value


class _ProgressLog:
    """The progress notifications of one call: kept for ``detail`` (the last
    ``_PROGRESS_KEPT``), passed live to ``on_progress`` on the caller's event loop, and added
    live as events to the span that was current when the call began (``span_events``)."""

    def __init__(
        self,
        tool: str,
        on_progress: OnProgress | None,
        loop: asyncio.AbstractEventLoop,
        span_events: ProgressEvents | None,
    ) -> None:
        self.tool = tool
        self.on_progress = on_progress
        self.loop = loop
        self.span_events = span_events
        self.kept: list[dict[str, Any]] = []
        self.count = 0

    def __call__(self, done: float, total: float | None, message: str | None) -> None:
        """On the connection's thread, for each notification."""
        self.count += 1
        said = None if message is None else _cut(str(message))
        value, of = _number(done), _number(total)
        self.kept.append({"progress": value, "total": of, "message": said})
        del self.kept[:-_PROGRESS_KEPT]
        if self.span_events is not None:
            self.span_events.add(value, of, said)
        if self.on_progress is not None:
            with contextlib.suppress(RuntimeError):  # the caller's loop is gone: nobody listens
                self.loop.call_soon_threadsafe(self.on_progress, self.tool, done, total, message)

    def into(self, detail: dict[str, Any]) -> dict[str, Any]:
        if self.count:
            detail["progress"] = {"notifications": self.count, "last": list(self.kept)}
        return detail
