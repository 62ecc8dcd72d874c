"""Markdown code fences, found line by line (total and linear for any text)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FenceScan", "FencedBlock", "scan_fences"]


@dataclass(frozen=True, slots=True)
class FencedBlock:
    """One fenced block. ``language`` is the info string's first word, lower-cased."""

    language: str
    info: str
    body: str
    line: int  # 1-based line of the opening fence
    closed: bool


@dataclass(frozen=True, slots=True)
class FenceScan:
    blocks: tuple[FencedBlock, ...]
    outside_lines: tuple[tuple[int, str], ...]  # (0-based line number, text) not in a block
    lines: tuple[str, ...]


def _opening(line: str) -> tuple[int, str] | None:
    """(backtick count, info string) if ``line`` opens a fence, else ``None``.

    An opening fence is up to three spaces, three or more backticks, then an info string
    without backticks (CommonMark), so ``Use ```x``` inline`` is not a fence.
    """
    stripped = line.lstrip(" ")
    if len(line) - len(stripped) > 3 or not stripped.startswith("```"):
        return None
    count = len(stripped) - len(stripped.lstrip("`"))
    info = stripped[count:].strip()
    if "`" in info:
        return None
    return count, info


def _closes(line: str, count: int) -> bool:
    stripped = line.strip()
    return len(stripped) >= count and stripped == "`" * len(stripped)


def scan_fences(text: str) -> FenceScan:
    """Every fenced block of ``text`` and the lines outside blocks.

    Lines are split on ``\\n`` only (a trailing ``\\r`` is dropped). A fence that is never
    closed runs to the end of the text and is reported with ``closed=False``.
    """
    lines = tuple(line.removesuffix("\r") for line in text.split("\n"))
    blocks: list[FencedBlock] = []
    outside: list[tuple[int, str]] = []
    index = 0
    while index < len(lines):
        opening = _opening(lines[index])
        if opening is None:
            outside.append((index, lines[index]))
            index += 1
            continue
        count, info = opening
        end = index + 1
        while end < len(lines) and not _closes(lines[end], count):
            end += 1
        closed = end < len(lines)
        language = info.split()[0].lower() if info.split() else ""
        body = "\n".join(lines[index + 1 : end])
        blocks.append(
            FencedBlock(language=language, info=info, body=body, line=index + 1, closed=closed)
        )
        index = end + 1
    return FenceScan(blocks=tuple(blocks), outside_lines=tuple(outside), lines=lines)
