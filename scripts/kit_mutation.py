"""The contract kit's power: mutate a real implementation, judge each mutant by the kit alone.

    python scripts/kit_mutation.py                 every target of [tool.polyloop-kit-mutation]
    python scripts/kit_mutation.py memory-store    one target (or several, by name)
    python scripts/kit_mutation.py --list          the targets and their mutant counts
    python scripts/kit_mutation.py --show NAME     one mutant's change

Each target of ``[tool.polyloop-kit-mutation.NAME]`` in ``pyproject.toml`` names one module of a
real implementation (``module``), optionally the functions of it to mutate (``functions``:
qualified-name prefixes; default all), and the pytest arguments of that implementation's
conformance tests (``tests``, run with ``--polyloop-conformance`` — never the project's unit
tests). The tool makes the module's mutants with a small AST mutator (a comparison, an
arithmetic or boolean operator, a constant, a call's argument replaced by ``None`` or a keyword
argument dropped, a returned value, a removed call statement, an assignment of ``None``,
``break``/``continue``), samples up to ``sample`` of them with a fixed
``seed``, and runs the conformance tests on each in a scratch copy of the working tree, with the
copy first on ``PYTHONPATH`` so the kit's child processes (the crash writers, the child parses)
run the mutant too. The runs are forked from a process that has already imported pytest and the
kit's heavy dependencies (never polyloop itself), ``--jobs`` at a time under ``nice``.

A mutant is **killed** when the conformance run fails, **survived** when it passes, **timeout**
when it runs past ``timeout`` seconds (a timeout is not a kill). Every survivor must be listed in
``scripts/kit-mutation-outside.txt`` with a category and a reason — ``wording``, ``speed``,
``log``, ``outside`` (no promise covers the change) or ``equivalent`` (no caller can tell) — or
as ``hole`` (a bug the kit does not catch yet; counted against the score). The run fails on a
survivor or timeout that is not listed, and on a target whose score (killed / (killed + hole
survivors)) is under its ``min_score``.

A run resumes: each verdict is appended to ``RESULTS/NAME.jsonl`` as soon as it is known, keyed
by the mutant, the module's text and the kit's text (``polyloop/testing`` and
``pytest_polyloop``), and a later run judges only the mutants without a verdict under the same
keys — so a long target can be run in pieces, and a change to the module or the kit starts it
afresh. ``--fresh`` ignores what is recorded. Not generated: mutants of docstrings, annotations,
decorators, f-strings and the message text of a raised exception (wording by construction).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import difflib
import fnmatch
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUTSIDE = ROOT / "scripts" / "kit-mutation-outside.txt"
CATEGORIES = ("wording", "speed", "log", "outside", "equivalent", "hole")
_PYTEST_ARGS = ["-q", "-x", "-p", "no:randomly", "-p", "no:cacheprovider", "-p", "no:xdist"]

_COMPARE_SWAP: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
_BINOP_SWAP: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
    ast.FloorDiv: ast.Mult,
    ast.Mod: ast.FloorDiv,
    ast.BitOr: ast.BitAnd,
    ast.BitAnd: ast.BitOr,
}


@dataclass(frozen=True)
class Target:
    name: str
    module: str
    tests: tuple[str, ...]
    functions: tuple[str, ...] = ()
    sample: int = 150
    seed: int = 30
    timeout: float = 300.0
    min_score: float = 0.95


@dataclass(frozen=True)
class Mutant:
    """One change: the source span it replaces and the text it puts there."""

    name: str
    start: tuple[int, int]  # (line, byte column), as ast gives them
    end: tuple[int, int]
    text: str


@dataclass
class Result:
    mutant: Mutant
    status: str  # killed | survived | timeout
    seconds: float
    failed: str = ""


@dataclass
class _Points:
    """The mutation points of a module, each as (qualname, operator label, node, new text)."""

    functions: tuple[str, ...]
    found: list[tuple[str, str, ast.AST, str]] = field(default_factory=list)


def load_targets(pyproject: Path = ROOT / "pyproject.toml") -> dict[str, Target]:
    table = tomllib.loads(pyproject.read_text(encoding="utf-8"))["tool"]["polyloop-kit-mutation"]
    targets = {}
    for name, entry in table.items():
        targets[name] = Target(
            name=name,
            module=entry["module"],
            tests=tuple(entry["tests"]),
            functions=tuple(entry.get("functions", ())),
            sample=int(entry.get("sample", 150)),
            seed=int(entry.get("seed", 30)),
            timeout=float(entry.get("timeout", 300.0)),
            min_score=float(entry.get("min_score", 0.95)),
        )
    return targets


def _paren(node: ast.AST) -> str:
    return f"({ast.unparse(node)})"


def _is_docstring(node: ast.AST, parent: ast.AST | None) -> bool:
    return (
        isinstance(parent, ast.Expr)
        and isinstance(node, ast.Constant)
        and isinstance(node.value, str)
    )


def _constant_mutation(node: ast.Constant) -> str | None:
    value = node.value
    if isinstance(value, bool):
        return repr(not value)
    if isinstance(value, int):
        return repr(value + 1)
    if isinstance(value, float):
        return repr(value + 1.0)
    if isinstance(value, str):
        return repr(f"XX{value}XX")
    if isinstance(value, bytes):
        return repr(b"XX" + value + b"XX")
    return None


def _expression_mutations(node: ast.AST) -> Iterator[tuple[str, str]]:
    """(label, replacement text) of each mutation of one expression node."""
    if isinstance(node, ast.Compare):
        for index, op in enumerate(node.ops):
            swap = _COMPARE_SWAP.get(type(op))
            if swap is not None:
                ops = list(node.ops)
                ops[index] = swap()
                changed = ast.Compare(left=node.left, ops=ops, comparators=node.comparators)
                yield f"{type(op).__name__}->{swap.__name__}", _paren(changed)
    elif isinstance(node, ast.BinOp) and type(node.op) in _BINOP_SWAP:
        swap_op = _BINOP_SWAP[type(node.op)]
        changed_op = ast.BinOp(left=node.left, op=swap_op(), right=node.right)
        yield f"{type(node.op).__name__}->{swap_op.__name__}", _paren(changed_op)
    elif isinstance(node, ast.BoolOp):
        other: ast.boolop = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        changed_bool = ast.BoolOp(op=other, values=node.values)
        yield f"{type(node.op).__name__}->{type(other).__name__}", _paren(changed_bool)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield "drop-not", _paren(node.operand)
    elif isinstance(node, ast.Call):
        yield from _argument_mutations(node)
    elif isinstance(node, ast.Constant):
        text = _constant_mutation(node)
        if text is not None:
            yield f"const {ast.unparse(node)[:30]}", text


def _argument_mutations(node: ast.Call) -> Iterator[tuple[str, str]]:
    """Each argument of a call replaced by ``None`` (a keyword argument: dropped, too)."""
    for index, arg in enumerate(node.args):
        if isinstance(arg, ast.Starred) or (isinstance(arg, ast.Constant) and arg.value is None):
            continue
        args = [*node.args[:index], ast.Constant(None), *node.args[index + 1 :]]
        changed = ast.Call(func=node.func, args=args, keywords=node.keywords)
        yield f"arg{index}->None", _paren(changed)
    for index, keyword in enumerate(node.keywords):
        if keyword.arg is None:
            continue
        rest = [*node.keywords[:index], *node.keywords[index + 1 :]]
        dropped = ast.Call(func=node.func, args=node.args, keywords=rest)
        yield f"drop {keyword.arg}=", _paren(dropped)


def _statement_mutations(node: ast.stmt) -> Iterator[tuple[str, str]]:
    if isinstance(node, ast.Return) and node.value is not None:
        if not (isinstance(node.value, ast.Constant) and node.value.value is None):
            yield "return-None", "return None"
    elif isinstance(node, ast.Expr) and isinstance(node.value, (ast.Call, ast.Await)):
        yield "drop-call", "pass"
    elif isinstance(node, ast.Assign) and not (
        isinstance(node.value, ast.Constant) and node.value.value is None
    ):
        targets = " = ".join(ast.unparse(target) for target in node.targets)
        yield "assign-None", f"{targets} = None"
    elif isinstance(node, ast.Break):
        yield "break->continue", "continue"
    elif isinstance(node, ast.Continue):
        yield "continue->break", "break"
    elif isinstance(node, ast.AugAssign) and type(node.op) in _BINOP_SWAP:
        swap = _BINOP_SWAP[type(node.op)]
        changed = ast.AugAssign(target=node.target, op=swap(), value=node.value)
        yield f"aug {type(node.op).__name__}->{swap.__name__}", ast.unparse(changed)


_SKIPPED_FIELDS = {"annotation", "returns", "decorator_list", "type_comment", "type_params"}


def _walk(points: _Points, node: ast.AST, qualname: str, parent: ast.AST | None) -> None:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        qualname = f"{qualname}.{node.name}" if qualname else node.name
    if isinstance(node, ast.JoinedStr) or _is_docstring(node, parent):
        return
    if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
        return
    if isinstance(node, ast.Raise):
        return _walk_raise(points, node, qualname)
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return
    if isinstance(node, ast.Assign) and any(
        isinstance(target, ast.Name) and target.id == "__all__" for target in node.targets
    ):
        return
    if _wanted(points, qualname):
        mutations = (
            _statement_mutations(node)
            if isinstance(node, ast.stmt)
            else _expression_mutations(node)
        )
        for label, text in mutations:
            points.found.append((qualname or "<module>", label, node, text))
    for name, value in ast.iter_fields(node):
        if name in _SKIPPED_FIELDS:
            continue
        for child in value if isinstance(value, list) else [value]:
            if isinstance(child, ast.AST):
                _walk(points, child, qualname, node)


def _walk_raise(points: _Points, node: ast.Raise, qualname: str) -> None:
    """A raise: its exception's class and arguments other than message text are mutated."""
    exc = node.exc
    if isinstance(exc, ast.Call):
        for arg in [*exc.args, *(keyword.value for keyword in exc.keywords)]:
            if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
                _walk(points, arg, qualname, exc)


def _wanted(points: _Points, qualname: str) -> bool:
    if not points.functions:
        return True
    return any(
        qualname == prefix or qualname.startswith(prefix + ".") for prefix in points.functions
    )


def mutants_of(source: str, module: str, functions: Sequence[str] = ()) -> list[Mutant]:
    """Every mutant of ``source``, named ``module::qualname::label#n`` (n counts the same
    label within the function, so an edit elsewhere in the module keeps the names)."""
    points = _Points(functions=tuple(functions))
    _walk(points, ast.parse(source), "", None)
    seen: dict[str, int] = {}
    mutants = []
    for qualname, label, node, text in points.found:
        key = f"{module}::{qualname}::{label}"
        seen[key] = seen.get(key, 0) + 1
        start = (node.lineno, node.col_offset)  # type: ignore[attr-defined]
        end = (node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]
        mutants.append(Mutant(f"{key}#{seen[key]}", start, end, text))
    return mutants


def apply(source: str, mutant: Mutant) -> str:
    """``source`` with the mutant's span replaced (columns are UTF-8 byte offsets)."""
    lines = source.encode("utf-8").splitlines(keepends=True)
    (first, start_col), (last, end_col) = mutant.start, mutant.end
    head = b"".join(lines[: first - 1]) + lines[first - 1][:start_col]
    tail = lines[last - 1][end_col:] + b"".join(lines[last:])
    changed = (head + mutant.text.encode("utf-8") + tail).decode("utf-8")
    ast.parse(changed)  # a mutant that does not parse is a bug of this tool, not a kill
    return changed


def diff_of(source: str, mutant: Mutant, module: str) -> str:
    lines = difflib.unified_diff(
        source.splitlines(keepends=True),
        apply(source, mutant).splitlines(keepends=True),
        fromfile=f"a/{module}",
        tofile=f"b/{module}",
        n=1,
    )
    return "".join(lines)


def sampled(target: Target, source: str) -> list[Mutant]:
    every = mutants_of(source, target.module, target.functions)
    if len(every) <= target.sample:
        return every
    chosen = sorted(random.Random(target.seed).sample(range(len(every)), target.sample))
    return [every[index] for index in chosen]


def read_outside(path: Path = OUTSIDE) -> dict[str, tuple[str, str]]:
    """name -> (category, reason) of every listed survivor."""
    listed = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        name, _, rest = line.partition("  # ")
        category, _, reason = rest.partition(":")
        if category.strip() not in CATEGORIES or not reason.strip():
            raise SystemExit(f"{path}:{number}: want `NAME  # CATEGORY: reason`, {CATEGORIES}")
        listed[name.strip()] = (category.strip(), reason.strip())
    return listed


def scratch_copy() -> Path:
    """A copy of the working tree's tracked and new files (no caches, no .venv)."""
    work = Path(tempfile.mkdtemp(prefix="kit-mutation-"))
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    for name in filter(None, files):
        source = ROOT / os.fsdecode(name)
        if source.is_file():
            destination = work / os.fsdecode(name)
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination)
    return work


def _preload() -> None:
    """Import what every conformance run imports, except polyloop, before forking."""
    for name in ("pytest", "hypothesis", "pytest_asyncio", "anyio", "trio", "asyncio", "sqlite3"):
        with contextlib.suppress(ImportError):
            __import__(name)


def _child(work: Path, tests: Sequence[str], log: Path) -> None:
    """In the forked child: run the conformance tests of the scratch copy, then exit."""
    os.setpgid(0, 0)
    os.nice(19)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.chdir(work)
    sys.path[:0] = [str(work)]
    os.environ["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(work), os.environ.get("PYTHONPATH")])
    )
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    sys.dont_write_bytecode = True
    import pytest

    code = pytest.main([*_PYTEST_ARGS, "--polyloop-conformance", *tests])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(int(code))


@dataclass
class _Slot:
    work: Path
    pid: int = 0
    mutant: Mutant | None = None
    started: float = 0.0
    log: Path | None = None


def _failed_test(log: Path) -> str:
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith(("FAILED ", "ERROR ")):
            return line.split(" - ")[0]
    return "(the run failed before a test did: see its log)"


def _start(slot: _Slot, target: Target, source: str, mutant: Mutant | None, logs: Path) -> None:
    text = source if mutant is None else apply(source, mutant)
    (slot.work / target.module).write_text(text, encoding="utf-8")
    slot.mutant, slot.started = mutant, time.monotonic()
    slot.log = logs / f"{time.monotonic_ns()}.log"
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            _child(slot.work, target.tests, slot.log)
        finally:
            os._exit(70)
    slot.pid = pid


def _finish(slot: _Slot, code: int | None) -> Result:
    assert slot.mutant is not None
    assert slot.log is not None
    seconds = time.monotonic() - slot.started
    if code is None:
        result = Result(slot.mutant, "timeout", seconds)
    elif code == 0:
        result = Result(slot.mutant, "survived", seconds)
    elif code in (1, 2, 3):  # failed tests, a collection error, an internal error
        result = Result(slot.mutant, "killed", seconds, _failed_test(slot.log))
    else:
        raise SystemExit(f"{slot.mutant.name}: pytest exited {code}; log {slot.log}")
    slot.pid, slot.mutant = 0, None
    return result


def _reap(slots: Sequence[_Slot], timeout: float) -> list[Result]:
    """The results of every finished or timed-out run; waits briefly when none is."""
    done = []
    for slot in slots:
        if not slot.pid:
            continue
        pid, status = os.waitpid(slot.pid, os.WNOHANG)
        if pid:
            done.append(_finish(slot, os.waitstatus_to_exitcode(status)))
        elif time.monotonic() - slot.started > timeout:
            os.killpg(slot.pid, signal.SIGKILL)
            os.waitpid(slot.pid, 0)
            done.append(_finish(slot, None))
    if not done:
        time.sleep(0.1)
    return done


def baseline(target: Target, source: str, slot: _Slot, logs: Path) -> float:
    """The unmutated run must pass: otherwise every mutant would look killed."""
    _start(slot, target, source, None, logs)
    slot.mutant = Mutant("<baseline>", (0, 0), (0, 0), "")
    while True:
        results = _reap([slot], target.timeout)
        if results:
            break
    (result,) = results
    if result.status != "survived":
        raise SystemExit(
            f"{target.name}: the unmutated conformance run {result.status}: {slot.log}"
        )
    return result.seconds


def kit_digest() -> str:
    """What the verdicts depend on besides the module: the kit's and the plugin's source."""
    digest = hashlib.sha256()
    for package in ("polyloop/testing", "pytest_polyloop"):
        for path in sorted((ROOT / package).rglob("*.py")):
            digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def _key(source: str, kit: str) -> str:
    return hashlib.sha256(source.encode("utf-8")).hexdigest()[:16] + ":" + kit


def recorded(journal: Path, key: str, mutants: Sequence[Mutant]) -> list[Result]:
    """The verdicts a journal holds for these mutants under ``key`` (the latest of each)."""
    by_name = {mutant.name: mutant for mutant in mutants}
    found: dict[str, Result] = {}
    if journal.exists():
        for line in journal.read_text(encoding="utf-8").splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a line cut by a kill: that mutant is judged again
            name = entry.get("mutant") if isinstance(entry, dict) else None
            mutant = by_name.get(name) if isinstance(name, str) else None
            if mutant is not None and entry.get("key") == key:
                found[mutant.name] = Result(
                    mutant, entry["status"], entry["seconds"], entry.get("failed", "")
                )
    return list(found.values())


def _journal(journal: Path, key: str, result: Result) -> None:
    entry = {
        "key": key,
        "mutant": result.mutant.name,
        "status": result.status,
        "seconds": round(result.seconds, 2),
        "failed": result.failed,
    }
    with journal.open("a", encoding="utf-8") as out:
        out.write(json.dumps(entry, ensure_ascii=True) + "\n")


def run_target(
    target: Target,
    slots: Sequence[_Slot],
    logs: Path,
    only: str = "*",
    journal: Path | None = None,
) -> list[Result]:
    source = (ROOT / target.module).read_text(encoding="utf-8")
    chosen = [m for m in sampled(target, source) if fnmatch.fnmatchcase(m.name, only)]
    key = _key(source, kit_digest())
    results = recorded(journal, key, chosen) if journal is not None else []
    done = {result.mutant.name for result in results}
    pending = [m for m in chosen if m.name not in done]
    total = len(chosen)
    print(f"{target.name}: {len(done)} of {total} judged before, {len(pending)} to go", flush=True)
    if pending:
        seconds = baseline(target, source, slots[0], logs)
        print(f"{target.name}: baseline {seconds:.1f} s", flush=True)
    while pending or any(slot.pid for slot in slots):
        for slot in slots:
            if not slot.pid and pending:
                _start(slot, target, source, pending.pop(0), logs)
        for result in _reap(slots, target.timeout):
            results.append(result)
            if journal is not None:
                _journal(journal, key, result)
            print(f"  [{len(results)}/{total}] {result.status:8} {result.mutant.name}", flush=True)
    for slot in slots:
        (slot.work / target.module).write_text(source, encoding="utf-8")
    return sorted(results, key=lambda result: result.mutant.name)


@dataclass
class Tally:
    killed: int = 0
    listed: dict[str, int] = field(default_factory=dict)  # category -> survivors listed as it
    unlisted: list[Result] = field(default_factory=list)
    timeouts: int = 0

    @property
    def score(self) -> float:
        holes = self.listed.get("hole", 0) + len(self.unlisted)
        return self.killed / (self.killed + holes) if self.killed + holes else 1.0


def tally(results: Sequence[Result], listed: dict[str, tuple[str, str]]) -> Tally:
    counts = Tally()
    for result in results:
        if result.status == "killed":
            counts.killed += 1
            continue
        if result.status == "timeout":
            counts.timeouts += 1
        entry = listed.get(result.mutant.name)
        if entry is None:
            counts.unlisted.append(result)
        else:
            counts.listed[entry[0]] = counts.listed.get(entry[0], 0) + 1
    return counts


def table(rows: Sequence[tuple[Target, Tally]]) -> str:
    lines = [
        "| target | module | killed | timeout | hole | outside / equivalent | unlisted | score |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for target, counts in rows:
        outside = sum(n for category, n in counts.listed.items() if category != "hole")
        lines.append(
            f"| {target.name} | `{target.module}` | {counts.killed} | {counts.timeouts} "
            f"| {counts.listed.get('hole', 0)} | {outside} | {len(counts.unlisted)} "
            f"| {counts.score:.0%} |"
        )
    return "\n".join(lines)


def report(
    target: Target, results: Sequence[Result], listed: dict[str, tuple[str, str]], out: Path
) -> Tally:
    source = (ROOT / target.module).read_text(encoding="utf-8")
    counts = tally(results, listed)
    with (out / f"{target.name}.txt").open("w", encoding="utf-8") as statuses:
        for result in results:
            why = listed.get(result.mutant.name, ("", ""))[0]
            statuses.write(f"{result.mutant.name}: {result.status} {why} {result.failed}\n")
    with (out / f"{target.name}.survivors.diff").open("w", encoding="utf-8") as diffs:
        for result in results:
            if result.status != "killed":
                entry = listed.get(result.mutant.name)
                mark = f"{entry[0]}: {entry[1]}" if entry else "NOT LISTED"
                diffs.write(f"## {result.mutant.name} ({result.status}; {mark})\n")
                diffs.write(diff_of(source, result.mutant, target.module) + "\n")
    for result in counts.unlisted:
        print(f"\n{result.status}, not listed in {OUTSIDE.name}: {result.mutant.name}")
        print(diff_of(source, result.mutant, target.module))
    return counts


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("names", nargs="*", help="targets to run (default: all)")
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("MUTATION_JOBS", "2")))
    parser.add_argument("--sample", type=int, help="override every target's sample size")
    parser.add_argument(
        "--mutants", metavar="GLOB", help="judge only the sampled mutants whose name matches"
    )
    parser.add_argument("--list", action="store_true", help="list targets and mutant counts")
    parser.add_argument("--show", metavar="NAME", help="print one mutant's change")
    parser.add_argument("--results", type=Path, default=ROOT / ".kit-mutation-results")
    parser.add_argument(
        "--fresh", action="store_true", help="judge every mutant again, ignoring the journal"
    )
    args = parser.parse_args(argv)
    targets = load_targets()
    if args.list or args.show:
        return _list_or_show(targets, args.show)
    unknown = sorted(set(args.names) - set(targets))
    if unknown:
        parser.error(f"unknown target(s) {unknown}; known: {sorted(targets)}")
    chosen = [targets[name] for name in args.names or targets]
    if args.sample is not None:
        chosen = [Target(**{**t.__dict__, "sample": args.sample}) for t in chosen]
    listed = read_outside()
    args.results.mkdir(parents=True, exist_ok=True)
    _preload()
    slots = [_Slot(scratch_copy()) for _ in range(max(1, args.jobs))]
    logs = Path(tempfile.mkdtemp(prefix="kit-mutation-logs-"))
    rows = []
    try:
        for target in chosen:
            journal = args.results / f"{target.name}.jsonl"
            if args.fresh:
                journal.unlink(missing_ok=True)
            results = run_target(target, slots, logs, args.mutants or "*", journal)
            rows.append((target, report(target, results, listed, args.results)))
    finally:
        for slot in slots:
            shutil.rmtree(slot.work, ignore_errors=True)
    print("\n" + table(rows))
    return _verdict(rows)


def _verdict(rows: Sequence[tuple[Target, Tally]]) -> int:
    status = 0
    for target, counts in rows:
        if counts.unlisted:
            print(f"{target.name}: {len(counts.unlisted)} survivor(s) neither killed nor listed")
            status = 1
        if counts.score < target.min_score:
            print(f"{target.name}: score {counts.score:.1%} under {target.min_score:.0%}")
            status = 1
    return status


def _list_or_show(targets: dict[str, Target], show: str | None) -> int:
    for target in targets.values():
        source = (ROOT / target.module).read_text(encoding="utf-8")
        every = mutants_of(source, target.module, target.functions)
        if show is None:
            print(f"{target.name}: {target.module}: {len(every)} mutants, {target.sample} sampled")
            continue
        for mutant in every:
            if mutant.name == show:
                print(diff_of(source, mutant, target.module))
                return 0
    if show is not None:
        print(f"no mutant named {show!r}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
