"""Transitions: source order, guards, one verifier call per condition group, otherwise/stay, bounds, traceback."""

from __future__ import annotations

from pydantic import BaseModel
from support.fake_client import FakeClient, verdict
from support.machines import cond, final, go, machine, otherwise, state, stay, when

from statewright.runtime.engine import Engine
from statewright.runtime.spec import InputSpec
from statewright.runtime.trace import Trace


class Score(BaseModel):
    score: int


def run(spec, answers, inputs=None):
    client = FakeClient(answers)
    events: list[dict] = []
    result = Engine(spec, client=client, trace=Trace(sink=events)).run(inputs or {})
    return result, client, events


def transitions(events):
    return [(e["from"], e["to"], e["cause"]) for e in events if e["event"] == "transition"]


def test_an_unconditional_edge_always_fires_and_the_path_ends_at_the_final_state():
    spec = machine(state("a", go("b")), state("b", go("done")), final("done"))
    result, _, events = run(spec, {("agent", "a"): ["A"], ("agent", "b"): ["B"]})
    assert result.ok
    assert result.path == ["a", "b", "done"]
    assert result.final_state == "done"
    assert result.result == "B"  # no result template: the last output
    assert transitions(events) == [("a", "b", "unconditional"), ("b", "done", "unconditional")]


def test_guards_are_evaluated_in_source_order_and_the_first_true_one_fires():
    spec = machine(
        state("review", when(lambda s: s.output.score >= 85, "publish", "output.score >= 85"),
              when(lambda s: s.output.score >= 50, "revise", "output.score >= 50"),
              otherwise("failed"), output=Score),
        final("publish"), final("revise"), final("failed"),
    )
    result, _, events = run(spec, {("agent", "review"): [{"score": 60}]})
    assert result.final_state == "revise"
    guards = [(e["index"], e["text"], e["value"]) for e in events if e["event"] == "guard"]
    assert guards == [(0, "output.score >= 85", False), (1, "output.score >= 50", True)]
    assert transitions(events) == [("review", "revise", "guard")]


def test_otherwise_catches_what_no_guard_matched():
    spec = machine(state("a", when(lambda s: False, "x", "false"), otherwise("y")), final("x"), final("y"))
    result, _, events = run(spec, {("agent", "a"): ["A"]})
    assert result.final_state == "y"
    assert transitions(events) == [("a", "y", "otherwise")]


def test_a_guard_that_raises_is_a_typed_failure_naming_the_transition():
    spec = machine(state("a", when(lambda s: s.output.missing, "x", "output.missing")), final("x"))
    result, _, _ = run(spec, {("agent", "a"): ["A"]})
    assert result.status == "failed"
    assert result.failure.kind == "guard"
    assert result.failure.state == "a"
    assert "output.missing" in result.failure.message
    assert result.failure.origin == "spec.fsm:output.missing"


def test_guards_see_inputs_other_outputs_and_visits():
    seen = {}

    def guard(scope):
        seen.update(topic=scope.inputs["topic"], first=scope.outputs["first"], visits=dict(scope.visits))
        return True

    spec = machine(state("first", go("second")), state("second", when(guard, "done", "g")), final("done"),
                   inputs=[InputSpec("topic", str)])
    run(spec, {("agent", "first"): ["one"], ("agent", "second"): ["two"]}, {"topic": "FSMs"})
    assert seen == {"topic": "FSMs", "first": "one", "visits": {"first": 1, "second": 1}}


def test_consecutive_conditions_are_judged_by_one_verifier_call():
    spec = machine(
        state("review", cond("the draft cites no sources", "research"), cond("the draft is too long", "cut"),
              otherwise("publish")),
        final("research"), final("cut"), final("publish"),
    )
    result, client, events = run(spec, {("agent", "review"): ["text"],
                                        ("verifier", "review"): [verdict("the draft is too long", "long")]})
    assert result.final_state == "cut"
    verifier_calls = client.calls("verifier")
    assert len(verifier_calls) == 1
    schema = verifier_calls[0].response_schema
    assert schema["properties"]["choice"]["enum"] == [0, 1, 2]  # 0: none; 1 and 2: the conditions, in order
    listed = verifier_calls[0].messages[-1]["content"]
    assert "1. the draft cites no sources\n2. the draft is too long" in listed
    assert transitions(events) == [("review", "cut", "verifier")]


def test_the_verifier_sees_only_the_instruction_and_the_output():
    spec = machine(state("review", cond("it is done", "done"), otherwise("done"), do="Review {{ topic }}."),
                   final("done"), inputs=[InputSpec("topic", str)])
    _, client, _ = run(spec, {("agent", "review"): ["the output"],
                              ("verifier", "review"): [verdict("it is done")]}, {"topic": "FSMs"})
    request = client.calls("verifier")[0]
    text = "\n".join(m["content"] for m in request.messages)
    assert "Review FSMs." in text and "the output" in text and "it is done" in text
    assert "You are worker." not in text  # no agent prompt, no memory
    assert request.model == "fake/verifier"


def test_conditions_separated_by_a_guard_are_two_verifier_calls():
    spec = machine(
        state("s", cond("c1", "x"), when(lambda s: False, "y", "false"), cond("c2", "z"), otherwise("w")),
        final("x"), final("y"), final("z"), final("w"),
    )
    result, client, _ = run(spec, {("agent", "s"): ["out"],
                                   ("verifier", "s"): [verdict(None), verdict("c2")]})
    assert result.final_state == "z"
    assert len(client.calls("verifier")) == 2


def test_choice_none_falls_through_to_the_next_transition():
    spec = machine(state("s", cond("it is perfect", "x"), go("y")), final("x"), final("y"))
    result, _, events = run(spec, {("agent", "s"): ["out"], ("verifier", "s"): [verdict(None)]})
    assert result.final_state == "y"
    assert [e["choice"] for e in events if e["event"] == "verdict"] == ["none"]
    assert transitions(events) == [("s", "y", "unconditional")]


def test_otherwise_stay_reruns_the_state_with_the_verifiers_feedback():
    spec = machine(state("outline", cond("every section has timings", "done"), stay("outline", max=2),
                         otherwise("done")), final("done"))
    result, client, events = run(spec, {
        ("agent", "outline"): ["v1", "v2"],
        ("verifier", "outline"): [verdict(None, "no timings", "Add minutes to each section."),
                                  verdict("every section has timings")],
    })
    assert result.path == ["outline", "outline", "done"]
    second = client.calls("agent", "outline")[1].messages[-1]["content"]
    assert second.startswith("Do outline.")
    assert "Add minutes to each section." in second
    assert transitions(events)[0] == ("outline", "outline", "stay")


def test_stay_without_a_verifier_gives_a_neutral_retry_message():
    spec = machine(state("s", when(lambda s: s.output == "good", "done", "output == 'good'"), stay("s", max=1)),
                   final("done"))
    result, client, _ = run(spec, {("agent", "s"): ["bad", "good"]})
    assert result.path == ["s", "s", "done"]
    retry = client.calls("agent", "s")[1].messages[-1]["content"]
    assert retry.startswith("Do s.\n\n")
    assert "output == 'good'" not in retry


def test_an_edge_with_max_is_disabled_once_exhausted_and_evaluation_falls_through():
    spec = machine(
        state("review", go("revise", max=2), otherwise("give_up"), agent="critic"),
        state("revise", go("review")),
        final("give_up"),
    )
    result, _, events = run(spec, {("agent", "review"): ["r1", "r2", "r3"], ("agent", "revise"): ["v1", "v2"]})
    assert result.path == ["review", "revise", "review", "revise", "review", "give_up"]
    skips = [(e["state"], e["to"], e["bound"]) for e in events if e["event"] == "bound_skip"]
    assert skips == [("review", "revise", "max 2")]
    assert transitions(events)[-1] == ("review", "give_up", "otherwise")


def test_an_edge_into_a_state_whose_visits_are_exhausted_is_disabled():
    spec = machine(
        state("draft", go("review"), visits=2),
        state("review", go("draft"), otherwise("done"), agent="critic"),
        final("done"),
    )
    result, _, events = run(spec, {("agent", "draft"): ["d1", "d2"], ("agent", "review"): ["r1", "r2"]})
    assert result.path == ["draft", "review", "draft", "review", "done"]
    assert [e["bound"] for e in events if e["event"] == "bound_skip"] == ["visits 2"]


def test_disabled_conditions_are_not_offered_to_the_verifier():
    spec = machine(
        state("s", cond("needs more work", "s2", max=1), cond("is finished", "done"), otherwise("done")),
        state("s2", go("s")),
        final("done"),
    )
    result, client, _ = run(spec, {
        ("agent", "s"): ["one", "two"], ("agent", "s2"): ["fix"],
        ("verifier", "s"): [verdict("needs more work"), verdict("is finished")],
    })
    assert result.path == ["s", "s2", "s", "done"]
    second = client.calls("verifier")[1]
    assert second.response_schema["properties"]["choice"]["enum"] == [0, 1]
    assert "1. is finished" in second.messages[-1]["content"]
    assert "needs more work" not in second.messages[-1]["content"]


def test_when_nothing_can_fire_the_run_fails_with_kind_bound():
    spec = machine(state("a", go("b", max=1)), state("b", go("a")), final("never"))
    result, _, events = run(spec, {("agent", "a"): ["a1", "a2"], ("agent", "b"): ["b1"]})
    assert result.status == "failed"
    assert result.failure.kind == "bound"
    assert result.failure.state == "a"
    assert result.path == ["a", "b", "a"]
    assert transitions(events)[-1] == ("a", None, "bound")
    assert events[-1]["event"] == "run_end" and events[-1]["status"] == "failed"


def test_a_verifier_traceback_delivers_its_reason_and_feedback_to_the_rerun_agent():
    spec = machine(
        state("draft", go("review"), tell=["critic"]),
        state("review", cond("the draft has unsourced claims", "draft"), otherwise("done"), agent="critic"),
        final("done"),
    )
    result, client, events = run(spec, {
        ("agent", "draft"): ["first draft", "second draft"],
        ("agent", "review"): ["looks shaky", "fine now"],
        ("verifier", "review"): [
            verdict("the draft has unsourced claims", "Paragraph 2 states a number without a source.",
                    "Cite where the 40% figure comes from."),
            verdict(None),
        ],
    })
    assert result.path == ["draft", "review", "draft", "review", "done"]
    rerun = client.calls("agent", "draft")[1].messages[-1]["content"]
    assert "Paragraph 2 states a number without a source." in rerun
    assert "Cite where the 40% figure comes from." in rerun
    assert ("review", "draft", "verifier") in transitions(events)


def test_a_guard_traceback_says_which_state_sent_the_run_back():
    spec = machine(
        state("write", go("check")),
        state("check", when(lambda s: s.outputs["write"] == "v1", "write", "write.output == 'v1'"),
              otherwise("done"), agent="checker"),
        final("done"),
    )
    _, client, _ = run(spec, {("agent", "write"): ["v1", "v2"], ("agent", "check"): ["no", "ok"]})
    rerun = client.calls("agent", "write")[1].messages[-1]["content"]
    assert "state 'check' sent the run back here" in rerun
    assert "write.output" not in rerun


def test_agent_messages_never_contain_condition_texts_even_when_the_verifier_quotes_them():
    conditions = ["the draft has unsourced claims", "the tone is too casual"]
    spec = machine(
        state("draft", go("review"), tell=["critic"]),
        state("review", cond(conditions[0], "draft", max=2), cond(conditions[1], "draft", max=2),
              stay("review", max=1), otherwise("done"), agent="critic"),
        final("done"),
    )
    result, client, _ = run(spec, {
        ("agent", "draft"): ["d1", "d2", "d3"],
        ("agent", "review"): ["r1", "r2", "r3", "r4"],
        ("verifier", "review"): [
            verdict(conditions[0], f"Yes, {conditions[0]}.", f"Fix it: {conditions[0].upper()}."),
            verdict(conditions[1], "It reads like a chat.", f"Because {conditions[1]}, rewrite it."),
            verdict(None, "Nothing holds.", f"Not {conditions[0]} anymore."),
            verdict(None),
        ],
    })
    assert result.ok, result.failure
    text = client.agent_text().casefold()
    assert len(client.calls("agent")) == 7
    for condition in conditions:
        assert condition.casefold() not in text


def test_a_self_loop_counts_visits_and_respects_the_states_bound():
    spec = machine(state("poll", go("poll"), otherwise("done"), visits=3), final("done"))
    result, _, _ = run(spec, {("agent", "poll"): ["1", "2", "3"]})
    assert result.path == ["poll", "poll", "poll", "done"]
