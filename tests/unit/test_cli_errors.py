"""The ``polyloop`` command says every error one way (``polyloop/cli/_errors.py``): one line,
white space folded, control characters escaped — a run the reading commands cannot read is
named in the same form as a failing command."""

from __future__ import annotations

import asyncio

import pytest

from polyloop.cli._errors import one_line, refuse
from polyloop.cli._index import _summaries_from_logs
from polyloop.errors import StoreCorrupted
from polyloop.types import RunLog

DAMAGED = StoreCorrupted("record 3 of run-a is damaged:\n  \x1b[2J{'text': 'x'}\x00")


class DamagedStore:
    """A store (written before the run index) whose one run cannot be read."""

    async def run_ids(self) -> list[str]:
        return ["run-a"]

    async def read_log(self, run_id: str) -> RunLog:
        raise DAMAGED


def test_an_unreadable_run_is_named_in_the_commands_one_line_error_form() -> None:
    summaries, unreadable = asyncio.run(_summaries_from_logs(DamagedStore()))  # type: ignore[arg-type]

    assert summaries == []
    assert unreadable == {"run-a": one_line(DAMAGED)}
    assert unreadable["run-a"] == ("record 3 of run-a is damaged: \\x1b[2J{'text': 'x'}\\x00")


def test_the_error_line_is_one_line_with_the_type_when_there_is_no_message(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert refuse(ValueError(), 2) == 2
    assert refuse(OSError("disk\nfull\x1b"), 1) == 1

    assert capsys.readouterr().err == (
        "polyloop: error: ValueError\npolyloop: error: disk full\\x1b\n"
    )
