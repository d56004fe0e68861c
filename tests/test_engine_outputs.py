"""A step's output: typed outputs requested, repaired, validated and retried; templates; the final result."""

from __future__ import annotations

from typing import Literal

import pytest
from pydantic import BaseModel
from support.fake_client import FakeClient
from support.machines import agent, final, go, machine, state, when

from statewright.runtime.client import ModelError
from statewright.runtime.engine import Engine
from statewright.runtime.spec import InputSpec
from statewright.runtime.structured import extract_json
from statewright.runtime.trace import Trace


class Critique(BaseModel):
    score: int
    fixes: list[str]
    level: Literal["low", "high"] = "low"


class Names(BaseModel):
    value: list[str]


def run(spec, answers, inputs=None, **engine_options):
    client = FakeClient(answers)
    events: list[dict] = []
    result = Engine(spec, client=client, trace=Trace(sink=events), **engine_options).run(inputs or {})
    return result, client, events


def test_a_typed_state_requests_its_schema_and_yields_the_validated_object():
    spec = machine(state("review", go("done"), output=Critique), final("done"))
    result, client, _ = run(spec, {("agent", "review"): ['{"score": 90, "fixes": []}']})
    request = client.calls("agent", "review")[0]
    assert request.response_schema == Critique.model_json_schema()
    assert request.schema_name == "Critique"
    assert isinstance(result.outputs["review"], Critique)
    assert result.result == {"score": 90, "fixes": [], "level": "low"}  # the last output, as JSON data


@pytest.mark.parametrize("reply, repairs", [
    ('```json\n{"score": 70, "fixes": ["a"]}\n```', ["fence"]),
    ('Here is my review:\n{"score": 70, "fixes": ["a"]}\nHope it helps.', ["prose"]),
    ('{"score": 70, "fixes": ["a",],}', ["trailing_comma"]),
    ('Sure: {"score": 70, "fixes": ["a",]} done', ["prose", "trailing_comma"]),
])
def test_json_is_recovered_from_fences_and_prose_and_every_repair_is_traced(reply, repairs):
    spec = machine(state("review", go("done"), output=Critique), final("done"))
    result, _, events = run(spec, {("agent", "review"): [reply]})
    assert result.outputs["review"].score == 70
    assert [e["repairs"] for e in events if e["event"] == "repair"] == [repairs]


@pytest.mark.parametrize("reply, repairs", [
    ('{"score": "70", "fixes": ["a"]}', ["coerced"]),
    ('{"score": 70.0, "fixes": ["a"]}', ["coerced"]),
    ('```json\n{"score": "70", "fixes": ["a"]}\n```', ["fence", "coerced"]),
    ('{"score": 70, "fixes": ["a"]}', None),
])
def test_a_value_converted_to_fit_its_type_is_accepted_and_the_coercion_traced(reply, repairs):
    spec = machine(state("review", go("done"), output=Critique), final("done"))
    result, _, events = run(spec, {("agent", "review"): [reply]})
    assert result.outputs["review"].score == 70
    assert [e["repairs"] for e in events if e["event"] == "repair"] == ([repairs] if repairs else [])


def test_each_reply_sent_back_is_traced_as_a_reask_with_the_errors_the_model_was_told():
    spec = machine(state("review", go("done"), output=Critique, retries=2), final("done"))
    result, client, events = run(spec, {("agent", "review"): [
        '{"score": "high", "fixes": []}',
        "no JSON here",
        '{"score": 80, "fixes": []}',
    ]})
    assert result.ok
    reasks = [e for e in events if e["event"] == "reask"]
    assert [(e["state"], e["role"], e["attempt"]) for e in reasks] == [("review", "agent", 1), ("review", "agent", 2)]
    told = [call.messages[-1]["content"] for call in client.calls("agent", "review")[1:]]
    assert [e["error"] in text for e, text in zip(reasks, told)] == [True, True]
    assert "valid integer" in reasks[0]["error"] and "no JSON value" in reasks[1]["error"]
    # each re-ask comes before the call it leads to
    kinds = [e["event"] for e in events if e["event"] in ("llm_call", "reask")]
    assert kinds == ["llm_call", "reask", "llm_call", "reask", "llm_call"]


def test_a_last_unusable_reply_is_not_sent_back():
    spec = machine(state("review", go("done"), output=Critique, retries=1), final("done"))
    result, client, events = run(spec, {("agent", "review"): ["nope", "still nope"]})
    assert result.failure is not None and result.failure.kind == "output"
    assert len(client.calls("agent", "review")) == 2
    assert [e["attempt"] for e in events if e["event"] == "reask"] == [1]


def test_an_invalid_reply_is_fed_back_with_its_errors_and_retried():
    spec = machine(state("review", go("done"), output=Critique, retries=2), final("done"))
    result, client, _ = run(spec, {("agent", "review"): [
        '{"score": "high", "fixes": []}',
        '{"score": 80, "fixes": [], "level": "medium"}',
        '{"score": 80, "fixes": []}',
    ]})
    assert result.ok
    calls = client.calls("agent", "review")
    assert len(calls) == 3
    retry = calls[1].messages
    assert retry[-2] == {"role": "assistant", "content": '{"score": "high", "fixes": []}'}
    assert retry[-1]["role"] == "user" and "score" in retry[-1]["content"]
    assert "valid integer" in retry[-1]["content"]
    assert "level" in calls[2].messages[-1]["content"]


def test_output_retries_exhausted_is_a_typed_failure_naming_the_state_and_the_last_error():
    spec = machine(state("review", go("done"), output=Critique, retries=1), final("done"))
    result, client, _ = run(spec, {("agent", "review"): ["no json here", '{"score": 1}']})
    assert result.status == "failed"
    assert result.failure.kind == "output"
    assert result.failure.state == "review"
    assert "fixes" in result.failure.message  # the last error, not the first
    assert len(client.calls("agent", "review")) == 2


def test_failed_attempts_do_not_stay_in_the_agents_memory():
    spec = machine(state("a", go("b"), output=Critique), state("b", go("done")), final("done"))
    _, client, _ = run(spec, {("agent", "a"): ["nope", '{"score": 5, "fixes": []}'], ("agent", "b"): ["ok"]})
    memory = client.calls("agent", "b")[0].messages[1:-1]
    assert [m["role"] for m in memory] == ["user", "assistant"]
    assert memory[1]["content"] == '{"score": 5, "fixes": [], "level": "low"}'


def test_a_wrapped_type_accepts_the_bare_value_and_yields_it_unwrapped():
    spec = machine(state("list", go("done"), output=Names, wrapped=True), final("done"))
    result, _, _ = run(spec, {("agent", "list"): ['["ada", "grace"]']})
    assert result.outputs["list"] == ["ada", "grace"]


def test_instructions_render_inputs_and_earlier_outputs_as_data():
    spec = machine(
        state("draft", go("review"), do="Write about {{ topic }}."),
        state("review", go("done"), output=Critique, do="Review: {{ draft.output }}"),
        final("done"),
        inputs=[InputSpec("topic", str)],
    )
    _, client, _ = run(spec, {("agent", "draft"): ["{{ topic }} is {% raw %}"],
                              ("agent", "review"): ['{"score": 1, "fixes": []}']}, {"topic": "FSMs"})
    assert client.calls("agent", "draft")[0].messages[-1]["content"] == "Write about FSMs."
    # the draft's text is data: its braces are not rendered again
    assert client.calls("agent", "review")[0].messages[-1]["content"] == "Review: {{ topic }} is {% raw %}"


def test_typed_outputs_and_lists_render_as_json_in_templates():
    spec = machine(
        state("review", go("revise"), output=Critique),
        state("revise", go("done"), do="Fix {{ review.output.fixes }} from {{ review.output }}; "
                                       "{{ review.output.score }} after {{ review.visits }} visit"),
        final("done"),
    )
    _, client, _ = run(spec, {("agent", "review"): ['{"score": 3, "fixes": ["a", "b"]}'],
                              ("agent", "revise"): ["ok"]})
    assert client.calls("agent", "revise")[0].messages[-1]["content"] == (
        'Fix ["a", "b"] from {"score": 3, "fixes": ["a", "b"], "level": "low"}; 3 after 1 visit')


def test_the_agent_prompt_is_rendered_with_the_inputs():
    spec = machine(state("a", go("done"), agent="writer"), final("done"),
                   agents=[agent("writer", "You write for {{ audience }}.")],
                   inputs=[InputSpec("audience", str, required=False, default="engineers")])
    _, client, _ = run(spec, {("agent", "a"): ["x"]})
    assert client.calls("agent", "a")[0].messages[0] == {"role": "system", "content": "You write for engineers."}


def test_an_undefined_name_in_a_template_is_a_typed_template_failure():
    spec = machine(state("a", go("done"), do="Use {{ nothing_here }}."), final("done"))
    result, client, _ = run(spec, {})
    assert result.failure.kind == "template"
    assert result.failure.state == "a"
    assert "nothing_here" in result.failure.message
    assert client.requests == []


def test_the_sandbox_refuses_unsafe_template_operations():
    spec = machine(state("a", go("done"), do="{{ ''.__class__.__mro__ }}"), final("done"))
    result, _, _ = run(spec, {})
    assert result.failure.kind == "template"


def test_a_final_state_result_template_is_rendered_with_outputs():
    spec = machine(state("draft", go("revise")), state("revise", go("publish")),
                   final("publish", "{{ revise.output or draft.output }} ({{ draft.visits }})"))
    result, _, _ = run(spec, {("agent", "draft"): ["D"], ("agent", "revise"): ["R"]})
    assert result.result == "R (1)"


def test_a_state_that_never_ran_renders_as_empty_in_a_result():
    spec = machine(state("draft", when(lambda s: True, "publish", "true")), state("revise", go("publish")),
                   final("publish", "{{ revise.output or draft.output }}"))
    result, _, _ = run(spec, {("agent", "draft"): ["D"]})
    assert result.result == "D"


def test_requests_carry_models_metadata_and_the_model_map():
    spec = machine(state("a", go("b"), agent="writer"), state("b", go("done"), agent="writer"), final("done"),
                   agents=[agent("writer", model="openai/gpt-4o", fallbacks=("openai/gpt-4o-mini",),
                                 temperature=0.7)])
    client = FakeClient({("agent", "a"): ["x"], ("agent", "b"): ["y"]})
    result = Engine(spec, client=client, model_map={"openai/gpt-4o": "scripted/a",
                                                    "openai/gpt-4o-mini": "scripted/b"}).run({}, run_id="r1")
    first, second = client.requests
    assert (first.model, first.fallbacks, first.temperature) == ("scripted/a", ("scripted/b",), 0.7)
    assert first.metadata == {"statewright": {"run_id": "r1", "state": "a", "role": "agent", "seq": 0,
                                              "agent": "writer"}}
    assert second.metadata["statewright"]["seq"] == 0  # seq counts calls per (role, state)
    assert result.run_id == "r1"
    assert result.usage.llm_calls == 2 and result.usage.prompt_tokens == 20


def test_a_model_error_ends_the_run_with_kind_model():
    spec = machine(state("a", go("done")), final("done"))
    result, _, _ = run(spec, {("agent", "a"): [ModelError("fake/model", "HTTP 500", attempts=3)]})
    assert result.failure.kind == "model"
    assert result.failure.state == "a"
    assert "HTTP 500" in result.failure.message


def test_invalid_inputs_fail_the_run_with_kind_input():
    spec = machine(state("a", go("done")), final("done"), inputs=[InputSpec("count", int)])
    result, client, _ = run(spec, {}, {"count": "many", "extra": 1})
    assert result.failure.kind == "input"
    assert "count" in result.failure.message and "unknown input 'extra'" in result.failure.message
    assert client.requests == []


def test_extract_json_reports_a_reply_without_json():
    with pytest.raises(ValueError, match="no JSON"):
        extract_json("I cannot do that.")
