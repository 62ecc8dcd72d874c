"""Run id validation: one rule, checked before any I/O by the loop and by every store."""

from __future__ import annotations

import re
import string
import uuid

from polyloop._base._shown import shown
from polyloop.errors import InvalidRunId

__all__ = [
    "MAX_RUN_ID",
    "RUN_ID_FIRST",
    "RUN_ID_PATTERN",
    "RUN_ID_REST",
    "new_run_id",
    "validate_run_id",
]

# The grammar, once: what the first character may be, what the others may be, how long an id
# may get. The pattern, the contract kit's strategies and its fresh ids are all built from these.
RUN_ID_FIRST = string.ascii_letters + string.digits
RUN_ID_REST = RUN_ID_FIRST + "._-"
MAX_RUN_ID = 128
#: ``[A-Za-z0-9][A-Za-z0-9._-]{0,127}`` (PostgresStore's CHECK constraint spells it out too).
RUN_ID_PATTERN = f"[A-Za-z0-9][A-Za-z0-9._-]{{0,{MAX_RUN_ID - 1}}}"
_RUN_ID = re.compile(RUN_ID_PATTERN)


def validate_run_id(run_id: object) -> str:
    """Return ``run_id`` unchanged if it is a valid run id, else raise :class:`InvalidRunId`.

    A run id is 1 to 128 characters of ``[A-Za-z0-9._-]`` starting with a letter or digit, so it
    is safe as a file name, a URL path segment and a SQL value (no ``/``, no ``..`` prefix, no NUL).
    """
    if not isinstance(run_id, str):
        raise InvalidRunId(f"run id must be a str, got {type(run_id).__name__}")
    if _RUN_ID.fullmatch(run_id) is None:
        # a long id is cut by shown(), which says its length itself
        length = (
            "" if len(run_id) > 40 else f" ({len(run_id)} char{'' if len(run_id) == 1 else 's'})"
        )
        raise InvalidRunId(
            f"invalid run id {shown(run_id, 40)}{length}: "
            "a run id is 1-128 characters of "
            "[A-Za-z0-9._-] starting with a letter or digit"
        )
    return run_id


def new_run_id() -> str:
    """A fresh run id (``uuid4().hex``)."""
    return uuid.uuid4().hex
