"""The environment a child session starts with: a short allow-list, not the parent's secrets.

One rule for every executor that starts a child process (``PythonExecutor`` today): the child
gets only the variables in :data:`PASSED_VARIABLES` that the parent has set, then ``env`` on top
(adding or replacing); ``inherit_env=True`` starts from the parent's whole environment instead.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from polyloop.executors._str_mapping import checked_str_mapping

__all__ = ["PASSED_VARIABLES", "checked_env", "child_environment"]

# Enough to find programs, a home, a temp dir and the locale; SYSTEMROOT: Windows needs it.
PASSED_VARIABLES = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TZ", "SYSTEMROOT")


def checked_env(env: object) -> dict[str, str] | None:
    """A copy of ``env`` (``None`` stays ``None``), refused unless it is a str→str mapping."""
    checked = checked_str_mapping("env", env)
    for key, value in (checked or {}).items():
        if not key or "=" in key or "\0" in key or "\0" in value:
            raise ValueError(f"env variable {key!r}: a name must be non-empty without '=' or NUL")
    return checked


def child_environment(env: Mapping[str, str] | None, *, inherit_env: bool) -> dict[str, str]:
    """The child's environment, read from ``os.environ`` now (at start, not at construction)."""
    if inherit_env:
        base = dict(os.environ)
    else:
        base = {name: os.environ[name] for name in PASSED_VARIABLES if name in os.environ}
    base.update(env or {})
    return base
