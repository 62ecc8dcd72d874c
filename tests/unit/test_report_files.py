"""The plugin's report files and exit status: what lands on disk, byte for byte, whatever the
locale; where a report cannot be written, said before the run; the baseline a report makes."""

from __future__ import annotations

import json
import os
import platform
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from polyloop.report import ReportError
from pytest_polyloop._report import (
    _first_paragraph,
    check_writable,
    environment_of,
    load_baseline,
    new_report_id,
    verdict_exit_status,
    write_json,
    write_markdown,
)
from tests.unit._reports import implementation, report, run_under_ascii_locale


@pytest.mark.parametrize(
    ("verdict", "status"),
    [
        ("conformant", 0),
        ("setup_error", 1),
        ("violations", 1),
        ("incomplete", 1),
        ("no_implementations", 5),
        ("anything else", 5),
    ],
)
def test_each_verdict_has_its_exit_status(verdict: str, status: int) -> None:
    assert verdict_exit_status(verdict) == status


def test_json_is_indented_utf_8_ending_in_a_newline(tmp_path: Path) -> None:
    data = report(implementation("执行器 😀", "model_client", {"model_client.a": "held"}))
    data["implementations"][0]["promises"][0]["detail"] = "lone \ud800 surrogate"
    path = tmp_path / "deep" / "er" / "report.json"
    write_json(data, path)
    raw = path.read_bytes()
    text = raw.decode("utf-8")  # valid UTF-8, lone surrogate escaped
    assert "执行器 😀" in text  # not \u-escaped
    assert '"lone \\ud800 surrogate"' in text
    assert text.endswith("}\n")
    assert text.startswith('{\n  "schema": ')  # indented by two
    assert json.loads(text)["implementations"][0]["id"] == "执行器 😀"


def test_the_files_are_utf_8_under_an_ascii_locale(tmp_path: Path) -> None:
    # In a child: the locale's encoding is fixed when the interpreter starts.
    code = (
        "import sys; from pathlib import Path\n"
        "from pytest_polyloop._report import write_json, write_markdown\n"
        "out = Path(sys.argv[1])\n"
        "write_json({'id': '\\u6267\\u884c\\u5668'}, out / 'r.json')\n"
        "write_markdown('## \\u6267\\u884c\\u5668\\n', out / 'r.md')\n"
    )
    run_under_ascii_locale(code, str(tmp_path), GITHUB_STEP_SUMMARY=str(tmp_path / "s.md"))
    assert (tmp_path / "r.json").read_bytes().decode("utf-8") == '{\n  "id": "执行器"\n}\n'
    assert (tmp_path / "r.md").read_bytes().decode("utf-8") == "## 执行器\n"
    assert (tmp_path / "s.md").read_bytes().decode("utf-8") == "## 执行器\n"


def test_markdown_is_written_and_appended_to_the_step_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n", encoding="utf-8")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    path = tmp_path / "a" / "report.md"
    written = write_markdown("## 执行器 \udcff done\n", path)
    assert written == [path, summary]
    assert path.read_bytes().decode("utf-8") == "## 执行器 \\udcff done\n"
    assert summary.read_bytes().decode("utf-8") == "earlier step\n## 执行器 \\udcff done\n"
    written = write_markdown("second\n", None)
    assert written == [summary]
    assert summary.read_text(encoding="utf-8").endswith("done\nsecond\n")


def test_without_a_step_summary_only_the_file_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    assert write_markdown("x\n", None) == []
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", "")
    path = tmp_path / "r.md"
    assert write_markdown("x\n", path) == [path]


@pytest.mark.parametrize("value", [None, ""])
def test_no_path_is_nothing_to_check(value: str | None) -> None:
    check_writable("polyloop_report", value)


def test_a_writable_path_passes(tmp_path: Path) -> None:
    check_writable("polyloop_report", str(tmp_path / "report.json"))
    check_writable("polyloop_report", str(tmp_path / "new" / "dirs" / "report.json"))
    existing = tmp_path / "old.json"
    existing.write_text("{}", encoding="utf-8")
    check_writable("polyloop_report", str(existing))


def test_a_directory_is_refused_with_the_flag(tmp_path: Path) -> None:
    with pytest.raises(pytest.UsageError) as caught:
        check_writable("polyloop_report_md", str(tmp_path))
    assert str(caught.value) == (
        f"--polyloop-report-md {tmp_path}: cannot write the report there: is a directory"
    )


def test_a_path_under_a_file_is_refused_naming_the_file(tmp_path: Path) -> None:
    blocker = tmp_path / "file.txt"
    blocker.write_text("x", encoding="utf-8")
    target = blocker / "sub" / "report.json"
    with pytest.raises(pytest.UsageError) as caught:
        check_writable("polyloop_report", str(target))
    assert str(caught.value) == (
        f"--polyloop-report {target}: cannot write the report there: {blocker} is not a directory"
    )


@pytest.mark.skipif(
    os.geteuid() == 0,
    reason="root writes into a read-only directory; the next test covers it for root",
)
def test_a_read_only_directory_is_refused(tmp_path: Path) -> None:  # pragma: no cover - root
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        with pytest.raises(pytest.UsageError, match="is not writable"):
            check_writable("polyloop_report", str(locked / "r.json"))
    finally:
        locked.chmod(0o700)


def test_a_read_only_directory_is_refused_even_for_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    real_access = os.access
    monkeypatch.setattr(
        os, "access", lambda p, mode: False if Path(p) == locked else real_access(p, mode)
    )
    with pytest.raises(pytest.UsageError) as caught:
        check_writable("polyloop_report", str(locked / "r.json"))
    assert str(caught.value).endswith(f"cannot write the report there: {locked} is not writable")


def test_report_ids_are_fresh_hex() -> None:
    ids = {new_report_id() for _ in range(100)}
    assert len(ids) == 100
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids)


@pytest.mark.parametrize(
    ("doc", "first"),
    [
        ("One line.", "One line."),
        ("  Two\n  lines.\n\nSecond paragraph.", "Two lines."),
        ("\n\nLeading blank.\n\nMore.", "Leading blank."),
        ("", ""),
    ],
)
def test_a_promise_text_is_its_docstring_first_paragraph(doc: str, first: str) -> None:
    assert _first_paragraph(doc) == first


def _written(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / "baseline.json"
    write_json(data, path)
    return path


def test_a_baseline_has_each_outcome_and_the_catalogue_per_seam(tmp_path: Path) -> None:
    data = report(
        implementation(
            "A", "model_client", {"model_client.x": "held", "model_client.y": "pending"}
        ),
        implementation("B", "run_store", {"run_store.z": "violated"}),
    )
    baseline = load_baseline(_written(tmp_path, data))
    assert dict(baseline.outcomes) == {
        ("A", "model_client.x"): "held",
        ("A", "model_client.y"): "pending",
        ("B", "run_store.z"): "violated",
    }
    assert baseline.catalogue == {
        ("model_client", "model_client.x"),
        ("model_client", "model_client.y"),
        ("run_store", "run_store.z"),
    }
    assert baseline.implementations == {"A", "B"}
    assert baseline.is_pending("model_client", "A", "model_client.y")
    assert not baseline.is_pending("model_client", "A", "model_client.x")
    assert baseline.is_pending("model_client", "A", "model_client.new")  # not in its kit then
    # The catalogue is per seam: B's kit had run_store.z, so A's violation of it fails.
    assert not baseline.is_pending("run_store", "A", "run_store.z")
    assert not baseline.is_pending("model_client", "C", "model_client.new")  # a new one


def test_a_baseline_that_is_not_a_report_is_a_report_error(tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    path.write_text("[]", encoding="utf-8")
    with pytest.raises(ReportError, match=re.escape(str(path))):
        load_baseline(path)


class _Config:
    """What environment_of reads of a pytest config: ``option`` and ``getoption``."""

    def __init__(self, job: object = None, **option: object) -> None:
        self.option = SimpleNamespace(**option)
        self._job = job
        self.rootpath = Path("/project")

    def getoption(self, name: str, default: object = None) -> object:
        assert name in (
            "polyloop_job",
            "polyloop_search",
            "polyloop_search_budget",
            "polyloop_examples",
        )
        return self._job if name == "polyloop_job" and self._job is not None else default

    def getini(self, name: str) -> object:
        return ""  # the search's ini keys, unset


@pytest.mark.parametrize(
    ("option", "workers"),
    [
        ({}, 0),  # no xdist at all
        ({"tx": ["popen", "popen"]}, 0),  # xdist's option without --dist
        ({"dist": "no", "tx": ["popen", "popen"]}, 0),
        ({"dist": "load", "tx": ["popen", "popen", "popen"]}, 3),
        ({"dist": "loadscope"}, 0),  # no tx: no worker was started
        ({"dist": "load", "tx": None}, 0),
    ],
)
def test_the_environment_counts_xdist_workers_only_when_distributing(
    option: dict[str, object], workers: int
) -> None:
    environment = environment_of(_Config(**option))  # type: ignore[arg-type]
    assert environment["xdist_workers"] == workers


def test_the_environment_names_the_os_tersely(monkeypatch: pytest.MonkeyPatch) -> None:
    # On Linux platform() is the same text terse or not; on macOS and FreeBSD it is not.
    def platform_of_a_mac(aliased: bool = False, terse: bool = False) -> str:
        return "macOS-14.5" if terse else "macOS-14.5-arm64-arm-64bit"

    monkeypatch.setattr(platform, "platform", platform_of_a_mac)
    assert environment_of(_Config())["os"] == "macOS-14.5"  # type: ignore[arg-type]


@pytest.mark.parametrize(("job", "shown"), [(None, None), ("", None), ("shard-2", "shard-2")])
def test_the_environment_names_the_job_when_given(job: str | None, shown: str | None) -> None:
    environment = environment_of(_Config(job=job))  # type: ignore[arg-type]
    assert environment["job"] == shown
    assert environment["python"] == platform.python_version()
    assert environment["pytest"] == pytest.__version__
    assert environment["os"] == platform.platform(terse=True)
    assert "testing" in environment["extras"]
    assert environment["extras"] == sorted(environment["extras"])
