"""The test MCP server behind a gate: ``python mcp_gated_server.py GATE [server options]``.

While the file ``GATE`` exists the server is down: the process exits at once with status 3,
before importing the SDK (so a client that keeps trying is told quickly). Otherwise it runs
``mcp_server.py`` with the options that follow. A test closes the gate and kills the running
server to take it down for as long as it likes; it opens the gate to bring it back.
"""

from __future__ import annotations

import os
import runpy
import sys
from pathlib import Path

if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: mcp_gated_server.py GATE [server options]")
    gate = sys.argv.pop(1)
    if os.path.exists(gate):
        sys.exit(3)
    server = Path(__file__).resolve().with_name("mcp_server.py")
    sys.argv[0] = str(server)
    runpy.run_path(str(server), run_name="__main__")
