"""Guard type checking: which guards are accepted, and which code each mistake gets."""

from __future__ import annotations

import pytest

from statewright.api import check_text

MACHINE = """machine guards {{
    input limit: int = 3
    input ratio: float = 0.5
    input tags: list[str] = []
    input note: str? 
    type Critique {{
        score: int
        ratio: float
        fixes: list[str]
        level: "low" | "high"
        comment: str?
        ok: bool
    }}
    tool lookup = "mypkg.tools:lookup"
    agent critic {{ prompt "You review for {{{{ limit }}}} {{{{ ratio }}}} {{{{ tags }}}} {{{{ note }}}}." }}
    agent writer {{ prompt "You write." }}
    start state draft {{
        agent writer
        do "Write."
        -> review
    }}
    state review {{
        agent critic
        do "Score {{{{ draft.output }}}}."
        output Critique
        when {guard} -> done
        otherwise -> run
    }}
    state run {{
        call std.python(code = "print(1)")
        -> ask
    }}
    state ask {{
        call lookup(query = draft.output)
        when {action_guard} -> done
        otherwise -> done
    }}
    final state done
}}
"""


# Guards for the places a test does not look at: each tests something the run decides (a guard that is
# always true would hide the transitions after it, SW3007).
REVIEW_GUARD = "output.ok"
ACTION_GUARD = "visits(ask) > 1"


def codes_for(guard: str, action_guard: str = ACTION_GUARD) -> list[str]:
    compilation = check_text(MACHINE.format(guard=guard, action_guard=action_guard), "guards.fsm")
    return [d.code for d in compilation.diagnostics]


@pytest.mark.parametrize("guard", [
    "output.score >= 85",
    "output.score > output.ratio",  # ints and floats compare
    "output.ratio == 1",
    "output.comment == none",  # none compares with optionals
    "output.comment != none and \"x\" in output.comment",
    'output.level == "high"',
    'output.level in ["low", "high"]',
    '"fix" in output.fixes',
    "output.ok",
    "not output.ok or output.score < limit",
    "len(output.fixes) > 0 and len(draft.output) < 100",
    "visits(review) <= 2",
    "output.fixes[0] == \"a\"",
    "output.score + 1 > limit * 2 - ratio",
    'draft.output + "!" == "x!"',
    "-output.score < 0",
    "tags == []",
    "note == none",
    "output.fixes == tags",
    # values that pick one of two, and sums, minima and maxima
    "(output.score if output.ok else limit) > 3",
    "len(output.comment if output.comment != none else \"\") > 0",
    "len(output.comment or \"\") > 0",
    "len(tags or output.fixes) > 0",
    "(note or \"x\") == \"x\"",
    "(output.score or output.ratio) > 0.5",
    "(output.level or \"low\") == \"low\"",
    "sum([output.score, limit]) > 3",
    "sum(len(f) for f in output.fixes) > limit",
    "min(output.score, limit, 2) > 0 and max(ratio, 1) < 2",
    "max(f for f in output.fixes) == \"z\"",
    "min(tags) == \"a\"",
    "(1 if output.ok else 2.5) > ratio",
    "output.ok if output.score > 1 else not output.ok",
])
def test_well_typed_guards_are_accepted(guard: str) -> None:
    assert codes_for(guard) == []


@pytest.mark.parametrize("guard, code", [
    ('output.score == "85"', "SW4001"),
    ('output.level == "medium"', "SW4001"),
    ('output.level in ["low", "hihg"]', "SW4001"),
    ("output.score in output.fixes", "SW4001"),
    ("output.score in 3", "SW4001"),
    ('output.fixes < "a"', "SW4001"),
    ("output.ok == none", "SW4001"),
    ("-output.fixes == 1", "SW4001"),
    ('output.score + "a" > 1', "SW4001"),
    ("draft.output.title == \"x\"", "SW4002"),
    ("output.score", "SW4004"),
    ("output.ok and output.fixes", "SW4004"),
    ("not output.level", "SW4004"),
    ("len(output.score) > 1", "SW4005"),
    ("len() > 1", "SW4005"),
    ("visits(limit) > 1", "SW4005"),
    ("visits(review, draft) > 1", "SW4005"),
    ("output.fixes[\"a\"] == \"x\"", "SW4008"),
    ("output.score[0] == 1", "SW4008"),
    ("output.score.value == 1", "SW4012"),
    ("review == none", "SW4013"),
    ("output.scor > 1", "SW2006"),
    ("draft.outptu == \"x\"", "SW2006"),
    ("score > 1", "SW2007"),
    ("True", "SW2007"),
    ("size(output.fixes) > 1", "SW2009"),
    ("visits(reviw) > 1", "SW2002"),
    ("(output.score if output.ok else \"none\") == 1", "SW4001"),
    ("len(tags or output.score) > 1", "SW4001"),
    ("(output.score if limit else 1) > 1", "SW4004"),
    ("output.fixes or tags", "SW4004"),
    ("output.ok or output.fixes", "SW4004"),
    ("len(output.comment if output.ok else \"\") > 1", "SW4014"),
    ("len(output.comment or note) > 1", "SW4014"),
    ("sum(output.fixes) > 1", "SW4005"),
    ("sum(output.score) > 1", "SW4005"),
    ("sum(tags, tags) > 1", "SW4005"),
    ("min() > 1", "SW4005"),
    ("max(output.score, \"a\") > 1", "SW4005"),
    ("max(output.comment, \"a\") == \"a\"", "SW4014"),
    ("max(output.fixes, \"a\") == \"a\"", "SW4005"),
    ("sum(f.x for f in output.fixes) > 1", "SW4012"),
    ("avg(output.fixes) > 1", "SW2009"),
    ("total(f for f in output.fixes) > 1", "SW2009"),
])
def test_each_guard_mistake_gets_its_code(guard: str, code: str) -> None:
    assert codes_for(guard) == [code]


def test_a_standard_tool_result_has_the_fields_the_tool_returns() -> None:
    source = MACHINE.format(guard=REVIEW_GUARD, action_guard=ACTION_GUARD).replace(
        "        -> ask\n", "        when output.exit_code == 0 and not output.timed_out -> ask\n"
                           "        when output.exitcode == 0 -> ask\n        otherwise -> ask\n")
    diags = check_text(source, "guards.fsm").diagnostics
    assert [(d.code, d.span.text if d.span else None) for d in diags] == [("SW2006", "exitcode")]
    assert "did you mean 'exit_code'?" in diags[0].help


def test_a_user_tool_result_is_unchecked() -> None:
    assert codes_for(REVIEW_GUARD, action_guard="output.anything.at.all == 3") == []


def test_output_is_not_in_scope_in_tool_call_arguments() -> None:
    source = MACHINE.format(guard=REVIEW_GUARD, action_guard=ACTION_GUARD).replace("query = draft.output",
                                                                       "query = output")
    assert [d.code for d in check_text(source, "guards.fsm").diagnostics] == ["SW2007"]


def test_an_unknown_name_causes_no_follow_on_errors_in_the_expression_around_it() -> None:
    # one report per use of the name; the field reads, the index, len() and '+' around it stay quiet
    assert codes_for("mystery.field[0] + len(mystery.items) > 2") == ["SW2007", "SW2007"]


def test_a_misspelled_input_suggests_the_input() -> None:
    diags = check_text(MACHINE.format(guard="limt > 1", action_guard=ACTION_GUARD), "guards.fsm").diagnostics
    assert [d.help for d in diags] == ["did you mean 'limit'?"]


@pytest.mark.parametrize("guard", ["output.comment == None", "output.ok == True", "output.comment != null"])
def test_python_literals_are_pointed_to_the_language_literals_even_when_a_state_name_is_close(
    guard: str,
) -> None:
    # `None` is one letter from the state `done`; the hint must not send the writer there
    diags = check_text(MACHINE.format(guard=guard, action_guard=ACTION_GUARD), "guards.fsm").diagnostics
    assert [(d.code, d.help) for d in diags] == [("SW2007", "the literals are written true, false and none")]


@pytest.mark.parametrize("guard, value", [
    ("sum([1, 2]) > 2", "true"),
    ("min(3, 1, 2) == 1 and max([1, 5]) == 5", "true"),
    ("(1 if 2 > 3 else 4) == 1", "false"),
    ("len([] or [1]) == 1", "true"),
    ("max(len(w) for w in [\"ab\", \"c\"]) == 3", "false"),
])
def test_a_guard_of_literals_with_the_new_forms_is_worked_out(guard: str, value: str) -> None:
    found = [d for d in check_text(MACHINE.format(guard=guard, action_guard=ACTION_GUARD), "guards.fsm").diagnostics
             if d.code == "SW7007"]
    assert [d.message for d in found] == [f"the guard is always {value}"]


def test_min_of_an_empty_literal_list_is_left_to_the_run() -> None:
    # it fails when the guard is evaluated (a failure of kind `guard`), so it is not worked out as constant
    assert codes_for("min([]) > 0") == []
    assert "SW7007" in codes_for("min([2]) > 0")
