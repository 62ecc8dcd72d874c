"""JsonToolCallParser and CodeBlockParser: the accepted forms and every failure mode."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from polyloop import Action, FinalAnswer, InvalidDecision, ModelReply
from polyloop.parsers import CodeBlockParser, JsonToolCallParser
from polyloop.ports import DecisionParser
from polyloop.testing._shared._base import in_ci


def reply(text: str) -> ModelReply:
    return ModelReply(text=text)


def json_parse(text: str, **options: object) -> object:
    return JsonToolCallParser(**options).parse(reply(text))  # type: ignore[arg-type]


def code_parse(text: str, **options: object) -> object:
    return CodeBlockParser(**options).parse(reply(text))  # type: ignore[arg-type]


def feedback(decision: object) -> str:
    assert isinstance(decision, InvalidDecision), decision
    return decision.feedback


# --------------------------------------------------------------------------- JSON: accepted


@pytest.mark.parametrize(
    "text",
    [
        '{"tool": "search", "arguments": {"q": "x", "n": 2}}',
        '{"name": "search", "args": {"q": "x", "n": 2}}',
        '{"tool": "search", "q": "x", "n": 2}',
        '  \n{"n": 2, "q": "x", "tool": "search"}\n ',
        'Let me look.\n```json\n{"tool": "search", "arguments": {"q": "x", "n": 2}}\n```\nDone.',
        '```\n{"tool": "search", "arguments": {"q": "x", "n": 2}}\n```',
        'I will call {"tool": "search", "arguments": {"q": "x", "n": 2}} now, don\'t "worry".',
        '```JSON\n{"tool": "search", "arguments": {"q": "x", "n": 2}}',  # unterminated fence
    ],
)
def test_every_accepted_spelling_gives_the_same_canonical_action(text):
    decision = json_parse(text)
    assert decision == Action(
        text='{"arguments":{"n":2,"q":"x"},"tool":"search"}',
        tool_name="search",
        tool_args={"q": "x", "n": 2},
    )


def test_name_is_an_ordinary_argument_when_tool_is_present():
    decision = json_parse('{"tool": "greet", "name": "Ada"}')
    assert isinstance(decision, Action)
    assert (decision.tool_name, decision.tool_args) == ("greet", {"name": "Ada"})


def test_null_arguments_mean_no_arguments_but_an_empty_string_is_not_an_object():
    none = json_parse('{"tool": "ping", "arguments": null}')
    assert isinstance(none, Action)
    assert none.tool_args == {}
    assert '"arguments" must be a JSON object' in feedback(
        json_parse('{"tool": "ping", "arguments": ""}')
    )


def test_a_tool_name_is_taken_verbatim_even_with_path_characters():
    decision = json_parse('{"tool": "../../etc/passwd", "arguments": {}}')
    assert isinstance(decision, Action)
    assert decision.tool_name == "../../etc/passwd"  # the executor decides; here it is a name


def test_unicode_survives_into_the_action():
    decision = json_parse('{"tool": "翻訳", "arguments": {"text": "😀 \\u0000 é"}}')
    assert isinstance(decision, Action)
    assert decision.tool_args == {"text": "😀 \u0000 é"}
    assert decision.text == '{"arguments":{"text":"😀 \\u0000 é"},"tool":"翻訳"}'


def test_the_final_answer_form():
    assert json_parse('{"final_answer": "42"}') == FinalAnswer(text="42")
    assert json_parse('```json\n{"final_answer": "done ✓"}\n```') == FinalAnswer(text="done ✓")


def test_the_final_answer_key_is_configurable_and_can_be_disabled():
    assert json_parse('{"answer": "42"}', final_answer_key="answer") == FinalAnswer(text="42")
    disabled = feedback(json_parse('{"final_answer": "42"}', final_answer_key=None))
    assert 'no "tool" key' in disabled
    assert "final_answer" not in disabled


# --------------------------------------------------------------------------- JSON: failures


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I think the answer is 42.", "No JSON tool call found"),
        ("", "No JSON tool call found"),
        (
            '{"tool": "a",}',
            "Your JSON is invalid: Expecting property name enclosed in double quotes "
            "at line 1 column 14",
        ),
        ('Call:\n  {"tool": "a" "b"}', "invalid: Expecting ',' delimiter at line 2 column 16"),
        (
            '```json\n{"tool": 1\n```',
            "The JSON in your code block is invalid: "
            "Expecting ',' delimiter at line 1 column 11 of the block",
        ),
        ('{"tool": "a", "arguments": {"x": NaN}}', "NaN is not allowed in JSON"),
        ('{"tool": "a", "n": ' + "9" * 5000 + "}", "Your JSON is invalid: Exceeds the limit"),
        ("[1, 2]", "The JSON in your reply is an array, not an object"),
        ('"just a string"', "is a string, not an object"),
        ("```json\n42\n```", "The JSON in your code block is a number, not an object"),
        ('{"arguments": {"q": 1}}', 'Your JSON object has no "tool" key'),
        ('{"tool": 7}', '"tool" must be a string naming a tool, got 7'),
        ('{"tool": "   "}', '"tool" is empty'),
        (
            '{"tool": "a", "arguments": [1]}',
            '"arguments" must be a JSON object of named arguments, got [1]',
        ),
        ('{"tool": "a", "args": "x=1"}', '"args" must be a JSON object'),
        (
            '{"tool": "a", "arguments": {}, "thought": "hm"}',
            "Unexpected keys next to \"arguments\": 'thought'",
        ),
        ('{"tool": "a"} and {"tool": "b"}', "Found several JSON objects"),
        ('```json\n{"tool": "a"}\n```\n```json\n{"tool": "b"}\n```', "Found 2 JSON code blocks"),
        ('{"tool": "a", "final_answer": "b"}', 'both "tool" and "final_answer"'),
        ('{"final_answer": 42}', '"final_answer" must be a string, got 42'),
        ('{"final_answer": " "}', '"final_answer" is empty'),
        ("{" * 10_000, "Your JSON is invalid"),
        ('{"a":' * 5_000, "nested deeper than 100 levels"),
        ("{x} " * 100, "more than 64 {...} groups"),
    ],
)
def test_each_failure_mode_gets_its_own_feedback(text, expected):
    text_feedback = feedback(json_parse(text))
    assert expected in text_feedback
    assert text_feedback.endswith("when you are done.")  # and the format to use


def test_a_deeply_nested_array_is_not_json_found_rather_than_a_crash():
    assert "No JSON tool call found" in feedback(json_parse("[" * 100_000))


def test_a_huge_reply_with_one_call_at_the_end_is_found():
    text = "x" * 2_000_000 + '{"tool": "t", "arguments": {}}'
    assert isinstance(json_parse(text), Action)


# --------------------------------------------------------------------------- code blocks


def test_one_python_block_is_an_action_with_the_code_as_text():
    decision = code_parse("Let me compute.\n```python\nx = 1\nprint(x)\n```\nThat prints 1.")
    assert decision == Action(text="x = 1\nprint(x)")


@pytest.mark.parametrize(
    "fence", ["```python", "```Python", "```py", "```python3", "```", "  ````python"]
)
def test_python_blocks_may_be_labelled_py_python3_or_not_at_all(fence):
    closing = "````" if fence.strip().startswith("````") else "```"
    assert code_parse(f"{fence}\nprint(1)\n{closing}") == Action(text="print(1)")


def test_crlf_line_endings_are_read_as_lines():
    assert code_parse("```python\r\nprint(1)\r\n```\r\n") == Action(text="print(1)")


def test_another_language_is_accepted_when_configured_or_with_none():
    assert code_parse("```bash\nls\n```", language="bash") == Action(text="ls")
    assert code_parse("```rust\nfn f() {}\n```", language=None) == Action(text="fn f() {}")


def test_a_final_answer_line_outside_code_is_a_final_answer():
    decision = code_parse("All done.\nFINAL ANSWER: 42\nbecause 6 * 7")
    assert decision == FinalAnswer(text="42\nbecause 6 * 7")


def test_the_prefix_inside_a_code_block_is_code_not_a_final_answer():
    text = '```python\nprint("FINAL ANSWER: 3")\n```'
    assert code_parse(text) == Action(text='print("FINAL ANSWER: 3")')


def test_the_final_answer_form_can_be_disabled_or_renamed():
    assert "No code block found" in feedback(
        code_parse("FINAL ANSWER: 1", final_answer_prefix=None)
    )
    assert code_parse("Answer: 1", final_answer_prefix="Answer:") == FinalAnswer(text="1")


def test_each_code_block_failure_mode_has_a_distinct_feedback():
    parser = CodeBlockParser()
    cases = {
        "no_block": "Just prose, no code.",
        "several": "```python\na = 1\n```\ntext\n```\nb = 2\n```",
        "empty": "```python\n   \n```",
        "unterminated": "```python\nprint('cut off",
        "wrong_language": "```bash\nls\n```",
        "both": "FINAL ANSWER: 3\n```python\nprint(3)\n```",
        "empty_final": "FINAL ANSWER:   ",
    }
    feedbacks = {mode: feedback(parser.parse(reply(text))) for mode, text in cases.items()}
    assert len(set(feedbacks.values())) == len(cases)
    assert feedbacks["no_block"] == parser.feedback.no_block
    assert feedbacks["several"] == parser.feedback.several.replace("{count}", "2")
    assert feedbacks["empty"] == parser.feedback.empty
    assert feedbacks["unterminated"] == parser.feedback.unterminated.replace("{line}", "1")
    assert feedbacks["wrong_language"].startswith("Found a code block labelled 'bash'")
    assert feedbacks["both"] == parser.feedback.both
    assert feedbacks["empty_final"] == parser.feedback.empty_final


def test_an_unterminated_fence_is_reported_even_after_a_good_block():
    text = "```python\nprint(1)\n```\n```python\nprint(2)"
    assert "line 4" in feedback(code_parse(text))


def test_a_language_with_braces_cannot_break_the_feedback():
    parser = CodeBlockParser(language="{0}")
    assert "```{0}" in feedback(parser.parse(reply("```bash\nls\n```")))


@pytest.mark.parametrize(
    "kwargs", [{"language": ""}, {"language": "  "}, {"final_answer_prefix": ""}]
)
def test_empty_configuration_is_refused(kwargs):
    with pytest.raises(ValueError, match="must be a non-empty str"):
        CodeBlockParser(**kwargs)


# --------------------------------------------------------------------------- both: total, pure

PARSERS: list[DecisionParser] = [
    JsonToolCallParser(),
    CodeBlockParser(),
    JsonToolCallParser(final_answer_key=None),
]

# Pieces that steer random text into the parsers' interesting paths.
FRAGMENTS = st.sampled_from(
    [
        "```",
        "```python",
        "```json",
        "\n",
        "\r\n",
        "{",
        "}",
        "[",
        "]",
        '"',
        "\\",
        ":",
        ",",
        '"tool"',
        '"name"',
        '"arguments"',
        '"args"',
        '"final_answer"',
        "null",
        "NaN",
        "1e999",
        "FINAL ANSWER:",
        "\udcff",
        "\x00",
        "\u202e",
        "😀",
        "  ",
    ]
)
REPLY_TEXT = st.one_of(
    st.text(),
    st.lists(st.one_of(FRAGMENTS, st.text(max_size=5)), max_size=40).map("".join),
)


BOUNDED = settings(
    max_examples=200,
    deadline=None,
    derandomize=in_ci(),
    suppress_health_check=[HealthCheck.too_slow],
)


@BOUNDED
@given(text=REPLY_TEXT, reasoning=st.text(max_size=20))
def test_parsers_never_raise_and_are_deterministic(text, reasoning):
    for parser in PARSERS:
        first = parser.parse(ModelReply(text=text, reasoning=reasoning))
        second = parser.parse(ModelReply(text=text, reasoning=reasoning))
        assert isinstance(first, Action | FinalAnswer | InvalidDecision)
        assert first == second
        if isinstance(first, InvalidDecision):
            assert first.feedback.strip()
        if isinstance(first, Action) and first.tool_name is not None:
            assert json.loads(first.text) == {"tool": first.tool_name, "arguments": first.tool_args}
