"""The model-client suite.

A client is called with the run's history and returns the model's reply. The suite calls it
with the implementer's sample conversation only, so it can run against a fake or local endpoint.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

import pytest

from polyloop._base._exception_text import exception_text
from polyloop.ports import ModelClient
from polyloop.testing._model_client._failures import failure_problems, golden_problems
from polyloop.testing._model_client._golden_requests import request_problems
from polyloop.testing._shared._base import (
    ContractBase,
    missing_fixture,
    require_samples,
    require_seam,
)
from polyloop.testing._shared._cancel import assert_cancellation_propagates
from polyloop.testing._shared._raised import raised_by_the_implementation
from polyloop.testing._shared._samples import ModelSamples
from polyloop.testing._shared._shapes import SHORT, model_reply_problems, short
from polyloop.testing._shared._skips import not_applicable, unverifiable
from polyloop.types import Message

__all__ = ["ModelClientContract"]


#: Calls ``does_not_mutate_messages`` makes on one client, each with a list of its own.
_MUTATION_CALLS = 3


#: The long history of ``does_not_mutate_messages``: messages, and characters at least.
_LONG_MESSAGES = 300
_LONG_CHARS = 100_000


def _long_history(samples: Sequence[Message]) -> list[Message]:
    """The samples repeated to :data:`_LONG_MESSAGES` messages, the first user message padded so
    the whole holds over :data:`_LONG_CHARS` characters; the samples' last message stays last."""
    repeated = [samples[i % len(samples)] for i in range(_LONG_MESSAGES - len(samples))]
    history = [*repeated, *samples]
    size = sum(len(m.content) for m in history)
    if size <= _LONG_CHARS:
        first = next((i for i, m in enumerate(history) if m.role == "user"), 0)
        pad = " " + "context " * ((_LONG_CHARS - size) // 8 + 1)
        history[first] = Message(role=history[first].role, content=history[first].content + pad)
    return history


def _snapshot(messages: list[Message]) -> list[tuple[int, object, object]]:
    return [(id(m), getattr(m, "role", None), getattr(m, "content", None)) for m in messages]


async def _call(client: ModelClient, messages: list[Message]) -> object:
    """The reply, unchecked: each promise checks only what it is about (the whole shape is
    ``returns_a_model_reply``'s), so one wrong field is one violated promise."""
    require_seam(client, "model_client", "complete", "async complete(messages) -> ModelReply")
    try:
        return await client.complete(messages)
    except Exception:
        raise  # a model error is an answer some promises expect
    except BaseException as error:  # a SystemExit: name the call, not just "SystemExit: 2"
        if not raised_by_the_implementation(error):
            raise
        detail = f"complete({short(messages, 300)}) raised {exception_text(error, limit=SHORT)}"
    pytest.fail(detail, pytrace=False)


class ModelClientContract(ContractBase):
    """Inherit this, override ``model_client`` and ``model_samples``.

    ``model_samples`` returns :class:`~polyloop.testing.ModelSamples`: a conversation your
    client can answer cheaply (point it at a fake or local endpoint).
    """

    seam = "model_client"
    samples_fixture = "model_samples"

    @pytest.fixture
    def model_client(self) -> ModelClient:
        """Your model client. Override this fixture and return an instance."""
        missing_fixture(
            "ModelClientContract",
            "model_client",
            "an instance of your client (any object with "
            "`async complete(messages: Sequence[Message]) -> ModelReply`)",
        )

    @pytest.fixture
    def model_samples(self) -> ModelSamples:
        """A conversation your client can answer. Override this fixture."""
        missing_fixture(
            "ModelClientContract",
            "model_samples",
            "polyloop.testing.ModelSamples(messages=[Message(role='system', content=...), "
            "Message(role='user', content=...)]) — a conversation your client can answer "
            "cheaply; it is sent several times",
        )

    async def test_returns_a_model_reply(
        self, model_client: ModelClient, model_samples: ModelSamples
    ) -> None:
        """``complete`` returns a ``ModelReply`` whose fields all have their declared types.

        The reply is written into the log as it is, and its text and reasoning are counted into
        the step record. A raw provider response, a dict, or a reply patched after construction
        (``usage`` holding floats or ``None``) fails there — or is written and breaks a resume.
        """
        samples = require_samples(model_samples, ModelSamples, "model_samples")
        reply = await _call(model_client, list(samples.messages))
        problems = model_reply_problems(reply, "complete(model_samples.messages)")
        assert not problems, "\n".join(problems)

    async def test_call_id_is_never_empty_string(
        self, model_client: ModelClient, model_samples: ModelSamples
    ) -> None:
        """``reply.call_id`` is ``None`` or a non-empty string, never ``""``.

        ``call_id`` joins a step to the provider's billing records. ``""`` looks like a valid key
        and silently matches nothing (or every other empty key); ``None`` says honestly that
        there is no id. The constructor refuses ``""``, so this also catches replies built
        around it.
        """
        samples = require_samples(model_samples, ModelSamples, "model_samples")
        reply = await _call(model_client, list(samples.messages))
        call_id = getattr(reply, "call_id", None)
        assert call_id != "", "complete() returned a reply with call_id='' (use None for no id)"
        assert call_id is None or isinstance(call_id, str), (
            f"call_id must be None or a non-empty str, got {type(call_id).__name__}"
        )

    async def test_does_not_mutate_messages(
        self, model_client: ModelClient, model_samples: ModelSamples
    ) -> None:
        """``complete`` leaves the message list it was given exactly as it was.

        The loop passes its own history. A client that appends the reply, drops the system
        message to save tokens or rewrites content in place changes what the next step sends
        and what ``prompt_chars`` counted — the log no longer describes what the model saw. The
        suite passes a mutable ``list`` so that such a mutation is possible, and compares after.
        It calls one client several times, each with a list of its own, and compares every list
        after every later call too: a client that keeps a reference to an earlier call's list
        (to append that reply next time, or to normalise a cached prefix) breaks it late. The
        last call passes a long history — the samples repeated to 300 messages and over 100 000
        characters — where a client that trims old messages in place to fit a window shows it
        (that call may raise; its list must be unchanged all the same).
        """
        samples = require_samples(model_samples, ModelSamples, "model_samples")
        given: list[tuple[list[Message], list[tuple[int, object, object]]]] = []
        for call in range(1, _MUTATION_CALLS + 2):
            long = call == _MUTATION_CALLS + 1
            messages = _long_history(samples.messages) if long else list(samples.messages)
            given.append((messages, _snapshot(messages)))
            if long:  # a client may refuse a history this long: only the list matters here
                with contextlib.suppress(Exception):
                    await _call(model_client, messages)
            else:
                await _call(model_client, messages)
            for earlier, (passed, before) in enumerate(given, start=1):
                after = _snapshot(passed)
                when = "during that call" if earlier == call else f"during call {call}"
                assert after == before, (
                    f"complete() changed the list of messages given to call {earlier} ({when}):\n"
                    f"before: {short([(r, c) for _, r, c in before], 400)}\n"
                    f"after:  {short([(r, c) for _, r, c in after], 400)}"
                )

    async def test_reads_golden_responses(
        self, model_client: ModelClient, model_samples: ModelSamples
    ) -> None:
        """Each golden response body gives exactly the reply the implementer stated — on a
        client of its own, and in turn on one client.

        ``returns_a_model_reply`` checks the reply's shape, not its content: a client that
        reads the wrong choice, drops the usage's nested counts, keeps the previous call's id
        or takes ``finish_reason`` from another field returns a well-formed reply the run then
        logs as what the model said. Checked when ``model_samples.golden_responses`` gives
        (JSON body, ``ModelReply``) pairs: the kit serves each body (HTTP 200) to a client the
        factory builds, each on a client of its own, then all of them in turn, twice, on one
        client; every reply must equal the stated one field for field and type for type.
        ``not_applicable`` with ``ModelSamples(no_wire_format=True)``: a client that reads no
        response body (a scripted model) has no wire format to read.
        """
        samples = require_samples(model_samples, ModelSamples, "model_samples")
        if samples.no_wire_format:
            not_applicable(
                promise="each golden response body gives exactly the reply stated for it",
                why=(
                    "ModelSamples(no_wire_format=True) declares that this client reads no "
                    "response body: there is no wire format to read wrongly"
                ),
                verify_yourself=(
                    "check that the replies it returns are the ones it was given (its own "
                    "tests); a client that reads a response body gives golden_responses instead"
                ),
            )
        if not samples.golden_responses or samples.failing_client_factory is None:
            unverifiable(
                promise="each golden response body gives exactly the reply stated for it",
                why=(
                    "model_samples.golden_responses is empty: the kit does not know what a "
                    "response must give"
                ),
                verify_yourself=(
                    "give ModelSamples(..., failing_client_factory=..., failure_bound_s=..., "
                    "golden_responses=[(response_body_dict, ModelReply(...)), ...]) and the kit "
                    "serves each body to your client; or serve recorded responses to your client "
                    "yourself and compare every field of the reply"
                ),
            )
        bound = samples.failure_bound_s or 60.0
        problems = await golden_problems(
            samples.failing_client_factory, bound, list(samples.messages), samples.golden_responses
        )
        assert not problems, "\n".join(problems)

    async def test_sends_golden_requests(
        self, model_client: ModelClient, model_samples: ModelSamples
    ) -> None:
        """Each golden call sends the request the implementer stated: the model, every message's
        role and content, and every parameter the client was built with, type for type.

        Every other promise reads what comes back; none looks at what goes out. A client that
        drops ``temperature``, renames ``max_tokens``, sends a message's role under another key
        or a seed as ``7.0`` still gets well-formed replies — from a run that is not the one
        its user configured, and that no log can tell apart. Checked when
        ``model_samples.golden_requests`` states them: each call runs on a client the factory
        builds against a path of the kit's loopback endpoint, and the first request that
        arrives there must match the stated body — its stated keys only, each value of the
        same type and equal, lists element for element. ``not_applicable`` with
        ``ModelSamples(no_wire_format=True)``: a client that sends no request has none to send
        wrongly.
        """
        samples = require_samples(model_samples, ModelSamples, "model_samples")
        if samples.no_wire_format:
            not_applicable(
                promise="each golden call sends the request stated for it",
                why=(
                    "ModelSamples(no_wire_format=True) declares that this client sends no "
                    "request over a wire format: there is no request to send wrongly"
                ),
                verify_yourself=(
                    "check that the messages and parameters it is given reach what answers "
                    "(its own tests); a client that sends requests gives golden_requests instead"
                ),
            )
        if not samples.golden_requests:
            unverifiable(
                promise="each golden call sends the request stated for it",
                why=(
                    "model_samples.golden_requests is empty: the kit does not know what a call "
                    "must send"
                ),
                verify_yourself=(
                    "give ModelSamples(..., golden_requests=[GoldenRequest(messages, body, "
                    "client_factory), ...]) and the kit reads back what each call sends; or "
                    "record your client's requests against a local endpoint and compare every "
                    "key your users configure"
                ),
            )
        bound = samples.failure_bound_s or 60.0
        problems = await request_problems(
            samples.failing_client_factory, bound, samples.golden_requests
        )
        assert not problems, "\n".join(problems)

    async def test_cancellation_propagates(
        self, model_client: ModelClient, model_samples: ModelSamples
    ) -> None:
        """Cancelling a running ``complete`` raises ``CancelledError`` out of it.

        A client that catches the cancellation (a broad ``except`` around a retry loop is the
        usual culprit) keeps retrying a request nobody waits for, and the run cannot stop. The
        call is cancelled at several depths (a few ticks, then fractions of an uncancelled
        call), since the catch usually sits around the request, after a quick connect.
        ``not_applicable`` when every probe found the call already finished: it had no await
        point at which to swallow anything.
        """
        samples = require_samples(model_samples, ModelSamples, "model_samples")
        require_seam(model_client, "model_client", "complete", "async complete(messages)")
        await assert_cancellation_propagates(
            {
                "complete(model_samples.messages)": lambda: model_client.complete(
                    list(samples.messages)
                )
            },
            promise="a cancelled complete() lets CancelledError through",
            what="complete(model_samples.messages)",
        )

    async def test_failure_is_an_exception(
        self, model_client: ModelClient, model_samples: ModelSamples
    ) -> None:
        """An unrecoverable failure is raised as an exception; retries are the client's business.

        The library turns an exception into a step with ``model_error`` and stops ``llm_error``.
        A client that instead returns an error message as reply text makes the parser read it
        as the model's answer, and the run goes on with a fabricated turn. Checked when
        ``model_samples`` has a ``failing_client_factory``: the suite serves a loopback endpoint
        that fails as servers and proxies do — HTTP 500; 429 every time; 400, 401, 403, 404 and
        422 with a JSON error body; 200 with an ``error`` object and no ``choices``; 200 with
        an empty ``choices`` list; a proxy's ``text/html`` 502 and 503 pages; a reset
        connection; truncated JSON; a reply cut before its end (for a streaming request, a
        server-sent-event stream closed mid-event without ``[DONE]``); a valid body trickled a
        byte at a time for longer than the bound; no answer at all — and ``complete()`` must
        raise, after whatever retries the client makes, within ``failure_bound_s`` each time.
        An empty text, partial text or the error message returned as a reply is a violation.
        """
        samples = require_samples(model_samples, ModelSamples, "model_samples")
        if samples.failing_client_factory is None or samples.failure_bound_s is None:
            unverifiable(
                promise=(
                    "an unrecoverable model failure is raised as an exception, not returned as text"
                ),
                why=(
                    "the suite cannot make an arbitrary client's endpoint fail, and an error "
                    "message returned as text looks exactly like a reply"
                ),
                verify_yourself=(
                    "give ModelSamples(failing_client_factory=<callable: base URL -> your "
                    "client>, failure_bound_s=<seconds your client needs to give up>) and the "
                    "kit checks this against a misbehaving loopback endpoint; the llm_error stop "
                    "is guarded by polyloop's own loop tests"
                ),
            )
        problems = await failure_problems(
            samples.failing_client_factory, samples.failure_bound_s, list(samples.messages)
        )
        assert not problems, "\n".join(problems)
