"""Template checks: Jinja2 syntax, names in scope, fields of typed outputs, positions in the .fsm file."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statewright.api import check_text
from statewright.compiler.checks import template_source
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
    text, missing = diagnose(result='"{{ draft.output.sections[0].heading.x }} {{ draft.output.sections[0].headng }}"')
    # a str has methods, not fields: `.x` would fail when the run renders it
    assert (text.code, text.span.text if text.span else None) == ("SW4012", "x")
    assert (missing.code, missing.span.text if missing.span else None, missing.help) == (
        "SW2006", "headng", "did you mean 'heading'?")
    assert diagnose(result='"{{ draft.output.sections[0].heading.upper() }}"') == []


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


def test_templates_that_bind_no_name_read_what_compiling_them_finds() -> None:
    """The check compiles a template to learn which names read its context; one that binds nothing is
    read without compiling it, and must come out the same (or be left to the compiler)."""
    from pathlib import Path

    from jinja2 import nodes

    from statewright.compiler.checks.secrets import _strings_outside_tests
    from statewright.compiler.checks.template_checks import (
        _ReadingCodeGenerator,
        reads_without_compiling,
        tree_index,
    )
    from statewright.compiler.checks.template_source import check_environment

    root = Path(__file__).resolve().parents[1]
    texts = [
        "{{ topic }}", "{{ self }}", "{{ loop }}", "{{ range(3) }} {{ x.items() }}", "{{ a.b.c[0]['d'] }}",
        "{% if x and not y %}{{ x | upper }}{% else %}{{ y is defined }}{% endif %}",
        "{{ [a, b] + [c] }} {{ {'k': v} }} {{ (a, b) }} {{ a if b else c }} {{ a ~ b }} {{ -a ** 2 }}",
        "{{ review.output.fixes | join(', ') }} {{ xs[1:2] }} {{ f(a, k=b) }} {{ lipsum }} {{ namespace }}",
        "{% for x in xs %}{{ x }} {{ loop.index }}{% endfor %}{{ x }}", "{% set a = 1 %}{{ a }} {{ b }}",
        "{% with a = b %}{{ a }}{% endwith %}", "{% macro m(p) %}{{ p }} {{ q }}{% endmacro %}{{ m(1) }}",
        "{{ " + "(" * 40 + "a" + ")" * 40 + " }}",
    ]
    for spec in sorted(root.glob("examples/*.fsm")) + sorted(root.glob("tests/cases/valid/*/input.fsm")):
        comp = check_text(spec.read_text(encoding="utf-8"), str(spec))
        if comp.ast is not None:
            texts += [string.value for string in _strings_outside_tests(comp.ast) if "{" in string.value]
    env = check_environment()
    fast = 0
    for text in texts:
        tree = env.parse(text)
        simple = reads_without_compiling(tree_index(tree), env)
        if simple is None:
            continue
        fast += 1
        codegen = _ReadingCodeGenerator(env)
        codegen.visit(tree)
        compile(codegen.stream.getvalue(), "<template>", "exec")
        assert simple == codegen.context_reads, text
        index = tree_index(tree)
        assert index.order == [tree, *tree.find_all(nodes.Node)]
        names = {n.name for n in tree.find_all(nodes.Name) if id(n) in simple}
        assert "self" not in names
    assert fast >= 10, "most templates bind nothing"
    assert reads_without_compiling(tree_index(env.parse("{% for x in xs %}{{ x }}{% endfor %}")), env) is None
    assert reads_without_compiling(tree_index(env.parse("{{ self }}")), env) is None


# ---- the fast ways from a template to its source are the general ways -------------------------------

_TEMPLATE_CHARS = st.text(alphabet=st.sampled_from(list("ab {}%#\n\r\t\\\"é😀")), max_size=40)


@given(_TEMPLATE_CHARS)
def test_normalized_text_without_a_carriage_return_is_what_reading_line_by_line_gives(value: str) -> None:
    assert template_source.normalized_text(value) == template_source.normalized_text_by_lines(value)


@given(st.text(alphabet=st.sampled_from(list("ab {}\n\t'é😀")), max_size=40))
def test_a_string_without_escapes_maps_each_character_to_its_own_source_offset(body: str) -> None:
    text = f'x = "{body}"'
    start, end = 5, 5 + len(body)
    fast = template_source._short_string_offsets(text, start, end, body)
    assert fast == template_source.escaped_string_offsets(text, start, end, body)
    assert fast == list(range(start, end))


_FRAGMENTS = st.sampled_from(["{{", "}}", " ", "\n", "\r\n", "x", "a.b", ".", "{%", "{#", "-", "|", "true",
                              "{", "}", "text ", "y_1", "é", "s1.output.fixes", "1", "%}", "#}", "\t"])


def _shape(parsed: template_source.ParsedTemplate) -> list[tuple[str, int, str]]:
    assert parsed.tree is not None
    return [(type(n).__name__, n.lineno, repr(n)) for n in template_source._walk(parsed.tree)]


@settings(max_examples=500)
@given(st.lists(_FRAGMENTS, max_size=14).map("".join))
def test_a_template_read_without_jinja_has_jinjas_tokens_and_tree(text: str) -> None:
    from statewright.grammar import ast

    string = ast.String(text, False, None)
    simple = template_source._parse_simple(string, template_source.normalized_text(text)[0])
    if simple is None:
        return  # Jinja's to read
    jinja = template_source.parse_with_jinja(string)
    assert simple.tokens == jinja.tokens
    assert _shape(simple) == _shape(jinja)
    _assert_indexed_as_walked(simple)


def _assert_indexed_as_walked(parsed: template_source.ParsedTemplate) -> None:
    """The index a template read without Jinja comes with is the one a walk of its tree gives, and every
    node knows the environment, as after Jinja's set_environment."""
    assert parsed.simple and parsed.index is not None and parsed.tree is not None
    walked = template_source.tree_index(parsed.tree)
    assert [id(n) for n in parsed.index.order] == [id(n) for n in walked.order]
    assert {k: id(v) for k, v in parsed.index.parents.items()} == {k: id(v) for k, v in walked.parents.items()}
    assert parsed.index.depth == walked.depth
    assert all(n.environment is template_source.check_environment() for n in walked.order)


@pytest.mark.parametrize("text", ["Write about {{ topic }}.", "{{s1.output.fixes}}\nthen {{ x }}", "{ braces }",
                                  "{{ a }}{{ b.c }}", "tail {{\n name \n}}"])
def test_templates_of_text_and_dotted_names_are_read_without_jinja(text: str) -> None:
    from statewright.grammar import ast

    string = ast.String(text, False, None)
    simple = template_source._parse_simple(string, template_source.normalized_text(text)[0])
    assert simple is not None
    jinja = template_source.parse_with_jinja(string)
    assert simple.tokens == jinja.tokens and _shape(simple) == _shape(jinja)
    _assert_indexed_as_walked(simple)
    assert not jinja.simple and jinja.index is None


@pytest.mark.parametrize("text", ["{{ x | upper }}", "{% if x %}y{% endif %}", "{{ true }}", "{{{ x }}",
                                  "{# note #}{{ x }}", "{{- x }}", "{{ x[0] }}", "{{ " + ".".join("a" * 30) + " }}"])
def test_every_other_template_is_jinjas_to_read(text: str) -> None:
    from statewright.grammar import ast

    assert template_source._parse_simple(ast.String(text, False, None), text) is None


def _elif_chain(branches: int, last: str) -> str:
    """A template of `branches` `elif`s after an `if`, each testing that `s1` ran, then `last`."""
    chain = "".join(f"{{% elif s1.output and s1.output.f0 == {i} %}}{{{{ s1.output.f0 }}}}" for i in range(branches))
    return f"""machine m {{
    input topic: str
    agent a {{ prompt "p" }}
    type R {{ f0: int }}
    start state s0 {{
        agent a
        do "go"
        output R
        when output.f0 > 1 -> s1
        -> s2
    }}
    state s1 {{
        agent a
        do "x"
        output R
        -> s2
    }}
    state s2 {{
        agent a
        do \"\"\"{{% if s1.output == none %}}none{chain}{last}{{% endif %}}\"\"\"
        -> done
    }}
    final state done
}}
"""


@pytest.mark.parametrize("last, warned", [("", 0), ("{% else %}{{ s1.output.f0 }}", 0),
                                          ("{% elif topic %}{{ s1.output.f0 }}", 0)])
def test_each_branch_of_a_long_elif_chain_is_narrowed_by_the_tests_before_it(last: str, warned: int) -> None:
    """Every branch after `if s1.output == none` knows s1 ran, the thousandth as the first (the tests
    before a branch are worked out once per block, not once per read)."""
    diagnostics = check_text(_elif_chain(1000, last), "chain.fsm").diagnostics
    assert [d.code for d in diagnostics if d.code == "SW4014"] == ["SW4014"] * warned
    assert not [d for d in diagnostics if d.severity.value == "error"]


def test_a_read_in_the_if_body_of_a_none_test_is_not_narrowed() -> None:
    text = _elif_chain(3, "").replace("{% if s1.output == none %}none", "{% if s1.output == none %}{{ s1.output.f0 }}")
    assert [d.code for d in check_text(text, "chain.fsm").diagnostics if d.code == "SW4014"] == ["SW4014"]


def test_the_else_of_a_long_elif_chain_that_never_tests_for_none_is_warned() -> None:
    text = _elif_chain(1000, "{% else %}{{ s1.output.f0 }}").replace("{% if s1.output == none %}none",
                                                                       "{% if topic == 'a' %}a")
    assert [d.code for d in check_text(text, "chain.fsm").diagnostics if d.code == "SW4014"] == ["SW4014"]
