"""Instrumentation: what the loop calls around a run and each seam call (optional).

The port is :class:`polyloop.ports.Instrumentation`. The bundled implementation,
``OpenTelemetryInstrumentation``, needs the ``otel`` extra; it is imported lazily so that
``import polyloop.instrumentation`` stays standard-library only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from polyloop.ports import (
    DescribedModelClient,
    Instrumentation,
    ModelDescription,
    RunInstrumentation,
    SeamCall,
)

if TYPE_CHECKING:
    from polyloop._telemetry._instrumentation import OpenTelemetryInstrumentation

__all__ = [
    "DescribedModelClient",
    "Instrumentation",
    "ModelDescription",
    "OpenTelemetryInstrumentation",
    "RunInstrumentation",
    "SeamCall",
]


def __getattr__(name: str) -> Any:
    if name == "OpenTelemetryInstrumentation":
        from polyloop._telemetry._instrumentation import OpenTelemetryInstrumentation

        return OpenTelemetryInstrumentation
    raise AttributeError(f"module 'polyloop.instrumentation' has no attribute {name!r}")
