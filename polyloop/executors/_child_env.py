"""The environment a child session starts with: a short allow-list, not the parent's secrets.

One rule for every executor that starts a child process (``PythonExecutor`` today): the child
gets only the variables in :data:`PASSED_VARIABLES` that the parent has set, then ``env`` on top
(adding or replacing); ``inherit_env=True`` starts from the parent's whole environment instead.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

__all__ = ["PASSED_VARIABLES", "checked_env", "child_environment"]

# Enough to find programs, a home, a temp dir and the locale; SYSTEMROOT: Windows needs it.
PASSED_VARIABLES = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TZ", "SYSTEMROOT")


def checked_env(env: object) -> dict[str, str] | None:
    """A copy of ``env`` (``None`` stays ``None``), refused unless it is a str→str mapping."""
    if env is None:
        return None
    if not isinstance(env, Mapping):
        raise TypeError(f"env must be a mapping of str to str or None, got {type(env).__name__}")
    for key, value in env.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f"env must map str to str, got {key!r}: {type(value).__name__}")
        if not key or "=" in key or "\0" in key or "\0" in value:
            raise ValueError(f"env variable {key!r}: a name must be non-empty without '=' or NUL")
    return dict(env)


def child_environment(env: Mapping[str, str] | None, *, inherit_env: bool) -> dict[str, str]:
    """The child's environment, read from ``os.environ`` now (at start, not at construction)."""
    if inherit_env:
        base = dict(os.environ)
    else:
        base = {name: os.environ[name] for name in PASSED_VARIABLES if name in os.environ}
    base.update(env or {})
    return base
