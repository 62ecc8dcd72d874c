"""``polyloop report FILE`` and ``polyloop report diff OLD NEW``: the command around
:mod:`polyloop.report` (which reads, renders and diffs reports; this only parses arguments,
prints and picks the exit status)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from polyloop.report import (
    ReportError,
    diff_reports,
    load_report,
    render_diff,
    render_markdown,
    render_text,
)

__all__ = ["add_report_commands", "run_report_command"]


def add_report_commands(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``report FILE`` and ``report diff OLD NEW`` to an argparse subparsers object.

    The handler is stored as the ``func`` default: ``args.func(args)`` returns the exit status
    (0; 1 when ``diff`` finds a regression; 2 for a file that is not a report).
    """
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "report",
        help="show a conformance report, or diff two",
        description="polyloop report FILE: show a conformance report (JSON from "
        "pytest --polyloop-conformance --polyloop-report FILE). polyloop report diff OLD NEW: "
        "list promises that regressed (held → violated), recovered, appeared and disappeared; "
        "exit 1 on any regression.",
    )
    parser.add_argument(
        "paths", nargs="+", metavar="FILE | diff OLD NEW", help="a report, or: diff OLD NEW"
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
                print("usage: polyloop report diff OLD NEW", file=sys.stderr)
                return 2
            old, new = load_report(paths[1]), load_report(paths[2])
            diff = diff_reports(old, new)
            sys.stdout.write(render_diff(diff, old, new))
            return 1 if diff.regressed else 0
        if len(paths) != 1:
            print("usage: polyloop report FILE  |  polyloop report diff OLD NEW", file=sys.stderr)
            return 2
        report = load_report(paths[0])
    except ReportError as error:
        print(f"polyloop report: {error}", file=sys.stderr)
        return 2
    try:
        text = render_markdown(report) if args.markdown else render_text(report)
    except (KeyError, TypeError, AttributeError, ValueError) as error:
        # load_report checks what diffs and baselines key on; rendering needs every field.
        what = f"missing field {error.args[0]!r}" if isinstance(error, KeyError) else str(error)
        print(f"polyloop report: {paths[0]}: malformed report ({what})", file=sys.stderr)
        return 2
    sys.stdout.write(text)
    return 0
