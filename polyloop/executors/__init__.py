"""Bundled action executors: a tool registry dispatcher and a persistent Python session."""

from __future__ import annotations

from polyloop.executors._python import PythonExecutor
from polyloop.executors._tool import ToolExecutor

__all__ = ["PythonExecutor", "ToolExecutor"]
