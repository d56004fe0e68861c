"""OpenTelemetry: a run's events as spans and metrics in the GenAI conventions, read back from an in-memory
exporter — the tree, the names and attributes, one trace across a pause and a resume in another engine,
no content unless asked for and no secret ever, nothing imported when it is off, and the checkpoint's
trace context read strictly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.e2e_runs import ROOT

import statewright
from statewright.runtime.checkpoint import CheckpointStore
from statewright.runtime.scripted import Script
from statewright.runtime.snapshot import SnapshotError, read_head

otel_sdk = pytest.importorskip("opentelemetry.sdk.trace", reason="the otel extra (opentelemetry-sdk) is missing")
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from statewright.runtime.otel import OtelTelemetry
from statewright.trace_export import _replay

PARALLEL = ROOT / "examples" / "parallel_review.fsm"
APPROVAL = '''machine refund {
    input amount: int
    type Decision {
        approved: bool
        note: str
    }
    agent clerk { prompt "You handle refunds." }
    start state check {
        agent clerk
        do "Check the refund of {{ amount }} USD."
        -> approve
    }
    state approve {
        ask "Refund {{ amount }} USD? The clerk says: {{ check.output }}"
        output Decision
        when output.approved -> pay
        otherwise -> refuse
    }
    final state pay { result "paid {{ amount }}: {{ approve.output.note }}" }
    final state refuse
}
'''


class Collected:
    """Telemetry whose spans and metrics stay in memory."""

    def __init__(self, **options: Any) -> None:
        self.spans = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.reader = InMemoryMetricReader()
        self.telemetry = OtelTelemetry(provider, MeterProvider(metric_readers=[self.reader]), **options)

    def finished(self) -> list[Any]:
        return list(self.spans.get_finished_spans())

    def metrics(self) -> dict[str, list[Any]]:
        found: dict[str, list[Any]] = {}
        data = self.reader.get_metrics_data()
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    found[metric.name] = list(metric.data.data_points)
        return found


def tree(spans: list[Any], unit: int = 1) -> list[tuple[int, str]]:
    """(depth, name) of every span, depth first, children in the order they started (`unit`: the times
    read in that many ns, ties by name: a trace file keeps milliseconds)."""
    children: dict[Any, list[Any]] = {}
    ids = {s.context.span_id for s in spans}
    for span in spans:
        parent = span.parent.span_id if span.parent is not None and span.parent.span_id in ids else None
        children.setdefault(parent, []).append(span)
    lines: list[tuple[int, str]] = []

    def walk(parent: Any, depth: int) -> None:
        for span in sorted(children.get(parent, []), key=lambda s: (s.start_time // unit, s.name)):
            lines.append((depth, span.name))
            walk(span.context.span_id, depth + 1)

    walk(None, 0)
    return lines


def timeline(spans: list[Any]) -> list[tuple[str, int, int]]:
    """(name, start, end) of every span, the times in whole microseconds (a trace file's)."""
    return sorted((s.name, s.start_time // 1000, s.end_time // 1000) for s in spans)


def parallel_run(collected: Collected, test_index: int = 1, **options: Any) -> Any:
    machine = statewright.load(PARALLEL)
    test = machine.spec.tests[test_index]
    return machine.run(dict(test.inputs), script=Script.from_test(machine.spec, test), otel=collected.telemetry,
                       **options)


def test_a_run_is_one_tree_of_the_machine_s_structure() -> None:
    collected = Collected()
    result = parallel_run(collected)
    assert result.ok
    spans = collected.finished()
    assert len({s.context.trace_id for s in spans}) == 1
    shape = tree(spans)
    assert shape[0] == (0, "invoke_agent parallel_review")
    assert (1, "invoke_agent writer") in shape and (2, "chat gpt-4o-mini") in shape
    assert shape.count((1, "state reviews")) == 2  # the parallel state, visited twice
    assert shape.count((2, "branch accuracy")) == 2
    assert (3, "invoke_agent reviewer") in shape and (4, "chat claude-3-5-haiku-latest") in shape
    assert shape[-1] == (1, "state publish")
    by_name: dict[str, list[Any]] = {}
    for span in spans:
        by_name.setdefault(span.name, []).append(span)
    root = by_name["invoke_agent parallel_review"][0]
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root.attributes["statewright.status"] == "final"
    assert root.attributes["statewright.final_state"] == "publish"
    assert root.attributes["statewright.llm_calls"] == 8
    chat = by_name["chat gpt-4o"][0]
    assert chat.attributes["gen_ai.operation.name"] == "chat"
    assert chat.attributes["gen_ai.system"] == "openai"
    assert chat.attributes["gen_ai.request.model"] == "gpt-4o" == chat.attributes["gen_ai.response.model"]
    assert chat.attributes["gen_ai.usage.input_tokens"] > 0 and chat.attributes["gen_ai.usage.output_tokens"] > 0
    assert chat.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert chat.attributes["gen_ai.agent.name"] == "reviewer"
    assert "gen_ai.input.messages" not in chat.attributes  # no content unless asked for
    visits = [s for s in by_name["state reviews"]]
    assert sorted(s.attributes["statewright.visit"] for s in visits) == [1, 2]
    second = next(s for s in visits if s.attributes["statewright.visit"] == 2)
    assert second.attributes["statewright.transition.cause"] == "guard"
    assert second.attributes["statewright.transition.to"] == "publish"
    events = [e.name for e in second.events]
    assert events[:1] == ["statewright.fan_out"] and "statewright.join" in events
    assert events[-1] == "statewright.transition"
    branch = by_name["branch accuracy"][0]
    assert branch.attributes["statewright.branch.status"] == "done"
    assert branch.start_time <= branch.end_time
    metrics = collected.metrics()
    assert sum(p.count for p in metrics["statewright.state.duration"]) == len(result.path)  # every visit
    tokens = {p.attributes["gen_ai.token.type"]: p for p in metrics["gen_ai.client.token.usage"]
              if p.attributes["gen_ai.request.model"] == "gpt-4o"}
    assert set(tokens) == {"input", "output"}
    ended = metrics["statewright.runs.ended"]
    assert [(p.attributes["statewright.status"], p.value) for p in ended] == [("final", 1)]
    assert sum(p.count for p in metrics["gen_ai.client.operation.duration"]) == 8


def test_the_latest_conventions_when_opted_in(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "http,gen_ai_latest_experimental")
    collected = Collected()
    assert parallel_run(collected).ok
    spans = {s.name: s for s in collected.finished()}
    root = spans["invoke_workflow parallel_review"]
    assert root.attributes["gen_ai.operation.name"] == "invoke_workflow"
    assert root.attributes["gen_ai.workflow.name"] == "parallel_review"
    chat = spans["chat claude-3-5-haiku-latest"]
    assert chat.attributes["gen_ai.provider.name"] == "anthropic" and "gen_ai.system" not in chat.attributes


def test_a_verifier_decision_and_a_failure(tmp_path: Path) -> None:
    machine = statewright.load(ROOT / "examples" / "evaluator_optimizer.fsm")
    collected = Collected()
    for test in machine.spec.tests:
        machine.run(dict(test.inputs), script=Script.from_test(machine.spec, test), otel=collected.telemetry)
    verdicts = [s for s in collected.finished() if s.name == "invoke_agent verifier"]
    assert verdicts, "the machine's verifier decided nothing"
    decided = [v for v in verdicts if v.attributes["statewright.verdict.number"] > 0]
    for verdict in decided:
        conditions = verdict.attributes["statewright.verdict.conditions"]
        number = verdict.attributes["statewright.verdict.number"]
        assert conditions[number - 1] == verdict.attributes["statewright.verdict.choice"]
        assert verdict.attributes["statewright.transition.cause"] == "verifier"
        assert any(s.name.startswith("chat ") and s.parent.span_id == verdict.context.span_id
                   for s in collected.finished())
    failed = statewright.load_text(APPROVAL.replace("ask \"", "agent clerk\n        do \""), "refund.fsm")
    collected = Collected()
    result = failed.run({"amount": 3}, script=Script({("agent", "check"): ["fine"]}), otel=collected.telemetry)
    assert not result.ok
    root = next(s for s in collected.finished() if s.parent is None)
    assert root.status.status_code.name == "ERROR" and root.attributes["error.type"] == "script"


def test_a_paused_run_resumed_elsewhere_continues_its_trace(tmp_path: Path) -> None:
    machine = statewright.load_text(APPROVAL, str(tmp_path / "refund.fsm"))
    database = str(tmp_path / "runs.db")
    first = Collected()
    paused = machine.run({"amount": 30}, checkpoint=database, run_id="refund-1",
                         script=Script({("agent", "check"): ["looks fine"]}), otel=first.telemetry)
    assert paused.status == "waiting"
    store = CheckpointStore(database)
    snapshot = store.load("refund-1")
    store.close()
    assert snapshot is not None and snapshot.head.trace_context is not None
    second = Collected()  # another engine, as another process would have: only the checkpoint joins them
    done = statewright.load_text(APPROVAL, str(tmp_path / "refund.fsm")).resume(
        "refund-1", '{"approved": true, "note": "ok"}', checkpoint=database, otel=second.telemetry)
    assert done.ok and done.final_state == "pay"
    before, after = first.finished(), second.finished()
    assert {s.context.trace_id for s in before} == {s.context.trace_id for s in after}
    root = next(s for s in before if s.parent is None)
    assert root.attributes["statewright.status"] == "waiting"
    assert snapshot.head.trace_context.split("-")[2] == f"{root.context.span_id:016x}"
    resumed = next(s for s in after if s.name == "invoke_agent refund")
    assert resumed.parent.span_id == root.context.span_id and resumed.attributes["statewright.resumed"]
    wait = next(s for s in after if s.name == "await_person approve")
    assert wait.start_time < resumed.start_time < wait.end_time  # from the question, across the pause
    assert wait.attributes["statewright.timed_out"] is False
    continued = next(s for s in after if s.name == "state approve")
    assert continued.attributes["statewright.continued"] and continued.attributes["statewright.transition.to"] == "pay"
    waits = second.metrics()["statewright.person.waits"]
    assert [p.value for p in waits] == [1]


SECRET_ENV = "OTEL_CANARY_API_KEY"
SECRET = 'canary-"secret"-value-0042'


@pytest.fixture()
def canary(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv(SECRET_ENV, SECRET)
    yield SECRET


def every_text(spans: list[Any]) -> str:
    parts = []
    for span in spans:
        parts.append(span.name)
        parts.append(json.dumps(dict(span.attributes), default=str))
        parts.extend(json.dumps([e.name, dict(e.attributes)], default=str) for e in span.events)
        parts.append(str(span.status.description))
    return "\n".join(parts)


def test_content_only_when_asked_and_secrets_never(canary: str, tmp_path: Path) -> None:
    machine = statewright.load(PARALLEL)
    test = machine.spec.tests[1]
    key = "sk-" + "a1b2c3d4e5f6g7h8i9j0k1l2"
    topic = f"{canary} and {json.dumps(canary)[1:-1]} and {key}"
    plain = Collected()
    machine.run({"topic": topic}, script=Script.from_test(machine.spec, test), otel=plain.telemetry)
    text = every_text(plain.finished())
    assert "gen_ai.input.messages" not in text and "finite" not in text
    content = Collected(content=True)
    trace_file = tmp_path / "trace.jsonl"
    machine.run({"topic": topic}, script=Script.from_test(machine.spec, test), otel=content.telemetry,
                trace=str(trace_file))
    spans = content.finished()
    text = every_text(spans)
    assert "gen_ai.input.messages" in text and "gen_ai.output.messages" in text and "[REDACTED]" in text
    for form in (canary, json.dumps(canary)[1:-1], json.dumps(json.dumps(canary)[1:-1])[1:-1], key):
        assert form not in text
    chat = next(s for s in spans if s.name == "chat gpt-4o-mini")
    messages = json.loads(chat.attributes["gen_ai.input.messages"])
    assert messages[0]["role"] == "system" and messages[-1]["parts"][0]["type"] == "text"
    # the spans had content; the trace, not asked for it, has none
    lines = trace_file.read_text()
    assert '"messages"' not in lines and '"reply"' not in lines


def test_a_recorded_trace_exports_as_the_same_spans(tmp_path: Path) -> None:
    live = Collected()
    trace_file = tmp_path / "run.jsonl"
    parallel_run(live, trace=str(trace_file))
    exported = Collected()
    events = [json.loads(line) for line in trace_file.read_text().splitlines()]
    assert _replay(events, exported.telemetry, content=False) == (1, [])
    # the trace and the spans were given one time for each event: exported, the spans start and end at
    # the same microseconds as the run's own, so they are the same tree in the same order
    assert tree(exported.finished(), 1000) == tree(live.finished(), 1000)
    exported_times, live_times = timeline(exported.finished()), timeline(live.finished())
    assert [name for name, _, _ in exported_times] == [name for name, _, _ in live_times]
    for (name, *times), (_, *live_at) in zip(exported_times, live_times, strict=True):
        # (a model call's or a tool's span starts its latency before its event: a microsecond apart at most)
        assert all(abs(a - b) <= 1 for a, b in zip(times, live_at, strict=True)), (name, times, live_at)
    names = {s.name: dict(s.attributes) for s in exported.finished()}
    assert names["chat gpt-4o"]["gen_ai.usage.input_tokens"] > 0


class OtlpCollector:
    """A collector on 127.0.0.1 that takes OTLP/HTTP trace exports and keeps their bodies (protobuf)."""

    def __init__(self) -> None:
        import http.server
        import threading

        bodies: list[bytes] = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                bodies.append(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.bodies = bodies
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def spans(self) -> list[Any]:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        found = []
        for body in self.bodies:
            request = ExportTraceServiceRequest.FromString(body)
            found += [span for resource in request.resource_spans for scope in resource.scope_spans
                      for span in scope.spans]
        return found

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_hostile_trace_file_exports_what_reads_and_leaks_no_secret(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A trace file is anyone's text: events whose fields are not a run's (a list for a state, text for a
    token count, NaN for a latency, an unknown kind of event) are left out and counted, the rest is sent;
    no secret of the environment nor key-shaped token reaches the collector, and the file's name and
    errors reach the terminal escaped."""
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http", reason="the otel extra's OTLP exporter")
    secret = "s3cr3t-value-+/=%"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    key = "sk-" + "A1b2" * 8
    lines = [
        {"event": "run_start", "run_id": "r1", "machine": f"m-{secret}", "time": "2026-01-01T00:00:00.000+00:00"},
        {"event": "state_enter", "state": "a", "visit": 1},
        {"event": "guard", "state": ["a"], "text": "x"},
        {"event": "llm_call", "state": "a", "model": f"openai/{key}", "latency_ms": float("nan")},
        {"event": "llm_call", "state": "a", "model": "openai/gpt", "prompt_tokens": "many"},
        {"event": "llm_call", "state": "a", "agent": secret, "model": "openai/gpt", "prompt_tokens": 3},
        {"event": "transition", "from": "a", "to": key, "cause": f"guard {secret}"},
        {"event": "no_such_event", key: secret},
        {"event": "run_end", "status": "final", "steps": "three", "usage": {"prompt_tokens": 3}},
    ]
    trace = tmp_path / "hostile\x1b]0;title\x07.jsonl"
    trace.write_text("".join(json.dumps(line) + "\n" for line in lines))
    collector = OtlpCollector()
    try:
        done = subprocess.run([sys.executable, "-m", "statewright", "trace", "export", str(trace), "--otlp",
                               collector.url], capture_output=True, text=True, timeout=120, check=False,
                              env={**os.environ, "OPENAI_API_KEY": secret})
        spans = collector.spans()
    finally:
        collector.close()
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "\x1b" not in done.stderr
    assert "left out (lines 3, 4" in done.stderr, done.stderr  # the list for a state, the NaN latency
    names = [span.name for span in spans]
    assert any(name.startswith("chat ") for name in names) and any(name.startswith("invoke_agent") for name in names)
    sent = b"".join(collector.bodies)
    for form in (secret, key, secret.encode().hex()):
        assert form.encode() not in sent, form
    assert b"[REDACTED]" in sent
    from statewright.trace_export import _replay

    exported = Collected()
    runs, left_out = _replay(lines, exported.telemetry, content=False)
    assert runs == 1 and left_out[:2] == [2, 3]  # the list state and the NaN latency; the rest is read
    assert exported.finished()


@pytest.mark.parametrize("zero", ["span", "trace"])
def test_a_span_under_a_parent_with_an_invalid_context_is_the_sdk_s(zero: str) -> None:
    """An id generator of one's own that gives an id of 0: the SDK's tracer starts a new trace under a
    parent whose context is not valid, and so does the recorder."""

    class Ids(Counting):
        def generate_span_id(self) -> int:
            number = super().generate_span_id()
            return 0 if zero == "span" and number == 2 else number

        def generate_trace_id(self) -> int:
            number = super().generate_trace_id()
            return 0 if zero == "trace" else number

    machine = statewright.load(ROOT / "examples" / "parallel_review.fsm").spec
    events = [("run_start", {"run_id": "r", "machine": machine.name}), ("state_enter", {"state": "draft", "visit": 1}),
              ("llm_call", {"role": "agent", "state": "draft", "model": "openai/gpt", "latency_ms": 1}),
              ("run_end", {"status": "final", "steps": 1})]
    results = []
    for light in (True, False):
        memory = InMemorySpanExporter()
        provider = TracerProvider(id_generator=Ids())
        provider.add_span_processor(SimpleSpanProcessor(memory))
        telemetry = OtelTelemetry(provider, MeterProvider(), light_spans=light)
        sink = telemetry.run_sink(None, machine)
        for at, (event, fields) in enumerate(events, start=1):
            sink.record(event, dict(fields), at * 1_000_000)
        results.append([exported(span, fixed_times=True) for span in memory.get_finished_spans()])
    assert len(results[0]) == 3
    assert results[0] == results[1]


def test_the_checkpoint_s_trace_context_is_read_strictly() -> None:
    head = {"machine": "m", "status": "running", "state": "a", "trace_context": "not-a-traceparent"}
    with pytest.raises(SnapshotError, match="not a W3C traceparent"):
        read_head(head)
    head["trace_context"] = 7
    with pytest.raises(SnapshotError, match="trace_context is a number"):
        read_head(head)
    head["trace_context"] = "00-" + "0" * 32 + "-" + "1" * 16 + "-01"
    with pytest.raises(SnapshotError):
        read_head(head)
    head["trace_context"] = "00-" + "ab" * 16 + "-" + "cd" * 8 + "-01"
    assert read_head(head).trace_context == head["trace_context"]


def test_nothing_is_imported_when_it_is_off(tmp_path: Path) -> None:
    """A run without telemetry — the API, a generated runner — imports no opentelemetry module, even with
    the extra installed; one with an endpoint set but telemetry disabled neither."""
    runner = tmp_path / "review_runner.py"
    statewright.load(PARALLEL).compile(runner)
    probe = ("import sys, runpy; sys.argv = ['review_runner.py', '--selftest']\n"
             "try:\n    runpy.run_path(sys.argv[0], run_name='__main__')\n"
             "except SystemExit:\n    pass\n"
             "print('IMPORTED' if any(m.startswith('opentelemetry') for m in sys.modules) else 'CLEAN')")
    env = {**os.environ, "OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, env=env,
                          timeout=120, check=False)
    assert done.stdout.strip().endswith("CLEAN"), done.stdout + done.stderr
    assert "3 passed, 0 failed" in done.stderr


class Counting:
    """Span and trace ids 1, 2, 3, ... in the order they are asked for: two providers that make the same
    spans in the same order give them the same ids."""

    def __init__(self) -> None:
        self.next = 0

    def generate_span_id(self) -> int:
        self.next += 1
        return self.next

    def generate_trace_id(self) -> int:
        self.next += 1
        return self.next << 64

    def is_trace_id_random(self) -> bool:
        return False


def exported(span: Any, fixed_times: bool = False) -> dict[str, Any]:
    """All an exporter is given of a span but its times (two runs take their own time), unless the times
    were given (`fixed_times`)."""
    def events(items: Any) -> list[Any]:
        return [(e.name, dict(e.attributes or {}), e.timestamp if fixed_times else None, e.dropped_attributes)
                for e in items]

    return {"name": span.name, "context": span.context, "parent": span.parent, "kind": span.kind,
            "status": (span.status.status_code, span.status.description), "attributes": dict(span.attributes),
            "events": events(span.events), "links": list(span.links), "resource": span.resource.attributes,
            "scope": (span.instrumentation_scope.name, span.instrumentation_scope.version),
            "dropped": (span.dropped_attributes, span.dropped_events, span.dropped_links),
            "ordered": span.start_time <= span.end_time,
            "times": (span.start_time, span.end_time) if fixed_times else None}


def spans_of(light: bool, limits: Any = None, content: bool = False) -> list[dict[str, Any]]:
    """Every example machine's tests, run with spans made by statewright's recorder (`light`) or by the
    SDK's tracer, as the exporter is given them."""
    from opentelemetry.sdk.resources import Resource

    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "parity"}), id_generator=Counting(),
                              span_limits=limits)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    telemetry = OtelTelemetry(provider, MeterProvider(), content=content, light_spans=light)
    assert (telemetry.recorder is not None) == light
    os.chdir(Path.cwd() / ("light" if light else "sdk"))  # (each its own checkpoints, under the same run ids)
    for path in sorted((ROOT / "examples").glob("*.fsm")):
        machine = statewright.load(path)
        for index, test in enumerate(machine.spec.tests):
            machine.run(dict(test.inputs), script=Script.from_test(machine.spec, test), otel=telemetry,
                        run_id=f"{path.stem}-{index}")
    return [exported(span) for span in memory.get_finished_spans()]


@pytest.mark.parametrize("content", [False, True], ids=["plain", "with-content"])
def test_the_recorder_s_spans_are_the_sdk_s_spans(content: bool, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Every example's tests: statewright's span recorder hands the exporters exactly what the SDK's own
    tracer hands them (names, ids, parents, kinds, status, attributes, events, resource, scope)."""
    for side in ("light", "sdk"):
        (tmp_path / side).mkdir()
    monkeypatch.chdir(tmp_path)
    light = spans_of(True, content=content)
    monkeypatch.chdir(tmp_path)
    sdk = spans_of(False, content=content)
    assert len(light) > 100
    assert light == sdk


def test_the_recorder_keeps_the_providers_span_limits_as_the_sdk_does(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from opentelemetry.sdk.trace import SpanLimits

    for side in ("light", "sdk"):
        (tmp_path / side).mkdir()
    limits = SpanLimits(max_span_attributes=3, max_events=2, max_event_attributes=1)
    monkeypatch.chdir(tmp_path)
    light = spans_of(True, limits)
    monkeypatch.chdir(tmp_path)
    sdk = spans_of(False, limits)
    assert any(span["dropped"][0] for span in light) and any(span["dropped"][1] for span in light)
    assert light == sdk


def both_ways(operations: Any, limits: Any = None, *, fixed_times: bool = True
              ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """`operations(start)` run twice — `start(name, parent, attributes)` making spans with the recorder, then
    with the SDK's tracer — and what the exporter was given each time."""
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource

    from statewright.runtime.otel_spans import span_recorder

    results = []
    for light in (True, False):
        memory = InMemorySpanExporter()
        provider = TracerProvider(id_generator=Counting(), span_limits=limits,
                                  resource=Resource.create({"service.name": "parity", "service.instance.id": "1"}))
        provider.add_span_processor(SimpleSpanProcessor(memory))
        tracer = provider.get_tracer("statewright")
        recorder = span_recorder(provider, tracer)
        assert recorder is not None

        def start(name: str, parent: Any = None, attributes: Any = None, *, light: bool = light,
                  recorder: Any = recorder, tracer: Any = tracer) -> Any:
            if light:
                return recorder.start(name, parent, trace.SpanKind.INTERNAL, attributes or {}, 1)
            context = trace.set_span_in_context(parent) if isinstance(parent, trace.Span) else parent
            return tracer.start_span(name, context=context, attributes=attributes, start_time=1)

        operations(start, tracer)
        results.append([exported(span, fixed_times=fixed_times) for span in memory.get_finished_spans()])
    return results[0], results[1]


def test_a_run_inside_an_applications_span_joins_its_trace() -> None:
    from opentelemetry import trace

    def operations(start: Any, tracer: Any) -> None:
        with tracer.start_as_current_span("http request"):
            run = start("run")
            start("state", run).end(2)
            run.end(3)

    light, sdk = both_ways(operations, fixed_times=False)  # (the application's span takes the time)
    assert light == sdk
    request = next(span for span in light if span["name"] == "http request")
    run = next(span for span in light if span["name"] == "run")
    assert run["parent"] == request["context"] and run["context"].trace_id == request["context"].trace_id
    assert trace.get_current_span() is trace.INVALID_SPAN


@pytest.mark.parametrize("limits", [None, {"max_span_attributes": 2, "max_event_attributes": 2}],
                         ids=["no-limits", "tight-limits"])
def test_any_attribute_a_span_is_given_is_kept_as_the_sdk_keeps_it(limits: Any) -> None:
    """Values the run's own sink never gives (None, bytes, nested values, ranges, sets, bad keys), keys set
    again, events with more attributes than the limit: the SDK's own attributes take over, so what the
    exporter receives is the same."""
    from opentelemetry.sdk.trace import SpanLimits
    from opentelemetry.trace import Status, StatusCode

    def operations(start: Any, tracer: Any) -> None:
        span = start("odd", None, {"a": 1, "b": "two"})
        span.set_attribute("a", 10)  # set again: it becomes the newest
        span.set_attribute("c", None)
        span.set_attributes({"d": b"bytes", "e": [[1], [2]], "f": range(3), "g": {1}, "": 5, "h": ["x", None]})
        span.set_attribute("i", {"nested": {"deep": True}})
        span.add_event("many", {"x": 1, "y": 2, "z": 3, "w": None, "v": ("p", "q")}, timestamp=5)
        span.add_event("plain", {"k": "v"}, timestamp=6)
        span.set_status(Status(StatusCode.ERROR, "broke"))
        span.set_status(StatusCode.OK)
        span.set_status(StatusCode.ERROR, "ignored after OK")
        span.update_name("renamed")
        span.end(9)
        span.set_attribute("after", 1)
        span.end(10)
        with pytest.raises(ValueError), start("raising") as raising:
            raise ValueError("boom")
        assert not raising.is_recording()

    light, sdk = both_ways(operations, SpanLimits(**limits) if limits else None, fixed_times=False)
    assert light == sdk


@pytest.mark.parametrize("limits", [None, {"max_span_attributes": 3, "max_events": 2, "max_event_attributes": 2}],
                         ids=["no-limits", "tight-limits"])
def test_a_sinks_spans_from_odd_events_are_the_sdk_s_spans(limits: Any) -> None:
    """The sink hands the recorder the attributes it makes without their kinds checked again: events read
    from a trace (or a listener) with values of subclasses, empty or non-text keys, nested values and wrong
    kinds where numbers belong still reach the exporter as the SDK's own spans would carry them."""
    import enum

    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import SpanLimits

    class Level(enum.IntEnum):
        HIGH = 3

    class Name(str):
        pass

    class Ratio(float):
        pass

    machine = statewright.load(ROOT / "examples" / "parallel_review.fsm").spec
    events: list[tuple[str, dict[Any, Any]]] = [
        ("run_start", {"run_id": Name("r1"), "machine": machine.name, "steps": Level.HIGH}),
        ("state_enter", {"state": Name("draft"), "visit": "two"}),
        ("guard", {"state": "draft", "index": Level.HIGH, "text": Name("x > 1"), "value": True, "": 5,
                   7: "seven", "ratio": Ratio(0.5), "nested": {"a": [1, {"b": None}]}, "none": None}),
        ("llm_call", {"role": "agent", "state": "draft", "agent": Name("writer"), "model": Name("openai/gpt-x"),
                      "prompt_tokens": Level.HIGH, "completion_tokens": True, "cost_usd": Ratio(0.25),
                      "latency_ms": 2, "finish_reason": Name("stop"),
                      "events": [{"type": "retry", "attempt": Level.HIGH, "": 1, "why": Name("429")}, "odd"]}),
        ("transition", {"from": "draft", "to": Name("review"), "cause": Name("guard"), "reason": "", "index": 1.5}),
        ("state_enter", {"state": "review", "visit": 1}),
        ("bound_skip", {"state": "review", "detail": ("a", 1)}),
        ("transition", {"from": "review", "to": None, "cause": "bound"}),
        ("run_end", {"status": "final", "steps": 3, "usage": {"prompt_tokens": Level.HIGH}}),
    ]
    results = []
    for light in (True, False):
        memory = InMemorySpanExporter()
        provider = TracerProvider(resource=Resource.create({"service.name": "parity"}), id_generator=Counting(),
                                  span_limits=SpanLimits(**limits) if limits else None)
        provider.add_span_processor(SimpleSpanProcessor(memory))
        telemetry = OtelTelemetry(provider, MeterProvider(), light_spans=light)
        assert (telemetry.recorder is not None) == light
        sink = telemetry.run_sink(None, machine)
        for at, (event, fields) in enumerate(events, start=1):
            sink.record(event, dict(fields), at * 1_000_000)
        results.append([exported(span, fixed_times=True) for span in memory.get_finished_spans()])
    light_spans, sdk_spans = results
    assert len(light_spans) >= 4
    assert light_spans == sdk_spans
    guard = [e for span in light_spans for e in span["events"] if e[0] == "statewright.guard"]
    if not limits:
        assert guard and guard[0][1]["index"] == 3 and type(guard[0][1]["index"]) is int


def test_the_recorder_steps_aside_for_length_limits_and_samplers_of_ones_own() -> None:
    from opentelemetry.sdk.trace import SpanLimits
    from opentelemetry.sdk.trace.sampling import ALWAYS_ON, ParentBased

    from statewright.runtime.otel_spans import span_recorder

    class Mine(ParentBased):
        def should_sample(self, *args: Any, **kwargs: Any) -> Any:
            return super().should_sample(*args, **kwargs)

    for provider in (TracerProvider(span_limits=SpanLimits(max_span_attribute_length=20)),
                     TracerProvider(span_limits=SpanLimits(max_attribute_length=20)),
                     TracerProvider(sampler=Mine(ALWAYS_ON)), TracerProvider(sampler=ALWAYS_ON)):
        assert span_recorder(provider, provider.get_tracer("statewright")) is None
    provider = TracerProvider()
    recorder = span_recorder(provider, provider.get_tracer("statewright"))
    assert recorder is not None and recorder.ready()
    from opentelemetry.sdk.trace import _disable_tracer_configurator

    provider._set_tracer_configurator(tracer_configurator=_disable_tracer_configurator)
    assert not recorder.ready()  # a tracer disabled after the fact: spans go through it (and are not made)


def test_the_recorder_steps_aside_where_the_sdk_would_do_more() -> None:
    """A sampler of one's own, or a span processor that acts when a span starts: spans go through the
    tracer — also when such a processor is added after the telemetry was made."""
    from opentelemetry.sdk.trace import SpanProcessor
    from opentelemetry.sdk.trace.sampling import ALWAYS_ON

    assert OtelTelemetry(TracerProvider(sampler=ALWAYS_ON), MeterProvider()).recorder is None

    class Starting(SpanProcessor):
        def __init__(self) -> None:
            self.started: list[str] = []

        def on_start(self, span: Any, parent_context: Any = None) -> None:
            self.started.append(span.name)

    provider = TracerProvider()
    provider.add_span_processor(Starting())
    assert OtelTelemetry(provider, MeterProvider()).recorder is None

    collected = Collected()
    assert collected.telemetry.recorder is not None
    starting = Starting()
    collected.telemetry.tracer_provider.add_span_processor(starting)
    assert parallel_run(collected).ok
    assert "invoke_agent parallel_review" in starting.started and len(starting.started) == len(collected.finished())


def test_a_local_runs_spans_made_in_batches_are_those_made_event_by_event(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A local run's sink makes its spans a batch of events at a time: every example's tests give the
    exporter exactly the spans (ids, parents, attributes, events) a sink taking each event at once gives."""
    from statewright.runtime import otel_sink
    from statewright.runtime.engine import Engine

    batches: list[int] = []
    flush = otel_sink.OtelRunSink.flush

    def counted(self: Any) -> None:
        batches.append(len(self.pending or ()))
        flush(self)

    monkeypatch.setattr(otel_sink.OtelRunSink, "flush", counted)
    for side in ("batched", "at_once"):
        (tmp_path / side / "light").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "batched")
    batched = spans_of(True)
    assert max(batches) > 10  # (the runs' events were taken in batches)
    monkeypatch.setattr(Engine, "_otel_sink", lambda self, run: self.otel.run_sink(run, self.machine))
    monkeypatch.chdir(tmp_path / "at_once")
    batches.clear()
    at_once = spans_of(True)
    assert batches == [] and len(at_once) > 100
    assert batched == at_once


def test_a_batched_sink_sends_spans_while_the_run_waits_and_when_flushed(tmp_path: Path) -> None:
    """Kept events become spans soon after (not at the run's end): while a run waits for a slow model call,
    the spans of the states before it are already with the exporter; events kept when a run stops without
    its end become spans when the telemetry is flushed."""
    import asyncio

    spec = tmp_path / "slow.fsm"
    spec.write_text(
        'machine slow {\n    agent a { prompt "p" }\n    start state first { agent a  do "One."  -> second }\n'
        '    state second { agent a  do "Two."  -> third }\n    state third { agent a  do "Three."  -> done }\n'
        '    final state done\n}\n')
    machine = statewright.load(spec)
    script = Script.from_json({"agent": {"first": ["one"], "second": [{"value": "two", "delay": 0.8}],
                                         "third": ["three"]}})
    collected = Collected()
    seen: list[list[str]] = []

    async def both() -> Any:
        run = asyncio.ensure_future(machine.arun({}, script=script, otel=collected.telemetry))
        await asyncio.sleep(0.4)  # the first state's call answered at once, the second's under way
        seen.append([str((span.attributes or {}).get("statewright.state") or span.name)
                     for span in collected.finished()])
        return await run

    result = asyncio.run(both())
    assert result.ok
    assert "first" in seen[0] and "second" not in seen[0] and not any("slow" in name for name in seen[0]), seen

    kept = Collected()
    sink = kept.telemetry.run_sink(None, machine.spec, batched=True)
    sink.record("run_start", {"run_id": "r", "machine": "m"})
    sink.record("state_enter", {"state": "outline", "visit": 1})
    sink.record("transition", {"from": "outline", "to": "draft", "cause": "unconditional", "reason": ""})
    assert kept.finished() == [] and len(sink.pending or ()) == 2
    kept.telemetry.flush()
    assert [span.name for span in kept.finished()] == [sink._state_name("outline")] and not sink.pending


SLOW = ('machine slow {\n    agent a { prompt "p" }\n    start state first { agent a  do "One."  -> second }\n'
        '    state second { agent a  do "Two."  -> third }\n    state third { agent a  do "Three."  -> done }\n'
        '    final state done\n}\n')


def test_a_run_cut_off_keeps_its_spans_for_the_telemetry_s_flush(tmp_path: Path) -> None:
    """A run cancelled without its end, its loop closed: the events its sink kept still become spans when
    the telemetry shuts down, however soon the garbage collector runs."""
    import asyncio
    import gc

    spec = tmp_path / "slow.fsm"
    spec.write_text(SLOW)
    machine = statewright.load(spec)
    script = Script.from_json({"agent": {"first": ["one"], "second": [{"value": "two", "delay": 5}]}})
    collected = Collected()

    async def cut_off() -> None:
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(machine.arun({}, script=script, otel=collected.telemetry), timeout=0.02)

    asyncio.run(cut_off())
    gc.collect()
    collected.telemetry.shutdown()
    states = [str((span.attributes or {}).get("statewright.state")) for span in collected.finished()]
    assert "first" in states and len(collected.finished()) == 2  # its state and that state's model call


def test_a_batched_sink_takes_every_event_when_flushed_from_another_thread() -> None:
    """Events recorded on one thread while another flushes the telemetry (and starts other runs' sinks):
    none is lost, none raises."""
    import threading

    collected = Collected()
    telemetry = collected.telemetry
    sink = telemetry.run_sink(None, None, batched=True)
    sink.record("run_start", {"run_id": "r", "machine": "m"})
    done = threading.Event()
    errors: list[BaseException] = []

    def flushing() -> None:
        while not done.is_set():
            try:
                telemetry.run_sink(None, None, batched=True).record("state_enter", {"state": "other", "visit": 1})
                telemetry.flush()
            except BaseException as exc:  # noqa: BLE001 - reported by the test
                errors.append(exc)
                return

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    thread = threading.Thread(target=flushing)
    thread.start()
    try:
        for index in range(3000):
            sink.record("state_enter", {"state": f"s{index}", "visit": 1})
            sink.record("transition", {"from": f"s{index}", "to": "next", "cause": "unconditional", "reason": ""})
    finally:
        done.set()
        thread.join()
        sys.setswitchinterval(interval)
    telemetry.flush()
    states = [span for span in collected.finished() if (span.attributes or {}).get("statewright.state", "") != "other"
              and "statewright.state" in (span.attributes or {})]
    assert errors == [] and len(states) == 3000
    assert all((span.attributes or {}).get("statewright.transition.to") == "next" for span in states)


def test_a_span_processor_s_error_loses_no_other_event_of_the_batch() -> None:
    """A span processor raising while a batch is taken: the batch's other events are still taken, and the
    error is raised where the batch was taken (here the run's end)."""
    from opentelemetry.sdk.trace import SpanProcessor

    class Failing(SpanProcessor):  # type: ignore[misc]
        failed = False

        def on_end(self, span: Any) -> None:
            if not Failing.failed:
                Failing.failed = True
                raise RuntimeError("the processor failed")

    collected = Collected()
    collected.telemetry.tracer_provider.add_span_processor(Failing())
    sink = collected.telemetry.run_sink(None, None, batched=True)
    sink.record("run_start", {"run_id": "r", "machine": "m"})
    for state in ("first", "second"):
        sink.record("state_enter", {"state": state, "visit": 1})
        sink.record("transition", {"from": state, "to": "next", "cause": "unconditional", "reason": ""})
    with pytest.raises(RuntimeError, match="the processor failed"):
        sink.record("run_end", {"run_id": "r", "status": "final", "steps": 2})
    ended = {str((span.attributes or {}).get("statewright.state")): span for span in collected.finished()}
    assert Failing.failed and {"first", "second"} <= set(ended)
    assert ended["second"].attributes["statewright.transition.to"] == "next"
