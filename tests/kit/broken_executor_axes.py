"""Executors with a bug on the size or sequence axis of issue 30, each beside its correct
twin. All are :class:`tests.kit.broken_executors.ToolboxExecutor` with another way to turn a
tool's output into an observation, and all give the echo sample but no ``truncates_at`` (an
implementer whose cap lives in a library may not know it): the kit as it was echoed 0, 1, 200
and 4 099 characters, rising, and every one of them kept every promise.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from polyloop.testing import ActionSamples
from polyloop.types import ActionOutcome, ActionStatus
from tests.kit.broken_executors import SAMPLES, ToolboxExecutor, ToolSession, _outcome

#: The samples of the executors below: every opt-in of broken_executors.SAMPLES but the cap.
AXES_SAMPLES = dataclasses.replace(SAMPLES, truncates_at=None)

_PAGE = 4_096
_PIPE_BUFFER = 65_536
_MARK = "\n[output truncated]"


class MarksAtTheCap(ToolboxExecutor):
    """Caps at 4 096 characters, but tests ``>=``: an output of exactly 4 096 characters gets
    the truncation marker while nothing was cut (and a count of 0)."""

    def capped(self, text: str) -> ActionOutcome:
        if len(text) >= _PAGE:
            cut = len(text) - _PAGE
            return _outcome(ActionStatus.EXECUTED, text[:_PAGE] + _MARK, cut)
        return _outcome(ActionStatus.EXECUTED, text)


class MarksPastTheCap(ToolboxExecutor):
    """The twin: the marker only when something was cut."""

    def capped(self, text: str) -> ActionOutcome:
        if len(text) > _PAGE:
            cut = len(text) - _PAGE
            return _outcome(ActionStatus.EXECUTED, text[:_PAGE] + _MARK, cut)
        return _outcome(ActionStatus.EXECUTED, text)


class ReadsOnePipeBuffer(ToolboxExecutor):
    """Reads the tool's output pipe once, 64 KiB: a longer output loses its end silently (a
    character split at the buffer's end too) and the count says nothing was cut."""

    def capped(self, text: str) -> ActionOutcome:
        data = text.encode("utf-8")[:_PIPE_BUFFER]
        return _outcome(ActionStatus.EXECUTED, data.decode("utf-8", "ignore"))


class ReadsThePipeToTheEnd(ToolboxExecutor):
    """The twin: reads 64 KiB chunks until the end of the output."""

    def capped(self, text: str) -> ActionOutcome:
        data = text.encode("utf-8")
        chunks = [data[i : i + _PIPE_BUFFER] for i in range(0, len(data), _PIPE_BUFFER)]
        return _outcome(ActionStatus.EXECUTED, b"".join(chunks).decode("utf-8"))


class ReusesItsOutputBuffer(ToolboxExecutor):
    """Copies each output into one growing buffer and decodes the whole buffer: after a long
    output, a shorter one comes back with the long one's tail."""

    def __init__(self) -> None:
        super().__init__()
        self._buffer = bytearray()

    def capped(self, text: str) -> ActionOutcome:
        data = text.encode("utf-8")
        if len(self._buffer) < len(data):
            self._buffer.extend(bytes(len(data) - len(self._buffer)))
        self._buffer[: len(data)] = data
        return _outcome(ActionStatus.EXECUTED, self._buffer.decode("utf-8", "ignore").rstrip("\0"))


class ReusesItsBufferUpToTheLength(ReusesItsOutputBuffer):
    """The twin: decodes only the bytes written this time."""

    def capped(self, text: str) -> ActionOutcome:
        data = text.encode("utf-8")
        if len(self._buffer) < len(data):
            self._buffer.extend(bytes(len(data) - len(self._buffer)))
        self._buffer[: len(data)] = data
        return _outcome(ActionStatus.EXECUTED, self._buffer[: len(data)].decode("utf-8"))


# --------------------------------------------------------------------------- issue 37: parity


#: Samples with no opt-in that makes more than one call of a kind: one failing, one clean and one
#: refused action. A refused one never reaches a sandbox, so a round of the status probe's fixed
#: order sent two actions to the sandboxes, and each sample always met the same one.
PARITY_SAMPLES = ActionSamples(
    executes_cleanly=SAMPLES.executes_cleanly,
    executes_but_errors=SAMPLES.executes_but_errors,
    refused=SAMPLES.refused,
)


class RoundRobinSandboxes(ToolboxExecutor):
    """The twin: hands the actions that pass its checks to two sandboxes in turn; both serve."""

    def __init__(self) -> None:
        super().__init__()
        self.turn = 0

    async def run(self, session: ToolSession, name: str, args: dict[str, Any]) -> ActionOutcome:
        self.turn += 1
        return await self.in_sandbox(self.turn % 2, session, name, args)

    async def in_sandbox(
        self, sandbox: int, session: ToolSession, name: str, args: dict[str, Any]
    ) -> ActionOutcome:
        return await super().run(session, name, args)


class RoundRobinOverALostSandbox(RoundRobinSandboxes):
    """The second sandbox lost its connection and nobody noticed: every second action that
    reaches a sandbox comes back env_error, whatever the action — its status flips call by call."""

    async def in_sandbox(
        self, sandbox: int, session: ToolSession, name: str, args: dict[str, Any]
    ) -> ActionOutcome:
        if sandbox == 0:
            self.release(session)
            await asyncio.sleep(0.001)  # the connection attempt that fails
            return _outcome(ActionStatus.ENV_ERROR, "sandbox 2: tool server unreachable")
        return await super().in_sandbox(sandbox, session, name, args)
