"""OpenTelemetry for statewright: where a process's spans and metrics go (`OtelTelemetry`, its metrics'
instruments) and planned span ids for replayed workflows. A run's events become spans in otel_sink.py
(`OtelRunSink`, made by `OtelTelemetry.run_sink`); the conventions' names and trace-context texts are
otel_names.py's.

opentelemetry is imported only when telemetry is asked for (`OtelTelemetry`, otel_setup.py): a runner
carries this module and runs without the package until `--otel` is given.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from .otel_names import OTEL_SCOPE, otel_capture_content, otel_context, otel_latest_conventions
from .otel_sink import OtelRunSink
from .trace import secret_values


class OtelPlannedIds:
    """An id generator (OpenTelemetry's IdGenerator shape) that gives the ids planned for the next span, and
    otherwise those of the generator it wraps. A Temporal workflow plans every span's id from its own
    history, so a worker that replays a run makes the spans of the worker before it again, ids and all."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.local = threading.local()  # workflows run in several threads of one worker

    def plan(self, span_id: int, trace_id: int | None = None) -> None:
        self.local.planned = (span_id, trace_id)

    def generate_span_id(self) -> int:
        planned = getattr(self.local, "planned", None)
        if planned is None:
            return int(self.inner.generate_span_id())
        self.local.planned = (None, planned[1]) if planned[1] is not None else None
        return int(planned[0]) if planned[0] is not None else int(self.inner.generate_span_id())

    def generate_trace_id(self) -> int:
        planned = getattr(self.local, "planned", None)
        if planned is not None and planned[1] is not None:
            self.local.planned = None if planned[0] is None else (planned[0], None)
            return int(planned[1])
        return int(self.inner.generate_trace_id())

    def is_trace_id_random(self) -> bool:
        return False


class OtelTelemetry:
    """Where a process's spans and metrics go: a tracer and the run metrics' instruments, with the content
    setting (`content`: prompts, replies and tool arguments in spans) and the conventions' version.

    `tracer_provider` and `meter_provider` default to OpenTelemetry's global ones. `owned` providers (made
    from the environment by otel_setup.py) are flushed and shut down by `shutdown`."""

    def __init__(self, tracer_provider: Any = None, meter_provider: Any = None, *, content: bool | None = None,
                 latest: bool | None = None, owned: bool = False, planned: bool = False,
                 light_spans: bool = True) -> None:
        from opentelemetry import metrics, trace

        from .otel_spans import span_recorder

        self.tracer_provider: Any = tracer_provider or trace.get_tracer_provider()
        self.meter_provider = meter_provider or metrics.get_meter_provider()
        self.ids: OtelPlannedIds | None = None
        generator = getattr(self.tracer_provider, "id_generator", None)
        if isinstance(generator, OtelPlannedIds):
            self.ids = generator
        elif planned and generator is not None:  # an SDK provider: its spans' ids can be planned
            self.ids = OtelPlannedIds(generator)
            setattr(self.tracer_provider, "id_generator", self.ids)  # noqa: B010 - the API's type lacks it
        self.tracer = self.tracer_provider.get_tracer(OTEL_SCOPE)
        # a run's spans made without the SDK tracer's cost per span where that changes nothing (otel_spans.py)
        self.recorder = span_recorder(self.tracer_provider, self.tracer) if light_spans else None
        self.content = otel_capture_content() if content is None else bool(content)
        self.latest = otel_latest_conventions() if latest is None else bool(latest)
        self.secrets = secret_values()
        self.owned = owned
        self.metrics = OtelMetrics(self.meter_provider.get_meter(OTEL_SCOPE), self.latest)
        # a no-op meter provider counts nothing: the run's sinks then build no measurement at all
        self.counting = not isinstance(self.meter_provider, metrics.NoOpMeterProvider)
        self.trace_api = trace
        self.batched: set[OtelRunSink] = set()  # batched sinks that keep events (OtelRunSink.record)

    def run_sink(self, run: Any = None, machine: Any = None, *, content: bool = False,
                 secrets: list[str] | None = None, planned: str | None = None, batched: bool = False) -> OtelRunSink:
        """The sink of one run's events. `run` (a Run) keeps the run's trace context for its checkpoint;
        `machine` names each state's agent; `content` adds content when this telemetry records none;
        `planned` (a workflow's own key) plans every span id from it; `batched` makes the spans a batch of
        events at a time (a local run's sink: OtelRunSink.record), taken when this telemetry is flushed."""
        return OtelRunSink(self, run, machine, content=self.content or content,
                           secrets=self.secrets if secrets is None else secrets, planned=planned, batched=batched)

    def start_client_span(self, name: str, attributes: Mapping[str, Any]) -> Any:
        """A span of a client that starts a run elsewhere (a Temporal workflow): the run's spans join it."""
        return self.tracer.start_span(name, kind=self.trace_api.SpanKind.CLIENT, attributes=dict(attributes))

    def child_span(self, name: str, parent: str | None, attributes: Mapping[str, Any]) -> Any:
        """A span under the span `parent` (traceparent text) names: an activity under its run's state."""
        return self.tracer.start_span(name, context=otel_context(self.trace_api, parent), attributes=dict(attributes))

    def flush(self) -> None:
        """Send what is buffered: the events runs' sinks keep become spans, then the providers flush (an
        error making a span is raised after all of it is done)."""
        error: Exception | None = None
        for sink in self.batched.copy():
            try:
                sink.flush()
            except Exception as exc:  # noqa: BLE001 - raised once everything else is flushed
                error = error or exc
        for provider in (self.tracer_provider, self.meter_provider):
            flush = getattr(provider, "force_flush", None)
            if flush is not None:
                flush()
        if error is not None:
            raise error

    def shutdown(self) -> None:
        """Send what is buffered; providers this telemetry made are shut down (whatever the flush raised)."""
        try:
            self.flush()
        finally:
            if self.owned:
                for provider in (self.tracer_provider, self.meter_provider):
                    stop = getattr(provider, "shutdown", None)
                    if stop is not None:
                        stop()


class OtelMetrics:
    """The run metrics' instruments: the GenAI client metrics for model calls, statewright's for the rest."""

    def __init__(self, meter: Any, latest: bool) -> None:
        self.provider_key = "gen_ai.provider.name" if latest else "gen_ai.system"
        self.runs_started = meter.create_counter("statewright.runs.started", "{run}", "Runs started or resumed")
        self.runs_ended = meter.create_counter("statewright.runs.ended", "{run}", "Runs ended, by status")
        self.run_duration = meter.create_histogram("statewright.run.duration", "s", "Wall time of a run's segment")
        # (a histogram counts what it records: its count is the state's visits, a model's calls, ...)
        self.state_duration = meter.create_histogram("statewright.state.duration", "s", "Time of a state visit")
        self.operation = meter.create_histogram("gen_ai.client.operation.duration", "s",
                                                "GenAI operation duration")
        self.tokens = meter.create_histogram("gen_ai.client.token.usage", "{token}",
                                             "Measures number of input and output tokens used")
        self.cost = meter.create_counter("statewright.model.cost", "USD", "What model calls cost, by model")
        self.waits = meter.create_counter("statewright.person.waits", "{wait}", "Answers awaited from a person")
        self.wait_duration = meter.create_histogram("statewright.person.wait.duration", "s",
                                                    "Time from a question to its answer")
