"""``async with`` for the bundled objects that hold a resource and release it in ``aclose()``."""

from __future__ import annotations

from types import TracebackType
from typing import Self


class AsyncClosing:
    """``async with obj:`` returns ``obj`` and calls ``await obj.aclose()`` on the way out."""

    async def aclose(self) -> None:
        raise NotImplementedError  # every subclass releases its own resource

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
