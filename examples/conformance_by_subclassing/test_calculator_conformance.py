"""The calculator's seams keep polyloop's promises: one subclass per suite."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

import pytest
from calculator import CalculatorExecutor, CalculatorService, CallParser, JsonLinesStore

from polyloop import Action, FinalAnswer, InvalidDecision, ModelReply
from polyloop.testing import (
    ActionExecutorContract,
    ActionSamples,
    DecisionParserContract,
    ParserSamples,
    RunStoreContract,
    StoreSamples,
)


class TestCalculatorExecutor(ActionExecutorContract):
    @pytest.fixture
    def service(self) -> CalculatorService:
        return CalculatorService()

    @pytest.fixture
    def action_executor(self, service: CalculatorService) -> CalculatorExecutor:
        return CalculatorExecutor(service, max_observation_chars=1_000)

    @pytest.fixture
    def action_samples(self, service: CalculatorService) -> ActionSamples:
        async def take_the_service_down(executor: CalculatorExecutor) -> None:
            service.reachable = False

        async def bring_the_service_back(executor: CalculatorExecutor) -> None:
            service.reachable = True

        return ActionSamples(
            executes_cleanly=Action(text="add 1 2", tool_name="add", tool_args={"a": 1, "b": 2}),
            executes_but_errors=Action(
                text="divide 1 0", tool_name="divide", tool_args={"a": 1, "b": 0}
            ),
            # Optional, each turning promises from unverifiable into checked:
            # an action it must refuse (not_executed), and more of them (bad arguments here);
            refused=Action(text="sqrt 4", tool_name="sqrt", tool_args={"x": 4}),
            more_refused=(
                Action(text="add 1", tool_name="add", tool_args={"a": 1}),
                Action(text="divide one 2", tool_name="divide", tool_args={"a": "one", "b": 2}),
            ),
            # a hook that breaks its environment, which stays broken (break_lasts) until the
            # other hook restores it: env_error every call meanwhile, normal service after;
            break_environment=take_the_service_down,
            break_lasts=True,
            restore_environment=bring_the_service_back,
            # an action whose whole output is the given text, and the executor's cap: the kit
            # checks what observation_truncated_chars counts, just under, at and past the cap.
            echo=lambda text: Action(
                text=f"echo {text}", tool_name="echo", tool_args={"text": text}
            ),
            truncates_at=1_000,
        )


class TestCallParser(DecisionParserContract):
    @pytest.fixture
    def decision_parser(self) -> CallParser:
        return CallParser()

    @pytest.fixture
    def parser_samples(self) -> ParserSamples:
        return ParserSamples(
            action_reply=ModelReply(text='CALL add {"a": 1, "b": 2}'),
            invalid_reply=ModelReply(text="Let me think about it."),
            final_reply=ModelReply(text="ANSWER 3"),
            # Optional: how to build the parser in another process. The kit parses the same
            # replies under different hash seeds there (is_deterministic_across_processes).
            factory="calculator:CallParser",
            # Optional: what replies must parse to, exactly (an InvalidDecision by branch only),
            # and the variations the format allows around them (parses_golden_samples).
            golden=[
                (
                    'CALL add {"a": 1, "b": 2}',
                    Action(
                        text='CALL add {"a": 1, "b": 2}',
                        tool_name="add",
                        tool_args={"a": 1, "b": 2},
                    ),
                ),
                (
                    'CALL note {"text": "buy milk"}',
                    Action(
                        text='CALL note {"text": "buy milk"}',
                        tool_name="note",
                        tool_args={"text": "buy milk"},
                    ),
                ),
                ("CALL now", Action(text="CALL now", tool_name="now", tool_args={})),
                ("ANSWER 3", FinalAnswer(text="3")),
                ("ANSWER  three apples ", FinalAnswer(text="three apples")),
                ("Let me think about it.", InvalidDecision(feedback="")),
                ('CALL add {"a": ', InvalidDecision(feedback="")),
                ("CALL add [1, 2]", InvalidDecision(feedback="")),
            ],
            golden_variations={"whitespace", "argument_text"},
        )


class TestJsonLinesStore(RunStoreContract):
    # A waiver is a promise you know you break, with the reason in the report. Example:
    # waive: ClassVar[Mapping[str, str]] = {"run_store.lists_its_runs": "ticket 42"}
    waive: ClassVar[Mapping[str, str]] = {}

    @pytest.fixture
    def run_store(self, tmp_path: Path) -> JsonLinesStore:
        return JsonLinesStore(tmp_path)

    @pytest.fixture
    def store_samples(self) -> StoreSamples:
        # Optional: how to reach the store's data from another process. The kit reopens the
        # store through it and kills writer processes mid-append (the two crash promises).
        return StoreSamples(factory="calculator:JsonLinesStore")
