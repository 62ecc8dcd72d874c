"""The run behind ``polyloop demo``: a scripted model, a line parser and an arithmetic executor.

It needs no network and no API key, and it walks the main paths a step can take — an
unparseable reply, an executed action, an action whose own error is a normal observation, an
action that was never executed, and a final answer — so ``polyloop show`` has something real
to display.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable

from polyloop._base._exception_text import exception_text
from polyloop._loop._run import run
from polyloop.models import ScriptedModel
from polyloop.ports import RunStore
from polyloop.types import (
    Action,
    ActionOutcome,
    ActionStatus,
    AgentDefinition,
    Budget,
    FinalAnswer,
    InvalidDecision,
    ModelReply,
    ParsedReply,
    RunResult,
    SyntheticObservations,
)

DEMO_GOAL = "What is (6 * 7) / 2?"

DEMO_SCRIPT = (
    "Let me think about this first.",  # neither form: the parser feeds back how to reply
    "CALC: 6 * 7",
    "CALC: 42 / 0",  # runs, and its error is an ordinary observation
    "SHELL: rm -rf /",  # unknown tool: never executed
    "CALC: 42 / 2",
    "ANSWER: 21",
)

DEMO_AGENT = AgentDefinition(
    system_prompt=(
        "You solve arithmetic. Reply with exactly one line: 'CALC: <expression>' to evaluate "
        "an expression (numbers, + - * / ** and parentheses), or 'ANSWER: <text>' when done."
    ),
    budget=Budget(
        max_steps=10,
        max_executed_actions=6,
        max_consecutive_parse_failures=3,
        max_prompt_chars=8000,
    ),
    synthetic_observations=SyntheticObservations(
        not_executed="That action was not executed. Use CALC or ANSWER.",
        env_error="The calculator is unavailable.",
    ),
)

_FEEDBACK = "Reply with exactly one line: 'CALC: <expression>' or 'ANSWER: <text>'."


class LineParser:
    """``CALC: expr`` → an action of the ``calc`` tool; ``ANSWER: text`` → a final answer;
    ``NAME: rest`` → an action of tool ``name`` (the executor decides whether it exists);
    anything else → feedback. Total and deterministic."""

    def parse(self, reply: ModelReply) -> ParsedReply:
        head, sep, rest = reply.text.strip().partition(":")
        if not sep or not head.isidentifier():
            return InvalidDecision(feedback=_FEEDBACK)
        name, argument = head.lower(), rest.strip()
        if name == "answer":
            return FinalAnswer(text=argument)
        return Action(text=reply.text.strip(), tool_name=name, tool_args={"input": argument})


_OPERATORS: dict[type[ast.AST], Callable[..., float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}


def evaluate(expression: str) -> float:
    """Evaluate arithmetic on numbers only (no names, no calls): safe on any input."""

    def walk(node: ast.AST) -> float:
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            if isinstance(node.value, bool):
                raise ValueError("not arithmetic: a boolean")
            return float(node.value)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            if isinstance(node.op, ast.Pow) and abs(walk(node.right)) > 100:
                raise ValueError("exponent too large")
            return _OPERATORS[type(node.op)](walk(node.left), walk(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
            return _OPERATORS[type(node.op)](walk(node.operand))
        raise ValueError(f"not arithmetic: {ast.dump(node)[:60]}")

    return walk(ast.parse(expression, mode="eval").body)


class CalculatorExecutor:
    """Runs the ``calc`` tool. Any other tool is ``not_executed``; an expression that fails is
    still ``executed`` (the model sees the error and can correct it)."""

    async def execute(self, action: Action) -> ActionOutcome:
        if action.tool_name != "calc":
            return ActionOutcome(
                status=ActionStatus.NOT_EXECUTED, observation=f"unknown tool {action.tool_name!r}"
            )
        expression = str((action.tool_args or {}).get("input", ""))
        try:
            value = evaluate(expression)
        except (ArithmeticError, ValueError, SyntaxError, RecursionError) as exc:
            return ActionOutcome(
                status=ActionStatus.EXECUTED, observation=f"error: {exception_text(exc)}"
            )
        shown = str(int(value)) if value.is_integer() else repr(value)
        return ActionOutcome(status=ActionStatus.EXECUTED, observation=shown)


async def run_demo(store: RunStore, run_id: str | None = None) -> RunResult:
    """Run the scripted demo against ``store``."""
    return await run(
        DEMO_AGENT,
        DEMO_GOAL,
        model=ScriptedModel(DEMO_SCRIPT),
        parser=LineParser(),
        executor=CalculatorExecutor(),
        store=store,
        run_id=run_id,
    )
