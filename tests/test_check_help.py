"""Help texts: where a mistake has a likely repair, the diagnostic says what to write instead."""

from __future__ import annotations

import pytest

from statewright.api import check_text
from statewright.diagnostics import Diagnostic

MACHINE = """machine h {{
    input limit: int = {default}
    type Critique {{ score: int  fixes: list[str] }}
    agent writer {{ prompt "You write for {{{{ limit }}}}." }}
    start state draft {{
        agent writer
        do "Write."
        output Critique
        when {guard} -> run
        otherwise -> done
    }}
    state run {{
        call std.python(code = {code}, timeout = 5)
        -> done
    }}
    final state done
}}
"""


def diagnose(default: str = "3", guard: str = "output.score > 1", code: str = '"print(1)"'
             ) -> list[Diagnostic]:
    return check_text(MACHINE.format(default=default, guard=guard, code=code), "h.fsm").diagnostics


def only(diagnostics: list[Diagnostic]) -> Diagnostic:
    assert len(diagnostics) == 1, [(d.code, d.message) for d in diagnostics]
    return diagnostics[0]


def test_the_machine_used_here_is_valid() -> None:
    assert diagnose() == []


@pytest.mark.parametrize(("default", "help"), [
    ('"3"', "write the number without quotes: 3"),
    ('"three"', "write a whole number, e.g. 3"),
    ("2.5", "write a whole number, e.g. 3"),
    ("true", "write a whole number, e.g. 3"),
])
def test_a_default_of_the_wrong_kind_says_how_to_write_one_that_fits(default: str, help: str) -> None:
    d = only(diagnose(default=default))
    assert (d.code, d.help) == ("SW4006", help)


@pytest.mark.parametrize(("guard", "help"), [
    ('output.score == "85"', "write the number without quotes: 85"),
    ('output.score == "high"', "'output.score' is a number; compare it with a number, not a string"),
    ('output.score - "a" > 1', "'-' takes two numbers"),
    ('output.fixes < "a"', "'<' orders two numbers or two strings"),
    ("output == 1", "use one of its fields: output.FIELD"),
])
def test_a_type_mismatch_in_a_guard_suggests_a_repair(guard: str, help: str) -> None:
    d = only(diagnose(guard=guard))
    assert (d.code, d.help) == ("SW4001", help)


def test_an_unknown_state_with_no_close_name_lists_the_states() -> None:
    d = only(diagnose(guard="visits(publish) > 1"))
    assert (d.code, d.help) == ("SW2002", "the states are 'draft', 'run' and 'done'")


def test_an_argument_of_the_wrong_type_shows_one_of_the_right_type() -> None:
    d = only(diagnose(code="42"))
    assert (d.code, d.help) == ("SW4006", 'write e.g. code = "..."')


def test_an_unknown_name_in_tool_arguments_lists_only_what_is_in_scope_there() -> None:
    d = only(diagnose(code="script"))
    assert d.code == "SW2007"
    assert d.help == "in scope: the machine's inputs, 'STATE.output', len() and visits()"


def test_len_of_a_number_says_to_use_the_number() -> None:
    d = only(diagnose(guard="len(output.score) > 2"))
    assert d.code == "SW4005"
    assert d.help.endswith("use the number itself: output.score")


def _misspelled_inputs(inputs: int, mistakes: list[str]) -> str:
    """A machine with `inputs` inputs and one template reading each name in `mistakes` (none declared)."""
    reads = " ".join(f"{{{{ {name} }}}}" for name in mistakes)
    declared = "\n".join(f"    input field_{i}: str" for i in range(inputs))
    uses = " ".join(f"{{{{ field_{i} }}}}" for i in range(inputs))
    return (f"machine m {{\n{declared}\n    agent w {{ prompt \"p\" }}\n    start state a {{\n        agent w\n"
            f"        do \"\"\"{uses} {reads}\"\"\"\n        -> done\n    }}\n    final state done\n}}\n")


def test_a_misspelling_repeated_gets_its_suggestion_every_time() -> None:
    from statewright.diagnostics.diagnostic import SUGGESTION_BUDGET

    inputs = 1000
    repeats = 3 * SUGGESTION_BUDGET // inputs  # far more searches than the budget pays for, but one name
    unknown = [d for d in check_text(_misspelled_inputs(inputs, ["feild_17"] * repeats)).diagnostics
               if d.code == "SW2008"]
    assert len(unknown) == repeats
    assert all(d.help.startswith("did you mean") and "'field_17'" in d.help for d in unknown)


def test_a_file_of_thousands_of_mistakes_stops_suggesting_and_reports_them_all() -> None:
    """Each suggestion compares a name with every candidate: past what one check may spend, mistakes are
    still reported, in full, without one (the first ones keep theirs)."""
    from statewright.diagnostics.diagnostic import SUGGESTION_BUDGET

    inputs = 1000
    mistakes = [f"feild_{i}" for i in range(2 * SUGGESTION_BUDGET // inputs)]
    unknown = [d for d in check_text(_misspelled_inputs(inputs, mistakes)).diagnostics if d.code == "SW2008"]
    assert [d.message for d in unknown] == [f"unknown template variable '{m}' in the instruction of state "
                                            "'a'" for m in mistakes]
    suggested = [d for d in unknown if d.help.startswith("did you mean")]
    assert 0 < len(suggested) <= SUGGESTION_BUDGET // inputs < len(unknown)
    assert suggested == unknown[: len(suggested)] and "'field_0'" in suggested[0].help
    assert all(d.help and not d.help.startswith("did you mean") for d in unknown[len(suggested):])


def test_suggestions_outside_a_check_are_not_budgeted() -> None:
    from statewright.diagnostics import did_you_mean
    from statewright.diagnostics.diagnostic import SUGGESTION_BUDGET

    names = [f"field_{i}" for i in range(300)]
    searches = SUGGESTION_BUDGET // len(names) + 20
    assert all(did_you_mean(f"feild_{i % 300}", names).startswith("did you mean") for i in range(searches))
