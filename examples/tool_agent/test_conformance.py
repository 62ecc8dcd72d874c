"""The tool agent's seam implementations, tagged for the conformance plugin.

``pytest --polyloop-conformance examples/tool_agent`` runs polyloop's contract suites against
each tagged fixture below and prints the conformance report. Without the flag this module holds
no tests (the tags do nothing).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from tool_agent import SCRIPT, build_registry, calculator

import pytest_polyloop
from polyloop import Action, Message, ModelReply, Tool, ToolEnvironmentError, ToolRegistry
from polyloop.executors import ToolExecutor
from polyloop.models import ScriptedModel
from polyloop.parsers import JsonToolCallParser
from polyloop.stores import SQLiteStore
from polyloop.testing import ActionSamples, ModelSamples, ParserSamples, StoreSamples


class CalculatorConnection:
    """The calculator behind a connection, as a remote service would be: once the connection
    is closed the tool reports its environment gone (``ToolEnvironmentError``), which the
    executor must return as ``env_error``.
    """

    def __init__(self) -> None:
        self.open = True

    def calculate(self, expression: str) -> str:
        if not self.open:
            raise ToolEnvironmentError("the calculator service is unreachable")
        return calculator(expression)

    def close(self) -> None:
        self.open = False


@pytest.fixture
def calculator_connection() -> CalculatorConnection:
    return CalculatorConnection()


#: The executor's observation cap, as the agent runs it (``truncates_at`` below).
OBSERVATION_CAP = 4_096


def echo(text: str) -> str:
    return text


#: A tool only the tests add: its whole output is its input, so the kit can count what the
#: executor cuts (truncated_chars_counts_what_was_cut).
ECHO = Tool(
    name="echo",
    description="Answer the text unchanged.",
    parameters={
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
        "additionalProperties": False,
    },
    func=echo,
    replayable=True,
)


@pytest_polyloop.seam("action_executor", samples="tool_samples")
@pytest.fixture
def tool_executor(calculator_connection: CalculatorConnection) -> ToolExecutor:
    tools = ToolRegistry([*build_registry(calculator_connection.calculate), ECHO])
    return ToolExecutor(tools, max_observation_chars=OBSERVATION_CAP)


@pytest.fixture
def tool_samples(calculator_connection: CalculatorConnection) -> ActionSamples:
    async def close_the_connection(executor: ToolExecutor) -> None:
        calculator_connection.close()

    async def reopen_the_connection(executor: ToolExecutor) -> None:
        calculator_connection.open = True

    def calculate(expression: object) -> Action:
        return Action(
            text=f"calculator {expression}",
            tool_name="calculator",
            tool_args={"expression": expression},
        )

    return ActionSamples(
        executes_cleanly=calculate("6 * 7"),
        executes_but_errors=calculate("1 / 0"),  # ZeroDivisionError
        # More errors of the calculator's own code, each of another type: all executed.
        more_executes_but_errors=(
            calculate("6 *"),  # SyntaxError
            calculate("2 ** 1000"),  # ValueError
            calculate("(10 ** 99) ** 99"),  # OverflowError
        ),
        refused=Action(text="shell rm -rf /", tool_name="shell", tool_args={"cmd": "rm -rf /"}),
        # More calls the executor must refuse without running: bad arguments.
        more_refused=(
            Action(text="calculator", tool_name="calculator", tool_args={}),
            calculate(42),
            Action(
                text="calculator 6 * 7 exact",
                tool_name="calculator",
                tool_args={"expression": "6 * 7", "exact": True},
            ),
        ),
        break_environment=close_the_connection,
        # The connection stays closed until this hook opens it again: then the executor must
        # serve again (environment_recovers_when_restored).
        restore_environment=reopen_the_connection,
        # An action whose whole output is the text, and the cap: the kit checks the count of
        # characters cut just under, at and past it.
        echo=lambda text: Action(text=f"echo {text}", tool_name="echo", tool_args={"text": text}),
        truncates_at=OBSERVATION_CAP,
    )


@pytest_polyloop.seam("decision_parser", samples="json_replies")
@pytest.fixture
def json_parser() -> JsonToolCallParser:
    return JsonToolCallParser()


@pytest.fixture
def json_replies() -> ParserSamples:
    return ParserSamples(
        action_reply=ModelReply(text=SCRIPT[0]),
        invalid_reply=ModelReply(text="The answer is probably 42."),
        final_reply=ModelReply(text='{"final_answer": "42"}'),
        # Built again in child processes for is_deterministic_across_processes.
        factory="polyloop.parsers:JsonToolCallParser",
    )


@pytest_polyloop.seam("model_client", samples="scripted_conversation")
@pytest.fixture
def scripted_model() -> ScriptedModel:
    return ScriptedModel(SCRIPT)


@pytest.fixture
def scripted_conversation() -> ModelSamples:
    return ModelSamples(
        messages=[
            Message(role="system", content="You solve arithmetic tasks with tools."),
            Message(role="user", content="What is 6 times 7?"),
        ],
        # The scripted model's only failure is running out of replies: it must raise.
        failing_client_factory=lambda base_url: ScriptedModel([]),
        failure_bound_s=1.0,
    )


@pytest_polyloop.seam("run_store", samples="sqlite_store_samples")
@pytest_asyncio.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    async with open_sqlite_store(tmp_path) as store:
        yield store


def open_sqlite_store(directory: Path) -> SQLiteStore:
    """The store over ``runs.db`` in ``directory``: the crash promises reopen it through this."""
    return SQLiteStore(directory / "runs.db")


@pytest.fixture
def sqlite_store_samples() -> StoreSamples:
    return StoreSamples(factory="test_conformance:open_sqlite_store")
