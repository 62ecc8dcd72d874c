"""Reading a report file: every way it can be unreadable is one ReportError, one line, naming
the file and what is wrong, in the order the readers rely on (keys first, then what the
renderers print). Each case breaks one field of a valid report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from polyloop.report import READABLE_SCHEMAS, SCHEMA, ReportError, load_report, schema
from tests.unit._reports import implementation, report, run_under_ascii_locale


def _valid() -> dict[str, Any]:
    data = report(
        implementation("Impl", "model_client", {"model_client.a": "held", "model_client.b": "held"})
    )
    data["implementations"][0]["promises"][0]["reruns"] = 1  # the fewest a rerun can be
    data["implementations"][0]["promises"][1]["reruns"] = 2
    return data


def _write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "report.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _refusal(tmp_path: Path, data: object) -> str:
    path = _write(tmp_path, data)
    with pytest.raises(ReportError) as caught:
        load_report(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: ")
    assert "\n" not in message
    return message.removeprefix(f"{path}: ")


def test_a_valid_report_reads_back_as_written(tmp_path: Path) -> None:
    data = _valid()
    assert load_report(_write(tmp_path, data)) == data
    assert load_report(str(_write(tmp_path, data))) == data


def _impl(data: dict[str, Any]) -> dict[str, Any]:
    item: dict[str, Any] = data["implementations"][0]
    return item


def _promise(data: dict[str, Any], index: int = 0) -> dict[str, Any]:
    entry: dict[str, Any] = _impl(data)["promises"][index]
    return entry


_IMPLEMENTATIONS = "'implementations' must be a list of objects with 'promises'"

# (what to break, the problem the message must end with)
CASES: list[tuple[str, Any, str]] = [
    ("implementations missing", lambda d: d.pop("implementations"), _IMPLEMENTATIONS),
    ("implementations an object", lambda d: d.update(implementations={}), _IMPLEMENTATIONS),
    ("an implementation a string", lambda d: d.update(implementations=["x"]), _IMPLEMENTATIONS),
    ("promises missing", lambda d: _impl(d).pop("promises"), _IMPLEMENTATIONS),
    ("promises an object", lambda d: _impl(d).update(promises={}), _IMPLEMENTATIONS),
    ("id missing", lambda d: _impl(d).pop("id"), "implementations[0]: 'id' must be a string"),
    ("id a number", lambda d: _impl(d).update(id=3), "implementations[0]: 'id' must be a string"),
    (
        "promise not an object",
        lambda d: _impl(d)["promises"].append(7),
        "implementations[0].promises[2]: not an object",
    ),
    (
        "promise id missing",
        lambda d: _promise(d, 1).pop("id"),
        "implementations[0].promises[1]: 'id' must be a string",
    ),
    (
        "unknown outcome",
        lambda d: _promise(d).update(outcome="great"),
        "implementations[0].promises[0]: 'outcome' must be one of held, violated, setup_error, "
        "unverifiable, not_applicable, waived, stale_waiver, overridden, pending",
    ),
    (
        "seam missing",
        lambda d: _impl(d).pop("seam"),
        "implementations[0]: 'seam' must be a string",
    ),
    (
        "collected a bool",
        lambda d: _impl(d).update(collected=True),
        "implementations[0]: 'collected' must be a number",
    ),
    (
        "catalogue a string",
        lambda d: _impl(d).update(catalogue="2"),
        "implementations[0]: 'catalogue' must be a number",
    ),
    (
        "counts a list",
        lambda d: _impl(d).update(counts=[]),
        "implementations[0]: 'counts' must be an object",
    ),
    (
        "source null",
        lambda d: _impl(d).update(source=None),
        "implementations[0]: 'source' must be a string",
    ),
    (
        "missing holds a number",
        lambda d: _impl(d).update(missing=["a", 1]),
        "implementations[0]: 'missing' must be a list of strings",
    ),
    (
        "missing a string",
        lambda d: _impl(d).update(missing="a"),
        "implementations[0]: 'missing' must be a list of strings",
    ),
    (
        "teardown errors an object",
        lambda d: _impl(d).update(teardown_errors={}),
        "implementations[0]: 'teardown_errors' must be a list of strings",
    ),
    (
        "setup error without location",
        lambda d: _impl(d).update(setup_error={"type": "E", "message": "m"}),
        "implementations[0]: 'setup_error' must be null or an object with 'type', 'message' "
        "and 'location'",
    ),
    (
        "setup error a string",
        lambda d: _impl(d).update(setup_error="boom"),
        "implementations[0]: 'setup_error' must be null or an object with 'type', 'message' "
        "and 'location'",
    ),
    (
        "nodeid missing",
        lambda d: _promise(d).pop("nodeid"),
        "implementations[0].promises[0]: 'nodeid' must be a string",
    ),
    (
        "promise text a number",
        lambda d: _promise(d).update(promise=1),
        "implementations[0].promises[0]: 'promise' must be a string",
    ),
    (
        "why a number",
        lambda d: _promise(d).update(why=1),
        "implementations[0].promises[0]: 'why' must be a string or null",
    ),
    (
        "detail a list",
        lambda d: _promise(d, 1).update(detail=[]),
        "implementations[0].promises[1]: 'detail' must be a string or null",
    ),
    (
        "reruns zero",
        lambda d: _promise(d, 1).update(reruns=0),
        "implementations[0].promises[1]: 'reruns' must be a whole number of at least 1",
    ),
    (
        "reruns a bool",
        lambda d: _promise(d, 1).update(reruns=True),
        "implementations[0].promises[1]: 'reruns' must be a whole number of at least 1",
    ),
    (
        "reruns a float",
        lambda d: _promise(d, 1).update(reruns=2.0),
        "implementations[0].promises[1]: 'reruns' must be a whole number of at least 1",
    ),
    (
        "reruns null",
        lambda d: _promise(d, 1).update(reruns=None),
        "implementations[0].promises[1]: 'reruns' must be a whole number of at least 1",
    ),
    (
        "unknown verdict",
        lambda d: d.update(verdict="fine"),
        "'verdict' must be one of conformant, setup_error, violations, incomplete, "
        "no_implementations",
    ),
    ("verdict missing", lambda d: d.pop("verdict"), "'verdict' must be one of conformant"),
    (
        "interrupted a string",
        lambda d: d.update(interrupted="no"),
        "'interrupted' must be true or false",
    ),
    (
        "a lone surrogate",
        lambda d: _promise(d).update(detail="bad \ud800 text"),
        "malformed report (a string holds an unpaired surrogate: 'bad \\ud800 text')",
    ),
    (
        "a lone surrogate in a key",
        lambda d: _impl(d)["counts"].update({"\udcff": 1}),
        "malformed report (a string holds an unpaired surrogate: '\\udcff')",
    ),
]


@pytest.mark.parametrize(("name", "breaks", "problem"), CASES, ids=[c[0] for c in CASES])
def test_each_broken_field_is_named(tmp_path: Path, name: str, breaks: Any, problem: str) -> None:
    data = _valid()
    breaks(data)
    message = _refusal(tmp_path, data)
    assert message.startswith(problem), message


def test_the_keys_are_checked_before_what_is_rendered(tmp_path: Path) -> None:
    # A baseline is refused for its keys first: the second implementation's id beats the first
    # implementation's missing seam, and a promise's id beats its missing nodeid.
    data = _valid()
    second = implementation("Other", "model_client", {"model_client.a": "held"})
    second["id"] = None
    data["implementations"].append(second)
    _impl(data).pop("seam")
    assert _refusal(tmp_path, data) == "implementations[1]: 'id' must be a string"
    data = _valid()
    _promise(data).pop("nodeid")
    _promise(data, 1).update(outcome="nope")
    assert _refusal(tmp_path, data).startswith("implementations[0].promises[1]: 'outcome'")


def test_optional_fields_may_be_absent(tmp_path: Path) -> None:
    data = _valid()
    for field in ("source", "missing", "teardown_errors", "setup_error"):
        _impl(data).pop(field)
    for field in ("why", "verify_yourself", "detail", "waiver_reason", "reruns"):
        _promise(data, 1).pop(field, None)
    data.pop("interrupted")
    assert load_report(_write(tmp_path, data)) == data


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("[]", f"not a {SCHEMA} report (schema: 'list')"),
        ('"text"', f"not a {SCHEMA} report (schema: 'str')"),
        ("3", f"not a {SCHEMA} report (schema: 'int')"),
        ("{}", f"not a {SCHEMA} report (schema: None)"),
        ('{"schema": "junit/1"}', f"not a {SCHEMA} report (schema: 'junit/1')"),
        ('{"schema": ["x"]}', f"not a {SCHEMA} report (schema: list)"),
        (
            '{"schema": "polyloop-conformance/3"}',
            f"not a {SCHEMA} report (schema: 'polyloop-conformance/3'): a newer polyloop wrote "
            "it; upgrade polyloop to read it",
        ),
        ('{"schema": "polyloop-conformance/0"}', "(schema: 'polyloop-conformance/0')"),
        ('{"schema": "polyloop-conformance/2x"}', "(schema: 'polyloop-conformance/2x')"),
        # digits that are not ASCII: str.isdigit() says yes, int() refuses (or reads them)
        ('{"schema": "polyloop-conformance/\u00b2"}', "(schema: 'polyloop-conformance/²')"),
        ('{"schema": "polyloop-conformance/\u0663"}', "(schema: 'polyloop-conformance/٣')"),
        ('{"schema": "polyloop-conformance/\uff13"}', "(schema: 'polyloop-conformance/３')"),
        ('{"schema": "polyloop-conformance/1234567"}', "(schema: 'polyloop-conformance/1234567')"),
        ('{"schema": "other/polyloop-conformance/3"}', "(schema: 'other/polyloop-conformance/3')"),
        ("{", "not JSON: Expecting property name enclosed in double quotes: line 1 column 2"),
        ("{\n\n  x", "not JSON: Expecting property name enclosed in double quotes: line 3"),
        ("[" * 100_000 + "]" * 100_000, "not a report (JSON nested too deeply)"),
    ],
)
def test_a_file_that_is_not_a_report(tmp_path: Path, content: str, problem: str) -> None:
    path = tmp_path / "report.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ReportError) as caught:
        load_report(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: ")
    assert "\n" not in message
    if problem.startswith("("):
        assert message.endswith(problem), message
        assert "newer" not in message
    else:
        assert message == f"{path}: {problem}" or message.startswith(f"{path}: {problem}"), message


@pytest.mark.parametrize(
    ("tag", "newer"),
    [
        ("polyloop-conformance/3", True),
        ("polyloop-conformance/99999", True),
        ("polyloop-conformance/999999", False),  # not a version number: six digits or more
        ("polyloop-conformance/0", False),
        # this version written with leading zeros: not readable, and not newer either
        ("polyloop-conformance/02", False),
        ("polyloop-conformance/00002", False),
    ],
)
def test_a_newer_version_is_only_one_with_a_larger_number(
    tmp_path: Path, tag: str, newer: bool
) -> None:
    with pytest.raises(ReportError) as caught:
        load_report(_write(tmp_path, {"schema": tag}))
    assert ("newer polyloop" in str(caught.value)) is newer


def test_a_file_that_cannot_be_read_says_why(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.json"
    with pytest.raises(ReportError) as caught:
        load_report(missing)
    assert str(caught.value) == f"{missing}: cannot read the report: No such file or directory"
    with pytest.raises(ReportError) as caught:
        load_report(tmp_path)
    assert str(caught.value) == f"{tmp_path}: cannot read the report: Is a directory"


def test_a_report_is_read_as_utf_8_under_an_ascii_locale(tmp_path: Path) -> None:
    # In a child: the locale's encoding is fixed when the interpreter starts.
    data = _valid()
    _promise(data).update(detail="naïve — 执行器 😀")
    path = tmp_path / "report.json"
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    code = (
        "import locale, sys; from polyloop.report import load_report\n"
        "assert locale.getpreferredencoding(False) == 'ANSI_X3.4-1968'\n"
        "print(ascii(load_report(sys.argv[1])['implementations'][0]['promises'][0]['detail']))"
    )
    out = run_under_ascii_locale(code, str(path))
    assert out == ascii("naïve — 执行器 😀") + "\n"


def test_invalid_utf_8_is_not_json(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    path.write_bytes(b'{"schema": "\xff"}')
    with pytest.raises(ReportError, match=r"not JSON: 'utf-8' codec can't decode byte 0xff"):
        load_report(path)


def test_every_readable_schema_ships_its_json_schema() -> None:
    for version in READABLE_SCHEMAS:
        loaded = schema(version)
        assert loaded["properties"]["schema"]["const"] == version
    assert schema() == schema(SCHEMA)
    with pytest.raises(ValueError, match="no schema") as caught:
        schema("polyloop-conformance/9")
    assert str(caught.value) == (
        "no schema for 'polyloop-conformance/9'; known: polyloop-conformance/2, "
        "polyloop-conformance/1"
    )
