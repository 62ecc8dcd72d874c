"""ModelReply's optional model and finish_reason (log schema 1.1): validated, written, read
back, absent from older replies; and the kit checks them when a reply has them."""

from __future__ import annotations

import json

import pytest
from hypothesis import find

from polyloop import ModelReplied, ModelReply, record_from_json
from polyloop.testing import strategies
from polyloop.testing._shared._shapes import model_reply_problems

# A ModelReplied exactly as polyloop wrote it before the reply had these fields.
_WRITTEN_BEFORE = (
    '{"kind":"model_replied","reply":{"call_id":"c1","reasoning":"","text":"hi",'
    '"usage":{"prompt_tokens":3}},"schema_version":"1.0","step_index":0}'
)


def test_a_reply_written_before_the_fields_existed_reads_with_none() -> None:
    record = record_from_json(_WRITTEN_BEFORE)

    assert isinstance(record, ModelReplied)
    assert (record.reply.model, record.reply.finish_reason) == (None, None)
    assert record.reply.call_id == "c1"


@pytest.mark.parametrize(
    ("model", "finish_reason"),
    [("gpt-x-2026", "stop"), ("mödel \ud800", "length"), (None, "tool_calls"), ("m", None)],
)
def test_the_fields_round_trip_through_the_record_json(
    model: str | None, finish_reason: str | None
) -> None:
    record = ModelReplied(
        step_index=2, reply=ModelReply(text="t", model=model, finish_reason=finish_reason)
    )

    text = record.to_json()

    text.encode("utf-8")  # valid UTF-8 even with a lone surrogate
    assert record_from_json(text) == record
    assert json.loads(text)["reply"]["finish_reason"] == finish_reason


@pytest.mark.parametrize("name", ["model", "finish_reason"])
@pytest.mark.parametrize("bad", ["", 0, ["stop"], b"stop"])
def test_an_empty_or_non_str_value_is_a_value_error_naming_the_field(name: str, bad: object):
    with pytest.raises(ValueError, match=f"ModelReply.{name} must be None or a non-empty str"):
        ModelReply(text="t", **{name: bad})  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["model", "finish_reason"])
@pytest.mark.parametrize("bad", ['""', "5", '["stop"]'])
def test_a_malformed_logged_value_is_refused_naming_the_field(name: str, bad: str):
    data = json.loads(_WRITTEN_BEFORE)
    data["reply"][name] = json.loads(bad)

    with pytest.raises(
        ValueError, match=f"malformed model reply: field '{name}' must be a non-empty str or null"
    ):
        record_from_json(json.dumps(data))


@pytest.mark.parametrize("name", ["model", "finish_reason"])
def test_the_kits_reply_check_names_a_patched_field_of_the_wrong_type(name: str) -> None:
    reply = ModelReply(text="t")
    object.__setattr__(reply, name, 42)  # patched after construction, past the validation

    assert model_reply_problems(reply, "complete()") == [
        f"complete().{name} must be None or a non-empty str, got int: 42"
    ]


def test_the_kits_reply_check_accepts_the_fields_or_their_absence() -> None:
    assert model_reply_problems(ModelReply(text="t", model="m", finish_reason="stop")) == []
    assert model_reply_problems(ModelReply(text="t")) == []


def test_the_reply_strategy_draws_the_fields_so_a_store_that_drops_them_fails() -> None:
    reply = find(
        strategies.model_replies(), lambda r: r.model is not None and r.finish_reason is not None
    )
    record = ModelReplied(step_index=0, reply=reply)

    assert record_from_json(record.to_json()) == record
