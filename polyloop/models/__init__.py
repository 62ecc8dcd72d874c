"""Bundled model clients.

``OpenAIChatModel`` needs the ``openai`` extra; it is imported lazily so that
``import polyloop.models`` stays standard-library only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from polyloop.models._scripted import ScriptedModel

if TYPE_CHECKING:
    from polyloop.models._openai import OpenAIChatModel

__all__ = ["OpenAIChatModel", "ScriptedModel"]


def __getattr__(name: str) -> Any:
    if name == "OpenAIChatModel":
        from polyloop.models._openai import OpenAIChatModel

        return OpenAIChatModel
    raise AttributeError(f"module 'polyloop.models' has no attribute {name!r}")
