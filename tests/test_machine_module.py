"""The IR as every face runs it: the machine module, compiled in memory, defines the MachineSpec."""

from __future__ import annotations

import hashlib
from typing import Any, Literal

import pytest
from support.machines import runtime_of

from statewright.api import check_text
from statewright.compiler import ir
from statewright.runtime.spec import MachineSpec, Scope

SPEC = '''machine review_pipeline {
    description "Draft, critique, publish."
    input topic: str
    input audience: str = "engineers"
    input tags: list[str] = []
    input level: "low" | "high" = "low"
    input note: str? = none
    model "openai/gpt-4o-mini"
    verifier model "openai/gpt-4o"
    temperature 0.2
    limits { steps 30  cost_usd 0.5  tokens 1000  seconds 60 }
    type Critique {
        score: int "0-100"
        fixes: list[str] "one per item"
        level: "low" | "high"
        note: str?
    }
    tool std.http_get { allow ["example.com"] }
    agent writer {
        prompt "You write for {{ audience }}."
        model "anthropic/claude-haiku-4-5"
        tools [std.python]
        memory last 6
        fallbacks ["openai/gpt-4o"]
    }
    agent critic { prompt "You critique." temperature 0.9 memory none }
    start state draft {
        agent writer
        do "Write about {{ topic }} for {{ tags }} at {{ level }} ({{ note }})."
        tell [critic]
        visits 3
        -> review
    }
    state review {
        agent critic
        do "Score it."
        output Critique
        retries 4
        when output.score >= 85 -> publish
        when "the draft has unsourced claims" -> draft
        -> lists max 2
        otherwise stay max 1
    }
    state lists {
        agent writer
        do "List the fixes."
        output list[str]
        -> fetch
    }
    state fetch {
        call std.http_get(url = "https://example.com/" + topic)
        when output.status == 200 -> publish
        otherwise -> failed
    }
    final state publish { result "{{ draft.output }}" }
    final state failed
    test "good draft publishes" {
        input { topic "FSMs" }
        reply draft "A draft."
        reply review { score 90  fixes []  level "high" }
        verdict review none
        expect path [draft, review, publish]
        expect result "A draft."
    }
}
'''


@pytest.fixture(scope="module")
def compiled() -> tuple[ir.Machine, MachineSpec]:
    comp = check_text(SPEC, "flows/review.fsm")
    assert comp.ok, [d.message for d in comp.diagnostics]
    return comp.ir, runtime_of(comp.ir, SPEC, "flows/review.fsm")  # type: ignore[arg-type]


def test_machine_settings_limits_and_source_are_carried(compiled: tuple[ir.Machine, MachineSpec]) -> None:
    _, m = compiled
    assert (m.name, m.description, m.start) == ("review_pipeline", "Draft, critique, publish.", "draft")
    assert (m.model, m.verifier_model, m.temperature) == ("openai/gpt-4o-mini", "openai/gpt-4o", 0.2)
    assert (m.limits.steps, m.limits.cost_usd, m.limits.tokens, m.limits.seconds) == (30, 0.5, 1000, 60)
    assert (m.source_sha256, m.source_path) == (hashlib.sha256(SPEC.encode()).hexdigest(), "flows/review.fsm")
    assert m.tools["std.http_get"].options == {"allow": ["example.com"]}


def test_states_keep_source_order_and_their_settings(compiled: tuple[ir.Machine, MachineSpec]) -> None:
    _, m = compiled
    assert list(m.states) == ["draft", "review", "lists", "fetch", "publish", "failed"]
    draft = m.states["draft"]
    assert (draft.kind, draft.agent) == ("agent", "writer")
    assert draft.instruction == "Write about {{ topic }} for {{ tags }} at {{ level }} ({{ note }})."
    assert (draft.tell, draft.visits, draft.output) == (("critic",), 3, None)
    assert m.states["review"].retries == 4
    assert m.states["publish"].result == "{{ draft.output }}"
    assert m.states["failed"].kind == "final"
    assert draft.origin == "flows/review.fsm:27:5"


def test_transitions_carry_kind_target_text_bound_and_origin(compiled: tuple[ir.Machine, MachineSpec]) -> None:
    _, m = compiled
    review = m.states["review"].transitions
    assert [(t.kind, t.target, t.text, t.max) for t in review] == [
        ("guard", "publish", "output.score >= 85", None),
        ("condition", "draft", "the draft has unsourced claims", None),
        ("always", "lists", "", 2),
        ("stay", "review", "", 1),
    ]
    assert review[0].origin == "flows/review.fsm:39:9"
    assert review[0].guard is not None and all(t.guard is None for t in review[1:])


def test_agents_get_the_machines_model_and_temperature_unless_they_set_their_own(
    compiled: tuple[ir.Machine, MachineSpec],
) -> None:
    _, m = compiled
    writer, critic = m.agents["writer"], m.agents["critic"]
    assert (writer.model, writer.temperature) == ("anthropic/claude-haiku-4-5", 0.2)
    assert (critic.model, critic.temperature) == ("openai/gpt-4o-mini", 0.9)
    assert (writer.tools, writer.memory, writer.memory_count, writer.fallbacks) == (
        ("std.python",), "last", 6, ("openai/gpt-4o",))
    assert critic.memory == "none"
    assert writer.prompt == "You write for {{ audience }}."


def test_inputs_carry_annotations_and_defaults(compiled: tuple[ir.Machine, MachineSpec]) -> None:
    _, m = compiled
    got = [(i.name, i.annotation, i.required, i.default) for i in m.inputs]
    assert got == [
        ("topic", str, True, None),
        ("audience", str, False, "engineers"),
        ("tags", list[str], False, []),
        ("level", Literal["low", "high"], False, "low"),
        ("note", str | None, False, None),
    ]


def test_a_typed_output_is_a_pydantic_model_whose_schema_carries_the_field_docs(
    compiled: tuple[ir.Machine, MachineSpec],
) -> None:
    _, m = compiled
    review = m.states["review"]
    assert review.output is not None and not review.output_wrapped
    schema = review.output.model_json_schema()
    assert schema["title"] == "Critique"
    assert schema["properties"]["score"]["description"] == "0-100"
    assert schema["properties"]["fixes"]["description"] == "one per item"
    assert schema["properties"]["level"]["enum"] == ["low", "high"]
    assert set(schema["required"]) == {"score", "fixes", "level"}  # an optional field may be left out
    assert review.output.model_validate({"score": 1, "fixes": [], "level": "low"}).note is None


def test_a_non_object_output_is_wrapped_in_a_model_with_one_value_field(
    compiled: tuple[ir.Machine, MachineSpec],
) -> None:
    _, m = compiled
    lists = m.states["lists"]
    assert lists.output_wrapped and lists.output is not None
    assert list(lists.output.model_fields) == ["value"]
    assert lists.output.model_validate({"value": ["a", "b"]}).value == ["a", "b"]


def test_guards_are_interpreted_over_the_scope(compiled: tuple[ir.Machine, MachineSpec]) -> None:
    _, m = compiled
    critique = m.states["review"].output
    assert critique is not None
    guard = m.states["review"].transitions[0].guard
    assert guard is not None

    def scope(score: int) -> Scope:
        return Scope(critique.model_validate({"score": score, "fixes": [], "level": "low"}),
                     {"topic": "t"}, {}, {})

    assert guard(scope(90)) is True
    assert guard(scope(10)) is False
    status = m.states["fetch"].transitions[0].guard
    assert status is not None and status(Scope({"status": 200, "body": ""}, {}, {}, {})) is True


def test_an_action_states_arguments_are_built_from_the_scope(compiled: tuple[ir.Machine, MachineSpec]) -> None:
    _, m = compiled
    call = m.states["fetch"].call
    assert call is not None and call.tool == "std.http_get"
    assert call.args(Scope(None, {"topic": "fsm"}, {}, {})) == {"url": "https://example.com/fsm"}
    assert call.origin == "flows/review.fsm:51:9"


def test_test_blocks_become_test_specs_with_steps_in_source_order(
    compiled: tuple[ir.Machine, MachineSpec],
) -> None:
    _, m = compiled
    (test,) = m.tests
    assert test.name == "good draft publishes"
    assert test.inputs == {"topic": "FSMs"}
    assert test.steps == (
        ("reply", "draft", "A draft."),
        ("reply", "review", {"score": 90, "fixes": [], "level": "high"}),
        ("verdict", "review", None),
    )
    assert test.expect_path == ("draft", "review", "publish")
    assert (test.has_expect_result, test.expect_result) == (True, "A draft.")
    assert test.origin.startswith("flows/review.fsm:")


def test_a_machine_built_without_source_has_empty_origins() -> None:
    machine = ir.Machine(
        name="m", description="", inputs=(), model="x/y", verifier_model="x/y", temperature=None,
        limits=ir.Limits(), types=(), tools=(),
        agents=(ir.Agent("a", "p", model="x/y", temperature=None, tools=()),),
        states=(
            ir.State("s", "agent", agent="a", instruction="go",
                     transitions=(ir.Transition("always", "f"),)),
            ir.State("f", "final", final=True),
        ),
        start="s",
    )
    m = runtime_of(machine)
    assert m.states["s"].origin == "" and m.states["s"].transitions[0].origin == ""
    assert m.agents["a"].model == "x/y"  # as lowering filled it: code generation decides no default again


def test_a_type_named_like_a_runtime_class_keeps_its_schema_title() -> None:
    comp = check_text('''machine m {
        type Trace { steps: int }
        agent a { prompt "p" }
        start state s { agent a  do "go"  output Trace  -> f }
        final state f
    }''', "m.fsm")
    assert comp.ok, [d.message for d in comp.diagnostics]
    model = runtime_of(comp.ir).states["s"].output  # type: ignore[arg-type]
    assert model is not None
    assert model.__name__ != "Trace"  # the runner's own Trace class keeps its name
    assert model.model_json_schema()["title"] == "Trace"


def test_fields_that_cannot_be_python_attributes_keep_their_names_in_schema_and_guards() -> None:
    comp = check_text('''machine m {
        type Odd { class: str  json: str?  _x: int? }
        agent a { prompt "p" }
        start state s { agent a  do "go"  output Odd  when output.class == "c" and output._x == 1 -> f
                        otherwise -> f }
        final state f
    }''', "m.fsm")
    assert comp.ok, [d.message for d in comp.diagnostics]
    spec = runtime_of(comp.ir).states["s"]  # type: ignore[arg-type]
    assert spec.output is not None
    assert list(spec.output.model_json_schema()["properties"]) == ["class", "json", "_x"]
    value = spec.output.model_validate({"class": "c", "_x": 1})
    guard = spec.transitions[0].guard
    assert guard is not None and guard(Scope(value, {}, {}, {})) is True


def test_types_that_refer_to_each_other_in_a_cycle_still_build() -> None:
    # The checker rejects a type that contains itself; the model builder still copes with one.
    node = ir.TypeDef("Node", (ir.Field("name", ir.STR), ir.Field("children", ir.ListOf(ir.Named("Node")))))
    machine = ir.Machine(
        name="m", description="", inputs=(), model="x/y", verifier_model="x/y", temperature=None,
        limits=ir.Limits(), types=(node,), tools=(), agents=(ir.Agent("a", "p", model="", temperature=None, tools=()),),
        states=(ir.State("s", "agent", agent="a", instruction="go", output=ir.Named("Node"),
                         transitions=(ir.Transition("always", "f"),)), ir.State("f", "final", final=True)),
        start="s",
    )
    node_class: Any = runtime_of(machine).states["s"].output
    tree = node_class.model_validate({"name": "a", "children": [{"name": "b", "children": []}]})
    assert tree.children[0].name == "b"
