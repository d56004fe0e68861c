"""Source-level rewrites: merges and removals edit the text a person reviews, and the result still checks."""

from __future__ import annotations

import dataclasses
import re

import pytest
from hypothesis import HealthCheck, assume, given, settings

from statewright import api
from statewright.compiler import ir
from statewright.compiler.passes import run_passes
from statewright.compiler.passes.merge_equivalent import equivalence_classes
from statewright.designer.source_edit import (
    SourceEditError,
    _keep_declared,
    apply_exact_passes_to_source,
    merge_state_into,
    remove_states,
    replace_equivalent_states,
    what_a_run_sees,
)
from tests.test_passes import chain_with_duplicates, machines_with_duplicates

REVIEW = """# review.fsm — kept comments matter
machine review {
    input topic: str

    type Verdict {
        score: int
        fixes: list[str]
    }

    agent writer {
        prompt "You write about {{ topic }}."
    }

    agent critic {
        prompt "You review."
    }

    agent editor {
        prompt "You edit."
    }

    start state draft {
        agent writer
        do "Write about {{ topic }}."
        tell [critic]
        -> review
    }

    state review {
        agent critic
        do "Score the draft: {{ draft.output }}"
        output Verdict
        when output.score >= 80 -> publish
        when "the draft cites no sources" -> draft max 1
        -> polish
    }

    # polish is the second pass over the text
    state polish {
        agent critic
        do "Check the style of the draft."
        tell [editor]
        visits 2
        when visits(draft) > 1 -> failed
        when "the style is fine" -> publish
        otherwise -> failed
    }

    final state publish {
        result "{{ polish.output or draft.output }}"
    }

    final state failed

    test "a good draft publishes" {
        input {
            topic "FSMs"
        }
        reply draft "A draft."
        reply review {
            score 90
            fixes []
        }
        expect path [draft, review, publish]
        expect result "A draft."
    }

    test "a weak draft is polished" {
        input {
            topic "FSMs"
        }
        reply draft "A draft."
        reply review {
            score 10
            fixes ["more"]
        }
        verdict review none
        reply polish "Polished."
        verdict polish "the style is fine"
        expect path [draft, review, polish, publish]
        expect result "Polished."
    }
}
"""


def check_ok(text: str) -> api.Compilation:
    comp = api.check_text(text, "m.fsm")
    assert comp.ok, [f"{d.code} {d.message}" for d in comp.diagnostics]
    return comp


def passing_tests(comp: api.Compilation) -> list[str]:
    return [o.name for o in api.run_tests(comp) if o.passed]  # type: ignore[attr-defined]


def condition_texts(text: str, state: str) -> list[str]:
    """The guard and condition texts of one state's transitions, as written."""
    comp = api.parse_text(text, "m.fsm")
    decl = next(s for s in comp.machine.items if getattr(getattr(s, "name", None), "value", None) == state
                and hasattr(s, "transitions"))
    out = []
    for t in decl.transitions:
        if t.guard is not None:
            out.append(text[t.guard.span.start : t.guard.span.end])
        if t.condition is not None:
            out.append(text[t.condition.span.start : t.condition.span.end])
    return out


# ---- merging -------------------------------------------------------------------------------------


def test_the_example_checks_and_its_tests_pass() -> None:
    comp = check_ok(REVIEW)
    assert passing_tests(comp) == ["a good draft publishes", "a weak draft is polished"]


def test_merging_redirects_every_reference_and_keeps_every_distinct_condition() -> None:
    merged = merge_state_into(REVIEW, "review", "polish", "m.fsm")
    comp = check_ok(merged)
    assert [line for line in merged.splitlines() if re.search(r"\bpolish\b", line)] == [
        "    # polish is the second pass over the text"]  # comments stay as written
    # polish's guard and condition take the place of review's hand-over to it
    assert [(t.kind, t.target) for t in comp.ir.state("review").transitions] == [
        ("guard", "publish"), ("condition", "draft"), ("guard", "failed"), ("condition", "publish"),
        ("otherwise", "failed"),
    ]
    for text in condition_texts(REVIEW, "polish"):
        assert text in merged
    # the result template and the test blocks follow the rename
    assert 'result "{{ review.output or draft.output }}"' in merged
    assert "expect path [draft, review, review, publish]" in merged
    assert "# review.fsm — kept comments matter" in merged


def test_a_catch_all_into_the_dropped_state_is_replaced_by_its_transitions_not_a_loop() -> None:
    merged = merge_state_into(REVIEW, "review", "polish", "m.fsm")
    review = check_ok(merged).ir.state("review")
    assert all(t.target != "review" for t in review.transitions)


def test_a_dropped_catch_all_is_not_added_where_the_kept_state_has_one() -> None:
    # not a hand-over: draft and polish are only alike; draft keeps its own catch-all
    text = REVIEW.replace("        tell [critic]\n        -> review\n",
                          '        tell [critic]\n        when "the draft is empty" -> failed\n'
                          "        -> review\n")
    check_ok(text)
    merged = merge_state_into(text, "draft", "polish", "m.fsm")
    draft = check_ok(merged).ir.state("draft")
    assert [(t.kind, t.target) for t in draft.transitions] == [
        ("condition", "failed"), ("guard", "failed"), ("condition", "publish"), ("always", "review"),
    ]


def test_the_kept_state_gains_the_dropped_states_bound_and_listeners() -> None:
    merged = merge_state_into(REVIEW, "review", "polish", "m.fsm")
    review = check_ok(merged).ir.state("review")
    assert review.visits == 2
    assert review.tell == ("editor",)


def test_listeners_are_joined_not_replaced() -> None:
    text = REVIEW.replace("        output Verdict\n", "        output Verdict\n        tell [writer]\n")
    merged = merge_state_into(text, "review", "polish", "m.fsm")
    assert check_ok(merged).ir.state("review").tell == ("writer", "editor")


def test_a_pure_hand_over_becomes_one_step_and_its_tests_still_pass() -> None:
    text = """machine m {
    agent a {
        prompt "You work."
    }

    start state gather {
        agent a
        do "Gather the facts."
        -> summarise
    }

    state summarise {
        agent a
        do "Summarise {{ gather.output }}."
        when "the summary is complete" -> done
        otherwise -> failed
    }

    final state done {
        result "{{ summarise.output }}"
    }

    final state failed

    test "facts are summarised" {
        reply gather "facts"
        reply summarise "summary"
        verdict summarise "the summary is complete"
        expect path [gather, summarise, done]
        expect result "summary"
    }
}
"""
    assert passing_tests(check_ok(text)) == ["facts are summarised"]
    merged = merge_state_into(text, "gather", "summarise", "m.fsm")
    comp = check_ok(merged)
    assert [(t.kind, t.target) for t in comp.ir.state("gather").transitions] == [
        ("condition", "done"), ("otherwise", "failed")]
    assert "expect path [gather, done]" in merged
    assert 'reply gather "summary"' in merged and 'reply gather "facts"' not in merged
    assert passing_tests(comp) == ["facts are summarised"]


def test_guards_that_name_the_dropped_state_are_renamed_inside_moved_transitions() -> None:
    text = REVIEW.replace('when visits(draft) > 1 -> failed', "when visits(polish) > 1 -> failed")
    check_ok(text)
    merged = merge_state_into(text, "review", "polish", "m.fsm")
    check_ok(merged)
    assert "visits(review) > 1 -> failed" in merged


@pytest.mark.parametrize(
    ("keep", "drop", "message"),
    [
        ("draft", "publish", "start state is never merged with a final"),
        ("review", "failed", "final state can only be merged with another final"),
        ("review", "draft", "start state"),
        ("review", "review", "itself"),
        ("review", "nowhere", "no state named 'nowhere'"),
        # review moves on to draft only under a condition: merged, that edge would loop
        ("draft", "review", "leads back"),
    ],
)
def test_merges_that_are_not_allowed_are_refused_with_a_reason(keep: str, drop: str, message: str) -> None:
    with pytest.raises(SourceEditError, match=message):
        merge_state_into(REVIEW, keep, drop, "m.fsm")


def test_a_conditional_edge_into_the_dropped_state_refuses_the_merge() -> None:
    text = REVIEW.replace("        -> polish\n",
                          '        when "the style is off" -> polish\n        -> failed\n')
    check_ok(text)
    with pytest.raises(SourceEditError, match="only under a condition"):
        merge_state_into(text, "review", "polish", "m.fsm")


def test_two_final_states_can_be_merged() -> None:
    merged = merge_state_into(REVIEW, "publish", "failed", "m.fsm")
    comp = check_ok(merged)
    assert {s.name for s in comp.ir.states if s.kind == "final"} == {"publish"}


def test_source_with_syntax_errors_is_refused() -> None:
    with pytest.raises(SourceEditError, match="syntax"):
        merge_state_into("machine m {", "a", "b")


# ---- removal and exact passes --------------------------------------------------------------------


def test_removing_a_state_removes_its_declaration_and_test_lines() -> None:
    text = REVIEW.replace("    final state failed\n", """    final state failed

    state orphan {
        agent critic
        do "Never runs."
        -> failed
    }
""").replace('        reply draft "A draft."\n        reply review {\n            score 90',
             '        reply draft "A draft."\n        reply orphan "x"\n'
             "        reply review {\n            score 90")
    check_ok(text)
    out = remove_states(text, ["orphan"], "m.fsm")
    assert "orphan" not in out
    assert api.format_text(out).text == api.format_text(REVIEW).text


def test_replacing_equivalent_states_redirects_references_and_deletes_the_copies() -> None:
    text = chain_with_duplicates(2)
    out = replace_equivalent_states(text, {"review1": "review0", "review2": "review0"}, "m.fsm")
    comp = check_ok(out)
    assert [s.name for s in comp.ir.states] == ["draft", "review0", "done", "failed"]
    with pytest.raises(SourceEditError, match="representative"):
        replace_equivalent_states(text, {"review1": "review0", "review0": "review2"}, "m.fsm")


def test_exact_passes_in_source_remove_dead_states_and_merge_duplicates() -> None:
    text = chain_with_duplicates(3).replace("    final state done", """    state orphan {
        agent critic
        do "Never runs."
        -> done
    }

    final state done""")
    out, notes = apply_exact_passes_to_source(text, "m.fsm")
    comp = check_ok(out)
    assert [s.name for s in comp.ir.states] == ["draft", "review0", "done", "failed"]
    assert notes == ["removed unreachable state(s): orphan",
                     "merged state(s) 'review1', 'review2', 'review3' into the equivalent state 'review0'"]


def test_exact_passes_leave_a_machine_with_nothing_to_do_byte_identical() -> None:
    assert apply_exact_passes_to_source(REVIEW, "m.fsm") == (REVIEW, [])


def test_exact_passes_leave_a_machine_with_errors_alone() -> None:
    broken = REVIEW.replace("-> publish\n", "-> pubish\n", 1)
    assert apply_exact_passes_to_source(broken, "m.fsm") == (broken, [])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(machines_with_duplicates())
def test_the_source_rewrite_is_the_ir_passes_written_back(text: str) -> None:
    comp = api.check_text(text, "m.fsm")
    assume(comp.ok)
    out, _ = apply_exact_passes_to_source(text, "m.fsm")
    rewritten = check_ok(out)
    assert rewritten.ir == _delete_merged_states(run_passes(comp.ir, disabled=["merge-equivalent"]))


def _delete_merged_states(machine: ir.Machine) -> ir.Machine:
    """The oracle, on the IR: each class of equivalent states that may lose their declaration becomes its
    first state, every edge to a deleted state leads to that one, and test blocks name it instead."""
    classes = equivalence_classes(machine, keep_apart=_keep_declared(machine), apart_by=what_a_run_sees)
    gone = {member: rep for rep, members in classes.items() for member in members if member != rep}

    def to(name: str) -> str:
        return gone.get(name, name)

    states = tuple(
        dataclasses.replace(s, transitions=tuple(dataclasses.replace(t, target=to(t.target))
                                                 for t in s.transitions))
        for s in machine.states if s.name not in gone
    )
    tests = tuple(
        dataclasses.replace(
            test,
            steps=tuple(dataclasses.replace(step, state=to(step.state)) for step in test.steps),
            expect_path=tuple(map(to, test.expect_path)) if test.expect_path is not None else None,
            expect_final=to(test.expect_final) if test.expect_final is not None else None,
        )
        for test in machine.tests
    )
    return dataclasses.replace(machine, states=states, tests=tests)


def test_a_source_rewrite_keeps_final_bounded_read_and_looping_states() -> None:
    text = """machine m {
    agent a {
        prompt "A."
    }

    start state s0 {
        agent a
        do "Plan."
        when "x" in output -> s1
        when "y" in output -> s2
        otherwise -> s3
    }

    state s1 {
        agent a
        do "Go."
        -> done
    }

    state s2 {
        agent a
        do "Go."
        -> done
    }

    state s3 {
        agent a
        do "Go."
        -> failed
    }

    final state done

    final state failed
}
"""
    comp = check_ok(text)
    optimized = run_passes(comp.ir)
    assert {s.name: s.shares for s in optimized.states}["failed"] == "done"  # the IR shares their (no) work
    out, notes = apply_exact_passes_to_source(text, "m.fsm")
    # the source keeps both finals — their names are the outcome — and so s3, which leads to the other one
    assert [s.name for s in check_ok(out).ir.states] == ["s0", "s1", "s3", "done", "failed"]
    assert notes == ["merged state(s) 's2' into the equivalent state 's1'"]


def test_a_hand_over_merge_takes_the_dropped_states_output_type() -> None:
    text = """machine m {
    type Summary {
        complete: bool
        text: str
    }

    agent a {
        prompt "You work."
    }

    start state gather {
        agent a
        do "Gather the facts."
        -> summarise
    }

    state summarise {
        agent a
        do "Summarise {{ gather.output }}."
        output Summary
        when output.complete -> done
        otherwise -> failed
    }

    final state done {
        result "{{ summarise.output.text }}"
    }

    final state failed

    test "facts are summarised" {
        reply gather "facts"
        reply summarise {
            complete true
            text "summary"
        }
        expect path [gather, summarise, done]
        expect result "summary"
    }
}
"""
    assert passing_tests(check_ok(text)) == ["facts are summarised"]
    merged = merge_state_into(text, "gather", "summarise", "m.fsm")
    comp = check_ok(merged)
    gather = comp.ir.state("gather")
    assert gather.output is not None and gather.output.name == "Summary"
    assert 'result "{{ gather.output.text }}"' in merged
    assert passing_tests(comp) == ["facts are summarised"]


# ---- issue 9, item 2: renames inside templates use the template check's record of what they read -----

READS_IN_TEMPLATES = r'''machine m {
    agent w {
        prompt "You write."
    }

    start state first {
        agent w
        do "One."
        -> second
    }

    state second {
        agent w
        do "Two."
        -> done
    }

    final state done {
        result "{{ \"}}\" ~ second.output }} {{ 'second.output' }} {% raw %}{{ second.output }}{% endraw %} {{ sec\u006fnd.output }} second"
    }
}
'''


def test_a_merge_renames_exactly_the_states_a_template_reads() -> None:
    check_ok(READS_IN_TEMPLATES)
    out = merge_state_into(READS_IN_TEMPLATES, "first", "second", "m.fsm")
    result = next(line for line in out.splitlines() if "result" in line)
    assert result.strip() == (r'''result "{{ \"}}\" ~ first.output }} {{ 'second.output' }} {% raw %}{{ second.output }}'''
                              r'''{% endraw %} {{ first.output }} second"''')
    check_ok(out)


def test_template_reads_point_at_the_name_in_the_source() -> None:
    comp = check_ok(READS_IN_TEMPLATES)
    reads = comp.ir.state("done").template_reads
    text = READS_IN_TEMPLATES
    assert [text[r.origin.start : r.origin.end] for r in reads] == ["second", r"sec\u006fnd"]
