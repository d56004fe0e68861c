"""No cascades: a mistake in a construct is reported once, and what only follows from it is not reported.

One test per kind of construct — join rules, transitions, types, templates, test inputs, and the syntax
itself — each through `check` as a user runs it: a valid machine is broken in exactly one place, and the
diagnostics must be exactly the one for that place. Each also keeps its control: the same follow-on
diagnostic is still reported where it does not follow from a mistake (so the suppression is not a check
switched off).
"""

from __future__ import annotations

from pathlib import Path

from statewright.api import check_text

ROOT = Path(__file__).resolve().parents[1]
PARALLEL = (ROOT / "examples" / "parallel_review.fsm").read_text(encoding="utf-8")
PIPELINE = (ROOT / "examples" / "content_pipeline.fsm").read_text(encoding="utf-8")


def codes(text: str) -> list[str]:
    return [d.code for d in check_text(text, "m.fsm").diagnostics]


def test_the_example_machines_check_clean() -> None:
    assert codes(PARALLEL) == [] and codes(PIPELINE) == []


def test_a_misspelled_join_rule_is_one_error_not_also_branch_outputs_that_may_be_none() -> None:
    assert "join all" in PARALLEL and "accuracy.output.approve" in PARALLEL
    assert codes(PARALLEL.replace("join all", "join any")) == ["SW3066"]
    assert codes(PARALLEL.replace("join all", "join al")) == ["SW3066"]
    # control: `join first 1` really may leave a branch unrun, and reading its output then is reported
    assert "SW4014" in codes(PARALLEL.replace("join all", "join first 1"))


def test_a_transition_to_a_misspelled_state_is_one_error_not_also_states_it_leaves_unreached() -> None:
    assert "-> review\n" in PIPELINE
    text = PIPELINE.replace("-> review\n", "-> reviw\n", 1)
    assert codes(text) == ["SW2002"]
    # control: a state no transition leads to is still unreachable
    assert "    final state publish {" in PIPELINE
    orphan = PIPELINE.replace("    final state publish {", "    state orphan {\n        agent writer\n"
                              "        do \"Nothing.\"\n        -> publish\n    }\n\n    final state publish {", 1)
    assert codes(orphan) == ["SW7004"]


def test_a_transition_to_a_misspelled_state_does_not_make_a_listener_look_unread() -> None:
    text = """machine m {
    input topic: str
    agent writer { prompt "You write." }
    agent critic { prompt "You review." }
    start state draft {
        agent writer
        do "Write about {{ topic }}."
        tell [critic]
        -> reviw
    }
    state review {
        agent critic
        do "Review {{ draft.output }}."
        -> done
    }
    final state done
}
"""
    assert codes(text) == ["SW2002"]
    assert sorted(codes(text.replace("-> reviw", "-> done"))) == ["SW7004", "SW7009"]  # control: unread now


def test_a_misspelled_type_is_one_error_not_also_every_read_of_its_fields() -> None:
    text = """machine m {
    input topic: str
    type Critique {
        score: int
        fixes: list[Fix]
    }
    type Fix { text: str }
    agent critic { prompt "You review." }
    start state review {
        agent critic
        do "Review {{ topic }}."
        output Critique
        when output.score >= 80 and len(output.fixes) == 0 -> done
        otherwise -> revise
    }
    state revise {
        agent critic
        do "Fix {{ review.output.fixes[0].text }} ({{ review.output.score }})."
        -> done
    }
    final state done { result "{{ review.output.score }}" }
    test "t" {
        input { topic "x" }
        reply review { score 90  fixes [] }
        expect path [review, done]
    }
}
"""
    assert codes(text) == []
    assert codes(text.replace("output Critique", "output Critiqe")) == ["SW2004"]
    assert codes(text.replace("score: int", "score: integer")) == ["SW2004"]
    assert codes(text.replace("list[Fix]", "list[Fixx]")) == ["SW2004"]


def test_a_template_that_does_not_parse_is_one_error_not_also_what_it_reads() -> None:
    assert 'do "Write an article of about 800 words about {{ topic }}' in PIPELINE
    broken = PIPELINE.replace("about {{ topic }} for", "about {{ topic } for", 1)
    assert codes(broken) == ["SW5001"]
    unclosed = PIPELINE.replace("about {{ topic }} for", "about {% if topic %}{{ topic }} for", 1)
    assert codes(unclosed) == ["SW5001"]


def test_a_misspelled_test_input_is_one_error_not_also_a_missing_one() -> None:
    text = """machine m {
    input topic: str
    agent writer { prompt "You write." }
    start state draft {
        agent writer
        do "Write about {{ topic }}."
        -> done
    }
    final state done
    test "t" {
        input { topic "x" }
        reply draft "text"
        expect path [draft, done]
    }
}
"""
    assert codes(text) == []
    assert codes(text.replace('input { topic "x" }', 'input { topik "x" }')) == ["SW6004"]
    # control: an input left out entirely is reported as missing
    assert codes(text.replace('input { topic "x" }', "input { }")) == ["SW6004"]


def test_a_syntax_error_is_one_error_and_no_check_runs_on_the_rest() -> None:
    broken = PIPELINE.replace("-> review\n", "=> review\n", 1)
    assert codes(broken) == ["SW1014"]
    missing_brace = PIPELINE.replace("        -> review\n    }\n", "        -> review\n", 1)
    assert codes(missing_brace) == ["SW1002"]
