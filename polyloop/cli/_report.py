"""``polyloop report FILE`` and ``polyloop report diff OLD NEW``: the command around
:mod:`polyloop.report` (which reads, renders and diffs reports; this only parses arguments,
prints and picks the exit status)."""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from polyloop.report import (
    ReportError,
    diff_reports,
    load_report,
    render_diff,
    render_markdown,
    render_text,
)

__all__ = ["REPORT_USAGE", "add_report_commands", "run_report_command"]

REPORT_USAGE = "polyloop report [--markdown] FILE\n       polyloop report diff OLD NEW"


def add_report_commands(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``report FILE`` and ``report diff OLD NEW`` to an argparse subparsers object.

    The handler is stored as the ``func`` default: ``args.func(args)`` returns the exit status
    (0; 1 when ``diff`` finds a regression; 2 for wrong arguments or a file that is not a
    report).
    """
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "report",
        help="show a conformance report, or diff two (exit 1 on a regression)",
        usage=REPORT_USAGE,
        description="polyloop report FILE: show a conformance report (JSON from "
        "pytest --polyloop-conformance --polyloop-report FILE). polyloop report diff OLD NEW: "
        "list each promise that moved from held to any other outcome (waived and overridden "
        "listed apart), each implementation of OLD missing from NEW, recoveries and other "
        "moves; exit 1 on a regression, 0 otherwise, 2 for wrong arguments or a file that is "
        "not a report.",
    )
    parser.add_argument(
        "paths", nargs="+", metavar="FILE", help="a report; or the word diff, then OLD and NEW"
    )
    parser.add_argument("--markdown", action="store_true", help="render FILE as Markdown")
    parser.set_defaults(func=run_report_command, report_parser=parser)
    return parser


def run_report_command(args: argparse.Namespace) -> int:
    """Run ``report`` from parsed arguments; return the exit status."""
    paths: Sequence[str] = args.paths
    try:
        if paths[0] == "diff":
            if len(paths) != 3:
                return _refuse(f"report diff takes two files, OLD and NEW; usage: {_usage(1)}")
            if args.markdown:
                return _refuse(f"--markdown renders one report, not a diff; usage: {_usage(0)}")
            old, new = load_report(paths[1]), load_report(paths[2])
            diff = diff_reports(old, new)
            _write(render_diff(diff, old, new), sys.stdout)
            return 1 if diff.has_regression else 0
        if len(paths) != 1:
            return _refuse(f"report takes one FILE (or: diff OLD NEW); usage: {_usage(0)}")
        report = load_report(paths[0])
    except ReportError as error:
        return _refuse(str(error))
    try:
        width = shutil.get_terminal_size().columns if sys.stdout.isatty() else None
        text = render_markdown(report) if args.markdown else render_text(report, width)
    except (KeyError, TypeError, AttributeError, ValueError) as error:
        # load_report checks what diffs and baselines key on; rendering needs every field.
        what = f"missing field {error.args[0]!r}" if isinstance(error, KeyError) else str(error)
        return _refuse(f"{paths[0]}: malformed report ({what})")
    _write(text, sys.stdout)
    return 0


def _usage(line: int) -> str:
    return REPORT_USAGE.splitlines()[line].strip()


def _refuse(message: str) -> int:
    _write(f"polyloop: error: {' '.join(message.split())}\n", sys.stderr)
    return 2


def _write(text: str, stream: TextIO) -> None:
    """Write ``text``; what the stream's encoding cannot show is escaped, never a traceback."""
    encoding = getattr(stream, "encoding", None) or "utf-8"
    try:
        text.encode(encoding)
    except UnicodeEncodeError:
        text = text.encode(encoding, "backslashreplace").decode(encoding)
    stream.write(text)
