"""ToolExecutor: dispatches an action to a function in a :class:`~polyloop.tools.ToolRegistry`."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from polyloop._base._exception_text import exception_message, exception_text
from polyloop._base._schema import validate, violations
from polyloop._base._shown import shown
from polyloop.executors._observation_cap import checked_max_observation_chars
from polyloop.tools import Tool, ToolEnvironmentError, ToolRegistry
from polyloop.types import Action, ActionOutcome, ActionStatus, canonical_json

__all__ = ["Refusal", "ToolExecutor", "truncate_observation", "truncation_marker"]

_NAME_SHOWN = 80  # a tool name quoted in an observation is cut here: the name is model input


def _shown(name: str) -> str:
    return shown(name, _NAME_SHOWN)


def truncate_observation(observation: str, limit: int | None) -> tuple[str, int]:
    """``observation`` cut to ``limit`` characters plus a marker, and how many were cut.

    The marker line is added *after* the ``limit`` kept characters, so the model learns the
    text was cut; the count is the number of original characters removed.
    """
    if limit is None or len(observation) <= limit:
        return observation, 0
    cut = len(observation) - limit
    return observation[:limit] + truncation_marker(cut), cut


def truncation_marker(cut: int) -> str:
    """The line appended to an observation from which ``cut`` characters were removed."""
    return f"\n[... {cut} more characters truncated]"


_LISTED = 20  # at most this many tool names in a refusal's text
_LISTED_IN_DETAIL = 200  # and in its structured detail
_DETAIL_CHARS = 200  # a name or a message in a refusal's detail is cut here
_VIOLATIONS_IN_DETAIL = 20


def _available(registry: ToolRegistry) -> str:
    names = [tool.name for tool in registry]
    if not names:
        return "none"
    more = f", and {len(names) - _LISTED} more" if len(names) > _LISTED else ""
    return ", ".join(_shown(n) for n in names[:_LISTED]) + more


def _cut(text: str) -> str:
    return text if len(text) <= _DETAIL_CHARS else text[:_DETAIL_CHARS] + "…"


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a tool call must not be made: ``text`` for the executor's observation, ``detail``
    the same reason as data for ``ActionOutcome.detail`` (under its ``"refusal"`` key).

    ``detail["kind"]`` is ``"no_tool"``, ``"unknown_tool"`` (with ``"tool"`` and
    ``"available"``: the names the registry holds, at most 200), ``"invalid_arguments"`` (with
    ``"tool"`` and ``"violations"``: ``{"path", "rule", "message"}`` each, at most 20) or
    ``"unusable_schema"`` (with ``"tool"`` and ``"message"``). Executors may add their own
    kinds (``MCPExecutor``: ``"server_refused"``).
    """

    text: str
    detail: dict[str, Any]

    def outcome(self, limit: int | None = None) -> ActionOutcome:
        """The ``not_executed`` outcome of this refusal, its text cut to ``limit``."""
        shown, cut = truncate_observation(self.text, limit)
        return ActionOutcome(
            status=ActionStatus.NOT_EXECUTED,
            observation=shown,
            observation_truncated_chars=cut,
            detail={"refusal": self.detail},
        )


def unknown_tool(registry: ToolRegistry, name: str | None) -> Refusal | None:
    """Why an action naming ``name`` cannot be called in ``registry``, or ``None``.

    Shared by every executor that calls tools from a registry (``ToolExecutor``, ``MCPExecutor``).
    """
    available = [tool.name for tool in registry][:_LISTED_IN_DETAIL]
    if name is None or name == "":
        listed = _available(registry)
        said = f"The action names no tool; say which tool to call (available: {listed})."
        return Refusal(said, {"kind": "no_tool", "tool": name, "available": available})
    if registry.lookup(name) is None:
        return Refusal(
            f"Unknown tool {_shown(name)}; available tools: {_available(registry)}.",
            {"kind": "unknown_tool", "tool": _cut(name), "available": available},
        )
    return None


def invalid_arguments(tool: Tool, args: Mapping[str, Any]) -> Refusal | None:
    """Why ``args`` break ``tool``'s published schema, or ``None``.

    The one argument check of every tool executor: :func:`polyloop._base._schema.validate`.
    """
    try:
        problem = validate(tool.parameters, args)
        found = violations(tool.parameters, args) if problem is not None else []
    except ValueError as exc:  # the schema was changed in place after Tool() checked it
        return Refusal(
            f"Tool {_shown(tool.name)} has an unusable schema: {exc}.",
            {"kind": "unusable_schema", "tool": _cut(tool.name), "message": _cut(str(exc))},
        )
    if problem is None:
        return None
    listed = [
        {"path": _cut(where), "rule": rule, "message": _cut(what)}
        for where, rule, what in found[:_VIOLATIONS_IN_DETAIL]
    ]
    return Refusal(
        f"Invalid arguments for tool {_shown(tool.name)}: {problem}.",
        {"kind": "invalid_arguments", "tool": _cut(tool.name), "violations": listed},
    )


class ToolExecutor:
    """Executes ``Action.tool_name`` from ``registry`` with ``Action.tool_args`` as keywords.

    Status mapping:

    * ``not_executed`` — the action names no tool (``tool_name`` is ``None`` or ``""``), the
      tool is not in the registry (names are looked up verbatim: ``"../x"`` is just an unknown
      name), the tool has no function, or the arguments fail the tool's JSON Schema 2020-12
      (:func:`polyloop._base._schema.validate`: ``jsonschema`` with the ``schema`` extra, else a
      subset that agrees with it; ``format`` is not asserted) or do not bind to the function's
      signature. The observation names the problem; the function is not called.
    * ``executed`` — the function was called. Its return value is the observation (a ``str``
      as is, anything else as canonical JSON; a value JSON cannot encode gives a ``TypeError``
      observation). A function that raises an ``Exception`` gives ``"ExcType: message"``.
    * ``env_error`` — the function raised :class:`~polyloop.tools.ToolEnvironmentError` (the
      environment behind the tool is gone); its message is the observation.

    ``tool_args=None`` is the same as ``{}`` (no arguments). A synchronous function runs in a
    worker thread (``asyncio.to_thread``) so it cannot block the loop; an ``async`` function is
    awaited. ``BaseException``\\ s that are not ``Exception``\\ s — ``KeyboardInterrupt``,
    ``SystemExit``, ``CancelledError``, a custom ``BaseException`` — propagate: they mean "stop
    the process or task", not "the action failed". A cancelled ``execute`` re-raises
    ``CancelledError`` at once; a synchronous function already running in its thread cannot be
    interrupted and finishes there (its result is discarded).

    ``max_observation_chars`` (``None``: unlimited) cuts long observations, recording the
    number of removed characters in ``observation_truncated_chars``.
    """

    def __init__(self, registry: ToolRegistry, *, max_observation_chars: int | None = None):
        if not isinstance(registry, ToolRegistry):
            raise TypeError(f"ToolExecutor expects a ToolRegistry, got {type(registry).__name__}")
        self.registry = registry
        self.max_observation_chars = checked_max_observation_chars(max_observation_chars)

    async def execute(self, action: Action) -> ActionOutcome:
        unknown = unknown_tool(self.registry, action.tool_name)
        if unknown is not None:
            return unknown.outcome()
        tool = self.registry.lookup(action.tool_name or "")
        assert tool is not None  # unknown_tool checked it
        args: Mapping[str, Any] = action.tool_args if action.tool_args is not None else {}
        refusal = self._refusal(tool, args)
        if refusal is not None:
            return refusal.outcome()
        assert tool.func is not None  # _refusal checked it
        status = ActionStatus.EXECUTED
        try:
            result = await self._call(tool, args)
        except ToolEnvironmentError as exc:  # the tool says its environment is gone
            # the observation cap below cuts (and counts) a long message: none is cut here
            status = ActionStatus.ENV_ERROR
            observation = exception_message(exc, limit=None) or exception_text(exc, limit=None)
        except Exception as exc:  # the tool ran and failed: a normal, correctable observation
            observation = exception_text(exc, limit=None)
        else:
            observation = self._render(tool, result)
        text, cut = truncate_observation(observation, self.max_observation_chars)
        return ActionOutcome(status=status, observation=text, observation_truncated_chars=cut)

    def _refusal(self, tool: Tool, args: Mapping[str, Any]) -> Refusal | None:
        """Why the call must not be made, or ``None``."""
        if tool.func is None:
            return Refusal(
                f"Tool {_shown(tool.name)} has no function to call.",
                {"kind": "no_function", "tool": _cut(tool.name)},
            )
        invalid = invalid_arguments(tool, args)
        if invalid is not None:
            return invalid
        try:
            signature = inspect.signature(tool.func)
        except (TypeError, ValueError):  # some builtins have no signature: let the call decide
            return None
        try:
            signature.bind(**args)
        except TypeError as exc:
            return Refusal(
                f"Arguments do not match tool {_shown(tool.name)}: {exc}.",
                {"kind": "signature_mismatch", "tool": _cut(tool.name), "message": _cut(str(exc))},
            )
        return None

    async def _call(self, tool: Tool, args: Mapping[str, Any]) -> Any:
        func = tool.func
        assert func is not None
        if inspect.iscoroutinefunction(func):
            return await func(**args)
        result = await asyncio.to_thread(func, **args)
        if inspect.isawaitable(result):  # a sync wrapper that returned a coroutine
            return await result
        return result

    def _render(self, tool: Tool, result: Any) -> str:
        if isinstance(result, str):
            return result
        try:
            return canonical_json(result)
        except (TypeError, ValueError, RecursionError) as exc:
            return (
                f"TypeError: tool {_shown(tool.name)} returned a {type(result).__name__} that "
                f"is not JSON-serialisable ({exc})"
            )

    def __repr__(self) -> str:
        return f"ToolExecutor({self.registry!r})"
