"""ScriptedModel: replies from a list, deterministic across processes."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence

from polyloop.types import Message, ModelReply


class ScriptedModel:
    """Returns ``replies[k]`` where *k* is the number of assistant messages in the history.

    Because *k* is read from the messages, not from a counter in this object, a resumed run in a
    fresh process gets exactly the replies the interrupted one would have got. ``call_id`` is
    ``f"scripted-{k}"``. A reply given as a ``str`` becomes ``ModelReply(text=...)``; a
    ``BaseException`` instance (or class) in the script is raised instead of replying. Past the
    end of the script the client raises ``IndexError`` (the run records ``llm_error``).
    """

    def __init__(self, replies: Iterable[str | ModelReply | BaseException | type[BaseException]]):
        self.replies = list(replies)
        self.calls = 0  # how many times complete() was called on this object

    async def complete(self, messages: Sequence[Message]) -> ModelReply:
        self.calls += 1
        await asyncio.sleep(0)  # a real suspension point, as any remote model has
        k = sum(1 for m in messages if m.role == "assistant")
        if k >= len(self.replies):
            raise IndexError(f"ScriptedModel has {len(self.replies)} replies; reply {k} asked for")
        reply = self.replies[k]
        if isinstance(reply, BaseException) or (
            isinstance(reply, type) and issubclass(reply, BaseException)
        ):
            raise reply
        if isinstance(reply, str):
            return ModelReply(text=reply, call_id=f"scripted-{k}")
        return reply

    def __repr__(self) -> str:
        return f"ScriptedModel({len(self.replies)} replies)"
