"""Decision parsers written the way downstream teams write them, each with one realistic bug the
kit used to pass — and each beside its correct twin, which must stay clean.

All read the format of :mod:`tests.kit.broken`'s ``ReferenceParser`` (its ``PARSER_SAMPLES``
fit them): ``ACT <command>`` is an action, ``FINAL <answer>`` a final answer, anything else is
invalid. The module imports only ``polyloop.types`` so the child processes of the cross-process
promise start fast.

* Inputs (issue 21, class 4): the old kit fed short, mostly-ASCII replies holding at most one
  call, so a parser that recurses once per line, caps the reply by UTF-8 bytes, encodes a field
  strictly, assumes one call per reply, or enriches its arguments with bytes for non-ASCII text
  kept every promise.
* Processes (class 5): a parser whose decision depends on the iteration order of a set of
  strings is deterministic inside one process and differs between processes (hash salting).
  The factories below (``tests.kit.broken_parsers:<Class>``) build them in child processes.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
from collections import defaultdict

from polyloop.types import Action, FinalAnswer, InvalidDecision, ModelReply, ParsedReply

FEEDBACK = "Start your reply with ACT <command> or FINAL <answer>."


class ReferenceParser:
    """``tests.kit.broken.ReferenceParser`` again (that module imports the kit)."""

    def parse(self, reply: ModelReply) -> ParsedReply:
        text = reply.text.strip()
        if text.startswith("ACT ") and text[4:].strip():
            command = text[4:].strip()
            return Action(text=command, tool_name="shell", tool_args={"cmd": command})
        if text.startswith("FINAL "):
            return FinalAnswer(text=text[6:].strip())
        return InvalidDecision(feedback=FEEDBACK)


# --------------------------------------------------------------------------- class 4: inputs


def _join_continued_recursively(lines: list[str]) -> list[str]:
    """Shell style: a line ending in a backslash continues on the next one."""
    if not lines:
        return []
    head, *rest = lines
    joined = _join_continued_recursively(rest)
    if head.endswith("\\") and joined:
        return [head[:-1] + joined[0], *joined[1:]]
    return [head, *joined]


def _join_continued(lines: list[str]) -> list[str]:
    joined: list[str] = []
    for line in lines:
        if joined and joined[-1].endswith("\\"):
            joined[-1] = joined[-1][:-1] + line
        else:
            joined.append(line)
    return joined


class RecursesPerLine(ReferenceParser):
    """Joins continued lines recursively: one stack frame per line, so a reply of a few
    thousand lines raises ``RecursionError``."""

    def parse(self, reply: ModelReply) -> ParsedReply:
        text = "\n".join(_join_continued_recursively(reply.text.split("\n")))
        return super().parse(ModelReply(text=text))


class LoopsPerLine(ReferenceParser):
    """The correct twin: the same joining in a loop."""

    def parse(self, reply: ModelReply) -> ParsedReply:
        text = "\n".join(_join_continued(reply.text.split("\n")))
        return super().parse(ModelReply(text=text))


_CAP = 64 * 1024


class CapsBytesStrictly(ReferenceParser):
    """Bounds its work by looking at the first 64 KiB of UTF-8 only — and decodes the cut
    strictly, so a cut inside a multi-byte character raises ``UnicodeDecodeError``."""

    def parse(self, reply: ModelReply) -> ParsedReply:
        head = reply.text.encode("utf-8", "surrogatepass")[:_CAP]
        return super().parse(ModelReply(text=head.decode("utf-8", "surrogatepass")))


class CapsBytesLeniently(ReferenceParser):
    """The correct twin: a character cut in two at the cap is dropped."""

    def parse(self, reply: ModelReply) -> ParsedReply:
        head = reply.text.encode("utf-8", "surrogatepass")[:_CAP]
        return super().parse(ModelReply(text=head.decode("utf-8", "ignore")))


class HashesFieldStrictly(ReferenceParser):
    """Stamps each action with a digest of one reply field (``text``, ``reasoning`` or
    ``call_id``) for tracing, encoding it with plain ``str.encode()`` — which raises
    ``UnicodeEncodeError`` on a lone surrogate."""

    errors = "strict"

    def __init__(self, field: str = "text") -> None:
        self.field = field

    def parse(self, reply: ModelReply) -> ParsedReply:
        decision = super().parse(reply)
        if not isinstance(decision, Action):
            return decision
        value = getattr(reply, self.field) or ""
        digest = hashlib.sha256(value.encode("utf-8", self.errors)).hexdigest()[:12]
        return Action(
            text=decision.text,
            tool_name=decision.tool_name,
            tool_args={**(decision.tool_args or {}), "trace": digest},
        )


class HashesFieldWithSurrogates(HashesFieldStrictly):
    """The correct twin: ``surrogatepass`` encodes any ``str``."""

    errors = "surrogatepass"


class OneCallOnly(ReferenceParser):
    """Reads every ``ACT`` line but unpacks them as exactly one: the second call in a reply
    raises ``ValueError``."""

    def parse(self, reply: ModelReply) -> ParsedReply:
        text = reply.text.strip()
        if text.startswith("FINAL "):
            return FinalAnswer(text=text[6:].strip())
        calls = [line[4:].strip() for line in text.split("\n") if line.startswith("ACT ")]
        if not calls or not calls[0]:
            return InvalidDecision(feedback=FEEDBACK)
        [command] = calls
        return Action(text=command, tool_name="shell", tool_args={"cmd": command})


class RefusesSecondCall(ReferenceParser):
    """The correct twin: several calls are an invalid reply, with feedback."""

    def parse(self, reply: ModelReply) -> ParsedReply:
        text = reply.text.strip()
        if text.startswith("FINAL "):
            return FinalAnswer(text=text[6:].strip())
        calls = [line[4:].strip() for line in text.split("\n") if line.startswith("ACT ")]
        if not calls or not calls[0]:
            return InvalidDecision(feedback=FEEDBACK)
        if len(calls) > 1:
            return InvalidDecision(feedback=f"Send one command per reply. {FEEDBACK}")
        return Action(text=calls[0], tool_name="shell", tool_args={"cmd": calls[0]})


class BytesArgumentForNonAscii(ReferenceParser):
    """Adds the command's UTF-8 bytes to the arguments when it is not ASCII (for a tool that
    takes bytes), after the action was built: the action can no longer be logged."""

    def parse(self, reply: ModelReply) -> ParsedReply:
        decision = super().parse(reply)
        if isinstance(decision, Action) and not decision.text.isascii():
            args = decision.tool_args
            assert isinstance(args, dict)
            args["cmd_utf8"] = decision.text.encode("utf-8", "surrogatepass")
        return decision


class HexArgumentForNonAscii(ReferenceParser):
    """The correct twin: the bytes as hex text, given to the constructor."""

    def parse(self, reply: ModelReply) -> ParsedReply:
        decision = super().parse(reply)
        if isinstance(decision, Action) and not decision.text.isascii():
            utf8 = decision.text.encode("utf-8", "surrogatepass").hex()
            return Action(
                text=decision.text,
                tool_name=decision.tool_name,
                tool_args={**(decision.tool_args or {}), "cmd_utf8_hex": utf8},
            )
        return decision


# --------------------------------------------------------------------------- class 5: processes


def _commands(text: str) -> list[str]:
    return [line[4:].strip() for line in text.split("\n") if line.startswith("ACT ")]


class PicksAnyOfASet(ReferenceParser):
    """A model sometimes repeats a call: this parser collects the distinct commands in a set
    and runs ``next(iter(...))`` of it — the same pick within one process, another pick in a
    process whose ``str`` hashes are salted differently."""

    def parse(self, reply: ModelReply) -> ParsedReply:
        text = reply.text.strip()
        if text.startswith("FINAL "):
            return FinalAnswer(text=text[6:].strip())
        commands = {command for command in _commands(text) if command}
        if not commands:
            return InvalidDecision(feedback=FEEDBACK)
        command = next(iter(commands))
        return Action(text=command, tool_name="shell", tool_args={"cmd": command})


class PicksTheFirstDistinct(ReferenceParser):
    """The correct twin: ``dict.fromkeys`` keeps the order the model wrote."""

    def parse(self, reply: ModelReply) -> ParsedReply:
        text = reply.text.strip()
        if text.startswith("FINAL "):
            return FinalAnswer(text=text[6:].strip())
        commands = list(dict.fromkeys(command for command in _commands(text) if command))
        if not commands:
            return InvalidDecision(feedback=FEEDBACK)
        return Action(text=commands[0], tool_name="shell", tool_args={"cmd": commands[0]})


class ArgumentsFromADictOfSets(ReferenceParser):
    """Groups the command's words into flags and operands with a dict of sets (a repeated word
    counts once) and lists each set as it iterates: the lists' order follows the hash salt."""

    sort = False

    def parse(self, reply: ModelReply) -> ParsedReply:
        decision = super().parse(reply)
        if not isinstance(decision, Action):
            return decision
        groups: defaultdict[str, set[str]] = defaultdict(set)
        for word in decision.text.split():
            groups["flags" if word.startswith("-") else "operands"].add(word)
        args = {name: sorted(words) if self.sort else list(words) for name, words in groups.items()}
        return Action(text=decision.text, tool_name="shell", tool_args=args)


class ArgumentsFromSortedSets(ArgumentsFromADictOfSets):
    """The correct twin: each set is sorted before it becomes a list."""

    sort = True


class PrintsWhileParsing(PicksTheFirstDistinct):
    """Correct, and chatty: prints every reply it parses (the child keeps stdout for itself)."""

    def parse(self, reply: ModelReply) -> ParsedReply:
        print(f"parsing {len(reply.text)} characters")
        return super().parse(reply)


# --------------------------------------------------------------------------- issue 30


_MOST_WORDS = 4  # ACT, the program, -l and -a


class ReadsOptionsWithArgparse(ReferenceParser):
    """Reads the command's options with ``argparse``, which calls ``sys.exit(2)`` on arguments
    it does not expect (a second call in the same reply): ``SystemExit`` escapes ``parse()``."""

    def __init__(self) -> None:
        self.options = argparse.ArgumentParser(prog="ACT", add_help=False)
        self.options.add_argument("program")
        self.options.add_argument("-l", action="store_true")
        self.options.add_argument("-a", action="store_true")

    def parse(self, reply: ModelReply) -> ParsedReply:
        decision = super().parse(reply)
        if not isinstance(decision, Action):
            return decision
        with contextlib.redirect_stderr(io.StringIO()):  # argparse prints its usage there
            options = self.options.parse_args(decision.text.split())
        return Action(
            text=decision.text,
            tool_name=options.program,
            tool_args={"long": options.l, "all": options.a},
        )


class ReadsOptionsWithArgparseSafely(ReadsOptionsWithArgparse):
    """The correct twin: argparse's exit is turned into feedback, and a command of more words
    than one call can have is refused before argparse reads it (argparse's time is quadratic in
    the words: a reply holding a thousand calls would block the event loop for a second)."""

    def parse(self, reply: ModelReply) -> ParsedReply:
        if len(reply.text.split(maxsplit=_MOST_WORDS)) > _MOST_WORDS:
            return InvalidDecision(feedback=f"{FEEDBACK} One call, options -l and -a only.")
        try:
            return super().parse(reply)
        except SystemExit:
            return InvalidDecision(feedback=f"{FEEDBACK} One call, options -l and -a only.")
