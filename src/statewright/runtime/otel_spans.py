"""A run's spans at a fraction of the SDK's cost per span, exported through the SDK's own pipeline.

The OpenTelemetry SDK's `Tracer.start_span` pays, for every span, a sampler call, a lock, a context, and a
check of every attribute value (each through an isinstance ladder): about 16 µs a span on a slow core, more
than statewright's whole engine spends on a transition. A run's spans carry only values statewright made
(text, numbers, booleans, tuples of them), so none of that is needed to make them: a `SpanRecorder` keeps
a span as a few slots while it is open, and at its end hands the SDK the same `ReadableSpan` the SDK's own
span would have handed it, to the same span processors (batching, exporters) as every other span.

It is used only where that is exactly what the SDK would do, checked once per tracer provider
(`span_recorder`): the SDK's `TracerProvider` and `Tracer`, the tracer enabled and without the SDK's own
span metrics, the default sampler (parent-based, always on), and span processors that do nothing when a
span starts or is ending (the SDK's batch and simple processors do nothing then). Anything else — another
SDK, a custom sampler or processor — gets None, and spans go through the tracer as before. Ids come from
the provider's id generator, so planned ids (a Temporal workflow's, otel.py) are used alike; the span
limits are the provider's, applied as the SDK applies them (the oldest attribute or event gives way).
"""

from __future__ import annotations

from collections import deque
from time import time_ns
from typing import Any

_SCALARS = (str, bool, int, float)
_SCALAR_TYPES = frozenset(_SCALARS)  # exactly these types (a subclass goes the long way, through `clean`)
_PLAIN_TYPES = _SCALAR_TYPES | {tuple}


def span_recorder(provider: Any, tracer: Any) -> SpanRecorder | None:
    """A recorder for `tracer`'s spans when it would make exactly the spans the SDK makes; None otherwise."""
    try:
        from opentelemetry.sdk.trace import SynchronousMultiSpanProcessor, Tracer, TracerProvider, sampling
        from opentelemetry.sdk.trace._tracer_metrics import NoOpTracerMetrics
    except ImportError:
        return None
    if type(provider) is not TracerProvider or type(tracer) is not Tracer:
        return None
    try:
        if not tracer._is_enabled() or not isinstance(tracer._tracer_metrics, NoOpTracerMetrics):
            return None
        if tracer.sampler.get_description() != sampling.DEFAULT_ON.get_description():
            return None
        active = provider._active_span_processor
        if type(active) is not SynchronousMultiSpanProcessor:
            return None
        if not _quiet(active._span_processors):
            return None
        return SpanRecorder(tracer, active)
    except AttributeError:  # an SDK whose insides differ from those this was written against
        return None


def _quiet(processors: Any) -> bool:
    """Whether every one of a provider's span processors does nothing when a span starts or is ending."""
    from opentelemetry.sdk.trace import SpanProcessor

    for processor in processors:
        kind = type(processor)
        if not (_does_nothing(kind.on_start, SpanProcessor.on_start)
                and _does_nothing(kind._on_ending, SpanProcessor._on_ending)):
            return False
    return True


def _does_nothing(method: Any, base: Any) -> bool:
    """Whether a span processor's hook is the base class's (which does nothing) or the SDK's own processors'
    (which do nothing too)."""
    if method is base:
        return True
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    return method in (BatchSpanProcessor.on_start, BatchSpanProcessor._on_ending, SimpleSpanProcessor.on_start,
                      SimpleSpanProcessor._on_ending)


class SpanRecorder:
    """Makes spans for one SDK tracer (see the module's docstring); `start` is `tracer.start_span`'s twin."""

    def __init__(self, tracer: Any, active: Any) -> None:
        from opentelemetry import trace as trace_api
        from opentelemetry.sdk.trace import Event, ReadableSpan
        from opentelemetry.trace.status import Status, StatusCode

        self.api = trace_api
        # the provider's span processors, called one by one at a span's end (what the provider's own
        # processor does); one added later replaces the tuple, and is checked before the next span starts
        self.active = active
        self.checked = active._span_processors
        self.ids = tracer.id_generator
        self.resource = tracer.resource
        self.scope = tracer._instrumentation_scope
        self.info = tracer.instrumentation_info
        limits = tracer._span_limits
        self.max_attributes = limits.max_attributes
        self.max_events = limits.max_events
        self.max_event_attributes = limits.max_event_attributes
        self.max_length = limits.max_attribute_length
        flags = trace_api.TraceFlags
        random = getattr(flags, "RANDOM_TRACE_ID", 0)
        self.sampled = flags(flags.SAMPLED)
        self.sampled_random = flags(flags.SAMPLED | random)
        self.unsampled = flags(flags.DEFAULT)
        self.unsampled_random = flags(flags.DEFAULT | random)
        self.readable = ReadableSpan
        self.event = Event
        self.status = Status
        self.status_code = StatusCode
        self.unset = Status(StatusCode.UNSET)
        self.light: Any = _light_span_class(trace_api.Span)

    def ready(self) -> bool:
        """Whether spans can still be made here: False once a span processor that acts when a span starts
        has been added to the provider (its spans then go through the tracer)."""
        processors = self.active._span_processors
        if processors is not self.checked:
            if not _quiet(processors):
                return False
            self.checked = processors
        return True

    def start(self, name: str, parent: Any, kind: Any, attributes: dict[str, Any], start_time: int) -> Any:
        """A span named `name` under `parent` (a span, an OpenTelemetry context, or None for a new trace)."""
        api = self.api
        if type(parent) is self.light:  # (the common case: a span of the same run; sampled, as it is here)
            above = parent.get_span_context()
            context = api.SpanContext(above.trace_id, self.ids.generate_span_id(), is_remote=False,
                                      trace_flags=above.trace_flags, trace_state=above.trace_state)
            span = self.light(self, name, context, above, kind, start_time)
            if attributes:
                span.set_attributes(attributes)
            return span
        if parent is None:
            parent_context = None
        elif isinstance(parent, api.Span):
            parent_context = parent.get_span_context()
        else:
            parent_context = api.get_current_span(parent).get_span_context()
        if parent_context is None or not parent_context.is_valid:
            trace_id = self.ids.generate_trace_id()
            random = self.ids.is_trace_id_random()
            sampled, state, parent_context = True, None, None
        else:
            trace_id = parent_context.trace_id
            parent_flags = parent_context.trace_flags
            random = getattr(parent_flags, "random_trace_id", False)
            sampled, state = parent_flags.sampled, parent_context.trace_state
        flags = ((self.sampled_random if random else self.sampled) if sampled
                 else (self.unsampled_random if random else self.unsampled))
        context = api.SpanContext(trace_id, self.ids.generate_span_id(), is_remote=False, trace_flags=flags,
                                  trace_state=state)
        if not sampled:  # the parent-based sampler follows an unsampled parent
            return api.NonRecordingSpan(context)
        span = self.light(self, name, context, parent_context, kind, start_time)
        if attributes:
            span.set_attributes(attributes)
        return span

    def plain(self, attributes: Any, present: int) -> bool:
        """Whether `attributes` can be kept as they are beside `present` others: every value text, a number
        or a boolean, no limit on text's length, and room for them all (what nearly every call is)."""
        limit = self.max_attributes
        if self.max_length is not None or (limit is not None and present + len(attributes) > limit):
            return False
        kinds = set(map(type, attributes.values()))
        if kinds <= _SCALAR_TYPES:
            return True
        # a tuple of scalars (a model call's finish reasons) is kept as it is too
        return kinds <= _PLAIN_TYPES and all(_SCALAR_TYPES.issuperset(map(type, value))
                                             for value in attributes.values() if type(value) is tuple)

    def plain_event(self, attributes: Any) -> bool:
        """`plain` for an event's attributes (a dict of its own, under the limit for events)."""
        limit = self.max_event_attributes
        return (type(attributes) is dict and self.max_length is None and (limit is None or len(attributes) <= limit)
                and _SCALAR_TYPES.issuperset(map(type, attributes.values())))

    def clean(self, value: Any) -> Any:
        """An attribute value as the SDK keeps it: text, a number or a boolean as it is (text cut to the
        limit on its length, when there is one), a list or tuple of them as a tuple; anything else None."""
        if isinstance(value, _SCALARS):
            if self.max_length is not None and isinstance(value, str):
                return value[:self.max_length]
            return value
        if isinstance(value, (list, tuple)) and all(isinstance(item, _SCALARS) or item is None for item in value):
            if self.max_length is not None:
                return tuple(item[:self.max_length] if isinstance(item, str) else item for item in value)
            return tuple(value)
        return None

    def bounded(self, attributes: dict[str, Any], limit: int | None) -> dict[str, Any]:
        """Clean `attributes` (None values dropped) and keep the newest `limit` of them."""
        kept: dict[str, Any] = {}
        for key, value in attributes.items():
            if value is not None and (value := self.clean(value)) is not None:
                kept[key] = value
        if limit is not None and len(kept) > limit:
            kept = dict(list(kept.items())[len(kept) - limit:])
        return kept


def _light_span_class(span_base: type) -> type:
    """The span class, made by each recorder once OpenTelemetry's API is imported (it subclasses the API's
    Span, so a context holding one gives it back as the current span)."""

    class LightSpan(span_base):  # type: ignore[misc,valid-type]
        """An open span as a few slots; at `end` the SDK's ReadableSpan of it goes to the span processors."""

        __slots__ = ("_added", "_attributes", "_context", "_dropped_attributes", "_end", "_events", "_kind",
                     "_name", "_parent", "_recorder", "_start", "_status")

        def __init__(self, recorder: SpanRecorder, name: str, context: Any, parent: Any, kind: Any,
                     start: int) -> None:
            self._recorder = recorder
            self._name = name
            self._context = context
            self._parent = parent
            self._kind = kind
            self._start = start
            self._end: int | None = None
            self._attributes: dict[str, Any] = {}
            self._dropped_attributes = 0
            self._events: deque[Any] | None = None
            self._added = 0  # events added, kept or not
            self._status = recorder.unset

        def get_span_context(self) -> Any:
            return self._context

        def is_recording(self) -> bool:
            return self._end is None

        def set_attribute(self, key: str, value: Any) -> None:
            if self._end is not None or value is None:
                return
            recorder = self._recorder
            if type(value) not in _SCALAR_TYPES or recorder.max_length is not None:
                value = recorder.clean(value)
                if value is None:
                    return
            attributes = self._attributes
            if key not in attributes and recorder.max_attributes is not None \
                    and len(attributes) >= recorder.max_attributes:
                if recorder.max_attributes == 0:
                    self._dropped_attributes += 1
                    return
                del attributes[next(iter(attributes))]  # the oldest gives way, as in the SDK
                self._dropped_attributes += 1
            attributes[key] = value

        def set_attributes(self, attributes: Any) -> None:
            if self._end is None and self._recorder.plain(attributes, len(self._attributes)):
                self._attributes.update(attributes)
                return
            for key, value in attributes.items():
                self.set_attribute(key, value)

        def add_event(self, name: str, attributes: Any = None, timestamp: int | None = None) -> None:
            if self._end is not None:
                return
            recorder = self._recorder
            if self._events is None:
                self._events = deque(maxlen=recorder.max_events)
            self._added += 1
            if not attributes:
                attributes = {}
            elif not recorder.plain_event(attributes):
                attributes = recorder.bounded(attributes, recorder.max_event_attributes)
            self._events.append(recorder.event(name, attributes, timestamp if timestamp is not None else time_ns()))

        def update_name(self, name: str) -> None:
            if self._end is None:
                self._name = name

        def set_status(self, status: Any, description: str | None = None) -> None:
            if self._end is not None:
                return
            recorder = self._recorder
            code = recorder.status_code
            if self._status.status_code is code.OK:
                return  # OK is final, as in the SDK
            if isinstance(status, recorder.status):
                if status.status_code is not code.UNSET:
                    self._status = status
            elif isinstance(status, code) and status is not code.UNSET:
                self._status = recorder.status(status, description)

        def record_exception(self, exception: BaseException, attributes: Any = None, timestamp: int | None = None,
                             escaped: bool = False) -> None:
            fields = {"exception.type": type(exception).__qualname__, "exception.message": str(exception),
                      "exception.escaped": str(escaped)}
            if attributes:
                fields.update(attributes)
            self.add_event("exception", fields, timestamp)

        def end(self, end_time: int | None = None) -> None:
            if self._end is not None:
                return
            self._end = end = end_time if end_time is not None else time_ns()
            recorder = self._recorder
            attributes: Any = self._attributes
            events: Any = tuple(self._events) if self._events is not None else ()
            if self._dropped_attributes or self._added > len(events):
                attributes, events = self._counted(attributes, events)
            readable = recorder.readable(
                name=self._name, context=self._context, parent=self._parent, resource=recorder.resource,
                attributes=attributes, events=events, kind=self._kind, instrumentation_info=recorder.info,
                status=self._status, start_time=self._start, end_time=end,
                instrumentation_scope=recorder.scope)
            for processor in recorder.active._span_processors:
                processor.on_end(readable)

        def _counted(self, attributes: dict[str, Any], events: tuple[Any, ...]) -> tuple[Any, Any]:
            """What the SDK reports of a span that reached a limit: its bounded collections, with the number
            of attributes or events dropped."""
            from opentelemetry.attributes import BoundedAttributes
            from opentelemetry.sdk.util import BoundedList

            bounded = BoundedAttributes(self._recorder.max_attributes, attributes, immutable=True)
            bounded.dropped = self._dropped_attributes
            kept: Any = BoundedList(self._recorder.max_events)
            kept.extend(events)
            kept.dropped = self._added - len(events)
            return bounded, kept

    return LightSpan
