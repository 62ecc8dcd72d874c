"""CodeBlockParser: exactly one fenced code block is an action."""

from __future__ import annotations

from dataclasses import dataclass

from polyloop._base._shown import shown
from polyloop.parsers._fences import FencedBlock, scan_fences
from polyloop.types import Action, FinalAnswer, InvalidDecision, ModelReply, ParsedReply

__all__ = ["CodeBlockFeedback", "CodeBlockParser"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CodeBlockFeedback:
    """The feedback text of each failure mode.

    ``{label}``, ``{count}`` and ``{line}`` are replaced per reply (plain replacement, not
    ``str.format``: a language or prefix containing braces cannot break the parser).
    """

    no_block: str
    wrong_language: str  # {label}
    several: str  # {count}
    empty: str
    unterminated: str  # {line}
    both: str
    empty_final: str


_ALIASES = {"python": ("python", "py", "python3")}
_SHOWN = 40


def _shown(text: str) -> str:
    return shown(text, _SHOWN)


class CodeBlockParser:
    """Turns a reply with exactly one fenced code block into ``Action(text=<the code>)``.

    A block counts when its fence is labelled with ``language`` (case-insensitive; for
    ``"python"`` also ``py`` and ``python3``) or unlabelled; ``language=None`` accepts any
    label. The action's ``tool_name`` and ``tool_args`` are ``None``. The reasoning is ignored.

    With ``final_answer_prefix`` (default ``"FINAL ANSWER:"``; ``None`` disables the form), a
    line *outside* code blocks that starts with the prefix (after leading spaces; the match is
    case-sensitive) makes the reply a ``FinalAnswer`` whose text is everything after the prefix,
    stripped. The first such line wins.

    Every other reply is an ``InvalidDecision`` whose feedback names the failure; each mode
    has its own text (``parser.feedback``, a :class:`CodeBlockFeedback`): no code block, a
    block in another language, several blocks, an empty block, an unterminated fence (checked
    first: the reply was probably cut off), both a code block and a final answer, an empty
    final answer.

    Total and deterministic: any ``str`` gives one of the three branches, the same each time.
    """

    def __init__(
        self, language: str | None = "python", *, final_answer_prefix: str | None = "FINAL ANSWER:"
    ) -> None:
        if language is not None and (not isinstance(language, str) or not language.strip()):
            raise ValueError("language must be a non-empty str or None")
        if final_answer_prefix is not None and (
            not isinstance(final_answer_prefix, str) or not final_answer_prefix.strip()
        ):
            raise ValueError("final_answer_prefix must be a non-empty str or None")
        self.language = language
        self.final_answer_prefix = final_answer_prefix
        label = language.strip().lower() if language is not None else None
        self._labels = _ALIASES.get(label, (label,)) if label is not None else None
        fence = f"```{label}" if label is not None else "```"
        finish = (
            f" To finish instead, write a line starting with {final_answer_prefix!r} followed "
            "by your answer."
            if final_answer_prefix is not None
            else ""
        )
        self.feedback = CodeBlockFeedback(
            no_block=(
                f"No code block found. Reply with exactly one fenced code block: a line "
                f"{fence}, your code, then a line ```.{finish}"
            ),
            wrong_language=(
                "Found a code block labelled {label}, but only "
                f"{fence} blocks are run. Reply with one {fence} block."
            ),
            several=(
                "Found {count} code blocks. Reply with exactly one code block per turn: merge "
                "them into one, or send them one turn at a time."
            ),
            empty=(
                f"Your code block is empty. Put the code to run between the {fence} line and "
                "the closing ``` line."
            ),
            unterminated=(
                "Your code block is not closed: the fence opened on line {line} has no closing "
                "``` line. Was the reply cut off? Send shorter code and close the block."
            ),
            both=(
                "Your reply has both a code block and a final answer. Do one per turn: run "
                "code, or give the final answer once you are done."
            ),
            empty_final=(
                f"Your final answer is empty: write the answer after {final_answer_prefix!r}."
            ),
        )

    def _accepts(self, block: FencedBlock) -> bool:
        return self._labels is None or block.language == "" or block.language in self._labels

    def _final_answer(
        self, lines: tuple[str, ...], outside: tuple[tuple[int, str], ...]
    ) -> str | None:
        """The text after the prefix, to the end of the reply, or ``None`` if no such line."""
        prefix = self.final_answer_prefix
        if prefix is None:
            return None
        for number, line in outside:
            stripped = line.lstrip(" \t")
            if stripped.startswith(prefix):
                rest_of_line = stripped[len(prefix) :]
                following = lines[number + 1 :]
                return "\n".join([rest_of_line, *following]).strip()
        return None

    def parse(self, reply: ModelReply) -> ParsedReply:
        scan = scan_fences(reply.text)
        for block in scan.blocks:
            if not block.closed:
                return InvalidDecision(
                    feedback=self.feedback.unterminated.replace("{line}", str(block.line))
                )
        accepted = [b for b in scan.blocks if self._accepts(b)]
        final = self._final_answer(scan.lines, scan.outside_lines)
        if final is not None:
            if accepted:
                return InvalidDecision(feedback=self.feedback.both)
            if not final:
                return InvalidDecision(feedback=self.feedback.empty_final)
            return FinalAnswer(text=final)
        if not accepted:
            if scan.blocks:
                label = _shown(scan.blocks[0].info)
                return InvalidDecision(
                    feedback=self.feedback.wrong_language.replace("{label}", label)
                )
            return InvalidDecision(feedback=self.feedback.no_block)
        if len(accepted) > 1:
            return InvalidDecision(
                feedback=self.feedback.several.replace("{count}", str(len(accepted)))
            )
        code = accepted[0].body
        if not code.strip():
            return InvalidDecision(feedback=self.feedback.empty)
        return Action(text=code)

    def __repr__(self) -> str:
        return (
            f"CodeBlockParser(language={self.language!r}, "
            f"final_answer_prefix={self.final_answer_prefix!r})"
        )
