"""Optional OS limits for a child session: rlimits and a network namespace (Linux).

Checked in the parent at construction (bad values, a platform that cannot provide a limit);
applied by the child itself before it runs any code (see ``_python_server.confine``). This is
hardening against runaway code, not a sandbox against a determined attacker.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict, dataclass

__all__ = ["SessionLimits"]


def _positive_int(name: str, value: object) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"{name} must be an int >= 1 or None, got {value!r}")


@dataclass(frozen=True)
class SessionLimits:
    """What the child applies to itself; every field ``None``/``True`` means "no limit"."""

    cpu_time_s: int | None = None
    memory_bytes: int | None = None
    max_processes: int | None = None
    max_file_bytes: int | None = None
    network: bool = True

    def __post_init__(self) -> None:
        for name in ("cpu_time_s", "memory_bytes", "max_processes", "max_file_bytes"):
            _positive_int(name, getattr(self, name))
        if not isinstance(self.network, bool):
            raise TypeError(f"network must be a bool, got {type(self.network).__name__}")

    @property
    def restricts(self) -> bool:
        numbers = (self.cpu_time_s, self.memory_bytes, self.max_processes, self.max_file_bytes)
        return not self.network or any(n is not None for n in numbers)

    def unavailable(self, *, platform: str, uid: int | None) -> str | None:
        """Why this OS cannot provide these limits, or ``None`` when it can (so far as we know)."""
        if self.restricts and platform != "linux":
            return f"session limits and network=False need Linux; this is {platform!r}"
        if self.max_processes is not None and uid == 0:
            return (
                "max_processes is RLIMIT_NPROC, which Linux does not enforce for root: run the "
                "session as another user, or leave max_processes=None"
            )
        return None

    def require_available(self) -> None:
        """Raise ``OSError`` saying why when this machine cannot provide these limits."""
        refusal = self.unavailable(platform=sys.platform, uid=_uid())
        if refusal is not None:
            raise OSError(refusal)

    def to_json(self) -> str:
        return json.dumps(asdict(self))


def _uid() -> int | None:
    return os.getuid() if hasattr(os, "getuid") else None
