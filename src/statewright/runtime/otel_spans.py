"""A run's spans at a fraction of the SDK's cost per span, exported through the SDK's own pipeline.

The OpenTelemetry SDK's `Tracer.start_span` pays, for every span, a sampler call, a lock, a context, and a
check of every attribute value (each through an isinstance ladder): about 16 µs a span on a slow core, more
than statewright's whole engine spends on a transition. A run's spans carry only values statewright made
(text, numbers, booleans, tuples of them), so none of that is needed to make them: a `SpanRecorder` keeps
a span as a few slots while it is open, and at its end hands the SDK the same `ReadableSpan` the SDK's own
span would have handed it, to the same span processors (batching, exporters) as every other span.

It is used only where that is exactly what the SDK would do, checked once per tracer provider
(`span_recorder`) and again before each span (`SpanRecorder.ready`): the SDK's `TracerProvider` and
`Tracer`, the tracer enabled and without the SDK's own span metrics, the default sampler itself
(parent-based, always on; not a subclass), no limit on the length of attribute values, and span processors
that do nothing when a span starts or is ending (the SDK's batch and simple processors do nothing then).
Anything else gets None, or False from `ready`, and spans go through the tracer as before. A span with no
parent given joins the span current in the caller's context, as the tracer's would. Ids come from the
provider's id generator, so planned ids (a Temporal workflow's, otel.py) are used alike.

Attributes are a plain dict only while that cannot differ from the SDK's: text, numbers, booleans and tuples
of them under non-empty text keys, with room under the count limit and no key set twice. Anything else —
another kind of value, a limit reached, a key set again — turns the span's attributes into the SDK's own
`BoundedAttributes`, which cleans, orders and drops exactly as the SDK's span does; an event's attributes
likewise. The run's sink, which makes its attributes itself (`str()`, `int()`, ... of what it reads), hands
them over as `made` (`set_made`, `add_made_event`, `start(made=True)`): values of exactly those types under
non-empty text keys, so the check of their kinds is not made again (the limits still are). A span is used by
one thread at a time (a run's sink is), so it takes no lock.
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
        if not _default_sampler(tracer.sampler, sampling):
            return None
        limits = tracer._span_limits
        if limits.max_span_attribute_length is not None or limits.max_attribute_length is not None:
            return None  # (values cut to a length: the SDK's own span does it)
        active = provider._active_span_processor
        if type(active) is not SynchronousMultiSpanProcessor:
            return None
        if not _quiet(active._span_processors):
            return None
        return SpanRecorder(tracer, active)
    except AttributeError:  # an SDK whose insides differ from those this was written against
        return None


def _default_sampler(sampler: Any, sampling: Any) -> bool:
    """Whether `sampler` is the SDK's default, parent-based and always on, and not a subclass of it."""
    if sampler is sampling.DEFAULT_ON:
        return True
    parts = ("_root", "_remote_parent_sampled", "_remote_parent_not_sampled", "_local_parent_sampled",
             "_local_parent_not_sampled")
    return (type(sampler) is sampling.ParentBased
            and all(type(getattr(sampler, part)) is sampling.StaticSampler for part in parts)
            and sampler.get_description() == sampling.DEFAULT_ON.get_description())


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
        self.scope = tracer._instrumentation_scope
        self.info = tracer.instrumentation_info
        limits = tracer._span_limits
        self.tracer = tracer
        self.max_attributes = limits.max_span_attributes
        self.max_events = limits.max_events
        self.max_event_attributes = limits.max_event_attributes
        from opentelemetry.attributes import BoundedAttributes
        from opentelemetry.sdk.trace import Span as SDKSpan
        from opentelemetry.sdk.util import BoundedList

        self.bounded_attributes = BoundedAttributes
        self.bounded_list = BoundedList
        self.record_exception: Any = SDKSpan.record_exception  # (it only builds an event: the SDK's own, word for word)
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
        self.span_context = _context_maker(trace_api.SpanContext)
        trace_api.Span.register(LightSpan)  # (idempotent) see LightSpan

    def ready(self) -> bool:
        """Whether spans can still be made here: False once the tracer is disabled, or a span processor that
        acts when a span starts has been added to the provider (spans then go through the tracer)."""
        if not self.tracer._is_enabled():
            return False
        processors = self.active._span_processors
        if processors is not self.checked:
            if not _quiet(processors):
                return False
            self.checked = processors
        return True

    def start(self, name: str, parent: Any, kind: Any, attributes: dict[str, Any], start_time: int | None,
              made: bool = False) -> Any:
        """A span named `name` under `parent` (a span, an OpenTelemetry context, or None: the current span,
        else a new trace); `made`: the attributes are as `LightSpan.set_made` takes them."""
        api = self.api
        if start_time is None:
            start_time = time_ns()
        if type(parent) is LightSpan and parent._context.is_valid:  # (the common case: a span of the same
            above = parent._context                                 # run; sampled, as it is here)
            context = self.span_context(above, self.ids.generate_span_id())
            span = LightSpan(self, name, context, above, kind, start_time)
            if attributes:
                if made:
                    span.set_made(attributes)
                else:
                    span.set_attributes(attributes)
            return span
        if parent is None:  # the span current in the caller's context, as the tracer takes it
            parent_context = api.get_current_span().get_span_context()
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
        span = LightSpan(self, name, context, parent_context, kind, start_time)
        if attributes:
            if made:
                span.set_made(attributes)
            else:
                span.set_attributes(attributes)
        return span

    def plain(self, attributes: Any, present: Any) -> bool:
        """Whether `attributes` can go into the dict `present` as they are, as the SDK would put them: every
        key non-empty text not there yet, every value text, a number, a boolean or a tuple of those, and
        room for them all."""
        limit = self.max_attributes
        if limit is not None and len(present) + len(attributes) > limit:
            return False
        if present and not present.keys().isdisjoint(attributes):
            return False
        return _plain_items(attributes)

    def event_attributes(self, attributes: Any) -> Any:
        """An event's attributes as the SDK keeps them: a copy when that is all it does, else its own
        BoundedAttributes."""
        limit = self.max_event_attributes
        if type(attributes) is dict and (limit is None or len(attributes) <= limit) and _plain_items(attributes):
            return dict(attributes)
        return self.bounded_attributes(limit, attributes, immutable=True)


_TEXT = frozenset({str})
_SPAN_ID_LIMIT = 1 << 64  # (ids are 64 and 128 bits, not 0: what makes a context valid)
_TRACE_ID_LIMIT = 1 << 128


def _context_maker(span_context: Any) -> Any:
    """`(parent context, span id) -> SpanContext` of a child span: what `SpanContext(parent.trace_id, span_id,
    is_remote=False, trace_flags=parent.trace_flags, trace_state=parent.trace_state)` makes, built as the
    tuple it is without the constructor's checks of values that are known here — when the API's
    SpanContext is laid out as this was written against (checked once, else the constructor itself)."""
    probe = span_context(1, 2, is_remote=False)
    layout = (probe.trace_id, probe.span_id, probe.is_remote, probe.trace_flags, probe.trace_state, probe.is_valid)
    if tuple(probe) != layout or len(probe) != 6:
        return lambda parent, span_id: span_context(parent.trace_id, span_id, is_remote=False,
                                                    trace_flags=parent.trace_flags, trace_state=parent.trace_state)
    new = tuple.__new__

    def make(parent: Any, span_id: int) -> Any:
        trace_id = parent[0]
        return new(span_context, (trace_id, span_id, False, parent[3], parent[4],
                                  0 < trace_id < _TRACE_ID_LIMIT and 0 < span_id < _SPAN_ID_LIMIT))

    return make


def _plain_items(attributes: Any) -> bool:
    """Whether the SDK keeps `attributes` as they are: every key non-empty text, every value text, a number,
    a boolean or a tuple of those (a model call's finish reasons)."""
    if "" in attributes or not _TEXT.issuperset(map(type, attributes)):
        return False
    kinds = set(map(type, attributes.values()))
    return kinds <= _SCALAR_TYPES or (kinds <= _PLAIN_TYPES and all(
        _SCALAR_TYPES.issuperset(map(type, value)) for value in attributes.values() if type(value) is tuple))


class LightSpan:
    """An open span as a few slots; at `end` the SDK's ReadableSpan of it goes to the span processors.

    OpenTelemetry's API Span, as a virtual subclass (`SpanRecorder` registers it when it is made): a context
    holding one gives it back as the current span, and this module imports nothing of OpenTelemetry when
    it is loaded (a runner carries it and runs without the package)."""

    __slots__ = ("_added", "_attributes", "_context", "_end", "_events", "_kind", "_name", "_parent",
                 "_recorder", "_start", "_status")
    # what the tracer's spans are made with by default (read by `__exit__`, as the SDK's span reads them)
    _record_exception = True
    _set_status_on_exception = True

    def __init__(self, recorder: SpanRecorder, name: str, context: Any, parent: Any, kind: Any,
                 start: int) -> None:
        self._recorder = recorder
        self._name = name
        self._context = context
        self._parent = parent
        self._kind = kind
        self._start = start
        self._end: int | None = None
        self._attributes: Any = {}  # a dict while it can be; the SDK's BoundedAttributes from then on
        self._events: deque[Any] | None = None
        self._added = 0  # events added, kept or not
        self._status = recorder.unset

    def get_span_context(self) -> Any:
        return self._context

    def is_recording(self) -> bool:
        return self._end is None

    def _bounded(self) -> Any:
        """The span's attributes as the SDK's own BoundedAttributes, from now on (see the module)."""
        attributes = self._attributes
        if type(attributes) is dict:
            recorder = self._recorder
            attributes = recorder.bounded_attributes(recorder.max_attributes, attributes, immutable=False)
            self._attributes = attributes
        return attributes

    def set_attribute(self, key: str, value: Any) -> None:
        if self._end is None:
            self._bounded()[key] = value

    def set_attributes(self, attributes: Any) -> None:
        if self._end is not None:
            return
        present = self._attributes
        if type(present) is dict and self._recorder.plain(attributes, present):
            present.update(attributes)
        else:
            self._bounded()._set_items(attributes)

    def set_made(self, attributes: dict[str, Any]) -> None:
        """`set_attributes` of attributes its caller made: exactly text, numbers, booleans or tuples of those
        under non-empty text keys (the module's docstring)."""
        if self._end is not None:
            return
        present = self._attributes
        limit = self._recorder.max_attributes
        if type(present) is dict and (limit is None or len(present) + len(attributes) <= limit) and (
                not present or present.keys().isdisjoint(attributes)):
            present.update(attributes)
        else:
            self._bounded()._set_items(attributes)

    def add_made_event(self, name: str, attributes: dict[str, Any], timestamp: int) -> None:
        """`add_event` of attributes its caller made, as `set_made` takes them, and hands over (not copied)."""
        if self._end is not None:
            return
        limit = self._recorder.max_event_attributes
        kept: Any = attributes
        if limit is not None and len(attributes) > limit:
            kept = self._recorder.bounded_attributes(limit, attributes, immutable=True)
        self._keep_event(name, kept, timestamp)

    def add_event(self, name: str, attributes: Any = None, timestamp: int | None = None) -> None:
        if self._end is not None:
            return
        self._keep_event(name, self._recorder.event_attributes(attributes),
                         timestamp if timestamp is not None else time_ns())

    def _keep_event(self, name: str, attributes: Any, timestamp: int) -> None:
        """Keep an event, the oldest giving way past the limit (as the SDK's span keeps them)."""
        recorder = self._recorder
        if self._events is None:
            self._events = deque(maxlen=recorder.max_events)
        self._added += 1
        self._events.append(recorder.event(name, attributes, timestamp))

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
        self._recorder.record_exception(self, exception, attributes, timestamp, escaped)

    def __enter__(self) -> Any:
        return self

    def __exit__(self, exc_type: object, exc_val: object, exc_tb: object) -> None:
        if isinstance(exc_val, BaseException) and self.is_recording():  # as the SDK's span does
            self.record_exception(exc_val, escaped=True)
            recorder = self._recorder
            self.set_status(recorder.status(recorder.status_code.ERROR, f"{type(exc_val).__name__}: {exc_val}"))
        self.end()

    def add_link(self, context: Any, attributes: Any = None) -> None:
        """Links after a span's start are not kept (the API's own default: a warning, nothing done)."""
        import warnings

        warnings.warn("Span.add_link() not implemented and will be a no-op. "
                      "Use opentelemetry-sdk >= 1.23 to add links after span creation", stacklevel=2)

    # what a live span of the SDK lets one read
    name = property(lambda self: self._name)
    kind = property(lambda self: self._kind)
    parent = property(lambda self: self._parent)
    status = property(lambda self: self._status)
    start_time = property(lambda self: self._start)
    end_time = property(lambda self: self._end)
    attributes = property(lambda self: self._attributes)
    events = property(lambda self: tuple(self._events or ()))

    def end(self, end_time: int | None = None) -> None:
        if self._end is not None:
            return
        self._end = end = end_time if end_time is not None else time_ns()
        recorder = self._recorder
        attributes = self._attributes
        if type(attributes) is not dict:
            attributes._immutable = True  # as the SDK's span makes it at its end
        events: Any = tuple(self._events) if self._events is not None else ()
        if self._added > len(events):  # some gave way to the limit: the SDK's list, with the count
            kept: Any = recorder.bounded_list(recorder.max_events)
            kept.extend(events)
            kept.dropped = self._added - len(events)
            events = kept
        readable = recorder.readable(
            name=self._name, context=self._context, parent=self._parent, resource=recorder.tracer.resource,
            attributes=attributes, events=events, kind=self._kind, instrumentation_info=recorder.info,
            status=self._status, start_time=self._start, end_time=end,
            instrumentation_scope=recorder.scope)
        for processor in recorder.active._span_processors:
            processor.on_end(readable)
