"""A run's events as OpenTelemetry spans and metrics: `OtelRunSink`, one more sink of the run.

A run's `OtelRunSink` hears the same `(event, fields)` a trace and every listener hear, and makes of them
spans in the GenAI semantic conventions — the run, each state visit, each model call, verifier decision,
tool call, branch, map element and wait for a person — and the run's metrics. Nothing in the core knows
of it. The events of branches arrive held back until their join, each with the `time` it happened at:
spans are built with the times the events carry, so a span tree is right however the branches interleaved,
and `statewright trace export` builds the same spans from a trace file. Where it changes nothing, the
spans are made by otel_spans.py's recorder rather than the SDK's tracer.

Where the spans and metrics go, and the conventions' names, are otel.py's (`OtelTelemetry`) and otel_names.py's.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
from collections import deque
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .otel_names import otel_context, otel_event_ns, otel_model_names, otel_traceparent, otel_without_content
from .otel_spans import LightSpan
from .structured import safe_json_dumps
from .trace import redact

if TYPE_CHECKING:
    from .otel import OtelTelemetry

class _NoInstrument:
    def add(self, amount: float, attributes: Any = None) -> None:
        pass

    def record(self, amount: float, attributes: Any = None) -> None:
        pass


class _NoMetrics:
    """Instruments that count nothing (a workflow's replay)."""

    def __getattr__(self, name: str) -> _NoInstrument:
        return _NO_INSTRUMENT


_NO_INSTRUMENT = _NoInstrument()
_NO_METRICS: Any = _NoMetrics()


_SHORT_TEXT = 80  # the longest text `OtelRunSink._text` keeps redacted, and how many it keeps
_SHORT_TEXTS = 256


class _OpenSpan:
    """A span the sink has started and not ended: its kind (run, state, branch, item, verifier), the state
    it is of, and the time of the last event it saw (a branch ends there)."""

    __slots__ = ("context", "kind", "last", "span", "start", "state")

    def __init__(self, kind: str, span: Any, state: str | None, start: int) -> None:
        self.kind = kind
        self.span = span
        self.context: Any = None  # the span as its children's parent context, made once
        self.state = state
        self.start = start
        self.last = start


class OtelRunSink:
    """One run's events as spans: a listener `(event, fields)` (see the module's docstring).

    Spans nest as the run does: the run's span holds its states' spans; a state's span holds its model
    calls, tool calls, its verifier's decision, and a parallel state's branches or a map's elements, whose
    own states nest in them. Guards, bounds, re-asks, repairs and transitions are events of the state's span.
    """

    def __init__(self, telemetry: OtelTelemetry, run: Any, machine: Any, *, content: bool, secrets: list[str],
                 planned: str | None = None, batched: bool = False) -> None:
        self.telemetry = telemetry
        self.tracer = telemetry.tracer
        self.recorder = telemetry.recorder
        self.api = telemetry.trace_api
        self.run = run
        self.agents = {n: s.agent for n, s in machine.states.items() if s.agent} if machine is not None else {}
        self.machine = machine.name if machine is not None else ""
        self.content = content
        self.secrets = secrets
        self.latest = telemetry.latest
        self.metrics: Any = telemetry.metrics
        self.provider_key = telemetry.metrics.provider_key
        self.planned = planned
        self.planned_count = 0
        self.replaying: Any = None  # a workflow's "is it replaying" (spans ended then were sent before)
        self.stack: list[_OpenSpan] = []
        self.branches = 0  # how many of the stack's spans are branches'
        self.texts: dict[str, str] = {}  # short texts redacted before: names, causes, guards (see `_text`)
        self.model_names: dict[str, tuple[str, str]] = {}  # (see `_model_names`)
        self.asked: dict[str, int] = {}  # state -> when the run began to wait there (the `waiting` event)
        self.root: Any = None
        self.parent = getattr(run, "trace_context", None)  # the run's context, when it has one already
        self.status = "running"
        self.spec = machine
        self.calls: dict[str, OtelRunSink] = {}  # the machines the run runs, by path: each a sink of its own
        self.parent_span: Any = None  # a call's sink: the span of the caller's state that runs it
        # a local run's events, taken in batches (see `record`); None: each at once
        self.pending: deque[tuple[str, dict[str, Any], int]] | None = deque() if batched and not content else None
        self.timer: Any = None
        self.taking = threading.RLock()  # one flush at a time (the telemetry may flush from another thread)

    # -- the listener ---------------------------------------------------------------------------------

    def record(self, event: str, fields: dict[str, Any], at: int | None = None) -> None:
        """Take one event; `at` (ns since the epoch) when it happened, else its `time` field, else now.

        A batched sink (a local run's) keeps the events and turns them into spans a batch at a time: when
        the run starts or ends, after _BATCH events, _BATCH_SECONDS after the first one kept (on the run's
        event loop), or when its telemetry is flushed (the telemetry holds a sink while it keeps events, so
        a run cut off without its end loses none). The spans are the same (built with the times the events
        carry); what changes is that the sink's code runs for many events at once, not between every two
        model calls, whose clients leave the processor's caches cold (it costs a third). An error in making
        a span (a span processor's) no longer stops the batch: the rest is taken, then the first error is
        raised where the batch was taken (at an event of the run, or in the event loop's handler)."""
        pending = self.pending
        if pending is None:
            self.take(event, fields, at)
            return
        stamp = otel_event_ns(fields["time"]) if "time" in fields else None
        pending.append((event, fields, stamp or at or time.time_ns()))  # (one step: safe beside a flush)
        if len(pending) == 1:
            self.telemetry.batched.add(self)
        if event in _AT_ONCE or len(pending) >= _BATCH:
            self.flush()
        elif self.timer is None:
            try:
                self.timer = asyncio.get_running_loop().call_later(_BATCH_SECONDS, self._timed_flush)
            except RuntimeError:  # (no loop: taken at the next event, the run's end, the telemetry's flush)
                pass

    def _timed_flush(self) -> None:
        self.timer = None
        self.flush()

    def flush(self) -> None:
        """Take the events a batched sink keeps, first kept first (from any thread, one at a time; again
        from inside, as a span processor flushing its telemetry would). An event kept meanwhile by another
        thread is taken too, or left kept (and the sink held) for the next flush."""
        with self.taking:
            pending = self.pending
            if not pending:
                return
            batched = self.telemetry.batched
            batched.discard(self)
            take, first = self.take, pending.popleft
            error: Exception | None = None
            while pending:
                event, fields, at = first()
                try:
                    take(event, fields, at)
                except Exception as exc:  # noqa: BLE001 - raised once the rest of the batch is taken
                    error = error or exc
            if pending:
                batched.add(self)
            if error is not None:
                raise error

    def take(self, event: str, fields: dict[str, Any], at: int | None = None) -> None:
        """Make the spans of one event."""
        call = fields.get("call")
        if isinstance(call, str) and call:  # an event of a machine the run runs: its spans nest under the call
            self._call_event(call, event, fields, at)
            return
        stamp = otel_event_ns(fields["time"]) if "time" in fields else None  # a branch's event, held back
        at = stamp or at or time.time_ns()
        if self.replaying is not None:  # a replayed workflow's metrics were counted by the worker before
            self.metrics = _NO_METRICS if self.replaying() else self.telemetry.metrics
        handle = _HANDLERS.get(event)
        if self.stack:
            self.stack[-1].last = at
            if self.branches:
                for entry in self.stack:
                    if entry.kind == "branch":
                        entry.last = at
        if handle is not None:
            handle(self, fields, at)
        elif self.stack:
            self._event(self.stack[-1].span, event, fields, at)

    __call__ = record  # the listener `(event, fields)` (one call, not two, for every event of a run)

    def _call_event(self, path: str, event: str, fields: dict[str, Any], at: int | None) -> None:
        """Hand an event of a call to the call's own sink, made at its `run_start` under the span of the
        state that runs it (for `a/b`, under the span of the state of `a` that runs `b`)."""
        sink = self.calls.get(path)
        if sink is None:
            caller = self.calls.get(path.rsplit("/", 1)[0]) if "/" in path else self
            if caller is None or not caller.stack:
                return  # (a call whose start this sink never saw: nothing to hang it on)
            spec = None
            if caller.spec is not None:
                from .spec import every_machine

                spec = next((m for m in every_machine(caller.spec) if m.name == fields.get("machine")), None)
            sink = OtelRunSink(self.telemetry, None, spec, content=self.content, secrets=self.secrets,
                               planned=f"{self.planned}/{path}" if self.planned is not None else None)
            sink.replaying = self.replaying
            sink.parent_span = caller.stack[-1].span
            self.calls[path] = sink
        sink.record(event, {k: v for k, v in fields.items() if k != "call"}, at)
        if event == "run_end":
            self.calls.pop(path, None)

    def close_open(self) -> None:
        """End the spans still open at the time of the last event seen: a run whose trace stops without its
        end (it crashed), marked so."""
        if self.stack:
            at = self.stack[-1].last
            self.stack[0].span.set_attribute("statewright.status", "unfinished")
            self._pop_to(("run",), at)

    def current(self) -> str | None:
        """The traceparent of the innermost span under way (what an activity's own spans go under)."""
        if not self.stack:
            return self.parent
        return otel_traceparent(self.stack[-1].span.get_span_context())

    # -- spans ----------------------------------------------------------------------------------------

    def _start(self, name: str, parent: Any, at: int, attributes: dict[str, Any], kind: Any = None,
               made: bool = False) -> Any:
        """A span; `made`: its attributes are values of exactly text, numbers, booleans (or tuples of those)
        under non-empty text keys, as the sink made them (otel_spans.py takes them without checking)."""
        if self.planned is not None and self.telemetry.ids is not None:
            self.planned_count += 1
            digest = hashlib.sha256(f"{self.planned}:{self.planned_count}".encode()).digest()
            self.telemetry.ids.plan(int.from_bytes(digest[:8], "big") or 1,
                                    int.from_bytes(digest[8:24], "big") or 1 if parent is None else None)
        if self.recorder is not None and self.recorder.ready():
            return self.recorder.start(name, parent, kind or self.api.SpanKind.INTERNAL, attributes, at, made)
        context = parent if parent is None or not hasattr(parent, "get_span_context") else \
            self.api.set_span_in_context(parent)
        return self.tracer.start_span(name, context=context, kind=kind or self.api.SpanKind.INTERNAL,
                                      attributes=attributes, start_time=at)

    def _end(self, span: Any, at: int) -> None:
        replaying = self.replaying
        if replaying is not None and replaying():
            return  # the worker that ran this part of the run first sent the span
        span.end(end_time=at)

    def _push(self, kind: str, name: str, state: str | None, at: int, attributes: dict[str, Any],
              made: bool = False) -> _OpenSpan:
        if not self.stack:
            parent = self._root_parent()
        else:  # (a span is a parent as it is to the recorder; the tracer takes a context holding it)
            parent = self.stack[-1].span if self.recorder is not None and self.recorder.ready() \
                else self._parent_context(self.stack[-1])
        entry = _OpenSpan(kind, self._start(name, parent, at, attributes, None, made), state, at)
        self.stack.append(entry)
        if kind == "branch":
            self.branches += 1
        return entry

    def _parent_context(self, entry: _OpenSpan) -> Any:
        if entry.context is None:
            entry.context = self.api.set_span_in_context(entry.span)
        return entry.context

    def _root_parent(self) -> Any:
        if self.parent_span is not None:
            return self.api.set_span_in_context(self.parent_span)
        return otel_context(self.api, self.parent) if self.parent else None

    def _pop_to(self, kinds: tuple[str, ...], at: int, *, inclusive: bool = True) -> _OpenSpan | None:
        """End the spans above the innermost one of `kinds` (and it, when `inclusive`); that one."""
        stack = self.stack
        index = len(stack) - 1
        while index >= 0 and stack[index].kind not in kinds:
            index -= 1
        if index < 0:
            return None
        found = stack[index]
        while len(stack) > index + (0 if inclusive else 1):
            self._close(stack.pop(), at)
        return found

    def _close(self, entry: _OpenSpan, at: int) -> None:
        if entry.kind == "branch":
            self.branches -= 1
        if entry.kind == "state" and entry.state is not None and self.telemetry.counting:
            self.metrics.state_duration.record(max(at - entry.start, 0) / 1e9,
                                               {"statewright.machine": self.machine, "statewright.state": entry.state})
        self._end(entry.span, at)

    def _state(self, state: str | None, at: int) -> Any:
        """The span of the visit of `state` under way; a span continuing it when the run resumed inside it."""
        for entry in reversed(self.stack):
            if entry.kind == "state" and (state is None or entry.state == state):
                return entry.span
            if entry.kind in ("branch", "item", "run"):
                break
        if state is None:
            return self.stack[-1].span if self.stack else None
        self._pop_to(("run", "branch", "item"), at, inclusive=False)
        entry = self._push("state", self._state_name(state), state, at, self._state_attributes(state, None), True)
        entry.span.set_attribute("statewright.continued", True)
        return entry.span

    def _state_name(self, state: str) -> str:
        agent = self.agents.get(state)
        return f"invoke_agent {agent}" if agent else f"state {state}"

    def _state_attributes(self, state: str, visit: Any) -> dict[str, Any]:
        """A state span's attributes, made (see `_start`) when `visit` is None or an int."""
        attributes: dict[str, Any] = {"statewright.state": state}
        if visit is not None:
            attributes["statewright.visit"] = visit
        agent = self.agents.get(state)
        if agent:
            attributes["gen_ai.operation.name"] = "invoke_agent"
            attributes["gen_ai.agent.name"] = agent
        return attributes

    def _event(self, span: Any, name: str, fields: Mapping[str, Any], at: int) -> None:
        if span is not None:
            self._add_event(span, f"statewright.{name}", fields, at)

    def _add_event(self, span: Any, name: str, fields: Mapping[str, Any], at: int) -> None:
        flat = self._flat(fields)
        if type(span) is LightSpan and _made_keys(flat):
            span.add_made_event(name, flat, at)
        else:
            span.add_event(name, flat, timestamp=at)

    def _set(self, span: Any, attributes: dict[str, Any]) -> None:
        """Set attributes the sink made (see `_start`)."""
        if type(span) is LightSpan:
            span.set_made(attributes)
        else:
            span.set_attributes(attributes)

    def _flat(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        """Event fields as attribute values: text, numbers and booleans as values of exactly those types
        (the same values: what an exporter sends of a subclass), the rest as (redacted) JSON text."""
        flat: dict[str, Any] = {}
        for key, value in fields.items():
            if key == "time" or value is None:
                continue
            kind = type(value)
            if kind is str:
                flat[key] = self._text(value)
            elif kind is bool or kind is int or kind is float:
                flat[key] = value
            elif isinstance(value, str):
                flat[key] = self._text(str.__str__(value))
            elif isinstance(value, int):  # (bool has no subclasses)
                flat[key] = int.__index__(value)
            elif isinstance(value, float):
                flat[key] = float.__float__(value)
            else:
                flat[key] = self._json(value)
        return flat

    def _text(self, text: str) -> str:
        """`text` redacted; the same short texts come with every visit (state names, causes, guards), so
        those are redacted once (a few hundred of them at most, per sink)."""
        if len(text) > _SHORT_TEXT:
            return redact(text, self.secrets)
        done = self.texts.get(text)
        if done is None:
            done = redact(text, self.secrets)
            if len(self.texts) < _SHORT_TEXTS:
                self.texts[text] = done
        return done

    def _json(self, value: Any) -> str:
        return redact(safe_json_dumps(value), self.secrets)

    # -- the events -----------------------------------------------------------------------------------

    def _run_start(self, fields: dict[str, Any], at: int) -> None:
        machine = str(fields.get("machine") or self.machine)
        self.machine = machine
        resumed = bool(fields.get("resumed"))
        attributes: dict[str, Any]
        if self.latest:
            name, attributes = f"invoke_workflow {machine}", {"gen_ai.operation.name": "invoke_workflow",
                                                              "gen_ai.workflow.name": machine}
        else:
            name, attributes = f"invoke_agent {machine}", {"gen_ai.operation.name": "invoke_agent",
                                                           "gen_ai.agent.name": machine}
        attributes.update({"statewright.machine": machine, "statewright.run_id": str(fields.get("run_id") or "")})
        if resumed:
            attributes["statewright.resumed"] = True
            attributes["statewright.steps"] = int(fields.get("steps") or 0)
        self.stack = []
        entry = self._push("run", name, None, at, attributes)
        self.root = entry.span
        if self.run is not None and not self.parent:
            self.run.trace_context = otel_traceparent(entry.span.get_span_context())
        self.metrics.runs_started.add(1, {"statewright.machine": machine, "statewright.resumed": resumed})

    def _run_end(self, fields: dict[str, Any], at: int) -> None:
        if not self.stack:
            return
        root = self.stack[0]
        status = str(fields.get("status") or "")
        self.status = status
        span = root.span
        attributes: dict[str, Any] = {"statewright.status": status, "statewright.steps": int(fields.get("steps") or 0)}
        if fields.get("final_state"):
            attributes["statewright.final_state"] = str(fields["final_state"])
        usage = fields.get("usage") or {}
        if isinstance(usage, dict):
            attributes.update({"gen_ai.usage.input_tokens": int(usage.get("prompt_tokens") or 0),
                               "gen_ai.usage.output_tokens": int(usage.get("completion_tokens") or 0),
                               "statewright.cost_usd": float(usage.get("cost_usd") or 0.0),
                               "statewright.llm_calls": int(usage.get("llm_calls") or 0)})
        failure = fields.get("failure")
        if isinstance(failure, dict):
            attributes["error.type"] = str(failure.get("kind") or "_OTHER")
            attributes["statewright.failure"] = self._text(str(failure.get("message") or ""))
            span.set_status(self.api.Status(self.api.StatusCode.ERROR, self._text(str(failure.get("message") or ""))))
        elif status == "final":
            span.set_status(self.api.Status(self.api.StatusCode.OK))
        span.set_attributes(attributes)
        self._pop_to(("run",), at)
        self.metrics.runs_ended.add(1, {"statewright.machine": self.machine, "statewright.status": status})
        self.metrics.run_duration.record(max(at - root.start, 0) / 1e9,
                                         {"statewright.machine": self.machine, "statewright.status": status})

    def _state_enter(self, fields: dict[str, Any], at: int) -> None:
        state = str(fields.get("state"))
        self._pop_to(("run", "branch", "item"), at, inclusive=False)
        visit = fields.get("visit")
        self._push("state", self._state_name(state), state, at, self._state_attributes(state, visit),
                   visit is None or type(visit) is int)

    def _state_exit(self, fields: dict[str, Any], at: int) -> None:
        span = self._state(fields.get("state"), at)
        if span is None:
            return
        if fields.get("variant"):
            span.set_attribute("statewright.variant", str(fields["variant"]))
        if self.content and "output" in fields:
            span.set_attribute("statewright.output", self._json(fields["output"]))

    def _transition(self, fields: dict[str, Any], at: int) -> None:
        span = self._state(fields.get("from"), at)
        if span is None:
            return
        self._event(span, "transition", fields, at)
        self._set(span, {"statewright.transition.cause": str(fields.get("cause") or ""),
                         "statewright.transition.to": str(fields.get("to") or "")})
        if fields.get("to") is not None:  # the visit ends; a run stopped by a bound or limit ends at run_end
            self._pop_to(("state",), at)

    def _llm_call(self, fields: dict[str, Any], at: int) -> None:
        role = str(fields.get("role") or "agent")
        state = fields.get("state")
        parent = self._verifier(state, at) if role == "verifier" else self._call_parent(state, fields, at)
        served = str(fields.get("model") or "")
        provider, response_model = self._model_names(served)
        _, request_model = self._model_names(str(fields.get("request_model") or served))
        latency = float(fields.get("latency_ms") or 0.0)
        start = at - int(latency * 1_000_000)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat", self.provider_key: provider,
            "gen_ai.request.model": request_model, "gen_ai.response.model": response_model,
            "gen_ai.usage.input_tokens": int(fields.get("prompt_tokens") or 0),
            "gen_ai.usage.output_tokens": int(fields.get("completion_tokens") or 0),
            "statewright.role": role, "statewright.cost_usd": float(fields.get("cost_usd") or 0.0),
            "statewright.attempts": int(fields.get("attempts") or 1),
            "statewright.call_index": int(fields.get("call_index") or 0)}
        if state is not None:
            attributes["statewright.state"] = str(state)
        if fields.get("agent"):
            attributes["gen_ai.agent.name"] = str(fields["agent"])
        if fields.get("item") is not None:
            attributes["statewright.item"] = int(fields["item"])
        if fields.get("finish_reason"):
            attributes["gen_ai.response.finish_reasons"] = (str(fields["finish_reason"]),)
        if self.content:
            self._chat_content(attributes, fields)
        span = self._start(f"chat {request_model}", parent, start, attributes, self.api.SpanKind.CLIENT, True)
        for happened in fields.get("events") or ():
            if isinstance(happened, dict):
                self._add_event(span, f"statewright.client.{happened.get('type') or 'event'}", happened, at)
        self._end(span, at)
        self._model_metrics(provider, request_model, response_model, fields, latency, None)

    def _model_names(self, model: str) -> tuple[str, str]:
        """`otel_model_names` of `model`, worked out once per sink for each model it sees (a few)."""
        names = self.model_names.get(model)
        if names is None:
            names = otel_model_names(model, self.latest)
            if len(self.model_names) < _SHORT_TEXTS:
                self.model_names[model] = names
        return names

    def _llm_error(self, fields: dict[str, Any], at: int) -> None:
        role = str(fields.get("role") or "agent")
        state = fields.get("state")
        parent = self._verifier(state, at) if role == "verifier" else self._call_parent(state, fields, at)
        provider, model = otel_model_names(str(fields.get("model") or ""), self.latest)
        attributes = {"gen_ai.operation.name": "chat", self.provider_key: provider,
                      "gen_ai.request.model": model, "statewright.role": role, "error.type": "model",
                      "statewright.attempts": int(fields.get("attempts") or 1)}
        if state is not None:
            attributes["statewright.state"] = str(state)
        span = self._start(f"chat {model}", parent, at, attributes, self.api.SpanKind.CLIENT)
        message = self._text(str(fields.get("error") or ""))
        for happened in fields.get("events") or ():
            if isinstance(happened, dict):
                self._add_event(span, f"statewright.client.{happened.get('type') or 'event'}", happened, at)
        span.set_status(self.api.Status(self.api.StatusCode.ERROR, message))
        self._end(span, at)
        self._model_metrics(provider, model, model, fields, 0.0, "model")

    def _model_metrics(self, provider: str, request_model: str, response_model: str, fields: dict[str, Any],
                       latency: float, error: str | None) -> None:
        if not self.telemetry.counting:
            return
        metrics = self.metrics
        attributes = {"gen_ai.operation.name": "chat", self.provider_key: provider,
                      "gen_ai.request.model": request_model, "gen_ai.response.model": response_model}
        if error is not None:
            attributes["error.type"] = error
        metrics.operation.record(latency / 1000.0, attributes)
        if error is None:
            metrics.tokens.record(int(fields.get("prompt_tokens") or 0), {**attributes, "gen_ai.token.type": "input"})
            metrics.tokens.record(int(fields.get("completion_tokens") or 0),
                                  {**attributes, "gen_ai.token.type": "output"})
            cost = float(fields.get("cost_usd") or 0.0)
            if cost:
                metrics.cost.add(cost, attributes)

    def _chat_content(self, attributes: dict[str, Any], fields: dict[str, Any]) -> None:
        messages = fields.get("messages")
        if isinstance(messages, list):
            attributes["gen_ai.input.messages"] = self._json([otel_message(m) for m in messages if isinstance(m, dict)])
        reply = fields.get("reply")
        if isinstance(reply, dict):
            parts: list[dict[str, Any]] = []
            if reply.get("content"):
                parts.append({"type": "text", "content": reply["content"]})
            for call in reply.get("tool_calls") or ():
                if isinstance(call, dict):
                    parts.append({"type": "tool_call", "id": call.get("id"), "name": call.get("name"),
                                  "arguments": call.get("arguments")})
            output = {"role": "assistant", "parts": parts,
                      "finish_reason": str(fields.get("finish_reason") or "stop")}
            attributes["gen_ai.output.messages"] = self._json([output])

    def _call_parent(self, state: Any, fields: dict[str, Any], at: int) -> Any:
        """Where a call's span goes: the map element or the state under way (a verifier's decision ends)."""
        if self.stack and self.stack[-1].kind == "verifier":
            self._pop_to(("verifier",), at)
        agent = fields.get("agent")
        if agent and state is not None and str(state) not in self.agents:  # a trace read without its machine
            self.agents[str(state)] = str(agent)
            for entry in reversed(self.stack):
                if entry.kind == "state" and entry.state == state:
                    entry.span.update_name(f"invoke_agent {agent}")
                    entry.span.set_attributes({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": str(agent)})
                    break
        if self.stack and self.stack[-1].kind == "item":
            return self.stack[-1].span
        return self._state(str(state) if state is not None else None, at)

    def _verifier(self, state: Any, at: int) -> Any:
        """The span of the verifier's decision under way in `state` (begun by its first call)."""
        if self.stack and self.stack[-1].kind == "verifier":
            return self.stack[-1].span
        self._state(str(state) if state is not None else None, at)
        attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "verifier"}
        if state is not None:
            attributes["statewright.state"] = str(state)
        return self._push("verifier", "invoke_agent verifier", str(state), at, attributes).span

    def _verdict(self, fields: dict[str, Any], at: int) -> None:
        span = self._verifier(fields.get("state"), at)
        conditions = [str(c) for c in fields.get("conditions") or ()]
        choice = str(fields.get("choice") or "none")
        number = conditions.index(choice) + 1 if choice in conditions else 0
        span.set_attributes({"statewright.verdict.conditions": tuple(self._text(c) for c in conditions),
                             "statewright.verdict.choice": self._text(choice),
                             "statewright.verdict.number": number,
                             "statewright.verdict.reason": self._text(str(fields.get("reason") or "")),
                             "statewright.verdict.feedback": self._text(str(fields.get("feedback") or "")),
                             "statewright.transition.cause": "verifier" if number else "none"})
        self._pop_to(("verifier",), at)

    def _tool_call(self, fields: dict[str, Any], at: int) -> None:
        parent = self._call_parent(fields.get("state"), fields, at)
        tool = str(fields.get("tool") or "")
        latency = float(fields.get("latency_ms") or 0.0)
        ok = bool(fields.get("ok"))
        attributes: dict[str, Any] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                                      "gen_ai.tool.type": "function", "statewright.ok": ok}
        for key, name in (("state", "statewright.state"), ("agent", "gen_ai.agent.name")):
            if fields.get(key):
                attributes[name] = str(fields[key])
        if fields.get("scripted"):
            attributes["statewright.scripted"] = True
        if self.content:
            if "args" in fields:
                attributes["gen_ai.tool.call.arguments"] = self._json(fields["args"])
            if "result" in fields:
                attributes["gen_ai.tool.call.result"] = self._json(fields["result"])
        if not ok:
            attributes["error.type"] = "tool"
        span = self._start(f"execute_tool {tool}", parent, at - int(latency * 1_000_000), attributes)
        if not ok:
            span.set_status(self.api.Status(self.api.StatusCode.ERROR, self._text(str(fields.get("error") or ""))))
        self._end(span, at)

    def _fan_out(self, fields: dict[str, Any], at: int) -> None:
        span = self._state(fields.get("state"), at)
        self._event(span, "fan_out", fields, at)
        span.set_attribute("statewright.fan_out", str(fields.get("kind") or ""))

    def _branch_start(self, fields: dict[str, Any], at: int) -> None:
        self._state(fields.get("state"), at)
        self._pop_to(("state",), at, inclusive=False)
        branch = str(fields.get("branch") or "")
        self._push("branch", f"branch {branch}", None, at,
                   {"statewright.state": str(fields.get("state") or ""), "statewright.branch": branch})

    def _branch_end(self, fields: dict[str, Any], at: int) -> None:
        top = next((e for e in reversed(self.stack) if e.kind == "branch"), None)
        if top is None:  # a branch cancelled before it held back any event: only its end is known
            self._branch_start(fields, at)
            top = self.stack[-1]
        status = str(fields.get("status") or "")
        top.span.set_attributes({"statewright.branch.status": status,
                                 "statewright.branch.last": str(fields.get("last") or "")})
        self._pop_to(("branch",), top.last if status == "done" else at)

    def _item_start(self, fields: dict[str, Any], at: int) -> None:
        state = str(fields.get("state") or "")
        self._state(state, at)
        self._pop_to(("state",), at, inclusive=False)
        item = int(fields.get("item") or 0)
        self._push("item", f"item {state}[{item}]", None, at, {"statewright.state": state, "statewright.item": item})

    def _item_end(self, fields: dict[str, Any], at: int) -> None:
        top = next((e for e in reversed(self.stack) if e.kind == "item"), None)
        if top is None:
            return
        if self.content and "output" in fields:
            top.span.set_attribute("statewright.output", self._json(fields["output"]))
        self._pop_to(("item",), at)

    def _waiting(self, fields: dict[str, Any], at: int) -> None:
        self.asked[str(fields.get("state") or "")] = at  # (a durable engine waits in the same run: no pause)
        span = self._state(fields.get("state"), at)
        self._event(span, "waiting", fields if self.content else otel_without_content("waiting", fields), at)

    def _answer(self, fields: dict[str, Any], at: int) -> None:
        """The wait for a person, as a span from the question to the answer — across a pause and a resume."""
        state = str(fields.get("state") or "")
        span = self._state(state, at)
        asked = fields.get("asked_at")
        start = int(float(asked) * 1e9) if isinstance(asked, (int, float)) and not isinstance(asked, bool) else at
        start = min(start, self.asked.pop(state, start))
        timed_out = bool(fields.get("timed_out"))
        attributes: dict[str, Any] = {"statewright.state": state, "statewright.timed_out": timed_out}
        if self.content and "answer" in fields:
            attributes["statewright.answer"] = self._json(fields["answer"])
        wait = self._start(f"await_person {state}", span, min(start, at), attributes)
        self._end(wait, at)
        outcome = {"statewright.machine": self.machine, "statewright.state": state,
                   "statewright.outcome": "timeout" if timed_out else "answer"}
        self.metrics.waits.add(1, outcome)
        self.metrics.wait_duration.record(max(at - start, 0) / 1e9, outcome)


def _made_keys(flat: dict[str, Any]) -> bool:
    """Whether every key of fields made flat (`_flat`) is non-empty text (a trace read back may hold
    others: the SDK's own check drops them)."""
    return "" not in flat and _TEXT_KEYS.issuperset(map(type, flat))


_TEXT_KEYS = frozenset({str})


def _state_event(name: str) -> Any:
    """The handler of an event that is an event of its state's span (a guard, a bound, a re-ask, ...)."""

    def handle(sink: OtelRunSink, fields: dict[str, Any], at: int) -> None:
        sink._event(sink._state(fields.get("state"), at), name, fields, at)

    return handle


# a batched sink's batches: events, and how long the first waits (see OtelRunSink.record); events taken at
# once, with what was kept before (a run's start gives the run its trace context, for its checkpoint)
_BATCH = 256
_BATCH_SECONDS = 0.05
_AT_ONCE = frozenset({"run_start", "run_end"})

_HANDLERS: dict[str, Any] = {
    "run_start": OtelRunSink._run_start, "run_end": OtelRunSink._run_end,
    "state_enter": OtelRunSink._state_enter, "state_exit": OtelRunSink._state_exit,
    "transition": OtelRunSink._transition, "llm_call": OtelRunSink._llm_call, "llm_error": OtelRunSink._llm_error,
    "verdict": OtelRunSink._verdict, "tool_call": OtelRunSink._tool_call, "fan_out": OtelRunSink._fan_out,
    "branch_start": OtelRunSink._branch_start, "branch_end": OtelRunSink._branch_end,
    "item_start": OtelRunSink._item_start, "item_end": OtelRunSink._item_end,
    "waiting": OtelRunSink._waiting, "answer": OtelRunSink._answer,
    **{name: _state_event(name)
       for name in ("guard", "bound_skip", "reask", "repair", "join", "answer_refused", "answered_by")},
}


def otel_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """A chat message in the conventions' shape: a role and parts (text, tool calls, a tool's response)."""
    role = str(message.get("role") or "user")
    parts: list[dict[str, Any]] = []
    content = message.get("content")
    if role == "tool":
        parts.append({"type": "tool_call_response", "id": message.get("tool_call_id"), "response": content})
    elif isinstance(content, str) and content:
        parts.append({"type": "text", "content": content})
    elif isinstance(content, list):
        parts.extend({"type": "text", "content": str(p.get("text") or "")} for p in content if isinstance(p, dict))
    for call in message.get("tool_calls") or ():
        if isinstance(call, dict):
            function = call.get("function") or {}
            parts.append({"type": "tool_call", "id": call.get("id"), "name": function.get("name"),
                          "arguments": function.get("arguments")})
    return {"role": role, "parts": parts}
