"""Fresh run ids for the store suite: across the grammar, unique in every example.

A store is often shared between examples (one PostgreSQL database for a whole session), so
every id the suite writes must be new — the old suite used ``uuid4().hex`` for that, which is
32 lower-case hex digits: a store that lower-cases ids, compares them case-insensitively or
keeps only their first 64 characters passed. Here each id still carries a ``uuid4`` (in mixed
case, so it stays unique even to a case-insensitive store), but is padded to the grammar's
edge of 128 characters of ``[A-Za-z0-9._-]`` and, within one call, the ids share everything but
their last two characters, the first four of them differing only in case (``aB``, ``Ab``,
``ab``, ``AB``).
"""

from __future__ import annotations

import random
import uuid

from polyloop._base._run_id import MAX_RUN_ID, RUN_ID_REST

__all__ = ["MAX_RUN_ID", "fresh_run_id", "fresh_run_ids", "numeric_run_ids", "unique_run_id"]

#: The last two characters of the ids of one family, in order: case-only twins first.
_ENDINGS = ("aB", "Ab", "ab", "AB", "a.", "a-", "a_", "a0", "b9", "Z_", "z-", "0.")
_RANDOM = random.Random()


def _token() -> str:
    """A ``uuid4`` in hex with each letter in a random case: unique however case is treated."""
    return "".join(c.upper() if _RANDOM.random() < 0.5 else c for c in uuid.uuid4().hex)


def fresh_run_ids(count: int, length: int = MAX_RUN_ID) -> list[str]:
    """``count`` (at most 12) new run ids of ``length`` (34 to 128) characters that differ only
    in their last two characters; the first four differ only in case."""
    if not 1 <= count <= len(_ENDINGS) or not 34 <= length <= MAX_RUN_ID:
        raise ValueError(f"fresh_run_ids({count}, {length}): out of range")
    token = _token()
    filler = "".join(_RANDOM.choice(RUN_ID_REST) for _ in range(length - len(token) - 2))
    # The dots and dashes of the filler sit mid-id; the head is the token's, a letter or digit.
    return [token + filler + ending for ending in _ENDINGS[:count]]


def fresh_run_id() -> str:
    """One new run id of 128 characters, in mixed case."""
    return fresh_run_ids(1)[0]


def unique_run_id(drawn: str) -> str:
    """A drawn run id made unique: ``drawn`` + ``-`` + a mixed-case ``uuid4``, ``drawn`` cut so
    the result stays within 128 characters (a 128-character draw stays 128 long)."""
    suffix = "-" + _token()
    return drawn[: MAX_RUN_ID - len(suffix)] + suffix


def numeric_run_ids() -> list[str]:
    """New run ids that look like numbers and are equal as numbers: a fresh 17-digit integer,
    with one and two leading zeros, zero-padded to the grammar's 128 characters, and with a
    ``.0`` (a store that keys, types or compares ids as numbers merges them)."""
    number = str(_RANDOM.randrange(10**16, 10**17))
    return [number, "0" + number, "00" + number, number.rjust(MAX_RUN_ID, "0"), number + ".0"]
