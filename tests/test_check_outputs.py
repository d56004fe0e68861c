"""A state's output is none until the state has run: guards, tool-call arguments and templates may read into
it only where the state has surely run, or after testing for it (issue 9, item 7)."""

from __future__ import annotations

import pytest

from statewright.api import check_text

# `check` may run before `draft` is reached again, but `score` only after `check`; `skip` can jump past it
MACHINE = """machine m {{
    type Check {{
        score: int
        notes: list[str]
    }}
    tool notify = "hooks.chat:notify"
    agent w {{
        prompt "You work."
    }}
    start state draft {{
        agent w
        do {draft_do}
        when "it needs no check" -> score
        -> check
    }}
    state check {{
        agent w
        do "Check it."
        output Check
        {check_guard}
        -> score
    }}
    state score {{
        agent w
        do {score_do}
        {score_guard}
        -> notify_them
    }}
    state notify_them {{
        call notify(value = {call_arg})
        -> done
    }}
    final state done
}}
"""


def codes(draft_do: str = '"Write."', check_guard: str = "", score_do: str = '"Score."',
          score_guard: str = "", call_arg: str = "1") -> list[str]:
    text = MACHINE.format(draft_do=draft_do, check_guard=check_guard, score_do=score_do,
                          score_guard=score_guard, call_arg=call_arg)
    comp = check_text(text, "m.fsm")
    return [d.code for d in comp.diagnostics if d.severity.value == "error"]


@pytest.mark.parametrize("guard", [
    "when check.output.score > 80 -> done",
    "when len(check.output.notes) > 0 -> done",
    "when check.output.notes[0] == \"x\" -> done",
    "when check.output.score + 1 > 80 -> done",
    "when \"x\" in check.output.notes -> done",
    "when check.output.score > 80 and check.output != none -> done",  # the test comes too late
    "when not (check.output != none) and check.output.score > 1 -> done",
    "when check.output != none or check.output.score > 1 -> done",
])
def test_a_guard_may_not_read_into_an_output_whose_state_may_not_have_run(guard: str) -> None:
    assert "SW4014" in codes(score_guard=guard)


@pytest.mark.parametrize("guard", [
    "when check.output != none -> done",
    "when check.output == none -> done",
    "when none != check.output -> done",
    "when check.output != none and check.output.score > 80 -> done",
    "when check.output == none or check.output.score > 80 -> done",
    "when check.output == none or check.output.score > 80 and check.output.score < 90 -> done",
    "when not (check.output == none) and len(check.output.notes) > 0 -> done",
    "when check.output != none and (check.output.score > 80 or check.output.notes[0] == \"ok\") -> done",
    "when draft.output == \"x\" -> done",  # draft runs before every other state
    "when visits(check) > 0 -> done",
])
def test_a_guard_may_test_for_an_output_and_then_read_it(guard: str) -> None:
    assert codes(score_guard=guard) == []


def test_a_guard_reads_its_own_states_output_by_name_after_the_step() -> None:
    assert codes(check_guard="when check.output.score > 80 -> done") == []


def test_a_states_own_instruction_is_rendered_before_its_step() -> None:
    assert codes(score_do='"{{ score.output.x }}"') == ["SW4014", "SW5002"]
    assert codes(score_do='"{% if score.output %}{{ score.output }}{% endif %}"') == []


def test_a_tool_call_argument_may_not_read_into_an_output_that_may_be_missing() -> None:
    assert codes(call_arg="check.output.score") == ["SW4014"]
    assert codes(call_arg="draft.output") == []
    assert codes(call_arg="check.output") == []  # passed whole: the tool decides what none means


@pytest.mark.parametrize("template", [
    "{{ check.output.score }}",
    "{{ check.output['score'] }}",
    "{% for n in check.output.notes %}{{ n }}{% endfor %}",
    "{% if check.output %}{% else %}{{ check.output.score }}{% endif %}",
    "{% if check.output is none %}{{ check.output.score }}{% endif %}",
    "{{ check.output.score if not check.output }}",
    "{{ check.output or check.output.score }}",
    "{% macro m() %}{{ check.output.score }}{% endmacro %}{% if check.output %}{{ m() }}{% endif %}",
])
def test_a_template_may_not_read_into_an_output_whose_state_may_not_have_run(template: str) -> None:
    assert "SW4014" in codes(score_do=f'"{template}"')


@pytest.mark.parametrize("template", [
    "{{ check.output }}",
    "{{ check.output or draft.output }}",
    "{% if check.output %}{{ check.output.score }}{% endif %}",
    "{% if check.output is not none %}{{ check.output.score }}{% endif %}",
    "{% if check.output != none %}{{ check.output.score }}{% endif %}",
    "{% if not check.output %}none{% else %}{{ check.output.score }}{% endif %}",
    "{% if draft.output %}{% elif not check.output %}{% else %}{{ check.output.score }}{% endif %}",
    "{% if check.output and check.output.score > 3 %}{{ check.output.notes[0] }}{% endif %}",
    "{{ check.output.score if check.output }}",
    "{{ check.output.score if check.output else 0 }}",
    "{{ check.output and check.output.score }}",
    "{{ not check.output or check.output.score }}",
    "{{ draft.output }}",
])
def test_a_template_may_test_for_an_output_and_then_read_it(template: str) -> None:
    assert codes(score_do=f'"{template}"') == []


def test_a_state_no_run_reaches_is_not_blamed_for_what_it_reads() -> None:
    text = MACHINE.format(draft_do='"Write."', check_guard="", score_do='"Score."', score_guard="",
                          call_arg="1").replace("    final state done", """    state orphan {
        agent w
        do "{{ check.output.score }}"
        -> done
    }
    final state done""")
    comp = check_text(text, "m.fsm")
    assert [d.code for d in comp.diagnostics] == ["SW7004"]


def test_the_diagnostic_shows_a_path_that_skips_the_state_and_the_test_to_write() -> None:
    comp = check_text(MACHINE.format(draft_do='"Write."', check_guard="", score_do='"Score."',
                                     score_guard="when check.output.score > 80 -> done", call_arg="1"), "m.fsm")
    (d,) = [d for d in comp.diagnostics if d.code == "SW4014"]
    assert d.span is not None and d.span.text == "check.output.score"
    assert d.notes == ("for example, a run can go draft -> score without running 'check'",)
    assert d.help == ("test that it ran first: 'when check.output != none and check.output.score > 80 -> done'")


# ---- the same rule for optional values (`T?`) -------------------------------------------------------

OPTIONAL = """machine m {{
    input tags: list[str]?
    type Ticket {{
        owner: str?
        estimate: int?
    }}
    agent w {{
        prompt "You work."
    }}
    start state read {{
        agent w
        do "{template}"
        output Ticket
        {guard}
        -> done
    }}
    final state done
}}
"""


def optional_codes(guard: str = "", template: str = "{{ tags }}") -> list[str]:
    comp = check_text(OPTIONAL.format(guard=guard, template=template), "m.fsm")
    return [d.code for d in comp.diagnostics if d.severity.value == "error"]


@pytest.mark.parametrize("guard", [
    "when len(tags) > 0 -> done", "when tags[0] == \"a\" -> done", "when \"a\" in tags -> done",
    "when output.estimate > 3 -> done", "when output.estimate + 1 > 3 -> done",
    "when \"x\" in output.owner -> done", "when tags != none or len(tags) > 0 -> done",
])
def test_a_guard_may_not_read_into_an_optional_value_without_a_test(guard: str) -> None:
    assert optional_codes(guard=guard) == ["SW4014"]


@pytest.mark.parametrize("guard", [
    "when tags != none and len(tags) > 0 -> done", "when tags == none or tags[0] == \"a\" -> done",
    "when output.estimate != none and output.estimate > 3 -> done", "when output.estimate == 3 -> done",
    "when not (output.owner == none) and \"x\" in output.owner -> done",
    "when tags == none -> done",
])
def test_a_guard_may_test_an_optional_value_and_then_read_into_it(guard: str) -> None:
    assert optional_codes(guard=guard) == []


@pytest.mark.parametrize(("template", "expected"), [
    ("{{ tags[0] }}", ["SW4014"]),
    ("{% if tags %}{{ tags[0] }}{% endif %}", []),
    ("{{ tags[0] if tags else '' }}", []),
    ("{{ tags and tags[0] }}", []),
    ("{% if not tags %}{% else %}{{ tags[0] }}{% endif %}", []),
    ("{{ tags | join(', ') }}", []),  # filters decide for themselves
])
def test_a_template_follows_the_same_rule_for_optional_values(template: str, expected: list[str]) -> None:
    assert optional_codes(template=template) == expected
