"""Tools: named callables an executor can dispatch to, and the registry that describes them.

A :class:`ToolRegistry` is what :class:`~polyloop.types.AgentDefinition` snapshots into its
``parameters()`` (name, description, JSON schema, completion marker), so changing a tool's
description between a crash and a resume is caught as ``ParametersChanged``. The tool's function
and its ``replayable`` flag are deliberately *not* part of that snapshot: they may change
between a crash and a resume without changing what the model sees.

A tool's ``parameters`` schema is checked when the :class:`Tool` is built (see
:func:`polyloop._base._schema.check_schema`): full JSON Schema 2020-12 with the ``schema`` extra, a
documented subset without it — a schema the installed validator cannot enforce is refused
there, never skimmed when arguments arrive.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from polyloop._base._canonical_json import canonical_json
from polyloop._base._schema import check_schema

__all__ = ["Tool", "ToolEnvironmentError", "ToolRegistry"]


class ToolEnvironmentError(Exception):
    """Raised by a tool function: the environment behind the tool is gone, not the action wrong.

    :class:`~polyloop.executors.ToolExecutor` turns it into ``ActionStatus.ENV_ERROR`` with the
    message as the executor's observation, and the run stops ``env_error``. Raise it when the
    tool cannot be served at all (the database connection is lost, the remote service is down);
    any other exception means the action ran and failed, an ``executed`` observation the model
    can correct::

        def query(sql: str) -> str:
            try:
                return database.execute(sql)
            except ConnectionError as exc:
                raise ToolEnvironmentError(f"the database is unreachable: {exc}") from exc
    """


@dataclass(frozen=True, slots=True, kw_only=True)
class Tool:
    """One tool.

    ``parameters`` is a JSON Schema (Draft 2020-12) object describing the arguments; one the
    installed validator cannot enforce is a ``ValueError`` naming the tool (without the
    ``schema`` extra: any keyword outside the built-in subset, with the install hint). A function
    reports a broken environment by raising :class:`ToolEnvironmentError`.
    ``completion_marker=True`` means that *executing* this tool completes the task (stop reason
    ``task_completed``).
    ``replayable`` decides what a resume does with an action intent of this tool that has no
    result: ``True`` re-executes it, ``False`` never does (the run ends
    ``resume_state_unknown``), ``None`` follows ``AgentDefinition.replay_interrupted_actions``.
    """

    name: str
    description: str
    parameters: Mapping[str, Any] = field(default_factory=dict)
    func: Callable[..., Any] | None = None
    completion_marker: bool = False
    replayable: bool | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("Tool.name must be a non-empty str")
        if not isinstance(self.description, str):
            raise ValueError("Tool.description must be a str")
        if not isinstance(self.parameters, Mapping):
            raise ValueError("Tool.parameters must be a JSON-schema mapping")
        try:
            canonical_json(dict(self.parameters))
        except (TypeError, ValueError, RecursionError) as exc:
            raise ValueError(f"Tool.parameters must be JSON-serialisable: {exc}") from None
        try:
            check_schema(self.parameters)
        except ValueError as exc:
            raise ValueError(
                f"Tool {self.name[:80]!r}: {exc}"
            ) from None  # a huge name is cut: one readable line
        if self.replayable not in (True, False, None):
            raise ValueError("Tool.replayable must be True, False or None")

    def spec(self) -> dict[str, Any]:
        """What the model may be told about this tool (and what ``parameters()`` snapshots)."""
        return {
            "name": self.name,
            "description": self.description,
            "parameters": json.loads(canonical_json(dict(self.parameters))),
            "completion_marker": self.completion_marker,
        }


class ToolRegistry:
    """A set of tools with unique names."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> Tool:
        """Add ``tool``; a second tool with the same name is a ``ValueError``."""
        if not isinstance(tool, Tool):
            raise TypeError(f"ToolRegistry.register expects a Tool, got {type(tool).__name__}")
        if tool.name in self._tools:
            raise ValueError(f"a tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool
        return tool

    def lookup(self, name: str | None) -> Tool | None:
        """The tool called ``name``, or ``None``."""
        if name is None:
            return None
        return self._tools.get(name)

    def specs(self) -> list[dict[str, Any]]:
        """Every tool's :meth:`Tool.spec`, sorted by name."""
        return [self._tools[name].spec() for name in sorted(self._tools)]

    def describe(self) -> str:
        """A canonical, deterministic text describing the tools, for a system prompt.

        Tools are never injected into the prompt by the library; put this text there yourself.
        """
        lines = []
        for spec in self.specs():
            lines.append(f"- {spec['name']}: {spec['description']}")
            lines.append(f"  parameters: {canonical_json(spec['parameters'])}")
            if spec["completion_marker"]:
                lines.append("  calling this tool completes the task")
        return "\n".join(lines)

    def is_completion_marker(self, name: str | None) -> bool:
        """Whether executing the tool ``name`` completes the task."""
        tool = self.lookup(name)
        return tool is not None and tool.completion_marker

    def replay_allowed(self, name: str | None, agent_default: bool) -> bool:
        """Whether an interrupted action of tool ``name`` may be re-executed on resume.

        ``replayable=False`` is never replayed whatever the agent says; ``True`` always is;
        ``None`` (or a tool not in the registry) follows ``agent_default``.
        """
        tool = self.lookup(name)
        if tool is None or tool.replayable is None:
            return agent_default
        return tool.replayable

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools[name] for name in sorted(self._tools))

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __repr__(self) -> str:
        return f"ToolRegistry({sorted(self._tools)!r})"
