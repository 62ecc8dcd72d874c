"""Child process of the two-process fencing test under concurrent groups.

``python -m tests.integration.contending_child URL ACKS TAG [--writers W] [--runs R]
[--batches B]``

``W`` writer tasks on one store object (so their commits meet in groups, several at once on the
pool's connections) append to ``R`` shared runs (``c<i>``), which another process appends to at
the same time: each writer takes a run in turn, reads its log, and appends one batch of two
records at the log's end, tagged with this process's ``TAG``; a batch the fence refuses
(``RunConflict``, ``RunAlreadyExists``) is dropped and the writer goes on. After each append
*returns* it writes ``<run> <sequence> <tag>`` to ``ACKS`` (unbuffered). Prints ``DONE``.
"""

from __future__ import annotations

import argparse
import asyncio
import os

from polyloop import ModelCallIntent, RunStarted
from polyloop.errors import RunAlreadyExists, RunConflict
from tests.integration._scenario import opened


def started(run_id: str) -> RunStarted:
    return RunStarted(
        run_id=run_id,
        goal="contend",
        parameters={},
        parameters_hash="sha256:" + "0" * 64,
        started_at="2026-12-06T06:00:00.000Z",
    )


def batch(sequence: int, tag: int) -> tuple[ModelCallIntent, ModelCallIntent]:
    """Two records that say which process wrote them, and at which sequence."""
    return (
        ModelCallIntent(step_index=sequence, prompt_chars=tag),
        ModelCallIntent(step_index=sequence + 1, prompt_chars=tag),
    )


async def main(args: argparse.Namespace) -> None:
    acks = os.open(args.acks, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    async with opened(args.url) as store:

        async def writer(first: int) -> None:
            for n in range(args.batches):
                run_id = f"c{(first + n) % args.runs}"
                length = len((await store.read_log(run_id)).records)
                try:
                    if length == 0:
                        await store.append(run_id, started(run_id), sequence=0)
                        os.write(acks, f"{run_id} 0 start\n".encode())
                        continue
                    await store.append_many(  # type: ignore[attr-defined]
                        run_id, batch(length, args.tag), sequence=length
                    )
                except (RunConflict, RunAlreadyExists):
                    continue  # the other writer or process was first: fenced off
                os.write(acks, f"{run_id} {length} {args.tag}\n".encode())

        await asyncio.gather(*(writer(n) for n in range(args.writers)))
    print("DONE", flush=True)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("acks")
    parser.add_argument("tag", type=int)
    parser.add_argument("--writers", type=int, default=16)
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--batches", type=int, default=30)
    return parser.parse_args()


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
