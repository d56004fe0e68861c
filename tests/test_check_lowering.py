"""Lowering to IR: defaults filled in, source order kept, origins kept as spans."""

from __future__ import annotations

from statewright.api import check_text
from statewright.compiler import ir


def lower(text: str) -> ir.Machine:
    compilation = check_text(text, "m.fsm")
    assert compilation.ir is not None, [d.message for d in compilation.diagnostics]
    assert isinstance(compilation.ir, ir.Machine)
    return compilation.ir


MINIMAL = """machine m {
    agent writer { prompt "You write." }
    start state draft { agent writer do "Write." -> done }
    final state done
}
"""


def test_a_machine_without_settings_gets_the_defaults() -> None:
    m = lower(MINIMAL)
    assert (m.model, m.verifier_model, m.temperature) == (ir.DEFAULT_MODEL, ir.DEFAULT_MODEL, None)
    assert m.limits == ir.Limits(steps=ir.DEFAULT_STEP_LIMIT)
    assert m.description == ""
    writer = m.agent("writer")
    assert (writer.model, writer.temperature, writer.memory, writer.memory_count) == (
        ir.DEFAULT_MODEL, None, ir.DEFAULT_MEMORY, None)
    assert m.state("draft").retries == ir.DEFAULT_RETRIES
    assert m.start == "draft"


def test_agents_inherit_the_machine_model_and_temperature_unless_they_set_their_own() -> None:
    m = lower(MINIMAL.replace("machine m {", 'machine m {\n    model "x/base"\n    temperature 0.3').replace(
        'agent writer { prompt "You write." }',
        'agent writer { prompt "You write." }\n    agent own { prompt "Mine." model "x/own" temperature 1.5 }'
    ).replace("do \"Write.\"", "do \"Write.\" tell [own]"))
    assert (m.agent("writer").model, m.agent("writer").temperature) == ("x/base", 0.3)
    assert (m.agent("own").model, m.agent("own").temperature) == ("x/own", 1.5)


def test_the_verifier_uses_the_machine_model_unless_it_has_its_own() -> None:
    assert lower(MINIMAL.replace("machine m {", 'machine m {\n    model "x/base"')).verifier_model == "x/base"
    both = MINIMAL.replace("machine m {", 'machine m {\n    model "x/base"\n    verifier model "x/judge"')
    assert lower(both).verifier_model == "x/judge"


def test_limits_take_the_given_values_and_keep_the_default_step_limit() -> None:
    m = lower(MINIMAL.replace("machine m {", "machine m {\n    limits { cost_usd 1  tokens 500 }"))
    assert m.limits == ir.Limits(steps=ir.DEFAULT_STEP_LIMIT, cost_usd=1.0, tokens=500, seconds=None)
    assert isinstance(m.limits.cost_usd, float)


def test_stay_targets_its_own_state_and_transitions_keep_source_order() -> None:
    m = lower("""machine m {
    type Check { ok: bool }
    agent writer { prompt "You write." }
    start state draft {
        agent writer
        do "Write."
        output Check
        when output.ok -> done
        when "it is unfinished" -> done max 2
        otherwise stay max 3
    }
    final state done
}
""")
    kinds = [(t.kind, t.target, t.max) for t in m.state("draft").transitions]
    assert kinds == [("guard", "done", None), ("condition", "done", 2), ("stay", "draft", 3)]
    assert m.state("draft").transitions[1].condition == "it is unfinished"
    assert m.state("draft").output == ir.Named("Check")


def test_tools_keep_declaration_order_with_sorted_options_and_implicit_std_tools_last() -> None:
    m = lower("""machine m {
    tool std.http_get { timeout 5  allow ["example.com"] }
    tool lookup = "pkg.tools:lookup"
    agent writer { prompt "You write." tools [std.read_file, lookup, std.http_get] }
    start state draft { agent writer do "Write." -> run }
    state run { call std.python(code = "print(1)") -> done }
    final state done
}
""")
    assert [(t.name, t.import_path, t.options) for t in m.tools] == [
        ("std.http_get", None, (("allow", ["example.com"]), ("timeout", 5))),
        ("lookup", "pkg.tools:lookup", ()),
        ("std.read_file", None, ()),
        ("std.python", None, ()),
    ]
    run = m.state("run")
    assert run.kind == "action" and run.call is not None and run.call.tool == "std.python"
    assert [a.name for a in run.call.args] == ["code"]


def test_inputs_keep_defaults_and_optional_inputs_default_to_none() -> None:
    m = lower(MINIMAL.replace("machine m {", 'machine m {\n    input topic: str\n    input n: int = 2\n'
                                              '    input tags: list[str]?').replace(
        '"Write."', '"Write {{ topic }} {{ n }} {{ tags }}."'))
    assert [(i.name, i.type, i.default, i.has_default) for i in m.inputs] == [
        ("topic", ir.STR, None, False),
        ("n", ir.INT, 2, True),
        ("tags", ir.Optional_(ir.ListOf(ir.STR)), None, True),
    ]


def test_state_kinds_and_origins_point_at_the_source() -> None:
    m = lower(MINIMAL)
    draft, done = m.states
    assert (draft.kind, done.kind) == ("agent", "final")
    assert draft.origin is not None and draft.origin.text.startswith("start state draft")
    assert draft.shares is None  # only the merge pass marks a state as sharing another's work
    assert draft.transitions[0].origin is not None and draft.transitions[0].origin.text == "-> done"


def test_tests_lower_with_their_steps_in_source_order() -> None:
    m = lower("""machine m {
    input topic: str
    agent writer { prompt "You write." }
    start state draft {
        agent writer
        do "Write {{ topic }}."
        when "it is good" -> done
        otherwise -> done
    }
    final state done
    test "works" {
        input { topic "x" }
        reply draft "A."
        verdict draft "it is good"
        reply draft "B."
        verdict draft none
        expect path [draft, done]
        expect result "A."
    }
}
""")
    (test,) = m.tests
    assert test.inputs == (("topic", "x"),)
    assert [(type(s).__name__, s.state) for s in test.steps] == [
        ("Reply", "draft"), ("Verdict", "draft"), ("Reply", "draft"), ("Verdict", "draft")]
    assert test.steps[3] == ir.Verdict("draft", None)
    assert (test.expect_path, test.expect_result, test.has_expect_result) == (("draft", "done"), "A.", True)


def test_layout_does_not_change_the_ir() -> None:
    spread = MINIMAL.replace('{ agent writer do "Write." -> done }',
                             '{\n        agent writer\n\n        do "Write."\n        -> done   # go\n    }')
    assert lower(spread) == lower(MINIMAL)


def test_a_machine_with_errors_has_no_ir() -> None:
    compilation = check_text(MINIMAL.replace("-> done", "-> dnoe"), "m.fsm")
    assert compilation.ir is None
    assert [d.code for d in compilation.diagnostics if d.severity.value == "error"] == ["SW2002"]
