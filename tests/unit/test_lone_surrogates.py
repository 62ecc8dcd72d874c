"""A lone surrogate in any text a run records behaves the same on every store (issue #24 §3).

Python strings and JSON accept a lone surrogate (``"\\ud800"``, or what
``bytes.decode(errors="surrogateescape")`` gives); UTF-8 cannot encode one. Text reaches a record
mid-run (model replies, tool arguments, final answers) and cannot be refused in advance, so the
record codec writes a lone surrogate as its JSON escape and every store keeps that text as it
is. Before, such a run finished on ``MemoryStore`` but ``run()`` raised ``UnicodeEncodeError``
mid-run on ``SQLiteStore`` and ``resume()`` raised it forever.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import polyloop
from polyloop import (
    Action,
    ActionIntent,
    FinalAnswer,
    ModelReplied,
    ModelReply,
    RunResult,
    RunStarted,
    StopReason,
    parameters_hash,
    record_from_json,
)
from polyloop.models import ScriptedModel
from polyloop.ports import RunStore
from tests.unit._doubles import ScriptedExecutor, ScriptedParser, agent
from tests.unit.test_records_read_back import _close, _with_store

LONE = "\ud800"  # a high surrogate with nothing after it
ESCAPED = "\udcff"  # what surrogateescape makes of the byte 0xff


@pytest.fixture(
    params=[
        "memory",
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.postgres),
        "example-jsonl",
    ]
)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "memory":
        yield "memory:"
    elif request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'runs.db'}"
    elif request.param == "example-jsonl":
        yield f"jsonl:{tmp_path}"
    else:
        yield request.getfixturevalue("postgres_database_dsn")


def _seams() -> tuple[ScriptedModel, ScriptedParser, ScriptedExecutor]:
    replies = [ModelReply(text=f"call {LONE}"), ModelReply(text=f"done {ESCAPED}")]
    parser = ScriptedParser(
        {
            f"call {LONE}": Action(
                text=f"echo {LONE}", tool_name=f"echo{ESCAPED}", tool_args={f"k{LONE}": LONE}
            ),
            f"done {ESCAPED}": FinalAnswer(text=f"answer {ESCAPED}{LONE}"),
        }
    )
    return ScriptedModel(replies), parser, ScriptedExecutor({})


async def _run_then_resume(url: str, goal: str) -> tuple[RunResult, RunResult, int]:
    store: RunStore = await _with_store(url, {})
    try:
        model, parser, executor = _seams()
        result = await polyloop.run(
            agent(), goal, model=model, parser=parser, executor=executor, store=store, run_id="r"
        )
        log = await store.read_log("r")
        model, parser, executor = _seams()
        rebuilt = await polyloop.resume(
            "r", agent(), model=model, parser=parser, executor=executor, store=store
        )
    finally:
        await _close(store)
    assert log.started is not None
    assert log.started.goal == goal
    assert log.replies[0].reply.text == f"call {LONE}"
    intent = next(r for r in log.records if isinstance(r, ActionIntent))
    assert intent.action.tool_args == {f"k{LONE}": LONE}
    assert intent.action.tool_name == f"echo{ESCAPED}"
    assert log.steps[0].step.tool_args_json == json.dumps(
        {f"k{LONE}": LONE}, ensure_ascii=False, separators=(",", ":"), sort_keys=True
    )
    return result, rebuilt, len(log)


def test_tool_arguments_and_a_final_answer_with_lone_surrogates_finish_and_resume(
    store_url: str,
) -> None:
    result, rebuilt, length = asyncio.run(_run_then_resume(store_url, "plain goal"))

    assert result.stop_reason is StopReason.AGENT_FINISHED
    assert result.final_answer == f"answer {ESCAPED}{LONE}"
    assert rebuilt == result
    assert length > 2


def test_a_goal_with_a_lone_surrogate_is_recorded_and_resumes(store_url: str) -> None:
    result, rebuilt, length = asyncio.run(_run_then_resume(store_url, f"goal {LONE}"))

    assert result.stop_reason is StopReason.AGENT_FINISHED
    assert rebuilt == result
    assert length > 2


# --------------------------------------------------------------------------- the codec's rule


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(LONE, id="high"),
        pytest.param(ESCAPED, id="low"),
        pytest.param("\udfff", id="last"),
        pytest.param(f"a{LONE}b", id="inside"),
        pytest.param(f"\\{LONE}", id="after-backslash"),  # the escape must not swallow it
        pytest.param(f'"{LONE}"', id="quoted"),
        pytest.param(f"{ESCAPED}\U0001f600é\x00\x1b", id="with-non-ascii-and-control"),
        pytest.param(chr(0xDC80) + chr(0xDC81), id="two-low"),  # no pair
        pytest.param(chr(0xD800) * 2, id="two-high"),  # no pair
        pytest.param(chr(0xDC00) + chr(0xD800), id="low-then-high"),  # no pair
    ],
)
def test_record_json_is_valid_utf8_and_decodes_to_the_exact_string(text: str) -> None:
    records = [
        RunStarted(
            run_id="r",
            goal=text,
            parameters={text: [text]},
            parameters_hash=parameters_hash({text: [text]}),
            started_at=text,
        ),
        ModelReplied(step_index=0, reply=ModelReply(text=text, usage={text: 1})),
        ActionIntent(
            step_index=1, action=Action(text=text, tool_name=text, tool_args={text: text})
        ),
    ]
    for record in records:
        body = record.to_json()
        body.encode("utf-8")  # never raises
        assert record_from_json(body) == record
        assert record_from_json(body.encode("utf-8")) == record


def test_text_without_lone_surrogates_is_written_unchanged() -> None:
    reply = ModelReply(text="é\U0001f600\u4e2d\x00\x1b\\u00e9")
    body = ModelReplied(step_index=0, reply=reply).to_json()

    assert "é\U0001f600\u4e2d" in body  # non-ASCII stays raw, as canonical JSON writes it
    assert body == json.dumps(
        {"kind": "model_replied", **json.loads(body)},
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )


def test_a_high_surrogate_right_before_a_low_one_reads_back_as_the_character_they_spell() -> None:
    # A UTF-16 pair, not a lone surrogate: JSON (RFC 8259 §7) reads its escape as one character.
    record = ModelReplied(step_index=0, reply=ModelReply(text="\ud83d\ude00"))

    decoded = record_from_json(record.to_json())

    assert isinstance(decoded, ModelReplied)
    assert decoded.reply.text == "\U0001f600"


def test_parameters_with_a_lone_surrogate_hash() -> None:
    assert parameters_hash({"p": LONE}).startswith("sha256:")
    assert parameters_hash({"p": LONE}) != parameters_hash({"p": ESCAPED})
    assert parameters_hash({"p": "é"}) == parameters_hash({"p": "é"})


# --------------------------------------------------------------------------- shown by the CLI


@pytest.mark.parametrize("locale", ["C", "C.UTF-8"])
def test_show_prints_a_lone_surrogate_escaped_under_any_locale(tmp_path: Path, locale: str) -> None:
    """Under the C locale Python's stdout uses ``surrogateescape``, which encodes only the low
    surrogates bytes decode to: a goal with ``\\ud800`` made ``polyloop show`` raise
    ``UnicodeEncodeError`` after printing half the run."""
    import os
    import subprocess
    import sys

    url = f"sqlite:///{tmp_path / 'runs.db'}"
    asyncio.run(_run_then_resume(url, f"goal {LONE}"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LC_", "PYTHONIO"))}
    env.update(LC_ALL=locale, LANG=locale, PYTHONUTF8="0")
    shown = subprocess.run(
        [sys.executable, "-m", "polyloop.cli", "show", "r", "--store", url],
        env=env, capture_output=True, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr.decode("utf-8", "replace")
    assert b"goal \\ud800" in shown.stdout
