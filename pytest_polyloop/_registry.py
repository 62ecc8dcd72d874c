"""The seam registry: seam name → contract suite and the samples fixture it needs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["RegisteredSeam", "SeamRegistry"]


@dataclass(frozen=True, slots=True)
class RegisteredSeam:
    """One seam: its name, the suite (a ``polyloop.testing.ContractBase`` subclass) and the
    name of the samples fixture the suite needs (``None`` if it needs none)."""

    name: str
    suite: type[Any]
    samples_fixture: str | None

    @property
    def samples_target(self) -> str | None:
        """The fixture a tag's ``samples=`` feeds: the one the suite needs, else the one it can
        use when given (``optional_samples_fixture``, e.g. a store's crash-probe factory)."""
        return self.samples_fixture or getattr(self.suite, "optional_samples_fixture", None)


class SeamRegistry:
    """What ``pytest_polyloop_register_seams`` fills: one suite per seam name, and the
    implementations left out of the run (:meth:`leave_out`)."""

    def __init__(self, contract_base: type[Any]) -> None:
        self._contract_base = contract_base
        self._seams: dict[str, RegisteredSeam] = {}
        self._left_out: dict[str, dict[str, Any]] = {}

    def leave_out(
        self,
        implementation: str,
        *,
        hint: str,
        extra: str | None = None,
        seam: str | None = None,
        ids: Sequence[str] = (),
    ) -> None:
        """Record that ``implementation`` is not judged in this run because what it needs is
        not installed, so that the report lists it (``left_out``) instead of a warning.

        ``hint`` says what to install, completing "it needs …" (e.g. "the `postgres` extra
        (pip install 'polyloop[postgres]')"); ``extra`` names the extra, ``seam`` the seam, and
        ``ids`` the implementation ids it would be judged under (a report merge drops the entry
        where another job judged one of them). The verdict does not count it. Leaving the same
        implementation out twice with different details is an error.
        """
        if not isinstance(implementation, str) or not implementation.strip():
            raise ValueError(f"leave_out needs an implementation name, got {implementation!r}")
        if not isinstance(hint, str) or not hint.strip():
            raise ValueError(f"leave_out({implementation!r}) needs a hint: what to install")
        for name, value in (("extra", extra), ("seam", seam)):
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise ValueError(f"leave_out({implementation!r}): {name} must be a name or None")
        if isinstance(ids, str) or not all(isinstance(i, str) and i for i in ids):
            raise ValueError(f"leave_out({implementation!r}): ids must be a list of ids")
        entry: dict[str, Any] = {
            "implementation": implementation,
            "seam": seam,
            "extra": extra,
            "hint": hint,
            "ids": sorted(set(ids)),
        }
        existing = self._left_out.setdefault(implementation, entry)
        if existing != entry:
            raise ValueError(f"{implementation!r} is already left out with other details")

    def left_out(self) -> list[dict[str, Any]]:
        """The implementations left out of the run, sorted by name (each a fresh dict)."""
        return [dict(self._left_out[name]) for name in sorted(self._left_out)]

    def add(self, name: str, suite: type[Any], samples_fixture: str | None = None) -> None:
        """Register ``suite`` as the contract suite of seam ``name``.

        ``suite`` must be a suite (a subclass of ``polyloop.testing.ContractBase`` whose body sets
        ``seam = name``); ``samples_fixture`` is the fixture name the suite reads samples from, or
        ``None``. Registering the same seam twice with a different suite is an error.
        """
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"a seam name must be an identifier, got {name!r}")
        if not (isinstance(suite, type) and issubclass(suite, self._contract_base)):
            raise TypeError(
                f"the suite for seam {name!r} must be a polyloop.testing.ContractBase subclass, "
                f"got {suite!r}"
            )
        if getattr(suite, "seam", None) != name:
            raise ValueError(
                f"the suite {suite.__qualname__} declares seam {getattr(suite, 'seam', None)!r}, "
                f"not {name!r}: the seam name is the fixture the suite needs"
            )
        if samples_fixture is not None and not (
            isinstance(samples_fixture, str) and samples_fixture.isidentifier()
        ):
            raise ValueError(
                f"samples_fixture must be a fixture name or None, got {samples_fixture!r}"
            )
        existing = self._seams.get(name)
        if existing is not None and existing.suite is not suite:
            raise ValueError(
                f"seam {name!r} is already registered with {existing.suite.__qualname__}; "
                f"cannot register {suite.__qualname__} too"
            )
        self._seams[name] = RegisteredSeam(name, suite, samples_fixture)

    def get(self, name: str) -> RegisteredSeam | None:
        """The seam registered as ``name``, or ``None``."""
        return self._seams.get(name)

    def names(self) -> list[str]:
        """The registered seam names, sorted."""
        return sorted(self._seams)

    def seams(self) -> list[RegisteredSeam]:
        """Every registered seam, sorted by name."""
        return [self._seams[name] for name in sorted(self._seams)]

    def suite_of(self, cls: type[Any]) -> RegisteredSeam | None:
        """The registered seam whose suite ``cls`` inherits (a concrete subclass), or ``None``."""
        for seam in self._seams.values():
            if cls is not seam.suite and issubclass(cls, seam.suite):
                return seam
        return None
