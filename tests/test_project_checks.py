"""The checks of machines that run machines: imported declarations, `run` arguments, the call's outcome in
guards and templates, `returns`, machines that run themselves, test steps by path, and what the passes may
do with calls. (Each code's golden case is under tests/cases/check; these go after the corners.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from statewright import api
from statewright.compiler import ir
from statewright.compiler.passes import run_passes

COMMON = """\
machine common {
    input audience: str = "engineers"

    type Fix {
        text: str
    }

    type Critique {
        score: int in 0..100
        fixes: list[Fix]
    }

    tool std.http_get {
        allow ["example.com"]
    }

    agent editor {
        prompt "You edit for {{ audience }}."
        tools [std.http_get]
    }

    start state review {
        agent editor
        do "Review."
        output Critique
        -> done
    }

    final state done
}
"""

TEAM = """\
use "common.fsm" { Critique }

machine research {
    input topic: str
    input depth: int = 1
    returns Critique

    agent researcher {
        prompt "You research."
    }

    start state draft {
        agent researcher
        do "Research {{ topic }}."
        output Critique
        when output.score < 10 -> thin
        -> done
    }

    final state done
    final state thin {
        fail "too thin"
    }
}
"""


def project(tmp_path: Path, lead: str, **files: str) -> api.Compilation:
    for name, text in {"common.fsm": COMMON, "team.fsm": TEAM, **files}.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    (tmp_path / "lead.fsm").write_text(lead, encoding="utf-8")
    return api.check_path(tmp_path / "lead.fsm")


def lead(body: str, uses: str = 'use "team.fsm"\n', settings: str = "", tests: str = "") -> str:
    return f"""{uses}
machine lead {{
    input topics: list[str]
    input audience: str = "engineers"
{settings}
{body}

    final state done
    final state failed {{
        fail "a call failed"
    }}
{tests}}}
"""


def codes(comp: api.Compilation) -> list[tuple[str, str]]:
    """The code and the text of each error."""
    return [(d.code, d.span.text if d.span is not None else "") for d in comp.diagnostics
            if d.severity.value == "error"]


# ---- the outcome, typed ----------------------------------------------------------------------------------


def test_guards_read_every_field_of_the_outcome_with_its_type(tmp_path: Path) -> None:
    body = """
    start state investigate {
        run research(topic = "x")
        when output.ok and output.final == "done" and output.result != none and output.result.score > 50 -> done
        when output.failure != none and output.failure.kind == "final" and output.failure.state == "draft" -> failed
        when output.result != none and len(output.result.fixes) > 0 and output.result.fixes[0].text == "" -> failed
        otherwise -> failed
    }"""
    comp = project(tmp_path, lead(body))
    assert comp.ok, codes(comp)


@pytest.mark.parametrize(("guard", "code", "text"), [
    ('output.final == "dne"', "SW4001", '"dne"'),
    ("output.resul != none", "SW2006", "resul"),
    ("output.result.score > 1", "SW4014", "output.result.score"),
    ("output.result != none and output.result.scor > 1", "SW2006", "scor"),
    ('output.result != none and output.result.score == "high"', "SW4001", 'output.result.score == "high"'),
    ("output.failure != none and output.failure.kinds == 1", "SW2006", "kinds"),
    ("output.ok > 1", "SW4001", "output.ok > 1"),
    ("output", "SW4004", "output"),
])
def test_guards_that_misread_the_outcome_are_reported(tmp_path: Path, guard: str, code: str, text: str) -> None:
    body = f"""
    start state investigate {{
        run research(topic = "x")
        when {guard} -> done
        otherwise -> failed
    }}"""
    comp = project(tmp_path, lead(body))
    assert (code, text) in codes(comp), codes(comp)


def test_a_map_of_calls_gives_the_list_of_outcomes_and_its_arguments_see_the_element(tmp_path: Path) -> None:
    body = """
    start state investigate {
        for i, topic in topics max 4 concurrency 2
        run research(topic = topic, depth = i + 1)
        when all(o.ok for o in output) and count(o.result != none for o in output) == len(output) -> done
        when output[0].final == "thin" -> failed
        otherwise -> failed
    }"""
    assert project(tmp_path, lead(body)).ok
    wrong = body.replace("when output[0].final", "when output.final")
    assert ("SW4012", "final") in codes(project(tmp_path, lead(wrong)))


def test_arguments_read_what_the_transitions_into_the_state_show(tmp_path: Path) -> None:
    """A run state entered only when a variant was tested (or a value was not none) reads it as that, in its
    arguments as in a tool call's: an orchestrator's typed hand-off passes the request it names."""
    body = """
    type Research {
        topic: str
    }

    type Answer {
        text: str
    }

    agent lead {
        prompt "You lead."
    }

    start state route {
        agent lead
        do "Choose."
        output Research | Answer
        when output is Research -> investigate max 2
        when output is Answer -> done
    }

    state investigate {
        run research(topic = route.output.topic)
        -> route
    }"""
    tests = """
    test "the topic the lead names is researched" {
        input {
            topics []
        }
        reply route Research { topic "FSMs" }
        reply investigate/draft { score 90, fixes [] }
        reply route Answer { text "Done." }
        expect path [route, investigate, route, done]
        expect output investigate { ok true, final "done" }
    }
"""
    comp = project(tmp_path, lead(body, tests=tests))
    assert comp.ok, codes(comp)
    assert [r.messages for r in api.run_tests(comp) if not r.passed] == []
    unproven = body.replace("when output is Research -> investigate max 2", "-> investigate max 2")
    assert ("SW4031", "topic") in codes(project(tmp_path, lead(unproven)))


def test_templates_read_the_outcome_with_its_types(tmp_path: Path) -> None:
    body = """
    agent writer {
        prompt "You write."
    }

    start state investigate {
        run research(topic = "x")
        -> write
    }

    state write {
        agent writer
        do "{% if investigate.output.result %}{{ investigate.output.result.score }}{% endif %} {{ investigate.output.final }}"
        -> done
    }"""
    assert project(tmp_path, lead(body)).ok
    wrong = body.replace("result.score }}", "result.scores }}")
    assert ("SW2006", "scores") in codes(project(tmp_path, lead(wrong)))


def test_a_machine_without_returns_gives_text_or_an_untyped_result(tmp_path: Path) -> None:
    text_team = TEAM.replace("    returns Critique\n", "").replace("    final state done\n",
                                                                     '    final state done {\n        result "ok"\n    }\n')
    untyped_team = TEAM.replace("    returns Critique\n", "")
    body = """
    start state investigate {
        run research(topic = "x")
        when output.result != none and output.result.score > 1 -> done
        otherwise -> failed
    }"""
    text = project(tmp_path, lead(body), **{"team.fsm": text_team})
    assert ("SW4012", "score") in codes(text)  # text has no fields
    untyped = project(tmp_path, lead(body), **{"team.fsm": untyped_team})
    assert [c for c, _ in codes(untyped)] == ["SW4105"]
    whole = body.replace("output.result != none and output.result.score > 1", 'output.result == "x"')
    assert project(tmp_path, lead(whole), **{"team.fsm": untyped_team}).ok  # a whole untyped result: fine


def test_a_type_reached_through_two_files_is_one_type(tmp_path: Path) -> None:
    """research returns common's Critique; writer takes a Critique imported from common too: the outcome's
    result is passed to it, and the lead's own import of Critique is the same type again."""
    writer = """\
use "common.fsm" { Critique }

machine writer {
    input critique: Critique

    agent w {
        prompt "You write."
    }

    start state write {
        agent w
        do "Apply {{ critique.fixes }}."
        -> done
    }

    final state done
}
"""
    body = """
    start state investigate {
        run research(topic = "x")
        when output.result != none -> write
        otherwise -> failed
    }

    state write {
        run writer(critique = investigate.output.result)
        -> done
    }"""
    uses = 'use "team.fsm"\nuse "writer.fsm"\nuse "common.fsm" { Critique }\n'
    comp = project(tmp_path, lead(body, uses, settings="    returns Critique"), **{"writer.fsm": writer})
    # the result was tested for none on the way into write, so the argument is a Critique; done gives the
    # outcome of write, not a Critique
    assert [c for c, _ in codes(comp)] == ["SW4104"], codes(comp)
    # a type of the same name declared here is another type
    mine = lead(body.replace("run writer(critique = investigate.output.result)", "run writer(critique = own.output)")
                .replace("when output.result != none -> write", "when output.result != none -> own"),
                'use "team.fsm"\nuse "writer.fsm"\n', settings="    type Critique { score: int  fixes: list[str] }\n\n"
                "    agent a {\n        prompt \"p\"\n    }\n\n    state own {\n        agent a\n        do \"x\"\n"
                "        output Critique\n        -> write\n    }")
    other = project(tmp_path, mine, **{"writer.fsm": writer})
    [d] = [d for d in other.diagnostics if d.code == "SW4102"]
    assert d.message == "input 'critique' of 'writer' is common.Critique, not Critique"  # named by its home


# ---- imports ---------------------------------------------------------------------------------------------


def test_an_imported_type_brings_its_field_types_and_an_agent_its_tools(tmp_path: Path) -> None:
    body = """
    start state review {
        agent editor
        do "Review {{ topics }}."
        output Critique
        when output.fixes != [] and output.fixes[0].text == "" -> failed
        -> done
    }"""
    comp = project(tmp_path, lead(body, 'use "common.fsm" { Critique, editor }\n'))
    assert comp.ok, codes(comp)
    assert comp.ir is not None
    assert [t.name for t in comp.ir.types] == ["Critique", "Fix"]
    assert [t.name for t in comp.ir.tools] == ["std.http_get"]
    assert dict(comp.ir.tool("std.http_get").options) == {"allow": ["example.com"]}
    # the imported agent runs with this machine's inputs: its prompt reads `audience`, which must be here
    missing = project(tmp_path, lead(body, 'use "common.fsm" { Critique, editor }\n').replace(
        '    input audience: str = "engineers"\n', ""))
    [d] = missing.diagnostics
    assert d.code == "SW2008" and d.span is not None and d.span.text == "editor"
    assert d.message.startswith("in the imported agent 'editor': ") and "common.fsm:" in d.notes[-1]


def test_imported_names_that_clash_are_reported_at_the_import(tmp_path: Path) -> None:
    body = """
    type Fix { note: str }

    start state review {
        agent editor
        do "Review."
        output Fix
        -> done
    }"""
    comp = project(tmp_path, lead(body, 'use "common.fsm" { Critique, editor }\n'))
    [d] = [d for d in comp.diagnostics if d.code == "SW2105"]
    assert d.span is not None and d.span.text == "Critique"
    assert d.message == "'Critique' uses the type 'Fix': type 'Fix' is declared twice"


def test_the_same_file_used_for_its_machine_and_its_declarations_is_fine(tmp_path: Path) -> None:
    body = """
    start state investigate {
        run research(topic = "x")
        when output.result != none -> done
        otherwise -> failed
    }"""
    uses = 'use "team.fsm"\nuse "team.fsm" as team_again { }\n'
    comp = project(tmp_path, lead(body, uses))
    assert [c for c, _ in codes(comp)] == [], codes(comp)


def test_files_that_only_share_declarations_in_a_cycle_are_files_not_machines(tmp_path: Path) -> None:
    a = 'use "b.fsm" { B }\nmachine a {\n    type A { b: B }\n    start state s { -> done }\n    final state done\n}\n'
    b = 'use "a.fsm"\nmachine b {\n    type B { x: int }\n    start state s { run a() -> done }\n    final state done\n}\n'
    (tmp_path / "a.fsm").write_text(a, encoding="utf-8")
    (tmp_path / "b.fsm").write_text(b, encoding="utf-8")
    found = {Path(c.source.path).name: [d.code for d in c.diagnostics]
             for c in api.check_files([str(tmp_path / "a.fsm")]) if c.source is not None}
    assert found["a.fsm"][0] == "SW2103" and found["b.fsm"][0] == "SW2103"  # a only imports from b


# ---- run states and returns --------------------------------------------------------------------------------


@pytest.mark.parametrize(("item", "code"), [
    ('ask "ok?"', "SW3101"), ("output str", "SW3101"), ("retries 3", "SW3101"), ('call std.python(code = "1")',
                                                                                   "SW3101"),
])
def test_a_run_state_does_no_other_work(tmp_path: Path, item: str, code: str) -> None:
    body = f"""
    start state investigate {{
        run research(topic = "x")
        {item}
        -> done
    }}"""
    assert code in [c for c, _ in codes(project(tmp_path, lead(body)))]


def test_a_run_state_may_tell_listeners_bound_its_visits_and_run_in_a_branch(tmp_path: Path) -> None:
    body = """
    agent writer {
        prompt "You write."
    }

    start state both {
        parallel [left, right]
        join all
        -> write
    }

    branch state left {
        run research(topic = "left")
        tell [writer]
    }

    branch state right {
        run research(topic = "right")
        visits 1
    }

    state write {
        agent writer
        do "Write it up."
        when both.output[0].ok -> done
        otherwise -> failed
    }"""
    comp = project(tmp_path, lead(body))
    assert comp.ok, codes(comp)


def test_a_call_inside_a_loop_is_bounded_by_the_loop(tmp_path: Path) -> None:
    body = """
    start state investigate {
        run research(topic = "x")
        when output.ok -> done
        -> investigate
    }"""
    assert ("SW3008", "") in [(c, "") for c, _ in codes(project(tmp_path, lead(body)))]
    assert project(tmp_path, lead(body.replace("-> investigate", "-> investigate max 2"))).ok


@pytest.mark.parametrize(("returns", "final", "ok"), [
    ("str", 'final state done { result "x" }', True),
    ("Critique", "final state done", True),  # the last output: write's, a Critique
    ("Critique?", "final state done", True),
    ("list[str]", "final state done", False),
    ("int", 'final state done { result "1" }', False),
])
def test_returns_is_held_to_each_final_state_that_succeeds(tmp_path: Path, returns: str, final: str,
                                                           ok: bool) -> None:
    text = f"""use "common.fsm" {{ Critique, editor }}

machine lead {{
    input audience: str = "engineers"
    returns {returns}

    start state write {{
        agent editor
        do "Write."
        output Critique
        -> done
    }}

    {final}
    final state failed {{
        fail "not reached"
    }}
}}
"""
    (tmp_path / "common.fsm").write_text(COMMON, encoding="utf-8")
    comp = api.check_text(text, str(tmp_path / "lead.fsm"))
    assert [c for c, _ in codes(comp) if c == "SW4104"] == ([] if ok else ["SW4104"]), codes(comp)


# ---- test steps by path ------------------------------------------------------------------------------------


def test_test_steps_by_path_are_checked_against_the_called_machines_states(tmp_path: Path) -> None:
    nested = """\
use "team.fsm"

machine middle {
    start state inner {
        run research(topic = "x")
        -> done
    }

    final state done
}
"""
    body = """
    start state outer {
        for topic in topics max 2
        run middle()
        -> done
    }"""
    tests = """
    test "t" {
        input { topics ["a"] }
        reply outer[0]/inner/draft { score 5  fixes [] }
        reply outer[1]/inner/draft { score "high"  fixes [] }
        reply outer[0]/inner/drat "x"
        reply outer[0]/inner[0]/draft "x"
        verdict outer[0]/inner/draft "anything"
        timeout outer[0]/inner/draft
        expect final done
        expect output outer [{ ok true  final "done" }]
    }
"""
    comp = project(tmp_path, lead(body, 'use "middle.fsm"\n', tests=tests), **{"middle.fsm": nested})
    assert codes(comp) == [
        ("SW6002", '"high"'), ("SW6101", "drat"), ("SW6102", "inner[0]"), ("SW6005", "outer[0]/inner/draft"),
        ("SW6008", "outer[0]/inner/draft"),
    ]


def test_expect_output_of_a_run_state_is_its_outcome(tmp_path: Path) -> None:
    body = """
    start state investigate {
        run research(topic = "x")
        -> done
    }"""
    tests = """
    test "t" {
        input { topics [] }
        reply investigate/draft { score 50  fixes [] }
        expect output investigate { ok true  final "done"  result { score 50 } }
        expect output investigate { okay true }
        expect final done
    }
"""
    comp = project(tmp_path, lead(body, tests=tests))
    assert codes(comp) == [("SW6040", "okay")]


# ---- the passes ----------------------------------------------------------------------------------------------


def test_the_passes_keep_calls_of_different_machines_or_arguments_apart(tmp_path: Path) -> None:
    other = TEAM.replace("machine research", "machine other")
    body = """
    start state a {
        run research(topic = "x")
        -> b
    }

    state b {
        run research(topic = "x")
        -> c
    }

    state c {
        run research(topic = "y")
        -> d
    }

    state d {
        run other(topic = "x")
        -> done
    }"""
    comp = project(tmp_path, lead(body, 'use "team.fsm"\nuse "other.fsm"\n'), **{"other.fsm": other})
    assert comp.ok and comp.ir is not None, codes(comp)
    optimized = run_passes(comp.ir)
    shares = {s.name: s.shares for s in optimized.states}
    # b does what a does (the same machine, the same arguments, the same way out: into equivalent states)
    # only when its successor is equivalent too; c and d never share with them
    assert shares["c"] is None and shares["d"] is None
    assert shares["a"] is None
    assert all(s.run is not None for s in optimized.states if s.name in "abcd")
    assert [name for name, _ in optimized.machines] == ["research", "other"]


def test_equivalent_calls_share_their_argument_builder_and_keep_their_names(tmp_path: Path) -> None:
    body = """
    start state first {
        run research(topic = "x")
        when output.ok -> done
        otherwise -> failed
    }

    state second {
        run research(topic = "x")
        when output.ok -> done
        otherwise -> failed
    }"""
    comp = project(tmp_path, lead(body).replace("-> done\n        otherwise -> failed\n    }\n\n    state second",
                                                "-> second\n        otherwise -> failed\n    }\n\n    state second"))
    assert comp.ir is not None
    optimized = run_passes(comp.ir)
    assert {s.name: s.shares for s in optimized.states}["second"] is None  # first leads to second: not equal
    same = project(tmp_path, lead(body.replace("start state first", "start state pick {\n        run research("
                                                                    'topic = "z")\n        when output.ok -> first\n'
                                                                    "        otherwise -> second\n    }\n\n    "
                                                                    "state first")))
    assert same.ir is not None
    merged = run_passes(same.ir)
    assert {s.name: s.shares for s in merged.states}["second"] == "first"
    assert merged.state("second").run == merged.state("first").run


def test_removing_a_dead_run_state_drops_its_machine_and_its_test_steps(tmp_path: Path) -> None:
    body = """
    start state investigate {
        run research(topic = "x")
        -> done
    }

    state never {
        run research(topic = "y")
        -> done
    }"""
    other = TEAM.replace("machine research", "machine other")
    text = lead(body.replace("state never {\n        run research", "state never {\n        run other"),
                'use "team.fsm"\nuse "other.fsm"\n',
                tests='\n    test "t" {\n        input { topics [] }\n        reply investigate/draft { score 50  '
                      'fixes [] }\n        reply never/draft { score 50  fixes [] }\n        allow unused replies\n'
                      "        expect final done\n    }\n")
    comp = project(tmp_path, text, **{"other.fsm": other})
    assert comp.ir is not None, codes(comp)
    optimized = run_passes(comp.ir)
    assert [name for name, _ in optimized.machines] == ["research"]
    assert [step.state for step in optimized.tests[0].steps] == ["investigate/draft"]
    assert isinstance(optimized.machine("research"), ir.Machine)
