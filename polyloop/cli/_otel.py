"""``--otel``: OpenTelemetry for a command, configured the standard way, from ``OTEL_*``.

The providers are the SDK's, built from the environment as every OpenTelemetry SDK reads it:
``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES`` (the resource), ``OTEL_TRACES_SAMPLER``,
``OTEL_TRACES_EXPORTER`` / ``OTEL_METRICS_EXPORTER`` (``otlp``, the default; ``console``;
``none``) and, for OTLP over HTTP/protobuf, ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or the
per-signal ``…_TRACES_ENDPOINT`` / ``…_METRICS_ENDPOINT``), ``…_HEADERS`` and ``…_TIMEOUT``.
Without the ``otel`` extra it is one line with the install hint.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

__all__ = ["INSTALL_HINT", "OtelUnavailable", "from_environment"]

INSTALL_HINT = (
    "--otel needs OpenTelemetry: pip install 'polyloop[otel]' (opentelemetry-sdk and the "
    "OTLP/HTTP exporter)"
)
_EXPORTERS = ("otlp", "console", "none")


class OtelUnavailable(Exception):
    """``--otel`` cannot be honoured: the extra is missing or an ``OTEL_*`` value is unknown."""


def _exporter_name(variable: str) -> str:
    name = os.environ.get(variable, "otlp").strip().lower() or "otlp"
    if name not in _EXPORTERS:
        raise OtelUnavailable(
            f"--otel: {variable}={name!r} is not supported here; use one of {', '.join(_EXPORTERS)}"
        )
    return name


def _check_protocol() -> None:
    protocol = os.environ.get(
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "")
    ).strip()
    if protocol not in ("", "http/protobuf"):
        raise OtelUnavailable(
            f"--otel: OTLP protocol {protocol!r} is not supported here; use http/protobuf"
        )


def from_environment() -> tuple[Any, Callable[[], None]]:
    """An ``OpenTelemetryInstrumentation`` over providers built from the environment, and the
    function that flushes and shuts them down (call it when the command ends)."""
    traces = _exporter_name("OTEL_TRACES_EXPORTER")
    metrics = _exporter_name("OTEL_METRICS_EXPORTER")
    _check_protocol()
    try:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import (
            ConsoleMetricExporter,
            PeriodicExportingMetricReader,
        )
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

        from polyloop.instrumentation import OpenTelemetryInstrumentation

        if "otlp" in (traces, metrics):
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
                OTLPMetricExporter,
            )
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError:
        raise OtelUnavailable(INSTALL_HINT) from None
    tracer_provider = TracerProvider()  # resource and sampler from OTEL_* (the SDK reads them)
    if traces != "none":
        span_exporter = OTLPSpanExporter() if traces == "otlp" else ConsoleSpanExporter()
        tracer_provider.add_span_processor(BatchSpanProcessor(span_exporter))
    readers = []
    if metrics != "none":
        metric_exporter = OTLPMetricExporter() if metrics == "otlp" else ConsoleMetricExporter()
        readers.append(PeriodicExportingMetricReader(metric_exporter))
    meter_provider = MeterProvider(metric_readers=readers)
    instrumentation = OpenTelemetryInstrumentation(
        tracer_provider=tracer_provider, meter_provider=meter_provider
    )

    def shutdown() -> None:
        tracer_provider.shutdown()
        meter_provider.shutdown()

    return instrumentation, shutdown
