"""What the engine costs per transition, against a hand-written loop doing the same model calls.

A three-state loop (a -> b -> c -> a ...) leaves for a final state after TRANSITIONS transitions. Timed,
median of RUNS runs each:
  plain       a hand-written while/if loop calling the same instant in-process client
  transitions the same loop in the `transitions` library (installed by the bench when missing), without
              model calls: what a general-purpose FSM library costs per transition. The engine's own cost
              (engine - plain) must be at most 3.5 us and at most 0.45x this
  engine      the engine with that client (the ModelClient seam): the engine's own overhead
  litellm     the engine through litellm and the scripted provider (fewer transitions: litellm is slow);
              traced against untraced in 41 short rounds (runs of 202 transitions, the two alternated, the
              order swapped every round; the median of the rounds' ratios): a shared machine's speed
              drifts by more than tracing costs within seconds
  native      the engine through the native client (`OpenAIHTTPClient`), each call a real HTTP exchange
              with bench/latency_server.py answering at once: what a transition costs with its model call
  checkpoint  the engine with a SQLite checkpoint committed after every transition
  traced      the engine with OpenTelemetry on (spans through a batch span processor to an exporter that
              drops them, metrics to an SDK meter provider): at most 25 us more per state visit than the
              engine, and through litellm at most 3% more per model call (needs the otel extra)

And the cost of a checkpoint as a run grows: the same number of checkpointed transitions around a ring of
10 states and through 10,000 distinct states (every state's output, visit counter and call counter kept).
A save must cost the same at the end of the long run as in the small one: target ratio at most 1.5.

Run: python bench/overhead.py [--transitions N] [--runs N]. The last line is `RESULT {json}`.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from statewright.runtime.checkpoint import CheckpointStore
from statewright.runtime.client import ModelRequest, ModelResponse
from statewright.runtime.engine import Engine
from statewright.runtime.spec import (
    AgentSpec,
    LimitsSpec,
    MachineSpec,
    StateSpec,
    TransitionSpec,
)

MODEL = "bench/instant"


class InstantClient:
    """Answers every request at once with the same reply: what remains is the caller's own cost."""

    def __init__(self) -> None:
        self.reply = ModelResponse(content="ok", model=MODEL, prompt_tokens=1, completion_tokens=1)

    def complete(self, request: ModelRequest) -> ModelResponse:
        return self.reply


def loop_machine(transitions: int) -> MachineSpec:
    """a -> b -> c -> a ...; `a` leaves for `done` on its visit after `cycles` full cycles."""
    cycles = (transitions - 1) // 3

    def leave(scope):
        return scope.visits["a"] > cycles

    agent = AgentSpec("worker", "You follow instructions.", MODEL, memory="last", memory_count=4)
    states = {
        "a": StateSpec("a", "agent", agent="worker", instruction="Step A.",
                       transitions=(TransitionSpec("guard", "done", guard=leave, text="visits(a) > N"),
                                    TransitionSpec("always", "b"))),
        "b": StateSpec("b", "agent", agent="worker", instruction="Step B.",
                       transitions=(TransitionSpec("always", "c"),)),
        "c": StateSpec("c", "agent", agent="worker", instruction="Step C.",
                       transitions=(TransitionSpec("always", "a"),)),
        "done": StateSpec("done", "final"),
    }
    return MachineSpec(name="bench_loop", description="", inputs=(), model=MODEL, verifier_model=MODEL,
                       temperature=None, limits=LimitsSpec(steps=transitions * 2), agents={"worker": agent},
                       states=states, start="a", source_sha256="bench")


def ring_machine(states: int, transitions: int) -> MachineSpec:
    """s0 -> s1 -> ... -> s{states-1} -> s0 ...; s0 leaves for `done` once the run has made `transitions`
    transitions. Every state has its own instruction, output, visit counter and call counter."""
    cycles = transitions // states

    def leave(scope):
        return scope.visits["s0"] > cycles

    agent = AgentSpec("worker", "You follow instructions.", MODEL, memory="last", memory_count=4)
    specs = {}
    for i in range(states):
        after = TransitionSpec("always", f"s{(i + 1) % states}")
        edges = (TransitionSpec("guard", "done", guard=leave, text="visits(s0) > N"), after) if i == 0 else (after,)
        specs[f"s{i}"] = StateSpec(f"s{i}", "agent", agent="worker", instruction=f"Step {i}.", transitions=edges)
    specs["done"] = StateSpec("done", "final")
    return MachineSpec(name=f"ring_{states}", description="", inputs=(), model=MODEL, verifier_model=MODEL,
                       temperature=None, limits=LimitsSpec(steps=transitions * 2), agents={"worker": agent},
                       states=specs, start="s0", source_sha256="bench")


def checkpointed_us(spec: MachineSpec, client: InstantClient, runs: int, directory: str) -> tuple[float, int]:
    """Median wall time per transition of checkpointed runs of `spec`, and the transitions of one run."""
    store = CheckpointStore(os.path.join(directory, f"{spec.name}.db"))
    engine = Engine(spec, client=client, checkpoint=store)
    first = engine.run({})
    assert first.ok, first.failure
    moves = len(first.path) - 1
    value = median_us(runs, moves, lambda: engine.run({}))
    store.close()
    return value, moves


def plain_loop(transitions: int, client: InstantClient) -> int:
    """The same calls and control flow, written by hand: the floor any orchestration sits on."""
    cycles = (transitions - 1) // 3
    instructions = {"a": "Step A.", "b": "Step B.", "c": "Step C."}
    visits = {"a": 0, "b": 0, "c": 0}
    memory: list[dict[str, str]] = []
    state = "a"
    moves = 0
    while state != "done":
        visits[state] += 1
        user = {"role": "user", "content": instructions[state]}
        request = ModelRequest(role="agent", state=state, model=MODEL,
                               messages=[{"role": "system", "content": "You follow instructions."}, *memory[-4:],
                                         user])
        reply = client.complete(request)
        memory += [user, {"role": "assistant", "content": reply.content}]
        if state == "a":
            state = "done" if visits["a"] > cycles else "b"
        elif state == "b":
            state = "c"
        else:
            state = "a"
        moves += 1
    return moves


def transitions_loop(transitions: int) -> Callable[[], int]:
    """The loop in the `transitions` library: a -> b -> c -> a ..., leaving a for done after as many cycles
    (a condition on a visit counter, as the engine's guard); one `step()` a transition."""
    if importlib.util.find_spec("transitions") is None:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "transitions"], check=True)
    from transitions import Machine

    cycles = (transitions - 1) // 3

    def once() -> int:
        visits = {"a": 1}

        def count() -> None:
            visits["a"] += 1

        class Loop:
            state: str

        loop = Loop()
        machine = Machine(model=loop, states=["a", "b", "c", "done"], initial="a", auto_transitions=False)
        machine.add_transition("step", "a", "done", conditions=[lambda: visits["a"] > cycles])
        machine.add_transition("step", "a", "b")
        machine.add_transition("step", "b", "c")
        machine.add_transition("step", "c", "a", after=count)
        moves = 0
        while loop.state != "done":
            loop.step()  # type: ignore[attr-defined]
            moves += 1
        return moves

    return once


def median_us(runs: int, transitions: int, once: Callable[[], object]) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        once()
        times.append(time.perf_counter() - started)
    return statistics.median(times) / transitions * 1e6


def alternated_us(runs: int, transitions: int, base: Callable[[], object], other: Callable[[], object]
                  ) -> list[tuple[float, float]]:
    """(base, other) per transition in each of `runs` rounds: the two run in alternation, round by round, so
    both see the same load (a shared machine's load swings more between two series than a traced visit
    costs, and litellm's own threads swing a series of its calls by a fifth)."""
    return [(median_us(1, transitions, base), median_us(1, transitions, other)) for _ in range(runs)]


def paired_overhead_us(runs: int, transitions: int, base: Callable[[], object], other: Callable[[], object]) -> float:
    """What `other` costs per transition more than `base`: the median of the alternated rounds' differences."""
    return statistics.median(b - a for a, b in alternated_us(max(runs, 7), transitions, base, other))


def check(result: object, transitions: int) -> None:
    path = getattr(result, "path", None)
    if not getattr(result, "ok", False) or path is None or len(path) != transitions + 1:
        raise SystemExit(f"the benchmark machine did not run as intended: {result}")


def measure_litellm(spec: MachineSpec, transitions: int, runs: int, otel: object = None) -> tuple[float, float | None]:
    """Per transition through litellm's real call path, untraced and (with `otel`) traced, in alternation
    (`alternated_us`), the order swapped every round: the traced figure is the untraced median times the
    median of the rounds' ratios. One engine and one client serve both (telemetry switched between runs):
    two engines of their own differ by about 1% untraced, as much as tracing costs here."""
    # the scripted provider behind litellm's real call path lives with the tests that prove its contract
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
    from support.scripted_litellm import register_scripted_provider

    from statewright.runtime.litellm_client import LiteLLMClient, RetryPolicy
    from statewright.runtime.scripted import Script

    steps_per_state = transitions // 3 + 2
    script = Script({("agent", s): ["ok"] * steps_per_state for s in "abc"})
    register_scripted_provider(script)
    engine = Engine(spec, client=LiteLLMClient(retry=RetryPolicy(max_retries=0)), model_map={"*": "scripted/bench"})

    def run(telemetry: object) -> None:
        engine.otel = telemetry
        check(engine.run({}), transitions)

    run(None)  # warm-up: litellm's first call loads much
    run(None)  # one untimed round more: what it loads late
    if otel is None:
        return median_us(runs, transitions, lambda: run(None)), None
    run(otel)
    rounds: list[tuple[float, float]] = []
    for number in range(runs):
        if number % 2 == 0:
            rounds += alternated_us(1, transitions, lambda: run(None), lambda: run(otel))
        else:
            traced, plain = alternated_us(1, transitions, lambda: run(otel), lambda: run(None))[0]
            rounds.append((plain, traced))
    plain_us = statistics.median(a for a, _ in rounds)
    return plain_us, plain_us * statistics.median(b / a for a, b in rounds)


def measure_native(spec: MachineSpec, transitions: int, runs: int) -> float:
    import subprocess

    from statewright.runtime.model_calls import RetryPolicy
    from statewright.runtime.openai_http import OpenAIHTTPClient

    bench = os.path.dirname(os.path.abspath(__file__))
    server = subprocess.Popen([sys.executable, os.path.join(bench, "latency_server.py"), "--delay", "0"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline().split()[1])
        client = OpenAIHTTPClient(retry=RetryPolicy(max_retries=0), api_base=f"http://127.0.0.1:{port}/v1",
                                  api_key="sk-bench-not-a-key")
        engine = Engine(spec, client=client, model_map={"*": "openai/bench"})
        check(engine.run({}), transitions)  # warm-up: the connection, the price table
        return median_us(runs, transitions, lambda: check(engine.run({}), transitions))
    finally:
        server.kill()
        server.wait()
def dropping_telemetry(metrics: bool = False) -> object | None:
    """OpenTelemetry as a service would run it — a batch span processor (and, with `metrics`, an SDK meter
    provider) — with an exporter that drops the spans: what remains is what tracing costs the run. None
    without the otel extra."""
    try:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
    except ImportError:
        return None
    from statewright.runtime.otel import OtelTelemetry

    class Dropping(SpanExporter):
        def export(self, spans: object) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    from opentelemetry.metrics import NoOpMeterProvider

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Dropping()))
    return OtelTelemetry(provider, MeterProvider() if metrics else NoOpMeterProvider())


def span_floor_us(telemetry: object, transitions: int, runs: int) -> float:
    """What the OpenTelemetry SDK alone costs a transition of the traced run: a state's span and its model
    call's span, started and ended under a run's span with the same provider, with no attribute and no
    event (the floor under any instrumentation that gives a state visit and a model call a span each)."""
    tracer = telemetry.tracer  # type: ignore[attr-defined]
    from opentelemetry import trace

    def once() -> None:
        root = tracer.start_span("run")
        context = trace.set_span_in_context(root)
        for _ in range(transitions):
            state = tracer.start_span("state", context=context)
            tracer.start_span("chat", context=trace.set_span_in_context(state)).end()
            state.end()
        root.end()

    return median_us(runs, transitions, once)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transitions", type=int, default=10_000)
    parser.add_argument("--litellm-transitions", type=int, default=202)
    parser.add_argument("--litellm-rounds", type=int, default=41)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--skip-litellm", action="store_true")
    parser.add_argument("--native-transitions", type=int, default=3_001)
    parser.add_argument("--skip-otel", action="store_true")
    args = parser.parse_args()
    n, runs = args.transitions, args.runs
    client = InstantClient()
    spec = loop_machine(n)

    assert plain_loop(n, client) == n
    plain = median_us(runs, n, lambda: plain_loop(n, client))
    library = transitions_loop(n)
    assert library() == n, "the transitions loop did not run as intended"
    library_us = median_us(runs, n, library)

    engine = Engine(spec, client=client)
    check(engine.run({}), n)
    engine_us = median_us(runs, n, lambda: check(engine.run({}), n))

    with tempfile.TemporaryDirectory() as tmp:
        store = CheckpointStore(os.path.join(tmp, "bench.db"))
        checkpointed = Engine(spec, client=client, checkpoint=store)
        check(checkpointed.run({}), n)
        checkpoint_us = median_us(runs, n, lambda: check(checkpointed.run({}), n))
        store.close()

    with tempfile.TemporaryDirectory() as tmp:
        ring_us, ring_moves = checkpointed_us(ring_machine(10, n), client, runs, tmp)
        wide_us, wide_moves = checkpointed_us(ring_machine(n, n), client, runs, tmp)

    telemetry = None if args.skip_otel else dropping_telemetry()
    traced_us = metered_us = floor_us = None
    if telemetry is not None:
        floor_us = span_floor_us(telemetry, n, runs)
        traced = Engine(spec, client=client, otel=telemetry)
        check(traced.run({}), n)
        traced_us = engine_us + paired_overhead_us(runs, n, lambda: check(engine.run({}), n),
                                                   lambda: check(traced.run({}), n))
        measured = Engine(spec, client=client, otel=dropping_telemetry(metrics=True))
        check(measured.run({}), n)
        metered_us = engine_us + paired_overhead_us(runs, n, lambda: check(engine.run({}), n),
                                                    lambda: check(measured.run({}), n))

    litellm_us = litellm_traced_us = None
    if not args.skip_litellm:
        m = args.litellm_transitions
        litellm_us, litellm_traced_us = measure_litellm(loop_machine(m), m, args.litellm_rounds, otel=telemetry)

    native_us = measure_native(loop_machine(args.native_transitions), args.native_transitions, runs)

    result = {
        "transitions": n,
        "plain_us": round(plain, 3),
        "engine_us": round(engine_us, 3),
        "litellm_us": round(litellm_us, 3) if litellm_us is not None else None,
        "native_us": round(native_us, 3),
        "checkpoint_us": round(checkpoint_us, 3),
        "engine_ratio": round(engine_us / plain, 2),
        "engine_overhead_us": round(engine_us - plain, 3),
        "engine_overhead_target_us": 3.5,
        "transitions_us": round(library_us, 3),
        "engine_vs_transitions": round((engine_us - plain) / library_us, 3),
        "engine_vs_transitions_target": 0.45,
        "checkpoint_overhead_us": round(checkpoint_us - plain, 3),
        "checkpoint_10_states_us": round(ring_us, 3),
        "checkpoint_10k_states_us": round(wide_us, 3),
        "checkpoint_growth_ratio": round(wide_us / ring_us, 3),
        "traced_us": round(traced_us, 3) if traced_us is not None else None,
        "traced_overhead_us": round(traced_us - engine_us, 3) if traced_us is not None else None,
        "traced_target_us": 25.0,
        "traced_sdk_floor_us": round(floor_us, 3) if floor_us is not None else None,
        "traced_metrics_overhead_us": round(metered_us - engine_us, 3) if metered_us is not None else None,
        "litellm_traced_us": round(litellm_traced_us, 3) if litellm_traced_us is not None else None,
        "litellm_traced_ratio": (round(litellm_traced_us / litellm_us, 3)
                                 if litellm_traced_us is not None and litellm_us else None),
        "litellm_traced_target_ratio": 1.03,
    }
    print(f"transitions: {n} (litellm: {args.litellm_transitions}), median of {runs} runs, per transition:")
    print(f"  plain loop              {plain:9.2f} us")
    print(f"  engine                  {engine_us:9.2f} us  ({engine_us / plain:.1f}x plain, "
          f"+{engine_us - plain:.2f} us)")
    print(f"  transitions library     {library_us:9.2f} us  (the engine's own cost is "
          f"{(engine_us - plain) / library_us:.2f}x this; target at most 0.45, and at most 3.5 us)")
    print(f"  engine + checkpoints    {checkpoint_us:9.2f} us  ({checkpoint_us / plain:.1f}x plain, "
          f"+{checkpoint_us - plain:.2f} us)")
    print(f"  checkpointed, 10 states  {ring_us:9.2f} us  ({ring_moves} transitions around a ring of 10)")
    print(f"  checkpointed, {n} states {wide_us:9.2f} us  ({wide_moves} transitions through {n} distinct states; "
          f"{wide_us / ring_us:.2f}x the ring, target at most 1.5)")
    print(f"  engine via native HTTP  {native_us:9.2f} us  (a real call to a local server; "
          f"{args.native_transitions} transitions)")
    if traced_us is not None:
        print(f"  engine, traced          {traced_us:9.2f} us  (+{traced_us - engine_us:.2f} us a state visit with "
              f"OpenTelemetry on; target at most +25)")
        print(f"  two bare SDK spans      {floor_us:9.2f} us  (the SDK's own floor: a state's span and a model "
              "call's, no attributes)")
        print(f"  traced, with metrics    {metered_us:9.2f} us  (+{metered_us - engine_us:.2f} us; SDK metrics, "
              "no target)")
    if litellm_us is not None:
        print(f"  engine via litellm      {litellm_us:9.2f} us  ({litellm_us / engine_us:.0f}x the engine alone)")
    if litellm_traced_us is not None and litellm_us:
        print(f"  via litellm, traced     {litellm_traced_us:9.2f} us  ({litellm_traced_us / litellm_us:.3f}x "
              "untraced; target at most 1.03)")
    print("RESULT " + json.dumps(result))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
