"""Turning OpenTelemetry on the OpenTelemetry way: `--otel` or the OTLP endpoint variable, and the standard
OTEL_* variables for where spans and metrics go (otel.py builds them).

`otel_requested` says whether a command asked for telemetry; `otel_from_environment` makes the providers
(the OTLP exporter over HTTP, or gRPC when OTEL_EXPORTER_OTLP_PROTOCOL says so, behind a batch span
processor; a periodic metric reader) with the resource OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
describe. Nothing is imported until then.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .otel import OtelTelemetry

OTEL_INSTALL_HINT = ("OpenTelemetry needs its SDK and an OTLP exporter: pip install 'statewright[otel]' (or: pip "
                     "install opentelemetry-sdk opentelemetry-exporter-otlp-proto-http)")
OTEL_DEFAULT_SERVICE = "statewright"


class OtelUnavailable(Exception):
    """--otel was given and OpenTelemetry's SDK or exporter is not installed (the message says what to do)."""


def otel_requested(flag: bool, environ: Mapping[str, str] | None = None) -> bool:
    """Whether telemetry is on: `--otel`, or an OTLP endpoint set in the environment; never with
    OTEL_SDK_DISABLED=true."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return flag or bool(env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


def otel_for_command(flag: bool, *, content: bool = False, planned: bool = False) -> OtelTelemetry | None:
    """The telemetry a command runs with: None when not asked for. Asked for with `--otel` and not
    installed: OtelUnavailable; asked for by the endpoint variable alone and not installed: a note on
    stderr, and the command goes on without."""
    if not otel_requested(flag):
        return None
    try:
        return otel_from_environment(content=content or None, planned=planned)
    except OtelUnavailable as exc:
        if flag:
            raise
        print(f"note: OTEL_EXPORTER_OTLP_ENDPOINT is set, but {exc}", file=sys.stderr)
        return None


def otel_from_environment(*, content: bool | None = None, planned: bool = False,
                          span_exporter: Any = None) -> OtelTelemetry:
    """Telemetry configured by the OTEL_* environment: spans (OTEL_TRACES_EXPORTER otlp, console or none) and
    metrics (OTEL_METRICS_EXPORTER otlp or none). `span_exporter`, when given, takes the spans instead."""
    try:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
    except ImportError:
        raise OtelUnavailable(OTEL_INSTALL_HINT) from None
    from .otel import OtelPlannedIds, OtelTelemetry

    resource = Resource.create(otel_resource_defaults())
    ids: Any = OtelPlannedIds(RandomIdGenerator())  # (an IdGenerator in all but its base class)
    tracer_provider = TracerProvider(resource=resource, id_generator=ids)
    exporter = span_exporter if span_exporter is not None else otel_span_exporter()
    if exporter is not None:
        tracer_provider.add_span_processor(BatchSpanProcessor(exporter))
    readers = []
    if span_exporter is None and os.environ.get("OTEL_METRICS_EXPORTER", "otlp").strip().lower() != "none":
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

        readers.append(PeriodicExportingMetricReader(otel_metric_exporter()))
    # no reader, no metrics: the API's no-op instruments cost nothing, an SDK meter's cost a record each
    meter_provider: Any = MeterProvider(resource=resource, metric_readers=readers) if readers else None
    if meter_provider is None:
        from opentelemetry.metrics import NoOpMeterProvider

        meter_provider = NoOpMeterProvider()
    return OtelTelemetry(tracer_provider, meter_provider, content=content, owned=True, planned=planned)


def otel_resource_defaults() -> dict[str, str]:
    """service.name "statewright" unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES names one."""
    named = os.environ.get("OTEL_SERVICE_NAME") or "service.name=" in os.environ.get("OTEL_RESOURCE_ATTRIBUTES", "")
    return {} if named else {"service.name": OTEL_DEFAULT_SERVICE}


def _protocol(signal: str) -> str:
    return (os.environ.get(f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL") or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
            or "http/protobuf").strip().lower()


def otel_span_exporter() -> Any:
    """The span exporter OTEL_TRACES_EXPORTER names (otlp by default; console; none)."""
    kind = os.environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower()
    if kind == "none":
        return None
    try:
        if kind == "console":
            from opentelemetry.sdk.trace.export import ConsoleSpanExporter

            return ConsoleSpanExporter(out=sys.stderr)
        if _protocol("TRACES") == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # type: ignore[assignment]
                OTLPSpanExporter,
            )
    except ImportError:
        raise OtelUnavailable(OTEL_INSTALL_HINT) from None
    return OTLPSpanExporter()


def otel_metric_exporter() -> Any:
    try:
        if _protocol("METRICS") == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
        else:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import (  # type: ignore[assignment]
                OTLPMetricExporter,
            )
    except ImportError:
        raise OtelUnavailable(OTEL_INSTALL_HINT) from None
    return OTLPMetricExporter()


def otel_http_exporter(url: str) -> Any:
    """An OTLP/HTTP span exporter sending to `url` — a collector's base URL (`/v1/traces` is added) or its
    traces endpoint."""
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError:
        raise OtelUnavailable(OTEL_INSTALL_HINT) from None
    endpoint = url if url.rstrip("/").endswith("/v1/traces") else url.rstrip("/") + "/v1/traces"
    return OTLPSpanExporter(endpoint=endpoint)
