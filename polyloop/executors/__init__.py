"""Bundled action executors: a tool registry dispatcher, a persistent Python session, and the
tools of an MCP server (``MCPExecutor``, extra ``polyloop[mcp]``, imported lazily)."""

from __future__ import annotations

from polyloop.executors._mcp import MCPExecutor
from polyloop.executors._python import PythonExecutor
from polyloop.executors._tool import ToolExecutor

__all__ = ["MCPExecutor", "PythonExecutor", "ToolExecutor"]
