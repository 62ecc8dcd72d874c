"""The environment of a child interpreter the kit starts to run the implementer's factory."""

from __future__ import annotations

import os
import sys

__all__ = ["child_env"]


def child_env() -> dict[str, str]:
    """The parent's environment, with its ``sys.path`` so the factory imports the same way."""
    paths = [entry or os.getcwd() for entry in sys.path]
    return dict(os.environ) | {"PYTHONPATH": os.pathsep.join(paths)}
