"""A test report whose text holds a lone surrogate, made sendable and printable.

An implementation under test may print, log or raise with a lone surrogate (the kit draws them
into records and events, and a model's text can hold one). pytest-xdist sends each report to
the controller over a channel that refuses any string UTF-8 cannot encode, so one such report
ended the whole ``-n`` session in an INTERNALERROR; JUnit XML and the conformance report could
not be written either. The report's captured sections and its failure text are escaped instead,
for every test: the text a person reads loses nothing but the raw code point.

The escape is Python's ``backslashreplace``, which writes a surrogate as ``\\udXXX`` — the form
``polyloop._base._utf8_json`` uses — without importing the runtime into every pytest session.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

__all__ = ["escape_surrogates"]


def escape_surrogates(report: pytest.TestReport) -> None:
    """Escape every lone surrogate in ``report``'s sections and failure text, in place."""
    if any(not _encodes(content) for _, content in report.sections):
        report.sections = [(title, _escaped(content)) for title, content in report.sections]
    longrepr = report.longrepr
    if longrepr is not None and not _encodes(str(longrepr)):
        # Escaped where it sits, so the failure keeps its structure (the crash line the
        # conformance report's detail is read from, the traceback entries).
        report.longrepr = _escaped(longrepr)


def _encodes(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _escaped(value: Any) -> Any:
    if isinstance(value, str):
        return value if _encodes(value) else value.encode("utf-8", "backslashreplace").decode()
    if isinstance(value, list | tuple):
        return type(value)(_escaped(item) for item in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):  # pytest's failure reprs are dataclasses
            object.__setattr__(value, field.name, _escaped(getattr(value, field.name)))
    return value
