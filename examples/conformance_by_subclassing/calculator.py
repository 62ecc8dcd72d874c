"""A tiny calculator agent's seams: the code a downstream project would write itself."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Sequence
from pathlib import Path

from polyloop import (
    Action,
    ActionOutcome,
    ActionStatus,
    FinalAnswer,
    InvalidDecision,
    ModelReply,
    ParsedReply,
    Record,
    RunAlreadyExists,
    RunAlreadyFinished,
    RunConflict,
    RunFinished,
    RunLog,
    RunStarted,
    record_from_json,
    validate_run_id,
)


class CalculatorExecutor:
    """Runs ``add`` and ``divide`` tool calls. A division by zero is the tool's own error."""

    async def execute(self, action: Action) -> ActionOutcome:
        args = dict(action.tool_args or {})
        if action.tool_name not in ("add", "divide"):
            return ActionOutcome(
                status=ActionStatus.NOT_EXECUTED, observation=f"no tool {action.tool_name!r}"
            )
        await asyncio.sleep(0)  # a real calculator service would be a network call away
        try:
            a, b = float(args["a"]), float(args["b"])
            result = a + b if action.tool_name == "add" else a / b
        except (KeyError, TypeError, ValueError, ZeroDivisionError) as error:
            # It ran and failed: the model can read this and correct itself.
            return ActionOutcome(status=ActionStatus.EXECUTED, observation=f"error: {error!r}")
        return ActionOutcome(status=ActionStatus.EXECUTED, observation=repr(result))


class CallParser:
    """``CALL <tool> <json args>`` is an action, ``ANSWER <text>`` a final answer."""

    feedback = "Reply with `CALL <tool> {json arguments}` or `ANSWER <text>`."

    def parse(self, reply: ModelReply) -> ParsedReply:
        text = reply.text.strip()
        if text.startswith("ANSWER "):
            return FinalAnswer(text=text.removeprefix("ANSWER ").strip())
        head, _, rest = text.partition(" ")
        tool, _, raw_args = rest.strip().partition(" ")
        if head != "CALL" or not tool:
            return InvalidDecision(feedback=self.feedback)
        try:
            args = json.loads(raw_args or "{}")
        except ValueError:
            return InvalidDecision(
                feedback=f"The arguments of {tool} are not JSON. {self.feedback}"
            )
        except RecursionError:  # "[[[[…" deeper than the stack (the kit's deep-nesting input)
            return InvalidDecision(feedback=f"The arguments are nested too deeply. {self.feedback}")
        if not isinstance(args, dict):
            return InvalidDecision(feedback=f"The arguments must be an object. {self.feedback}")
        try:
            return Action(text=text, tool_name=tool, tool_args=args)
        except ValueError:  # e.g. NaN, which canonical JSON refuses
            return InvalidDecision(feedback=f"The arguments must be plain JSON. {self.feedback}")


class JsonLinesStore:
    """One ``<run_id>.jsonl`` file per run; one record per line, written with ``to_json()``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _path(self, run_id: str) -> Path:
        validate_run_id(run_id)  # never let a run id become a path like ../x
        return self.directory / f"{run_id}.jsonl"

    def _committed(self, run_id: str) -> bytes:
        # A last line without its newline is an append a crash cut off: it never returned, so
        # it is not part of the log (the crash promises caught the version that read it).
        path = self._path(run_id)
        data = path.read_bytes() if path.exists() else b""
        return data[: data.rfind(b"\n") + 1]

    def _read(self, run_id: str) -> list[Record]:
        # split("\n"), not splitlines(): JSON text may hold U+2028 or \x1c, which
        # splitlines() also treats as line ends (the round-trip promise caught exactly that).
        lines = self._committed(run_id).decode("utf-8").split("\n")
        return [record_from_json(line) for line in lines if line]

    async def append(self, run_id: str, record: Record, *, sequence: int) -> None:
        await self.append_many(run_id, [record], sequence=sequence)

    async def append_many(self, run_id: str, records: Sequence[Record], *, sequence: int) -> None:
        # The rules of append for each record in order, all checked before anything is written:
        # a violation anywhere writes none of the batch. No await between checks and write.
        committed = self._committed(run_id)
        log = self._read(run_id)
        length, finished = len(log), bool(log) and isinstance(log[-1], RunFinished)
        for at, record in enumerate(records, start=sequence):
            if isinstance(record, RunStarted) and length:
                raise RunAlreadyExists(run_id)
            if finished:
                raise RunAlreadyFinished(run_id)
            if at != length:
                raise RunConflict(f"{run_id}: sequence {at}, log has {length} records")
            length, finished = length + 1, isinstance(record, RunFinished)
        lines = "".join(record.to_json() + "\n" for record in records)
        with self._path(run_id).open("ab") as file:
            file.truncate(len(committed))  # drop a torn line before writing after it
            file.write(lines.encode("utf-8"))  # the whole batch in one write
            file.flush()
            os.fsync(file.fileno())  # durable when append_many returns, power loss included

    async def read_log(self, run_id: str) -> RunLog:
        return RunLog(tuple(self._read(run_id)))

    async def run_ids(self) -> list[str]:
        return sorted(path.stem for path in self.directory.glob("*.jsonl"))
