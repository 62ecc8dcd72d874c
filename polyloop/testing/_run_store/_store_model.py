"""The kit's own model of the run-store append rules, independent of every bundled store.

``behaves_like_the_reference_store`` used to compare a store with ``MemoryStore``; the bundled
stores share their append rules (``polyloop.stores._rules``), so a bug in those rules was in the
reference too and invisible to the comparison. This model is written from the contract alone
(SPEC §3, the store promises' docstrings) and imports nothing from ``polyloop.stores``: the
records are kept as the objects appended (the store must read them back equal, value and
type), and an append is answered by the first rule it breaks, in the contract's precedence.
"""

from __future__ import annotations

from collections.abc import Sequence

from polyloop.errors import RunAlreadyExists, RunAlreadyFinished, RunConflict
from polyloop.types import Record, RunFinished, RunLog, RunStarted

__all__ = ["StoreModel"]


class StoreModel:
    """Logs by run id, and the error (a class) each append must raise, or ``None``."""

    def __init__(self) -> None:
        self.logs: dict[str, list[Record]] = {}

    def refusal(self, run_id: str, record: Record, sequence: int) -> type[Exception] | None:
        """The error an append of ``record`` at ``sequence`` must raise, else ``None``.

        Precedence: a start on a log that exists, then anything after a finish, then a
        sequence other than the log's length, then a first record that is not a start.
        """
        log = self.logs.get(run_id, [])
        if type(record) is RunStarted and log:
            return RunAlreadyExists
        if log and type(log[-1]) is RunFinished:
            return RunAlreadyFinished
        if sequence != len(log):
            return RunConflict
        if not log and type(record) is not RunStarted:
            return RunConflict
        return None

    def append(self, run_id: str, record: Record, sequence: int) -> type[Exception] | None:
        """Apply one append; its refusal (nothing written) or ``None`` (written)."""
        refused = self.refusal(run_id, record, sequence)
        if refused is None:
            self.logs.setdefault(run_id, []).append(record)
        return refused

    def append_many(
        self, run_id: str, records: Sequence[Record], sequence: int
    ) -> type[Exception] | None:
        """A batch: the first refusal of its records appended one by one, and then none of
        them written; else all of them."""
        before = list(self.logs.get(run_id, []))
        for offset, record in enumerate(records):
            refused = self.append(run_id, record, sequence + offset)
            if refused is not None:
                if before:
                    self.logs[run_id] = before
                else:
                    self.logs.pop(run_id, None)
                return refused
        return None

    def read_log(self, run_id: str) -> RunLog:
        return RunLog(tuple(self.logs.get(run_id, ())))

    def run_ids(self) -> list[str]:
        return sorted(run_id for run_id, log in self.logs.items() if log)
