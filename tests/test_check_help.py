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
