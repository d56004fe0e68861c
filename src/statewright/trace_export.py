"""`statewright trace export FILE --otlp URL`: a recorded trace sent to an OpenTelemetry collector as the spans
the run would have sent live (runtime/otel.py builds both, from the same events, at the times they carry)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from .runtime.otel import OtelTelemetry
from .runtime.otel_names import otel_traceparent
from .runtime.otel_sink import OtelRunSink
from .runtime.trace import trace_lines


class TraceExportError(Exception):
    """The trace could not be sent: OpenTelemetry missing, or the collector refused or could not be reached."""


@dataclass
class ExportReport:
    runs: int  # run segments: a run and each of its resumptions
    events: int
    spans: int
    traces: int
    unreadable: int = 0  # events whose fields could not be read as a run's (left out)
    left_out: list[int] = field(default_factory=list)  # their line numbers in the file (the first 20)


def export_trace(path: str, url: str | None = None, *, content: bool = False) -> ExportReport:
    """Send the trace file `path` to the OTLP/HTTP collector at `url` (default: the OTEL_EXPORTER_OTLP_*
    endpoint) as spans: each run a trace, a resumed run's segments in its run's trace. Content in the file
    (messages, replies, tool arguments) is sent only with `content`. Raises OSError and ValueError as
    `read_trace` does, and TraceExportError."""
    lines = [(number, event) for number, event, _ in trace_lines(path) if event is not None]
    events = [event for _, event in lines]
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        from .runtime.otel_setup import OtelUnavailable, otel_http_exporter, otel_resource_defaults
    except ImportError:
        from .runtime.otel_setup import OTEL_INSTALL_HINT

        raise TraceExportError(OTEL_INSTALL_HINT) from None
    target = url or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if not target:
        raise TraceExportError("no collector to send to: give --otlp URL (or set OTEL_EXPORTER_OTLP_ENDPOINT)")
    try:
        exporter = otel_http_exporter(target)
    except OtelUnavailable as exc:
        raise TraceExportError(str(exc)) from None
    collected = InMemorySpanExporter()  # the spans are sent in one export, whose result is known
    provider = TracerProvider(resource=Resource.create(otel_resource_defaults()))
    provider.add_span_processor(SimpleSpanProcessor(collected))
    from opentelemetry.sdk.metrics import MeterProvider

    telemetry = OtelTelemetry(provider, MeterProvider(), content=content)
    runs, left_out = _replay(events, telemetry, content)
    spans = collected.get_finished_spans()
    traces = len({span.context.trace_id for span in spans})
    try:
        result = exporter.export(spans)
    except Exception as exc:  # noqa: BLE001 - a collector that cannot be reached: one clear line
        raise TraceExportError(f"could not send to {target}: {exc}") from None
    finally:
        exporter.shutdown()
    if result is not SpanExportResult.SUCCESS:
        raise TraceExportError(f"the collector at {target} did not take the spans (see the messages above)")
    return ExportReport(runs, len(events), len(spans), traces, len(left_out),
                        [lines[index][0] for index in left_out[:20]])


def _replay(events: list[dict[str, Any]], telemetry: OtelTelemetry, content: bool) -> tuple[int, list[int]]:
    """Feed the events to one sink per run segment; a resumed segment joins its run's trace. (Run segments,
    the indexes of the events left out.)

    A trace file is anyone's text: every string in it (keys too) is redacted before the sink sees it, as
    in every other sink, and an event whose fields are not what a run records (a list for a state's name,
    text for a token count, ...) is left out and counted, never an error that stops the export."""
    from .runtime.otel_names import otel_without_content
    from .runtime.trace import secret_values

    secrets = secret_values()
    sink: OtelRunSink | None = None
    roots: dict[str, str] = {}  # run id -> its first segment's span, as traceparent
    runs = 0
    left_out: list[int] = []
    for index, event in enumerate(events):
        event = _redacted(event, secrets)
        name = str(event.get("event"))
        fields = {k: v for k, v in event.items() if k not in ("event", "seq")}
        if not content:
            fields = otel_without_content(name, fields)
        try:
            if name == "run_start" or sink is None:
                if sink is not None:
                    sink.close_open()  # a run that stopped without its end (a crash) before it was resumed
                run_id = str(fields.get("run_id") or "")
                sink = telemetry.run_sink()
                sink.parent = roots.get(run_id) if fields.get("resumed") else None
                runs += 1
                sink.record("run_start", fields if name == "run_start" else {"time": fields.get("time")})
                if run_id and sink.root is not None and run_id not in roots:
                    roots[run_id] = otel_traceparent(sink.root.get_span_context())
                if name == "run_start":
                    continue
            sink.record(name, fields)
        except Exception:  # noqa: BLE001 - a field of another kind than a run writes: the event is left out
            left_out.append(index)
    if sink is not None:
        sink.close_open()
    return runs, left_out


def _redacted(data: Any, secrets: list[str]) -> Any:
    """`data` (a trace line's JSON, its depth bounded when it was read) with every string redacted, keys too:
    the environment's secrets and every key-shaped token."""
    from .runtime.trace import redact

    if isinstance(data, str):
        return redact(data, secrets)
    if isinstance(data, dict):
        return {_redacted(key, secrets): _redacted(value, secrets) for key, value in data.items()}
    if isinstance(data, list):
        return [_redacted(value, secrets) for value in data]
    return data
