"""OpenTelemetry: the sink whose far end is spans (``_sink``), the instrumentation port's
implementation (``_instrumentation``), and their helpers (an executor's detail on a span,
``_detail``; a tool's progress as span events, ``_progress``). Imported only when the ``otel``
extra is used; the public doors are ``polyloop.events`` and ``polyloop.instrumentation``."""
