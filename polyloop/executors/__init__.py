"""Bundled action executors: a tool registry dispatcher, a persistent Python session, the tools
of an MCP server (``MCPExecutor``, extra ``polyloop[mcp]``) and a Jupyter kernel
(``JupyterExecutor``, extra ``polyloop[jupyter]``); the extras are imported only when used."""

from __future__ import annotations

from polyloop.executors._jupyter import JupyterExecutor
from polyloop.executors._mcp import MCPExecutor
from polyloop.executors._python import PythonExecutor
from polyloop.executors._tool import ToolExecutor

__all__ = ["JupyterExecutor", "MCPExecutor", "PythonExecutor", "ToolExecutor"]
