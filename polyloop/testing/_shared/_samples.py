"""The inputs a suite needs in the implementation's own language, supplied by the implementer.

A suite never hard-codes inputs: one executor runs Python code, another dispatches tool calls,
and a tool-call action fed to a code executor is correctly ``not_executed`` — a suite that
invented its own inputs would fail correct implementations. So the implementer hands over a
few samples, and the suite checks the promises on those.
"""

from __future__ import annotations

import math
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from polyloop.types import Action, FinalAnswer, InvalidDecision, Message, ModelReply, ParsedReply

__all__ = [
    "GOLDEN_VARIATIONS",
    "ActionSamples",
    "EventSinkSamples",
    "GoldenRequest",
    "ModelSamples",
    "ParserSamples",
    "StoreSamples",
]

_FACTORY = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
#: The longest failure bound a suite waits for: the suite must stay bounded.
MAX_FAILURE_BOUND_S = 60.0
#: The largest observation cap the kit echoes past (it sends about twice this many characters).
MAX_TRUNCATES_AT = 1_000_000


def _require(
    owner: str, name: str, value: object, expected: type, *, optional: bool = False
) -> None:
    if optional and value is None:
        return
    if not isinstance(value, expected):
        allowed = f"{expected.__name__} or None" if optional else expected.__name__
        raise TypeError(f"{owner}.{name} must be a polyloop {allowed}, got {type(value).__name__}")


def _actions(name: str, value: object) -> tuple[Action, ...]:
    if isinstance(value, str | bytes | Action) or not isinstance(value, Sequence):
        raise TypeError(
            f"ActionSamples.{name} must be a sequence of polyloop Action, "
            f"got {type(value).__name__}"
        )
    for index, action in enumerate(value):
        _require("ActionSamples", f"{name}[{index}]", action, Action)
    return tuple(value)


@dataclass(frozen=True, slots=True, kw_only=True)
class ActionSamples:
    """Actions in your executor's language; the suite executes each of them, possibly several
    times, and cancels one midway.

    * ``executes_cleanly`` — runs to the end and the action itself does not fail.
    * ``executes_but_errors`` — runs, but the action itself fails (code raises, command exits
      non-zero, the query has a syntax error). Your executor must report it ``executed`` with a
      non-empty observation: an action's own error is something the model can correct.

    Optional: ``refused``, ``break_environment``, ``break_lasts``, ``restore_environment``,
    ``echo`` and ``keeps_printing`` each turn a promise from ``unverifiable`` into checked;
    the ``more_*`` ones widen checked promises:

    * ``refused`` — an action your executor must refuse without running it (an unknown tool,
      arguments that fail the schema): ``status_trigger_conditions`` demands ``not_executed``.
      ``never_refuses=True`` instead declares that your executor has no refusal path (any text
      is code to run); the promise is then ``not_applicable``.
    * ``break_environment`` — ``async def hook(executor) -> None`` that breaks the executor's
      environment (kill its session, close its connection); ``failure_is_a_return_value``
      then runs a few actions, calls the hook, and demands that the calls after it *return*
      (never raise) and that the first, ``execute(executes_cleanly)``, is ``env_error``.
    * ``break_lasts=True`` — declares that ``break_environment`` breaks the environment for the
      rest of the test, not only the session the executor holds (which it might replace on the
      next call): ``every_call_returns_env_error_while_broken`` then demands ``env_error`` from
      every sample after the break.
    * ``restore_environment`` — ``async def hook(executor) -> None`` that undoes
      ``break_environment`` (needs it). Giving it declares that the break lasts until this
      hook runs (as ``break_lasts``): ``environment_recovers_when_restored`` demands
      ``env_error`` from every call while the environment is broken and normal service again
      after the restore.
    * ``more_executes_but_errors`` — more actions whose own code fails, each one differently
      (code raising ``TypeError``, ``ValueError``, ``AttributeError``; a tool reporting an
      error): each must be ``executed`` with a non-empty observation, like
      ``executes_but_errors``, and each joins the call sequences.
    * ``more_refused`` — more actions to refuse (needs ``refused``): missing or extra
      arguments, a wrong argument type, a second unknown name; each must be ``not_executed``.
    * ``echo`` — ``def echo(text: str) -> Action``: an action whose whole observation, when
      nothing is cut, is exactly ``text``: for a code executor, code that writes the text with
      nothing added, ``import sys; sys.stdout.write(text)`` (not ``print(text, end="")``: a
      sandbox's own ``print`` may ignore ``end`` and add a newline); for a tool executor, or a
      sandbox that cannot reach ``sys.stdout``, an echo tool that returns its argument
      unchanged. ``truncated_chars_counts_what_was_cut`` then echoes texts of
      non-ASCII characters and checks that ``observation_truncated_chars`` is the number of
      characters of the text the observation does not show. ``truncates_at`` (needs ``echo``)
      is your executor's observation cap in characters, if it has one: the texts then lie just
      under, at and past it, so the cutting path itself is checked.
    * ``keeps_printing`` — ``def keeps_printing(marker: str) -> Action``: an action that
      writes ``marker`` on a line of its own about every 10 ms for at least 3 s (e.g.
      ``for _ in range(300): print(marker, flush=True); time.sleep(0.01)``).
      ``cancelled_action_does_not_leak`` cancels it mid-way, then runs ``executes_cleanly``
      back to back for a second: no observation may show the marker.

    None may touch a real external side effect (delete files, send requests, spend money):
    the suite really runs them and interrupts one, leaving it half done.
    """

    executes_cleanly: Action
    executes_but_errors: Action
    refused: Action | None = None
    never_refuses: bool = False
    break_environment: Callable[[Any], Awaitable[None]] | None = None
    restore_environment: Callable[[Any], Awaitable[None]] | None = None
    break_lasts: bool = False
    more_executes_but_errors: Sequence[Action] = ()
    more_refused: Sequence[Action] = ()
    echo: Callable[[str], Action] | None = None
    truncates_at: int | None = None
    keeps_printing: Callable[[str], Action] | None = None

    def __post_init__(self) -> None:
        _require("ActionSamples", "executes_cleanly", self.executes_cleanly, Action)
        _require("ActionSamples", "executes_but_errors", self.executes_but_errors, Action)
        _require("ActionSamples", "refused", self.refused, Action, optional=True)
        for name in ("more_executes_but_errors", "more_refused"):
            object.__setattr__(self, name, _actions(name, getattr(self, name)))
        if self.more_refused and self.refused is None:
            raise ValueError(
                "ActionSamples.more_refused needs refused (the first action to refuse); with "
                "never_refuses=True there is nothing to refuse"
            )
        for name in ("restore_environment", "echo", "keeps_printing"):
            value = getattr(self, name)
            if value is not None and not callable(value):
                raise TypeError(
                    f"ActionSamples.{name} must be a function, got {type(value).__name__}"
                )
        if not isinstance(self.break_lasts, bool):
            raise TypeError("ActionSamples.break_lasts must be a bool")
        if self.break_lasts and self.break_environment is None:
            raise ValueError("ActionSamples.break_lasts describes break_environment: give both")
        if self.restore_environment is not None and self.break_environment is None:
            raise ValueError(
                "ActionSamples.restore_environment undoes break_environment: give both"
            )
        if self.truncates_at is not None:
            if self.echo is None:
                raise ValueError("ActionSamples.truncates_at needs echo (the kit echoes past it)")
            if (
                isinstance(self.truncates_at, bool)
                or not isinstance(self.truncates_at, int)
                or not 1 <= self.truncates_at <= MAX_TRUNCATES_AT
            ):
                raise ValueError(
                    "ActionSamples.truncates_at must be your executor's observation cap, an int "
                    f"in [1, {MAX_TRUNCATES_AT}], got {self.truncates_at!r}"
                )
        if not isinstance(self.never_refuses, bool):
            raise TypeError("ActionSamples.never_refuses must be a bool")
        if self.never_refuses and self.refused is not None:
            raise ValueError(
                "ActionSamples: give either refused (an action your executor refuses) or "
                "never_refuses=True (it has no refusal path), not both"
            )
        if self.break_environment is not None and not callable(self.break_environment):
            raise TypeError(
                "ActionSamples.break_environment must be an async function taking the executor, "
                f"got {type(self.break_environment).__name__}"
            )


#: The variations a parser's format may allow around a golden reply (``golden_variations``).
GOLDEN_VARIATIONS: Mapping[str, str] = {
    "whitespace": "blank lines before the reply, spaces, tabs and line breaks after it",
    "prose_before": "a paragraph of prose before the decision",
    "prose_after": "a paragraph of prose after an action (not after a final answer)",
    "argument_text": (
        "a string argument of an action without quotes, backslashes or control characters — or, "
        "for an action without a tool, its text — that "
        "appears exactly once in the reply, replaced by letters, digits, spaces, € and emoji (no "
        "quotes, backslashes, brackets or line breaks)"
    ),
}


def _pairs(value: object, field: str, what: str) -> list[tuple[object, object]]:
    """``value`` as a list of two-item pairs, or the ``TypeError`` that names ``field``."""
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence):
        raise TypeError(f"{field} must be a sequence of {what} pairs, got {type(value).__name__}")
    for index, pair in enumerate(value):
        if not isinstance(pair, tuple | list) or len(pair) != 2:
            raise TypeError(f"{field}[{index}] must be a {what} pair, got {pair!r:.80}")
    return [(first, second) for first, second in value]


def _golden(value: object) -> tuple[tuple[ModelReply, ParsedReply], ...]:
    pairs: list[tuple[ModelReply, ParsedReply]] = []
    for index, (given, decision) in enumerate(
        _pairs(value, "ParserSamples.golden", "(reply, decision)")
    ):
        reply = ModelReply(text=given) if isinstance(given, str) else given
        _require("ParserSamples", f"golden[{index}][0]", reply, ModelReply)
        if not isinstance(decision, Action | FinalAnswer | InvalidDecision):
            raise TypeError(
                f"ParserSamples.golden[{index}][1] must be the Action, FinalAnswer or "
                f"InvalidDecision the reply parses to, got {type(decision).__name__}"
            )
        pairs.append((cast(ModelReply, reply), decision))
    return tuple(pairs)


def _golden_variations(value: object) -> frozenset[str]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise TypeError(
            f"ParserSamples.golden_variations must be a set of names, got {type(value).__name__}"
        )
    names = frozenset(value)
    unknown = sorted(map(repr, names - set(GOLDEN_VARIATIONS)))
    if unknown:
        raise ValueError(
            f"ParserSamples.golden_variations: unknown {', '.join(unknown)}; known: "
            f"{', '.join(sorted(GOLDEN_VARIATIONS))}"
        )
    return names


@dataclass(frozen=True, slots=True, kw_only=True)
class ParserSamples:
    """Replies in the format your parser reads.

    * ``action_reply`` — a reply your parser turns into an ``Action``.
    * ``invalid_reply`` — a reply it cannot parse (it must return ``InvalidDecision`` with
      feedback for the model).
    * ``final_reply`` — a reply it turns into a ``FinalAnswer``; ``None`` if your parser has no
      final-answer form (the final-answer promise is then ``not_applicable``).

    Optional, to have ``is_deterministic_across_processes`` checked:

    * ``factory`` — ``"package.module:callable"``, importable in a child process (it inherits
      the test process's ``sys.path``); called with no arguments it returns your parser,
      configured like the one your fixture returns. The suite parses the same replies in child
      processes started with different ``PYTHONHASHSEED`` values and compares the results.

    Optional, to have ``parses_golden_samples`` checked:

    * ``golden`` — ``(reply, decision)`` pairs (a reply may be given as its text): what each
      reply must parse to, exactly. An ``Action`` or ``FinalAnswer`` must come back equal,
      field for field and type for type; an ``InvalidDecision`` by branch only (its feedback
      wording is yours). Give one pair per form your format has.
    * ``golden_variations`` — the names of :data:`GOLDEN_VARIATIONS` your format allows: the
      kit then builds each variation of each golden reply at every boundary size and demands
      the same decision (with ``argument_text``, the argument replaced — in the action's
      text too, where the text shows the value once).
    """

    action_reply: ModelReply
    invalid_reply: ModelReply
    final_reply: ModelReply | None = None
    factory: str | None = None
    golden: Sequence[tuple[ModelReply | str, ParsedReply]] = ()
    golden_variations: Iterable[str] = frozenset()

    def __post_init__(self) -> None:
        _require("ParserSamples", "action_reply", self.action_reply, ModelReply)
        _require("ParserSamples", "invalid_reply", self.invalid_reply, ModelReply)
        _require("ParserSamples", "final_reply", self.final_reply, ModelReply, optional=True)
        if self.factory is not None and (
            not isinstance(self.factory, str) or not _FACTORY.match(self.factory)
        ):
            raise ValueError(
                "ParserSamples.factory must name an importable callable as "
                f"'package.module:callable' (it takes no arguments), got {self.factory!r}"
            )
        object.__setattr__(self, "golden", _golden(self.golden))
        object.__setattr__(self, "golden_variations", _golden_variations(self.golden_variations))
        if self.golden_variations and not self.golden:
            raise ValueError("ParserSamples.golden_variations vary golden replies: give golden")


def _messages(owner: str, value: object) -> tuple[Message, ...]:
    """A conversation of at least one ``Message``, as a tuple, or the error naming ``owner``."""
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise TypeError(
            f"{owner}.messages must be a sequence of polyloop Message, got {type(value).__name__}"
        )
    if not value:
        raise ValueError(f"{owner}.messages must hold at least one Message")
    for index, message in enumerate(value):
        _require(owner, f"messages[{index}]", message, Message)
    return tuple(value)


@dataclass(frozen=True, slots=True)
class GoldenRequest:
    """One call and the request it must send: ``complete(messages)`` on a client that
    ``client_factory`` (a callable taking the kit's base URL, as
    ``ModelSamples.failing_client_factory`` does; that one when ``None``) builds, and ``body``,
    the JSON request body that must arrive.

    ``body`` is a pattern: every key it states must arrive with the same value, type for type
    (``42`` is not ``42.0`` and neither is ``True``), lists element for element and as long;
    keys it does not state may arrive with anything. State what your users depend on — the
    model, each message's role and content, every parameter the client was built with.
    """

    messages: Sequence[Message]
    body: Mapping[str, Any]
    client_factory: Callable[[str], Any] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "messages", _messages("GoldenRequest", self.messages))
        if not isinstance(self.body, Mapping):
            raise TypeError(
                "GoldenRequest.body must be a mapping (the JSON request body), got "
                f"{type(self.body).__name__}"
            )
        if self.client_factory is not None and not callable(self.client_factory):
            raise TypeError("GoldenRequest.client_factory must be callable (base_url -> client)")


def _golden_requests(value: object) -> tuple[GoldenRequest, ...]:
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence):
        raise TypeError(
            "ModelSamples.golden_requests must be a sequence of GoldenRequest, "
            f"got {type(value).__name__}"
        )
    for index, request in enumerate(value):
        _require("ModelSamples", f"golden_requests[{index}]", request, GoldenRequest)
    return tuple(value)


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSamples:
    """A conversation your model client can answer: at least one ``Message``.

    The suite calls ``complete`` with a fresh mutable ``list`` copy of it several times (also
    cancelling one call), so it should be cheap — point the client at a fake or local endpoint.
    Stored as a tuple.

    Optional, to have ``failure_is_an_exception`` checked: ``failing_client_factory`` builds
    your client against a base URL (``"http://127.0.0.1:PORT/<failure>/v1"``, OpenAI-compatible
    paths below it) that the suite serves and makes misbehave — HTTP errors with JSON bodies,
    a 200 with an ``error`` object or empty ``choices``, HTML proxy pages, a reset, truncated
    JSON, a reply (or SSE stream) cut before its end, a body trickled slower than the bound, no
    answer — one client per failure, all at once. ``failure_bound_s`` is the time within which
    your client gives up, retries and timeouts included (at most 60 s): a deadline for the
    whole request, not only a timeout per read.

    Optional, to have ``reads_golden_responses`` checked (needs the factory):
    ``golden_responses`` — ``(body, reply)`` pairs: the JSON body of a chat completion the kit
    serves (HTTP 200, ``application/json``) and the ``ModelReply`` your client must return for
    it, equal field for field and type for type. ``no_wire_format=True`` instead declares that
    your client reads no response body at all (a scripted or in-process model): that promise is
    then ``not_applicable``.

    Optional, to have ``sends_golden_requests`` checked: ``golden_requests`` —
    :class:`GoldenRequest` values, each the messages of one call and the JSON request body
    that call must send (built by the request's own ``client_factory``, else by
    ``failing_client_factory``).
    """

    messages: Sequence[Message]
    failing_client_factory: Callable[[str], Any] | None = None
    failure_bound_s: float | None = None
    golden_responses: Sequence[tuple[Mapping[str, Any], ModelReply]] = ()
    golden_requests: Sequence[GoldenRequest] = ()
    no_wire_format: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "messages", _messages("ModelSamples", self.messages))
        _check_failure_bound(self.failing_client_factory, self.failure_bound_s)
        object.__setattr__(self, "golden_responses", _golden_responses(self.golden_responses))
        if self.golden_responses and self.failing_client_factory is None:
            raise ValueError(
                "ModelSamples.golden_responses are served to a client the kit builds: give "
                "failing_client_factory and failure_bound_s too"
            )
        object.__setattr__(self, "golden_requests", _golden_requests(self.golden_requests))
        if self.failing_client_factory is None and any(
            request.client_factory is None for request in self.golden_requests
        ):
            raise ValueError(
                "ModelSamples.golden_requests are sent by a client the kit builds: give each "
                "GoldenRequest a client_factory, or give failing_client_factory"
            )
        if not isinstance(self.no_wire_format, bool):
            raise TypeError("ModelSamples.no_wire_format must be a bool")
        if self.no_wire_format and self.golden_responses:
            raise ValueError(
                "ModelSamples: give golden_responses (the bodies your client reads) or "
                "no_wire_format=True (it reads none), not both"
            )
        if self.no_wire_format and self.golden_requests:
            raise ValueError(
                "ModelSamples: give golden_requests (the bodies your client sends) or "
                "no_wire_format=True (it sends none), not both"
            )


def _golden_responses(value: object) -> tuple[tuple[Mapping[str, Any], ModelReply], ...]:
    pairs = []
    what = "(dict of the JSON response body, ModelReply)"
    for index, (body, reply) in enumerate(_pairs(value, "ModelSamples.golden_responses", what)):
        if not isinstance(body, Mapping) or not isinstance(reply, ModelReply):
            raise TypeError(
                f"ModelSamples.golden_responses[{index}] must be a {what} pair, got "
                f"{(body, reply)!r:.80}"
            )
        pairs.append((body, reply))
    return tuple(pairs)


def _check_failure_bound(factory: object, bound: object) -> None:
    if factory is None and bound is None:
        return
    if factory is None or not callable(factory):
        raise TypeError(
            "ModelSamples.failing_client_factory must be a callable taking a base URL and "
            f"returning your client, got {type(factory).__name__}"
        )
    if (
        isinstance(bound, bool)
        or not isinstance(bound, int | float)
        or not math.isfinite(bound)
        or not 0 < bound <= MAX_FAILURE_BOUND_S
    ):
        raise ValueError(
            "ModelSamples.failure_bound_s must be a number of seconds in (0, "
            f"{MAX_FAILURE_BOUND_S:g}] (the time your client needs to give up), got {bound!r}"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class StoreSamples:
    """How the suite reaches your store's data from another process, for the crash promises.

    * ``factory`` — ``"package.module:callable"``, importable in a child process (it inherits
      the test process's ``sys.path``); called with a fresh directory (``pathlib.Path``) it
      returns a store over data kept at that location — every call with the same directory
      sees the same data. ``run_store.prefix_durability`` and ``run_store.atomic_append`` then
      reopen the store and kill writer processes mid-append (inside 1 MiB appends and
      ``append_many`` batches too); ``start_is_exclusive``, ``finished_run_rejects_records``,
      ``rejects_out_of_order_sequence`` and ``lists_its_runs`` also run across three store
      objects opened on one location. On Linux with ``strace``, ``run_store.survives_power_loss``
      traces a writer appending through the factory and replays the trace up to many crash
      points, keeping only what an ``fsync`` made durable (elsewhere it is unverifiable).
    * ``in_memory=True`` instead declares that your store keeps nothing across processes (a
      test double): both promises are then ``not_applicable``.
    """

    factory: str | None = None
    in_memory: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.in_memory, bool):
            raise TypeError("StoreSamples.in_memory must be a bool")
        if self.factory is None:
            if not self.in_memory:
                raise ValueError(
                    "StoreSamples needs factory='package.module:callable' (or in_memory=True "
                    "for a store that keeps nothing across processes)"
                )
            return
        if self.in_memory:
            raise ValueError("StoreSamples: give factory or in_memory=True, not both")
        if not isinstance(self.factory, str) or not _FACTORY.match(self.factory):
            raise ValueError(
                "StoreSamples.factory must name an importable callable as "
                f"'package.module:callable', got {self.factory!r}"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class EventSinkSamples:
    """How the suite sees what your sink delivered, for ``delivers_each_event_exactly_once``.

    * ``read_back`` — ``async def read_back(sink) -> list[Event]``: the events as your sink
      delivered them, since the sink was built, each decoded from what reached the far end (read
      the file back, query the collector, take them from a test handler). Flush whatever your
      sink buffers first. Events of other runs may be among them: the suite keeps its own.
    * ``read_back_spans`` instead, for a sink whose far end is OpenTelemetry spans (one span
      carries several events and keeps a few fields of each): ``async def read_back_spans(sink)
      -> list[ReadableSpan]``, the spans it ended since the last call (since it was built, for
      the first) as an exporter received them — e.g. ``InMemorySpanExporter`` on the sink's
      provider: end the spans the sink still holds open, take ``get_finished_spans()``, then
      ``clear()`` it. Each span names the events it carries in
      the attribute ``polyloop.event_sequences`` (their sequences, an int array) and its run in
      ``polyloop.run_id`` (on itself or an ancestor); every event must be carried by exactly
      one span, no span may arrive twice, and each attribute a span keeps of a record's field
      (``polyloop.goal``, ``polyloop.step.<field>``, … — the contract-kit reference lists them)
      must equal that field.
    * ``delivers_nothing=True`` instead declares that your sink discards every event by design
      (``NullSink``): the promise is then ``not_applicable``.
    """

    read_back: Callable[[Any], Awaitable[Sequence[Any]]] | None = None
    read_back_spans: Callable[[Any], Awaitable[Sequence[Any]]] | None = None
    delivers_nothing: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.delivers_nothing, bool):
            raise TypeError("EventSinkSamples.delivers_nothing must be a bool")
        given = [
            name
            for name in ("read_back", "read_back_spans", "delivers_nothing")
            if getattr(self, name) not in (None, False)
        ]
        if not given:
            raise ValueError(
                "EventSinkSamples needs read_back=<async function(sink) -> list of Event> "
                "(or read_back_spans=<async function(sink) -> list of spans> for a sink whose far "
                "end is OpenTelemetry spans, or delivers_nothing=True for a sink that discards "
                "every event)"
            )
        if len(given) > 1:
            raise ValueError(
                "EventSinkSamples: give one of read_back, read_back_spans and "
                f"delivers_nothing=True, not {'both' if len(given) == 2 else 'all three'} "
                f"({' and '.join(given)})"
            )
        for name, what in (("read_back", "events"), ("read_back_spans", "spans")):
            value = getattr(self, name)
            if value is not None and not callable(value):
                raise TypeError(
                    f"EventSinkSamples.{name} must be an async function taking the sink and "
                    f"returning the {what} it delivered, got {type(value).__name__}"
                )
