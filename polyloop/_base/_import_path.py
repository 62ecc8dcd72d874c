"""``MODULE:ATTR`` as ``uvicorn module:app`` reads it: the module is imported with the current
directory first on ``sys.path``, the attribute may be dotted (``pkg.mod:obj.attr``).

Every failure is one :class:`BadImportPath` line naming the option and the path: no colon, a
module that does not import (and why), an import that raised, an attribute that is missing.
The one reading of such a path: the CLI's ``--seams`` and the kit's store factory use it.
"""

from __future__ import annotations

import importlib
import os
import sys

from polyloop._base._exception_text import exception_text
from polyloop._base._shown import shown

__all__ = ["BadImportPath", "load"]


class BadImportPath(Exception):
    """``MODULE:ATTR`` names nothing usable (one line)."""


def load(option: str, path: str) -> object:
    """The object ``path`` (``MODULE:ATTR``) names, for the command-line ``option``."""
    module_name, colon, attribute = path.partition(":")
    if not colon or not module_name or not attribute:
        raise BadImportPath(
            f"{option} {shown(path, 80)}: expected MODULE:ATTR (a module importable from the "
            "current directory, then the name of an object in it)"
        )
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_name.startswith(exc.name):
            raise BadImportPath(
                f"{option} {shown(path, 80)}: no module named {shown(exc.name, 80)} (looked in "
                f"the current directory {cwd} and on sys.path)"
            ) from None
        raise BadImportPath(f"{option} {shown(path, 80)}: importing {module_name} failed: "
                            f"{exception_text(exc)}") from None  # fmt: skip
    except BaseException as exc:  # the user's module raised (SystemExit included): one line
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise BadImportPath(
            f"{option} {shown(path, 80)}: importing {module_name} raised {exception_text(exc)}"
        ) from None
    found: object = module
    for part in attribute.split("."):
        try:
            found = getattr(found, part)
        except AttributeError:
            raise BadImportPath(
                f"{option} {shown(path, 80)}: {module_name} has no attribute {shown(attribute, 80)}"
            ) from None
    return found
