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


class CalculatorService:
    """Where the calculator's results come from: in a real deployment a service a network call
    away, which can be unreachable for a while."""

    def __init__(self) -> None:
        self.reachable = True


class CalculatorExecutor:
    """Runs ``add``, ``divide`` and ``echo`` tool calls. A division by zero is the tool's own
    error; a call it cannot make (another tool, arguments it does not take) is refused without
    running; an unreachable service is ``env_error``. An observation longer than
    ``max_observation_chars`` is cut, and the number of characters cut is reported."""

    def __init__(
        self, service: CalculatorService | None = None, *, max_observation_chars: int = 1_000
    ) -> None:
        self.service = service or CalculatorService()
        self.max_observation_chars = max_observation_chars

    async def execute(self, action: Action) -> ActionOutcome:
        args = dict(action.tool_args or {})
        refusal = _refusal(action.tool_name, args)
        if refusal is not None:
            # Checked before running: bad calls are the model's to fix, not a tool error.
            return ActionOutcome(status=ActionStatus.NOT_EXECUTED, observation=refusal)
        await asyncio.sleep(0)  # a real calculator service would be a network call away
        if not self.service.reachable:  # returned, never raised: the run stops cleanly
            return ActionOutcome(
                status=ActionStatus.ENV_ERROR, observation="the calculator service is unreachable"
            )
        if action.tool_name == "echo":
            output = args["text"]
        else:
            a, b = float(args["a"]), float(args["b"])
            try:
                output = repr(a + b if action.tool_name == "add" else a / b)
            except ZeroDivisionError as error:
                # It ran and failed: the model can read this and correct itself.
                output = f"error: {error!r}"
        shown = output[: self.max_observation_chars]  # characters, not bytes
        return ActionOutcome(
            status=ActionStatus.EXECUTED,
            observation=shown,
            observation_truncated_chars=len(output) - len(shown),
        )


def _refusal(tool: str | None, args: dict[str, object]) -> str | None:
    """Why a call cannot be made, or ``None``."""
    if tool == "echo":
        if set(args) != {"text"} or not isinstance(args["text"], str):
            return f"echo takes one string, text; got {args!r}"
        return None
    if tool not in ("add", "divide"):
        return f"no tool {tool!r}"
    if set(args) != {"a", "b"} or not all(_is_number(args[name]) for name in ("a", "b")):
        return f"{tool} takes two numbers, a and b; got {args!r}"
    return None


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


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
    """One ``<run_id>.jsonl`` file per run; one record per line, written with ``to_json()``.

    A line starting with ``+`` is a record of a batch whose last line is still to come: a batch
    counts only once its last line (without ``+``) is complete.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _path(self, run_id: str) -> Path:
        validate_run_id(run_id)  # never let a run id become a path like ../x
        return self.directory / f"{run_id}.jsonl"

    def _committed(self, run_id: str) -> bytes:
        # A crash can cut a write anywhere. Everything after the last complete line that ends
        # an append (not a "+" line) belongs to an append that never returned: not part of the
        # log (the crash promises caught the version that read a torn line, and the one that
        # kept the first records of a torn batch).
        path = self._path(run_id)
        data = path.read_bytes() if path.exists() else b""
        end = start = 0
        while (newline := data.find(b"\n", start)) != -1:
            if data[start : start + 1] != b"+":
                end = newline + 1
            start = newline + 1
        return data[:end]

    def _read(self, run_id: str) -> list[Record]:
        # split("\n"), not splitlines(): JSON text may hold U+2028 or \x1c, which
        # splitlines() also treats as line ends (the round-trip promise caught exactly that).
        lines = self._committed(run_id).decode("utf-8").split("\n")
        return [record_from_json(line.removeprefix("+")) for line in lines if line]

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
        last = len(records) - 1
        lines = "".join(
            ("" if n == last else "+") + record.to_json() + "\n" for n, record in enumerate(records)
        )
        path = self._path(run_id)
        created = not path.exists()
        with path.open("ab") as file:
            file.truncate(len(committed))  # drop a torn append before writing after it
            file.write(lines.encode("utf-8"))
            file.flush()
            os.fsync(file.fileno())  # durable when append_many returns, power loss included:
        if created:  # a new file's name is in the directory, which needs its own fsync
            directory = os.open(self.directory, os.O_RDONLY)
            try:
                os.fsync(directory)
            finally:
                os.close(directory)

    async def read_log(self, run_id: str) -> RunLog:
        return RunLog(tuple(self._read(run_id)))

    async def run_ids(self) -> list[str]:
        return sorted(path.stem for path in self.directory.glob("*.jsonl"))
