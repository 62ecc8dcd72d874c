"""A real MCP server, written with the official SDK, that the MCPExecutor tests talk to.

Run it over stdio (``python tests/integration/mcp_server.py``) or over streamable HTTP on
loopback (``python tests/integration/mcp_server.py --http PORT``). ``--broken`` adds tools
whose published input schemas cannot be used among the good ones; ``--token T`` (HTTP only)
answers 401 to a request without ``Authorization: Bearer T`` and 403 to one with another
token. Its tools have
pydantic-typed parameters of every shape the executor must publish and check: ``Optional``,
defaults, enums, nested models, ``Field`` bounds. Some tools exist to break things on purpose:
``fail`` reports a tool error (``isError``), ``nap`` sleeps past a read timeout, ``crash`` kills
the server process in the middle of a call, ``echo`` answers its text unchanged,
``remember`` leaves a side effect the resume test
counts, ``count`` reports progress, ``keep_reporting`` reports a marker until the call is
cancelled (the kit's long action), ``grow`` adds a tool and says the tool list changed,
``revoke`` makes the server refuse the token it accepted so far.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import enum
import os
import signal
from pathlib import Path
from typing import Annotated, Any, TypedDict

from mcp import MCPError
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Audio, Image
from mcp_types import (
    BlobResourceContents,
    CallToolResult,
    ContentBlock,
    EmbeddedResource,
    ResourceLink,
    TextContent,
    TextResourceContents,
)
from pydantic import BaseModel, Field

server = MCPServer("polyloop-test-server")

CONSTANTS = {"pi": "3.14159", "e": "2.71828"}
# A 1x1 transparent PNG: an image result the executor must summarise as text.
PIXEL_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


class Priority(enum.StrEnum):
    LOW = "low"
    NORMAL = "normal"
    HIGH = "high"


class Window(BaseModel):
    start_hour: Annotated[int, Field(ge=0, le=23)]
    end_hour: Annotated[int, Field(ge=0, le=23)]


class Meeting(BaseModel):
    title: Annotated[str, Field(min_length=1, max_length=80)]
    window: Window
    priority: Priority = Priority.NORMAL
    attendees: list[str] = Field(default_factory=list)


@server.tool()
def lookup(key: str) -> str:
    """Look a mathematical constant up by name (an unknown name is a tool error)."""
    if key not in CONSTANTS:
        raise ToolError(f"no constant named {key!r}; known: {', '.join(sorted(CONSTANTS))}")
    return CONSTANTS[key]


@server.tool()
def add(a: int, b: Annotated[int, Field(ge=-1000, le=1000)] = 1) -> int:
    """Add two integers; b defaults to 1 and lies in [-1000, 1000]."""
    return a + b


@server.tool()
def search(
    query: Annotated[str, Field(min_length=1)],
    limit: Annotated[int, Field(ge=1, le=10)] = 3,
    priority: Priority | None = None,
) -> str:
    """Search the calendar; an optional priority filters the hits."""
    shown = priority.value if priority is not None else "any"
    return f"{limit} hits for {query!r} (priority {shown})"


@server.tool()
def schedule(meeting: Meeting) -> str:
    """Schedule a meeting (a nested model: a window of hours, a priority enum)."""
    who = ", ".join(meeting.attendees) or "nobody"
    return (
        f"scheduled {meeting.title!r} {meeting.window.start_hour}-{meeting.window.end_hour}h "
        f"({meeting.priority.value}) with {who}"
    )


@server.tool()
def fail(message: str) -> str:
    """Always fails with ``message``: the tool ran and reports an error (isError)."""
    raise ToolError(message)


@server.tool()
async def nap(seconds: Annotated[float, Field(ge=0, le=60)]) -> str:
    """Sleep, then answer (for read timeouts)."""
    await asyncio.sleep(seconds)
    return f"slept {seconds} s"


@server.tool()
def crash() -> str:
    """Kill this server process in the middle of the call (SIGKILL: no answer, no cleanup)."""
    os.kill(os.getpid(), signal.SIGKILL)
    return "unreachable"


@server.tool()
def remember(note: str) -> str:
    """Append ``note`` to the file named by POLYLOOP_MCP_NOTES: a side effect a test can count."""
    path = Path(os.environ["POLYLOOP_MCP_NOTES"])
    with path.open("a", encoding="utf-8") as notes:
        notes.write(note + "\n")
    return f"remembered {note!r}"


@server.tool()
def pixel() -> Image:
    """A 1x1 PNG image (non-text content)."""
    return Image(data=PIXEL_PNG, format="png")


@server.tool()
def attachments() -> list[ContentBlock | Audio]:
    """One block of every kind a tool result may hold."""
    return [
        TextContent(type="text", text="see the attachments"),
        EmbeddedResource(
            type="resource",
            resource=TextResourceContents(
                uri="file:///notes.txt", mime_type="text/plain", text="hello"
            ),
        ),
        EmbeddedResource(
            type="resource",
            resource=BlobResourceContents(
                uri="file:///blob.bin", mime_type="application/octet-stream", blob="AAEC"
            ),
        ),
        ResourceLink(type="resource_link", name="report", uri="https://example.invalid/report"),
        Audio(data=b"RIFF", format="wav"),
    ]


@server.tool()
def refuse(code: int) -> str:
    """Answer with a JSON-RPC error ``code`` instead of a tool result (a refusing server)."""
    raise MCPError(code=code, message=f"refused with code {code}")


@server.tool()
def echo(text: str) -> str:
    """Answer ``text`` unchanged (the kit counts what the executor cuts of it)."""
    return text


@server.tool()
def pid() -> int:
    """This server's process id (so a test can kill it from outside)."""
    return os.getpid()


@server.tool()
async def count(to: Annotated[int, Field(ge=0, le=50)], ctx: Context) -> str:
    """Count to ``to``, reporting progress at each number."""
    for done in range(1, to + 1):
        await ctx.report_progress(done, to, f"counted {done}")
    return f"counted to {to}"


#: How long ``keep_reporting`` runs when nobody cancels it: past the kit's cancel (0.3 s) and
#: its watch (1 s), short enough that a call whose cancel never reached the server ends.
KEEP_REPORTING_S = 5.0


@server.tool()
async def keep_reporting(marker: str, ctx: Context) -> str:
    """Report ``marker`` as progress every 10 ms until the call is cancelled (at most
    ``KEEP_REPORTING_S``), then answer it: a long action to cancel mid-way."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + KEEP_REPORTING_S
    reported = 0
    while loop.time() < deadline:
        reported += 1
        await ctx.report_progress(reported, None, marker)
        await asyncio.sleep(0.01)
    return f"{marker} (reported {reported} times)"


@server.tool()
async def grow(name: Annotated[str, Field(pattern=r"^[a-z_]{1,20}$")], ctx: Context) -> str:
    """Add a tool called ``name`` (it echoes its ``text``), then say the tool list changed."""

    def echo(text: str) -> str:
        return text

    server.add_tool(echo, name=name, description=f"Echo, added by grow({name!r}).")
    await ctx.notify_tools_changed()  # 2026-era sessions: their subscriptions/listen streams
    await ctx.session.send_tool_list_changed()  # earlier sessions (dropped on 2026-era ones)
    return f"added {name}"


class Forecast(TypedDict):
    city: str
    days: int


@server.tool()
def forecast(city: str) -> Forecast:
    """Structured output: an object the server sends as structuredContent (and as text)."""
    return Forecast(city=city, days=3)


@server.tool()
def both() -> CallToolResult:
    """A result whose structuredContent and text blocks say different things."""
    return CallToolResult(
        content=[TextContent(type="text", text="the text block")],
        structured_content={"b": [1, 2], "a": "é"},
    )


REVOKED = False


@server.tool()
def revoke() -> str:
    """From now on the HTTP server refuses the token it accepted (as if it expired)."""
    global REVOKED
    REVOKED = True
    return "revoked"


def add_broken_tools() -> None:
    """Tools whose published schemas cannot be used, among the good ones."""

    def broken_type(x: int) -> int:
        return x

    def remote_ref(x: int) -> int:
        return x

    server.add_tool(broken_type, description="Its schema says type 5.")
    server.add_tool(remote_ref, description="Its schema points outside itself.")
    tools = server._tool_manager._tools
    tools["broken_type"].parameters = {"type": "object", "properties": {"x": {"type": "intger"}}}
    tools["remote_ref"].parameters = {
        "type": "object",
        "properties": {"x": {"$ref": "https://example.invalid/x.json"}},
    }


class RequireToken:
    """ASGI middleware: 401 without ``Authorization: Bearer <token>``, 403 with another one
    (or with any once ``revoke`` ran)."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = dict(scope["headers"]).get(b"authorization", b"").decode()
            if REVOKED or given != f"Bearer {self.token}":
                await send(
                    {
                        "type": "http.response.start",
                        "status": 403 if given else 401,
                        "headers": [
                            (b"www-authenticate", b'Bearer realm="polyloop-test"'),
                            (b"content-type", b"text/plain"),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": b"no entry"})
                return
        await self.app(scope, receive, send)


def main() -> None:
    options = argparse.ArgumentParser(description=__doc__)
    options.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP")
    options.add_argument("--broken", action="store_true", help="add tools with unusable schemas")
    options.add_argument("--token", help="HTTP: require this bearer token")
    given = options.parse_args()
    if given.broken:
        add_broken_tools()
    if given.http is None:
        server.run("stdio")
    elif given.token is None:
        server.run("streamable-http", host="127.0.0.1", port=given.http)
    else:
        import uvicorn

        app = RequireToken(server.streamable_http_app(), given.token)
        uvicorn.run(app, host="127.0.0.1", port=given.http, log_level="warning")


if __name__ == "__main__":
    main()
