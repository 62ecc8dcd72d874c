"""Read a system-call trace of the power-loss probe's writer (``strace -f -y -xx``).

The trace is the text ``strace`` writes with ``-f`` (every thread and child), ``-y`` (each file
descriptor followed by its path, ``3</abs/path>``), ``-xx`` (every string in hexadecimal, so no
byte of data or of a path can be mistaken for syntax) and ``-e write=all`` (the bytes of every
write-family call, dumped in full after the call's line whatever the string limit). This module
turns it into :class:`Syscall` values in the order the calls *completed* — a call one thread
began and another thread's calls interrupted (``<unfinished ...>`` / ``<... resumed>``) is
placed where it returned. It knows nothing about files: :mod:`._power_model` replays the calls.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

__all__ = ["Syscall", "TraceError", "parse_trace"]

_LINE = re.compile(r"^(\d+) +(.*)$")
_CALL = re.compile(r"^([a-z_0-9]+)\((.*)\) += (-?\d+|0x[0-9a-f]+|\?)(<[^>]*>(?:\(deleted\))?)?")
_FD = re.compile(r"^(-?\w+)<((?:\\x[0-9a-f]{2})*)>(\(deleted\))?$")
_STRING = re.compile(r'^"((?:\\x[0-9a-f]{2})*)"(\.\.\.)?$')
_UNFINISHED = " <unfinished ...>"
_RESUMED = re.compile(r"^<\.\.\. ([a-z_0-9]+) resumed>(.*)$")


class TraceError(Exception):
    """The trace cannot be read (a line or a data dump of a form this reader does not know)."""


@dataclass
class Syscall:
    """One completed system call: its name, its arguments as ``strace`` printed them (split at
    the top level), its return value (``None`` when it failed or did not return) and, for a
    write-family call, the bytes written."""

    pid: int
    name: str
    args: list[str]
    result: int | None
    result_path: str | None = None
    data: bytearray = field(default_factory=bytearray)

    def fd_path(self, index: int = 0) -> tuple[str, str | None]:
        """The ``index``-th argument as (descriptor, its path or ``None``)."""
        return decode_fd(self.args[index])


def decode_hex(text: str) -> bytes:
    """``\\x61\\x62`` → ``b"ab"``."""
    return bytes.fromhex(text.replace("\\x", ""))


def decode_fd(text: str) -> tuple[str, str | None]:
    """``3<\\x2f…>`` → ("3", "/…"); a bare descriptor or constant → (it, None)."""
    match = _FD.match(text.strip())
    if match is None:
        return text.strip(), None
    path = decode_hex(match.group(2)).decode("utf-8", "surrogateescape")
    return match.group(1), path + (" (deleted)" if match.group(3) else "")


def decode_string(text: str) -> bytes:
    """A quoted ``-xx`` string argument → its bytes (as far as ``strace`` printed it)."""
    match = _STRING.match(text.strip())
    if match is None:
        raise TraceError(f"not a string argument: {text[:80]!r}")
    return decode_hex(match.group(1))


def split_args(text: str) -> list[str]:
    """Split ``strace``'s argument list at its top-level commas (not inside ``[]``/``{}``)."""
    parts: list[str] = []
    depth, start, quoted = 0, 0, False
    for at, char in enumerate(text):
        if char == '"':
            quoted = not quoted
        elif quoted:
            continue
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:at].strip())
            start = at + 1
    tail = text[start:].strip()
    if tail:
        parts.append(tail)
    return parts


def _complete(pid: int, text: str) -> Syscall | None:
    match = _CALL.match(text)
    if match is None:
        return None  # a call that never returned (the process exited inside it), or noise
    name, args, result, decoration = match.groups()
    value = None if result in ("?", "-1") else int(result, 0)
    path = decode_fd(f"{result}{decoration}")[1] if decoration else None
    return Syscall(pid, name, split_args(args), value, path)


def _dump_bytes(line: str) -> bytes:
    """The bytes of one `` | 00000  61 62 …  ab |`` line of a data dump."""
    _, _, rest = line[3:].partition("  ")
    return bytes.fromhex(rest[:49].replace(" ", ""))


def parse_trace(lines: Iterable[str]) -> Iterator[Syscall]:
    """Every completed call of the trace, in order of completion, with its written bytes."""
    pending: dict[int, str] = {}
    last: Syscall | None = None
    for raw in lines:
        line = raw.rstrip("\n")
        if line.startswith(" | "):
            if last is None:
                raise TraceError(f"a data dump line with no call before it: {line[:80]!r}")
            last.data += _dump_bytes(line)
            continue
        if line.startswith(" * "):
            continue  # "* N bytes in buffer K": the dump of a vector call goes on
        match = _LINE.match(line)
        if match is None:
            continue
        pid, text = int(match.group(1)), match.group(2)
        if last is not None:
            yield last
            last = None
        if text.startswith(("---", "+++")):
            continue  # a signal, or a process's exit
        if text.endswith(_UNFINISHED):
            pending[pid] = text[: -len(_UNFINISHED)]
            continue
        resumed = _RESUMED.match(text)
        if resumed is not None:
            text = pending.pop(pid, resumed.group(1) + "(") + resumed.group(2)
        last = _complete(pid, text)
    if last is not None:
        yield last
