"""Action executors written the way downstream teams write them, each with one realistic bug.

Every executor here calls small tools on a *tool server* through a pool of sessions, the shape
of most production executors (a sandbox service, a database, an MCP server behind a pool).
:class:`ToolboxExecutor` is the correct twin; each broken one changes one method of it. The
bugs sit where one call, one error type or one count checked for its sign used to be all the
kit looked at:

* class 1, call sequences — a session not given back to the pool on the failing path
  (:class:`LeaksSessionOnToolError`), a circuit breaker that counts the action's own errors
  (:class:`TripsOnToolErrors`), a dropped connection the next call uses
  (:class:`RaisesAfterFirstCallAfterBreak`), a result cache consulted before the connection
  (:class:`ServesCachedResultAfterBreak`), a stale replica that answers while the server is
  down (:class:`AnswersFromStaleReplica`), a failure that latches
  (:class:`NeverRecoversAfterRestore`);
* class 2, truncation counts — counted in UTF-8 bytes (:class:`CountsCutBytes`), against the
  module's default cap instead of the configured one (:class:`CountsAgainstDefaultCap`), or
  not at all (:class:`CutsWithoutCounting`);
* class 3, status by error type — ``TypeError`` from the tool's own code taken for bad
  arguments (:class:`TypeErrorMeansBadArguments`), a ``ValueError`` taken for a validation
  error (:class:`ValueErrorMeansInvalidInput`), an ``AttributeError`` taken for a lost client
  (:class:`AttributeErrorMeansLostClient`), and arguments never checked before the call
  (:class:`RefusesOnlyUnknownNames`).

``OLD_SAMPLES`` uses only the samples the kit knew before these probes; ``SAMPLES`` adds the
new ones. Importable as ``tests.kit.broken_executors`` (the pytester sandboxes import it).
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import io
import threading
from collections.abc import Callable, Mapping
from typing import Any

from polyloop.testing import ActionSamples
from polyloop.types import Action, ActionOutcome, ActionStatus

#: Sessions in the pool: the old kit made at most three failing calls on one executor.
POOL_SIZE = 4
#: How long a call waits for a free session before it gives up with env_error.
ACQUIRE_TIMEOUT_S = 0.2
#: The observation cap the executors apply, and the one a helper module defaults to.
CAP = 1000
DEFAULT_CAP = 4096


class Settings:
    region = "eu-west-1"


def _lookup(key: str) -> str:
    return {"pi": "3.14159", "e": "2.71828"}[key]  # an unknown key: KeyError, the tool's own


def _join(parts: list[Any]) -> str:
    return ", ".join(parts)  # a non-str part: TypeError raised by the tool's own code


def _parse_int(text: str) -> str:
    return str(int(text))  # not a number: ValueError


def _setting(name: str) -> str:
    return str(getattr(Settings(), name))  # no such setting: AttributeError


def _echo(text: str) -> str:
    return text


TOOLS: dict[str, tuple[Callable[..., str], Mapping[str, type]]] = {
    "lookup": (_lookup, {"key": str}),
    "join": (_join, {"parts": list}),
    "parse_int": (_parse_int, {"text": str}),
    "setting": (_setting, {"name": str}),
    "echo": (_echo, {"text": str}),
}


class ToolServer:
    """The service behind the sessions; ``up=False`` is a network partition."""

    def __init__(self) -> None:
        self.up = True


class ToolSession:
    """One connection to the server; broken for good once the server was unreachable."""

    def __init__(self, server: ToolServer) -> None:
        if not server.up:
            raise ConnectionError("cannot connect to the tool server")
        self.server = server
        self.broken = False

    async def call(self, name: str, args: Mapping[str, Any]) -> str:
        await asyncio.sleep(0.001)
        if self.broken or not self.server.up:
            self.broken = True
            raise ConnectionError("the tool server stopped answering")
        func, _ = TOOLS[name]
        return func(**args)


def _outcome(status: ActionStatus, text: str, cut: int = 0) -> ActionOutcome:
    return ActionOutcome(status=status, observation=text, observation_truncated_chars=cut)


class ToolboxExecutor:
    """Correct: checks the call before sending it, gives every session back, maps only the
    server's unreachability to ``env_error``, counts cut characters."""

    def __init__(self) -> None:
        self.server = ToolServer()
        self.cap = CAP
        self._pool: asyncio.Queue[ToolSession] | None = None
        self._sessions = 0

    # -------------------------------------------------------------- the pool
    def _queue(self) -> asyncio.Queue[ToolSession]:
        if self._pool is None:
            self._pool = asyncio.Queue()
        return self._pool

    async def acquire(self) -> ToolSession:
        queue = self._queue()
        if queue.empty() and self._sessions < POOL_SIZE:
            self._sessions += 1
            try:
                return ToolSession(self.server)
            except ConnectionError:
                self._sessions -= 1
                raise
        try:
            async with asyncio.timeout(ACQUIRE_TIMEOUT_S):
                session = await queue.get()
        except TimeoutError:
            raise ConnectionError("no tool session became free") from None
        if session.broken:  # replace a session that saw the server go away
            self._sessions -= 1
            return await self.acquire()
        return session

    def release(self, session: ToolSession) -> None:
        self._queue().put_nowait(session)

    # -------------------------------------------------------------- the seam
    async def execute(self, action: Action) -> ActionOutcome:
        refusal = self.refusal(action)
        if refusal is not None:
            return _outcome(ActionStatus.NOT_EXECUTED, refusal)
        assert action.tool_name is not None
        try:
            session = await self.acquire()
        except ConnectionError as exc:
            return _outcome(ActionStatus.ENV_ERROR, f"tool server unreachable: {exc}")
        return await self.run(session, action.tool_name, dict(action.tool_args or {}))

    def refusal(self, action: Action) -> str | None:
        if action.tool_name not in TOOLS:
            return f"unknown tool {action.tool_name!r}"
        func, types = TOOLS[action.tool_name]
        args = dict(action.tool_args or {})
        try:
            inspect.signature(func).bind(**args)
        except TypeError as exc:
            return f"bad arguments: {exc}"
        for name, value in args.items():
            if not isinstance(value, types[name]):
                return f"bad arguments: {name} must be {types[name].__name__}"
        return None

    async def run(self, session: ToolSession, name: str, args: dict[str, Any]) -> ActionOutcome:
        try:
            result = await session.call(name, args)
        except ConnectionError as exc:
            return _outcome(ActionStatus.ENV_ERROR, f"tool server unreachable: {exc}")
        except Exception as exc:  # the tool ran and failed: the model can correct it
            return _outcome(ActionStatus.EXECUTED, f"{type(exc).__name__}: {exc}")
        finally:
            self.release(session)
        return self.capped(result)

    def capped(self, text: str) -> ActionOutcome:
        if len(text) <= self.cap:
            return _outcome(ActionStatus.EXECUTED, text)
        cut = len(text) - self.cap
        return _outcome(ActionStatus.EXECUTED, f"{text[: self.cap]}\n[{cut} more chars cut]", cut)


async def take_the_server_down(executor: ToolboxExecutor) -> None:
    executor.server.up = False


async def bring_the_server_back(executor: ToolboxExecutor) -> None:
    executor.server.up = True


def echo(text: str) -> Action:
    return Action(text="echo", tool_name="echo", tool_args={"text": text})


OLD_SAMPLES = ActionSamples(
    executes_cleanly=Action(text="lookup pi", tool_name="lookup", tool_args={"key": "pi"}),
    executes_but_errors=Action(text="lookup tau", tool_name="lookup", tool_args={"key": "tau"}),
    refused=Action(text="delete pi", tool_name="delete", tool_args={"key": "pi"}),
    break_environment=take_the_server_down,
)

SAMPLES = dataclasses.replace(
    OLD_SAMPLES,
    more_executes_but_errors=(
        Action(text="join a 1", tool_name="join", tool_args={"parts": ["a", 1]}),  # TypeError
        Action(text="parse_int x", tool_name="parse_int", tool_args={"text": "x"}),  # ValueError
        Action(text="setting colour", tool_name="setting", tool_args={"name": "colour"}),
    ),
    more_refused=(
        Action(text="lookup", tool_name="lookup", tool_args={}),  # a required argument missing
        Action(text="lookup pi 2", tool_name="lookup", tool_args={"key": "pi", "n": 2}),
        Action(text="lookup 5", tool_name="lookup", tool_args={"key": 5}),  # the wrong type
    ),
    restore_environment=bring_the_server_back,
    echo=echo,
    truncates_at=CAP,
)


# --------------------------------------------------------------------------- class 1: sequences


class LeaksSessionOnToolError(ToolboxExecutor):
    """Gives the session back on the success path only: after POOL_SIZE failing actions every
    call waits for a free session and gives up with env_error."""

    async def run(self, session: ToolSession, name: str, args: dict[str, Any]) -> ActionOutcome:
        try:
            result = await session.call(name, args)
        except ConnectionError as exc:
            return _outcome(ActionStatus.ENV_ERROR, f"tool server unreachable: {exc}")
        except Exception as exc:
            return _outcome(ActionStatus.EXECUTED, f"{type(exc).__name__}: {exc}")
        self.release(session)
        return self.capped(result)


class TripsOnToolErrors(ToolboxExecutor):
    """A circuit breaker that counts every exception, the tools' own errors included: after
    five it opens and every call is env_error."""

    def __init__(self) -> None:
        super().__init__()
        self.failures = 0

    async def execute(self, action: Action) -> ActionOutcome:
        if self.failures >= 5:
            return _outcome(ActionStatus.ENV_ERROR, "circuit open: the tool server is failing")
        outcome = await super().execute(action)
        if outcome.observation.split(":", 1)[0].endswith(("Error", "Exception")):
            self.failures += 1
        return outcome


class ConnectedToolboxExecutor(ToolboxExecutor):
    """Correct: one connection, dropped when the server stops answering and opened again on
    the next call."""

    def __init__(self) -> None:
        super().__init__()
        self.connection: ToolSession | None = None

    async def acquire(self) -> ToolSession:
        if self.connection is None:
            self.connection = ToolSession(self.server)
        return self.connection

    def release(self, session: ToolSession) -> None:
        if session.broken:
            self.connection = None


class RaisesAfterFirstCallAfterBreak(ConnectedToolboxExecutor):
    """Drops the dead connection on the first failure and forgets to reconnect: the second call
    after a break raises ``AttributeError`` on ``None``."""

    connected = False

    async def acquire(self) -> ToolSession:
        if not self.connected:
            self.connected = True
            self.connection = ToolSession(self.server)
        connection: Any = self.connection  # the bug: None once release() dropped a dead one
        if connection.broken:
            raise ConnectionError("the connection is broken")
        return connection  # type: ignore[no-any-return]


class ServesCachedResultAfterBreak(ToolboxExecutor):
    """Caches the results of read-only tools and answers from the cache before asking the
    server: a lookup it has seen comes back executed although the server is gone."""

    def __init__(self) -> None:
        super().__init__()
        self.cache: dict[str, ActionOutcome] = {}

    async def execute(self, action: Action) -> ActionOutcome:
        key = f"{action.tool_name}:{sorted((action.tool_args or {}).items())!r}"
        await asyncio.sleep(0.001)  # the cache is a service too (an async client)
        if action.tool_name == "lookup" and key in self.cache:
            return self.cache[key]
        outcome = await super().execute(action)
        if outcome.status is ActionStatus.EXECUTED:
            self.cache[key] = outcome
        return outcome


class AnswersFromStaleReplica(ToolboxExecutor):
    """Fails over to a read replica after the first env_error; the replica is a snapshot that
    keeps answering while the server is down."""

    def __init__(self) -> None:
        super().__init__()
        self.failed_over = False

    async def execute(self, action: Action) -> ActionOutcome:
        if self.failed_over and self.refusal(action) is None and action.tool_name == "lookup":
            key = str((action.tool_args or {}).get("key"))
            try:
                return _outcome(ActionStatus.EXECUTED, _lookup(key))
            except KeyError as exc:
                return _outcome(ActionStatus.EXECUTED, f"KeyError: {exc}")
        outcome = await super().execute(action)
        if outcome.status is ActionStatus.ENV_ERROR:
            self.failed_over = True
        return outcome


class NeverRecoversAfterRestore(ToolboxExecutor):
    """Latches its first env_error ("the server is gone, stop bothering it"): it never serves
    again, even once the server is back."""

    def __init__(self) -> None:
        super().__init__()
        self.gone = False

    async def execute(self, action: Action) -> ActionOutcome:
        if self.gone and self.refusal(action) is None:
            return _outcome(ActionStatus.ENV_ERROR, "the tool server is gone")
        outcome = await super().execute(action)
        if outcome.status is ActionStatus.ENV_ERROR:
            self.gone = True
        return outcome


# --------------------------------------------------------------------------- class 2: counts


class CountsCutBytes(ToolboxExecutor):
    """Cuts the UTF-8 encoding at the cap (dropping a split character) and counts bytes."""

    def capped(self, text: str) -> ActionOutcome:
        data = text.encode("utf-8")
        if len(data) <= self.cap:
            return _outcome(ActionStatus.EXECUTED, text)
        shown = data[: self.cap].decode("utf-8", "ignore")
        cut = len(data) - self.cap
        return _outcome(ActionStatus.EXECUTED, f"{shown}\n[{cut} more chars cut]", cut)


def _cut_count(text: str, limit: int = DEFAULT_CAP) -> int:
    """A shared helper's count, with the library-wide default cap."""
    return max(0, len(text) - limit)


class CountsAgainstDefaultCap(ToolboxExecutor):
    """Cuts at its configured cap but counts with a helper that defaults to another one."""

    def capped(self, text: str) -> ActionOutcome:
        if len(text) <= self.cap:
            return _outcome(ActionStatus.EXECUTED, text)
        cut = _cut_count(text)
        return _outcome(ActionStatus.EXECUTED, f"{text[: self.cap]}\n[output truncated]", cut)


class CutsWithoutCounting(ToolboxExecutor):
    """Cuts long output and leaves the count at its default, 0."""

    def capped(self, text: str) -> ActionOutcome:
        return _outcome(ActionStatus.EXECUTED, text[: self.cap])


# --------------------------------------------------------------------------- class 3: statuses


class TypeErrorMeansBadArguments(ToolboxExecutor):
    """Checks nothing up front and takes any ``TypeError`` from the call for an argument
    mismatch — also one the tool's own code raises."""

    def refusal(self, action: Action) -> str | None:
        return None if action.tool_name in TOOLS else f"unknown tool {action.tool_name!r}"

    async def run(self, session: ToolSession, name: str, args: dict[str, Any]) -> ActionOutcome:
        try:
            _, types = TOOLS[name]
            for key, value in args.items():
                if key in types and not isinstance(value, types[key]):
                    return _outcome(ActionStatus.NOT_EXECUTED, f"bad arguments: {key}")
            result = await session.call(name, args)
        except TypeError as exc:  # "missing 1 required positional argument": the model's fault
            return _outcome(ActionStatus.NOT_EXECUTED, f"bad arguments: {exc}")
        except ConnectionError as exc:
            return _outcome(ActionStatus.ENV_ERROR, f"tool server unreachable: {exc}")
        except Exception as exc:
            return _outcome(ActionStatus.EXECUTED, f"{type(exc).__name__}: {exc}")
        finally:
            self.release(session)
        return self.capped(result)


class ValueErrorMeansInvalidInput(ToolboxExecutor):
    """Treats ``ValueError`` as its validation library's error (which subclasses it): a tool
    whose own code raises one is reported as never run."""

    async def run(self, session: ToolSession, name: str, args: dict[str, Any]) -> ActionOutcome:
        try:
            result = await session.call(name, args)
        except ValueError as exc:
            return _outcome(ActionStatus.NOT_EXECUTED, f"invalid input: {exc}")
        except ConnectionError as exc:
            return _outcome(ActionStatus.ENV_ERROR, f"tool server unreachable: {exc}")
        except Exception as exc:
            return _outcome(ActionStatus.EXECUTED, f"{type(exc).__name__}: {exc}")
        finally:
            self.release(session)
        return self.capped(result)


class AttributeErrorMeansLostClient(ToolboxExecutor):
    """Takes ``AttributeError`` for its client having been torn down (``'NoneType' object has
    no attribute 'call'``) and reports env_error — also for one the tool raises."""

    async def run(self, session: ToolSession, name: str, args: dict[str, Any]) -> ActionOutcome:
        try:
            result = await session.call(name, args)
        except (ConnectionError, AttributeError) as exc:
            return _outcome(ActionStatus.ENV_ERROR, f"tool client lost: {exc}")
        except Exception as exc:
            return _outcome(ActionStatus.EXECUTED, f"{type(exc).__name__}: {exc}")
        finally:
            self.release(session)
        return self.capped(result)


class RefusesOnlyUnknownNames(ToolboxExecutor):
    """Refuses unknown tools but sends any arguments: a missing one comes back as the tool's
    ``TypeError``, executed."""

    def refusal(self, action: Action) -> str | None:
        return None if action.tool_name in TOOLS else f"unknown tool {action.tool_name!r}"


_RECOVERS = "environment_recovers_when_restored"
_LASTS = "every_call_returns_env_error_while_broken"
_COUNTS = "truncated_chars_counts_what_was_cut"
_OWN_ERROR = "action_error_is_a_normal_observation_not_an_env_error"
#: broken implementation → the promises the new kit catches it on (the old kit: none).
CAUGHT: dict[str, frozenset[str]] = {
    name: frozenset(promises.split())
    for name, promises in {
        # a leak or a latch also keeps the executor from serving after a restore
        "LeaksSessionOnToolError": f"repeated_execution_keeps_status {_RECOVERS}",
        "TripsOnToolErrors": f"repeated_execution_keeps_status {_RECOVERS}",
        "RaisesAfterFirstCallAfterBreak": f"failure_is_a_return_value {_RECOVERS} {_LASTS}",
        "ServesCachedResultAfterBreak": f"failure_is_a_return_value {_RECOVERS} {_LASTS}",
        "AnswersFromStaleReplica": f"{_RECOVERS} {_LASTS}",
        "NeverRecoversAfterRestore": _RECOVERS,
        "CountsCutBytes": _COUNTS,
        "CountsAgainstDefaultCap": _COUNTS,
        "CutsWithoutCounting": _COUNTS,
        # after the restore the recovery probe runs every sample again and sees the same bug
        "TypeErrorMeansBadArguments": f"{_OWN_ERROR} {_RECOVERS}",
        "ValueErrorMeansInvalidInput": f"{_OWN_ERROR} {_RECOVERS}",
        "AttributeErrorMeansLostClient": f"{_OWN_ERROR} {_RECOVERS}",
        "RefusesOnlyUnknownNames": f"status_trigger_conditions {_RECOVERS}",
    }.items()
}
#: The correct twins: the new kit finds nothing wrong with them.
CORRECT = ("ToolboxExecutor", "ConnectedToolboxExecutor")


class ExitsOnUnknownKey(ToolboxExecutor):
    """Its ``lookup`` tool is a command-line tool called in-process: on a key it does not know
    it exits with status 2 (``argparse``'s ``choices``), and ``SystemExit`` is no ``Exception``
    — it escapes ``execute()``."""

    async def run(self, session: ToolSession, name: str, args: dict[str, Any]) -> ActionOutcome:
        if name == "lookup" and args.get("key") not in ("pi", "e"):
            self.release(session)
            raise SystemExit(2)
        return await super().run(session, name, args)


# --------------------------------------------------------------------------- issue 30: cancel


class _Stopped(BaseException):
    """Raised by a cancelled action's print: not an Exception, so its own code cannot catch it."""


class ThreadedPythonExecutor:
    """Correct: runs Python code in a worker thread (``asyncio.to_thread``) with a sandbox
    ``print`` that writes into this action's own buffer; once the action is cancelled its
    ``print`` raises, ending the code at its next line of output."""

    async def execute(self, action: Action) -> ActionOutcome:
        buffer, cancelled = io.StringIO(), threading.Event()

        def sandbox_print(*values: object, sep: str = " ", end: str = "\n", **_: object) -> None:
            if cancelled.is_set():
                raise _Stopped
            buffer.write(sep.join(str(value) for value in values) + end)

        try:
            await asyncio.to_thread(_run_code, action.text, sandbox_print, buffer)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return _outcome(ActionStatus.EXECUTED, buffer.getvalue())


def _run_code(code: str, sandbox_print: Callable[..., None], buffer: io.StringIO) -> None:
    try:
        exec(code, {"print": sandbox_print})
    except _Stopped:
        pass
    except Exception as exc:  # the action's own error: the model reads it
        buffer.write(f"{type(exc).__name__}: {exc}")


class SharedOutputThreadedExecutor:
    """Keeps the output buffer on the executor, swapped for a fresh one at the start of each
    action, and a ``print`` that writes into whichever buffer is current: a cancelled action
    runs on in its thread, and its output lands in the next action's observation."""

    def __init__(self) -> None:
        self._output = io.StringIO()

    def _print(self, *values: object, sep: str = " ", end: str = "\n", **_: object) -> None:
        self._output.write(sep.join(str(value) for value in values) + end)

    async def execute(self, action: Action) -> ActionOutcome:
        self._output = io.StringIO()
        await asyncio.to_thread(_run_code, action.text, self._print, self._output)
        return _outcome(ActionStatus.EXECUTED, self._output.getvalue())


def keeps_printing(marker: str) -> Action:
    """Prints ``marker`` every 10 ms for 3 s."""
    return Action(
        text=f"import time\nfor _ in range(300):\n    print({marker!r})\n    time.sleep(0.01)"
    )


THREADED_SAMPLES = ActionSamples(
    executes_cleanly=Action(text="print(6 * 7)"),
    executes_but_errors=Action(text="1 / 0"),
    never_refuses=True,
    keeps_printing=keeps_printing,
)
