"""The cross-process check of ``decision_parser.is_deterministic_across_processes``: fresh
interpreters with their own hash seeds parse the same replies (:mod:`._parse_child`)."""

from __future__ import annotations

import asyncio
import json
import sys
from asyncio.subprocess import Process

import pytest

from polyloop.testing._decision_parser import _parse_child
from polyloop.testing._shared._child import child_env
from polyloop.testing._shared._shapes import (
    short,
)
from polyloop.types import (
    ModelReply,
)

__all__ = [
    "CHILD_BOUND_S",
    "SEEDS",
    "cross_process_problems",
    "end_children",
    "parse_in_children",
    "spawn_children",
]


SEEDS = ("1", "2")  # PYTHONHASHSEED of each child: fixed, so every run probes the same


CHILD_BOUND_S = 60.0  # the children's start and parse (cold interpreters under load)


async def spawn_children(factory: str) -> list[Process]:
    """One child per seed; each imports and builds the parser, then waits for the replies."""
    return [
        await asyncio.create_subprocess_exec(
            sys.executable,
            _parse_child.__file__,
            factory,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**child_env(), "PYTHONHASHSEED": seed},
        )
        for seed in SEEDS
    ]


async def parse_in_children(
    factory: str, children: list[Process], replies: list[ModelReply]
) -> list[list[str]]:
    """Each child's description of each reply's decision, one list per seed of :data:`SEEDS`."""
    payload = json.dumps([_parse_child.to_wire(r) for r in replies], ensure_ascii=True)
    try:
        async with asyncio.timeout(CHILD_BOUND_S):
            outputs = await asyncio.gather(
                *(child.communicate(payload.encode("ascii")) for child in children)
            )
    except TimeoutError:
        pytest.fail(
            f"the child processes built by parser_samples.factory={factory!r} did not parse "
            f"{len(replies)} replies within {CHILD_BOUND_S:g} s",
            pytrace=False,
        )
    finally:
        await end_children(children)
    found: list[list[str]] = []
    for seed, child, (out, err) in zip(SEEDS, children, outputs, strict=True):
        lines = [
            line.removeprefix(_parse_child.RESULT)
            for line in out.decode("ascii", "replace").splitlines()
            if line.startswith(_parse_child.RESULT)
        ]
        if child.returncode != 0 or len(lines) != len(replies):
            tail = "\n".join(err.decode("utf-8", "replace").strip().splitlines()[-12:])
            failed = child.returncode == _parse_child.FACTORY_FAILED
            where = "parser_samples.factory: " if failed else ""
            pytest.fail(
                f"{where}the child process (PYTHONHASHSEED={seed}) failed, exit code "
                f"{child.returncode}:\n{tail}",
                pytrace=False,
            )
        found.append(lines)
    return found


async def end_children(children: list[Process]) -> None:
    for child in children:
        if child.returncode is None:
            child.kill()
            await child.wait()


def cross_process_problems(replies: list[ModelReply], results: list[list[str]]) -> list[str]:
    problems = []
    for index, reply in enumerate(replies):
        seen = [lines[index] for lines in results]
        if len(set(seen)) > 1:
            each = "\n".join(
                f"  PYTHONHASHSEED={seed}: {short(json.loads(line), 300)}"
                for seed, line in zip(SEEDS, seen, strict=True)
            )
            problems.append(f"{short(reply, 300)} parsed to different decisions:\n{each}")
    return problems
