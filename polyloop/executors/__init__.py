"""Bundled action executors: a tool registry dispatcher, a persistent Python session and a
Jupyter kernel (``JupyterExecutor`` needs the ``jupyter`` extra, imported only when constructed).
"""

from __future__ import annotations

from polyloop.executors._jupyter import JupyterExecutor
from polyloop.executors._python import PythonExecutor
from polyloop.executors._tool import ToolExecutor

__all__ = ["JupyterExecutor", "PythonExecutor", "ToolExecutor"]
