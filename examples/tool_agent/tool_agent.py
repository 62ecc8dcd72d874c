"""The tool agent: a safe arithmetic calculator, a ``submit`` completion marker, the agent
definition and the scripted replies. ``run.py`` runs it; ``test_conformance.py`` tags its seams.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable

from polyloop import AgentDefinition, Budget, SyntheticObservations, Tool, ToolRegistry

_BINARY: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[float], float]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, int | float)
        and not isinstance(node.value, bool)
    ):
        return float(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        right = _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > 100:
            raise ValueError("exponents above 100 are refused")
        return _BINARY[type(node.op)](_evaluate(node.left), right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand))
    raise ValueError(f"unsupported expression element: {type(node).__name__}")


def calculator(expression: str) -> str:
    """Evaluate arithmetic (numbers, + - * / // % ** and parentheses); never ``eval``."""
    if len(expression) > 200:
        raise ValueError("expressions are limited to 200 characters")
    value = _evaluate(ast.parse(expression, mode="eval"))
    return str(int(value) if value.is_integer() else value)


def submit(answer: str) -> str:
    """Hand in the answer. Executing this tool completes the task (a completion marker)."""
    return f"submitted: {answer}"


def build_registry(calculate: Callable[[str], str] = calculator) -> ToolRegistry:
    """The agent's tools; ``calculate`` serves the ``calculator`` tool (a stand-in can be given,
    e.g. one behind a connection that ``test_conformance.py`` closes to break the environment).
    """
    return ToolRegistry(
        [
            Tool(
                name="calculator",
                description="Evaluate an arithmetic expression, e.g. '6 * 7'.",
                parameters={
                    "type": "object",
                    "properties": {"expression": {"type": "string"}},
                    "required": ["expression"],
                    "additionalProperties": False,
                },
                func=calculate,
                replayable=True,  # pure: safe to re-execute after a crash
            ),
            Tool(
                name="submit",
                description="Hand in the final answer; this completes the task.",
                parameters={
                    "type": "object",
                    "properties": {"answer": {"type": "string"}},
                    "required": ["answer"],
                    "additionalProperties": False,
                },
                func=submit,
                completion_marker=True,
                replayable=False,
            ),
        ]
    )


SCRIPT = [
    'I will compute it.\n```json\n{"tool": "calculator", "arguments": {"expression": "6 * 7"}}'
    "\n```",
    '{"tool": "calculator", "expression": "6 / 0"}',
    "The answer is probably 42.",
    '{"tool": "calculator", "arguments": {"expr": "6 * 7"}}',
    '{"tool": "submit", "arguments": {"answer": "42"}}',
]


def build_agent() -> AgentDefinition:
    registry = build_registry()
    return AgentDefinition(
        system_prompt=(
            "You solve arithmetic tasks with tools. Reply with one JSON object "
            '{"tool": ..., "arguments": {...}}.\nTools:\n' + registry.describe()
        ),
        budget=Budget(
            max_steps=10,
            max_executed_actions=5,
            max_consecutive_parse_failures=3,
            max_prompt_chars=20_000,
        ),
        synthetic_observations=SyntheticObservations(
            not_executed="That call was not executed: check the tool name and its arguments.",
            env_error="The environment failed; the run stops.",
        ),
        tools=registry,
    )
