"""``polyloop report FILE``, ``report diff OLD NEW``, ``report html``, ``report merge`` and
``report badge``: the command around :mod:`polyloop.report` (which reads, renders, diffs and
merges reports; this only parses arguments, prints or writes, and picks the exit status)."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from polyloop.report import (
    MergeError,
    ReportError,
    badge,
    diff_reports,
    load_report,
    merge_reports,
    render_diff,
    render_html,
    render_markdown,
    render_matrix_text,
    render_text,
)

__all__ = ["REPORT_USAGE", "add_report_commands", "run_report_command"]

REPORT_USAGE = (
    "polyloop report [--markdown | --matrix] FILE\n"
    "       polyloop report diff OLD NEW\n"
    "       polyloop report html REPORT -o conformance.html [--baseline OLD ...]\n"
    "       polyloop report merge A.json B.json ... -o merged.json [--allow-mixed-suites]\n"
    "       polyloop report badge REPORT -o badge.json"
)
_COMMANDS = {"diff": 1, "html": 2, "merge": 3, "badge": 4}  # word → its usage line


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
        "not a report. polyloop report html: the promise x implementation matrix as one "
        "self-contained HTML page (--baseline marks what changed since each earlier report, "
        "oldest first). polyloop report merge: several CI jobs' reports as one. polyloop "
        "report badge: a shields.io endpoint JSON.",
    )
    parser.add_argument(
        "paths",
        nargs="+",
        metavar="FILE",
        help="a report; or diff OLD NEW; html REPORT; merge A B ...; badge REPORT",
    )
    parser.add_argument("--markdown", action="store_true", help="render FILE as Markdown")
    parser.add_argument(
        "--matrix", action="store_true", help="also print the promise x implementation matrix"
    )
    parser.add_argument(
        "-o",
        "--output",
        metavar="PATH",
        help="html, merge, badge: the file to write (- or none: standard output)",
    )
    parser.add_argument(
        "--baseline",
        action="append",
        default=[],
        metavar="OLD.json",
        help="html: an earlier report; cells that changed since it are marked (repeatable, "
        "oldest first)",
    )
    parser.add_argument(
        "--allow-mixed-suites",
        action="store_true",
        help="merge: merge reports of different suite hashes (the promises that differ are marked)",
    )
    parser.set_defaults(func=run_report_command, report_parser=parser)
    return parser


def run_report_command(args: argparse.Namespace) -> int:
    """Run ``report`` from parsed arguments; return the exit status."""
    paths: Sequence[str] = args.paths
    problem = _misplaced_options(args)
    if problem is not None:
        return _refuse(problem)
    try:
        if paths[0] in ("html", "merge", "badge"):
            return _write_command(args)
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
        if args.markdown and args.matrix:
            return _refuse(f"--markdown already holds the matrix; usage: {_usage(0)}")
        text = render_markdown(report) if args.markdown else render_text(report, width)
        if args.matrix:
            text += "\n" + render_matrix_text(report, width)
    except (KeyError, TypeError, AttributeError, ValueError) as error:
        # load_report checks what diffs and baselines key on; rendering needs every field.
        what = f"missing field {error.args[0]!r}" if isinstance(error, KeyError) else str(error)
        return _refuse(f"{paths[0]}: malformed report ({what})")
    _write(text, sys.stdout)
    return 0


def _misplaced_options(args: argparse.Namespace) -> str | None:
    """An option given to a form that does not take it (one line), or ``None``."""
    word = args.paths[0] if args.paths[0] in _COMMANDS else None
    takes = {
        None: {"markdown", "matrix"},
        "diff": set(),
        "html": {"output", "baseline"},
        "merge": {"output", "allow_mixed_suites"},
        "badge": {"output"},
    }[word]
    given = {
        "markdown": args.markdown,
        "matrix": args.matrix,
        "output": args.output is not None,
        "baseline": bool(args.baseline),
        "allow_mixed_suites": args.allow_mixed_suites,
    }
    for name, present in given.items():
        if present and name not in takes:
            flag = "-o" if name == "output" else "--" + name.replace("_", "-")
            form = f"report {word}" if word else "report FILE"
            return f"{form} does not take {flag}; usage: {_usage(_COMMANDS.get(word or '', 0))}"
    return None


def _write_command(args: argparse.Namespace) -> int:
    """``report html``, ``report merge`` and ``report badge``: read, build, write."""
    word, files = args.paths[0], list(args.paths[1:])
    usage = _usage(_COMMANDS[word])
    if word == "merge":
        if not files:
            return _refuse(f"report merge takes one or more reports; usage: {usage}")
        reports = [load_report(path) for path in files]
        try:
            merged = merge_reports(reports, allow_mixed_suites=args.allow_mixed_suites, names=files)
        except MergeError as error:
            return _refuse(f"cannot merge: {error}")
        text = json.dumps(merged, indent=2, ensure_ascii=False) + "\n"
    else:
        if len(files) != 1:
            return _refuse(f"report {word} takes one REPORT; usage: {usage}")
        report = load_report(files[0])
        try:
            if word == "html":
                baselines = [load_report(path) for path in args.baseline]
                text = render_html(report, baselines)
            else:
                text = json.dumps(badge(report), ensure_ascii=False) + "\n"
        except (KeyError, TypeError, AttributeError, ValueError) as error:
            what = f"missing field {error.args[0]!r}" if isinstance(error, KeyError) else str(error)
            return _refuse(f"{files[0]}: malformed report ({what})")
    if args.output in (None, "-"):
        _write(text, sys.stdout)
        return 0
    try:
        with open(args.output, "w", encoding="utf-8") as stream:
            stream.write(text)
    except OSError as error:
        return _refuse(f"{args.output}: cannot write: {error.strerror or error}")
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
