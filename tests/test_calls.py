"""Machines that run machines, in the runtime: a `run` state's outcome, isolation, limits that compose,
pauses and crashes inside calls resumed exactly, waits at several paths answered one at a time, scripts and
traces by path. (The language, its checks and code generation: tests/test_project*.py.)"""

from __future__ import annotations

from typing import Any

import pytest
from support.fake_client import Crash, FakeClient
from support.machines import final, go, machine, otherwise, state, when

from statewright.runtime.calls import CallOutcome
from statewright.runtime.checkpoint import CheckpointStore
from statewright.runtime.engine import Engine
from statewright.runtime.result import AnswerError
from statewright.runtime.scripted import Script
from statewright.runtime.spec import (
    CallSpec,
    EachSpec,
    InputSpec,
    LimitsSpec,
    MachineSpec,
    ParallelSpec,
    StateSpec,
    TransitionSpec,
)
from statewright.runtime.trace import Trace


def call(name: str, callee: str, *transitions: TransitionSpec, args: Any = None, each: EachSpec | None = None,
         branch: str | None = None) -> StateSpec:
    build = args or (lambda scope: {"topic": scope.inputs.get("topic", "x")})
    return StateSpec(name, "call", run=CallSpec(callee, build, origin=f"spec.fsm:{name}"), each=each,
                     branch=branch, transitions=tuple(transitions), origin=f"spec.fsm:{name}")


def ask(name: str, *transitions: TransitionSpec, question: str = "Go on?") -> StateSpec:
    return StateSpec(name, "human", instruction=question, transitions=tuple(transitions))


TOPIC = (InputSpec("topic", str),)


def research(limits: LimitsSpec | None = None, asks: bool = False) -> MachineSpec:
    """A team: it drafts and reviews, then ends in `published` (or `thin`, a failing final state)."""
    states = [state("draft", go("review"), do="Draft {{ topic }}."),
              state("review", when(lambda s: "good" in s.output, "approve" if asks else "published"),
                    otherwise("thin"), agent="critic", do="Review: {{ draft.output }}")]
    if asks:
        states.append(ask("approve", when(lambda s: s.output == "yes", "published"), otherwise("thin"),
                          question="Publish {{ draft.output }}?"))
    states += [final("published", result="{{ draft.output }}"), StateSpec("thin", "final", fail="too thin")]
    return machine(*states, inputs=TOPIC, name="research", sha="sha-research", limits=limits)


def supervisor(team: MachineSpec, limits: LimitsSpec | None = None) -> MachineSpec:
    return machine(
        state("plan", go("investigate"), agent="lead", do="Plan {{ topic }}."),
        call("investigate", "research", when(lambda s: s.output.ok, "write"), otherwise("failed")),
        state("write", go("done"), agent="lead", do="Write up {{ investigate.output.result }}."),
        final("done", result="{{ write.output }}"),
        StateSpec("failed", "final", fail="the research failed"),
        inputs=TOPIC, name="supervisor", sha="sha-supervisor", limits=limits, machines={"research": team})


def scripted(**replies: list[Any]) -> Script:
    """`draft=[...]` answers agent state draft; a path `investigate__draft` stands for investigate/draft."""
    script = Script()
    for key, values in replies.items():
        role, _, name = key.partition("_")
        for value in values:
            script.add(role, name.replace("__", "/"), value)
    return script


def test_a_call_runs_the_machine_and_its_outcome_is_the_states_output() -> None:
    events: list[dict[str, Any]] = []
    script = scripted(agent_plan=["a plan"], agent_investigate__draft=["a good draft"],
                      agent_investigate__review=["good"], agent_write=["the write-up"])
    result = Engine(supervisor(research()), script=script, trace=Trace(sink=events)).run({"topic": "FSMs"})
    assert result.ok and result.path == ["plan", "investigate", "write", "done"], result.failure
    outcome = result.outputs["investigate"]
    assert isinstance(outcome, CallOutcome)
    assert (outcome.ok, outcome.final, outcome.result, outcome.failure) == (True, "published", "a good draft", None)
    assert result.usage.llm_calls == 4  # the call's two model calls count as the caller's
    nested = [e for e in events if e.get("call") == "investigate"]
    assert [e["event"] for e in nested if e["event"] in ("run_start", "run_end")] == ["run_start", "run_end"]
    assert [e["state"] for e in nested if e["event"] == "state_enter"] == ["draft", "review", "published"]
    assert not any(e.get("call") for e in events if e["event"] == "state_enter" and e["state"] == "write")


def test_a_failed_call_is_an_outcome_the_caller_routes_on() -> None:
    script = scripted(agent_plan=["p"], agent_investigate__draft=["d"], agent_investigate__review=["bad"])
    result = Engine(supervisor(research()), script=script).run({"topic": "FSMs"})
    assert result.status == "failed" and result.final_state is None or result.path[-1] == "failed"
    outcome = result.outputs["investigate"]
    assert not outcome.ok and outcome.final is None or outcome.final == "thin"
    assert outcome.failure is not None and outcome.failure.kind == "final"
    assert outcome.failure.message == "too thin"


def test_the_callers_limits_count_what_its_calls_do() -> None:
    script = scripted(agent_plan=["p"], agent_investigate__draft=["d"], agent_investigate__review=["good"],
                      agent_write=["w"])
    result = Engine(supervisor(research(), limits=LimitsSpec(steps=3)), script=script).run({"topic": "x"})
    assert result.status == "failed" and result.failure.kind == "limit" and result.failure.limit == "steps"
    assert result.failure.state == "investigate"  # the caller ends, in the state that ran the call
    assert "while it ran investigate" in result.failure.message
    # the callee's own limit ends only the call: its outcome says so and the caller routes on it
    tight = Engine(supervisor(research(limits=LimitsSpec(steps=1))), script=script).run({"topic": "x"})
    assert tight.path[-1] == "failed" and tight.outputs["investigate"].failure.limit == "steps"


def test_every_call_is_isolated() -> None:
    """Two calls of one machine: each its own memory and counters (the second does not see the first)."""
    team = research()
    twice = machine(
        call("first", "research", go("second")),
        call("second", "research", go("done")),
        final("done"), inputs=TOPIC, name="twice", machines={"research": team})
    client = FakeClient({("agent", "draft"): ["d1", "d2"], ("agent", "review"): ["good", "good"]})
    result = Engine(twice, client=client).run({"topic": "x"})
    assert result.ok
    second_draft = [r for r in client.requests if r.state == "draft"][1]
    assert [m["content"] for m in second_draft.messages if m["role"] != "system"] == ["Draft x."]


def test_a_crash_inside_a_call_resumes_inside_it_with_no_completed_step_again(tmp_path: Any) -> None:
    store = CheckpointStore(str(tmp_path / "runs.db"))
    answers = {("agent", "plan"): ["p"], ("agent", "draft"): ["a good draft"],
               ("agent", "review"): [Crash("killed"), "good"], ("agent", "write"): ["w"]}
    client = FakeClient(answers)
    with pytest.raises(Crash):
        Engine(supervisor(research()), client=client, checkpoint=store).run({"topic": "x"}, run_id="c1")
    snapshot = store.load("c1")
    assert snapshot is not None and list(snapshot.head.calls) == ["investigate#0"]
    assert snapshot.calls["investigate#0"].head.state == "review"
    again = FakeClient({**answers, ("agent", "review"): ["good"]})
    resumed = Engine(supervisor(research()), client=again, checkpoint=store).run(run_id="c1", resume=True)
    assert resumed.ok and resumed.path == ["plan", "investigate", "write", "done"], resumed.failure
    assert [r.state for r in again.requests] == ["review", "write"]  # neither plan nor draft is asked again
    assert resumed.outputs["investigate"].result == "a good draft"


def test_an_ask_inside_a_call_pauses_the_whole_run_and_resumes_inside_it(tmp_path: Any) -> None:
    store = CheckpointStore(str(tmp_path / "runs.db"))
    script = scripted(agent_plan=["p"], agent_investigate__draft=["a good draft"],
                      agent_investigate__review=["good"], agent_write=["w"])
    first = Engine(supervisor(research(asks=True)), script=script, checkpoint=store).run({"topic": "x"},
                                                                                        run_id="a1")
    assert first.status == "waiting" and first.waiting is not None
    assert (first.waiting.state, first.waiting.path) == ("approve", "investigate/approve")
    assert first.waiting.question == "Publish a good draft?"
    with pytest.raises(AnswerError, match="no answer at approve"):
        Engine(supervisor(research(asks=True)), script=script, checkpoint=store).run(
            run_id="a1", resume=True, answer="yes", path="approve")
    done = Engine(supervisor(research(asks=True)), script=script, checkpoint=store).run(
        run_id="a1", resume=True, answer="yes")
    assert done.ok and done.outputs["investigate"].final == "published", done.failure


def test_two_waits_at_once_are_listed_and_answered_one_at_a_time_in_any_order(tmp_path: Any) -> None:
    team = research(asks=True)
    both = machine(
        StateSpec("both", "parallel", parallel=ParallelSpec(("left", "right")), transitions=(go("done"),)),
        call("left", "research", branch="left"), call("right", "research", branch="right"),
        final("done"), inputs=TOPIC, name="both", machines={"research": team})
    script = scripted(agent_left__draft=["L good"], agent_left__review=["good"],
                      agent_right__draft=["R good"], agent_right__review=["good"])
    store = CheckpointStore(str(tmp_path / "runs.db"))
    first = Engine(both, script=script, checkpoint=store).run({"topic": "x"}, run_id="w2")
    assert first.status == "waiting"
    assert sorted(w.path for w in first.waits) == ["left/approve", "right/approve"]
    with pytest.raises(AnswerError, match="waits for 2 answers"):
        Engine(both, script=script, checkpoint=store).run(run_id="w2", resume=True, answer="yes")
    second = Engine(both, script=script, checkpoint=store).run(run_id="w2", resume=True, answer="no",
                                                              path="right/approve")
    assert second.status == "waiting" and [w.path for w in second.waits] == ["left/approve"]
    done = Engine(both, script=script, checkpoint=store).run(run_id="w2", resume=True, answer="yes")
    assert done.ok
    left, right = done.outputs["both"]
    assert (left.final, right.final) == ("published", "thin")


def test_a_map_of_calls_runs_one_call_per_element_each_scripted_by_its_path() -> None:
    team = research()
    fan = machine(
        call("investigate", "research", go("done"), args=lambda s: {"topic": s.each["topic"]},
             each=EachSpec("topic", lambda s: s.inputs["topics"], max=5)),
        final("done"), inputs=(InputSpec("topics", list[str]),), name="fan", machines={"research": team})
    script = scripted(**{"agent_investigate[0]__draft": ["a good 0"], "agent_investigate[0]__review": ["good"],
                         "agent_investigate[1]__draft": ["poor 1"], "agent_investigate[1]__review": ["bad"]})
    result = Engine(fan, script=script).run({"topics": ["a", "b"]})
    assert result.ok, result.failure
    assert [o.final for o in result.outputs["investigate"]] == ["published", "thin"]


def test_a_calls_spans_nest_under_the_state_that_runs_it() -> None:
    pytest.importorskip("opentelemetry.sdk.trace", reason="the otel extra (opentelemetry-sdk) is missing")
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from statewright.runtime.otel import OtelTelemetry

    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    script = scripted(agent_plan=["p"], agent_investigate__draft=["a good draft"],
                      agent_investigate__review=["good"], agent_write=["w"])
    result = Engine(supervisor(research()), script=script, otel=OtelTelemetry(provider, MeterProvider())).run(
        {"topic": "x"})
    assert result.ok
    finished = list(spans.get_finished_spans())
    by_id = {s.context.span_id: s for s in finished}
    runs = [s for s in finished if s.attributes.get("statewright.machine") == "research"
            and s.attributes.get("statewright.run_id")]
    assert len(runs) == 1, [s.name for s in finished]
    caller = by_id[runs[0].parent.span_id]
    assert caller.attributes.get("statewright.state") == "investigate"
    drafts = [s for s in finished if s.attributes.get("statewright.state") == "draft" and "statewright.visit" in s.attributes]
    assert drafts and by_id[drafts[0].parent.span_id] is runs[0]
    assert len({s.context.trace_id for s in finished}) == 1  # one trace for the run and its call
