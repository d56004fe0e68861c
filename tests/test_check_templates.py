"""Template checks: Jinja2 syntax, names in scope, fields of typed outputs, positions in the .fsm file."""

from __future__ import annotations

from statewright.api import check_text
from statewright.diagnostics import Diagnostic

MACHINE = """machine t {{
    input topic: str
    input limits: list[str] = []
    type Article {{ title: str  sections: list[Section] }}
    type Section {{ heading: str }}
    agent writer {{ prompt "You write." }}
    start state draft {{
        agent writer
        do {instruction}
        output Article
        -> done
    }}
    final state done {{ result {result} }}
}}
"""


def diagnose(instruction: str = '"Write {{ topic }} {{ limits }}."',
             result: str = '"{{ draft.output.title }}"') -> list[Diagnostic]:
    return check_text(MACHINE.format(instruction=instruction, result=result), "t.fsm").diagnostics


def test_loop_variables_set_variables_and_jinja_globals_are_in_scope() -> None:
    instruction = ('"{% set n = 3 %}{% if draft.output %}{% for s in draft.output.sections %}'
                   '{{ loop.index }} {{ s.heading }} {{ n }}'
                   '{% endfor %}{% endif %}{{ range(2) | list }} {{ topic | upper }} {{ limits | join(\', \') }}"')
    assert diagnose(instruction) == []


def test_fields_are_followed_through_lists_and_nested_types() -> None:
    assert diagnose(result='"{{ draft.output.sections[0].heading }}"') == []
    (d,) = diagnose(result='"{{ draft.output.sections[0].heading.x }} {{ draft.output.sections[0].headng }}"')
    assert (d.code, d.span.text if d.span else None, d.help) == ("SW2006", "headng",
                                                                 "did you mean 'heading'?")


def test_an_unknown_variable_in_a_long_string_points_at_its_line_in_the_file() -> None:
    instruction = ('"""\n            Write about {{ topic }} {{ limits }}.\n'
                   '            Then about {{ topik }}.\n        """')
    (d,) = diagnose(instruction)
    assert d.code == "SW2008" and d.span is not None
    assert d.span.text == "topik"
    assert d.span.source.line_text(d.span.start_pos.line).strip() == "Then about {{ topik }}."


def test_a_syntax_error_in_a_long_string_points_at_the_line_jinja_names() -> None:
    instruction = ('"""\n            Fine {{ topic }} {{ limits }}.\n'
                   '            Broken {{ topic }.\n        """')
    (d,) = diagnose(instruction)
    assert d.code == "SW5001" and d.span is not None
    assert d.span.text == "Broken {{ topic }."


def test_an_unknown_filter_is_a_template_error_with_a_suggestion() -> None:
    (d,) = diagnose('"Write {{ topic | uper }} {{ limits }}."')
    assert (d.code, d.span.text if d.span else None, d.help) == ("SW5001", "uper", "did you mean 'upper'?")


def test_a_misspelled_state_in_a_template_is_unknown_with_a_suggestion() -> None:
    (d,) = diagnose(result='"{{ drat.output }}"')
    assert (d.code, d.help) == ("SW2008", "did you mean 'draft'?")


def test_a_state_read_without_output_is_an_unknown_field() -> None:
    (d,) = diagnose(result='"{{ draft.title }}"')
    assert d.code == "SW2006" and d.span is not None and d.span.text == "title"


def test_an_input_read_only_by_a_template_counts_as_used() -> None:
    assert [d.code for d in diagnose('"Write {{ topic }}."')] == ["SW7005"]  # `limits` is read nowhere


def test_a_block_left_open_is_reported_at_the_tag_that_opens_it() -> None:
    instruction = ('"""\n            {% for s in draft.output.sections %}\n'
                   '            {% if s.heading %}{{ s.heading }}{% endif %}\n'
                   '            {{ topic }} {{ limits }}\n        """')
    (d,) = diagnose(instruction)
    assert d.code == "SW5001" and d.span is not None
    assert d.message.endswith("'{% for %}' is never closed")
    assert d.span.text == "for"
    assert d.span.source.line_text(d.span.start_pos.line).strip() == "{% for s in draft.output.sections %}"
    assert d.help == "close the block with {% endfor %} where it should end"


def test_an_unknown_filter_with_no_close_name_points_to_the_built_in_ones() -> None:
    (d,) = diagnose('"Write {{ topic | yell_loudly }} {{ limits }}."')
    assert d.code == "SW5001"
    assert d.help.startswith("templates have Jinja2's built-in filters only")
