"""Templates are bounded at run time: no operation builds a value over the size limits, and a render stops at
its deadline (issue 9, items 9 and 10)."""

from __future__ import annotations

import time

import pytest
from support.fake_client import FakeClient

from statewright import api
from statewright.runtime.engine import Engine
from statewright.runtime.rendering import (
    TemplateDeadlineExceeded,
    TemplateRenderError,
    TemplateTooLarge,
    bounded_binop,
    render_template,
)

HUGE = [
    "{{ 10**5000 }}",
    "{{ 10**(10**10) }}",
    '{{ "a" * 100000000 }}',
    "{{ [1] * 10**9 }}",
    "{{ (10**4000) * (10**4000) }}",
    '{{ "%0999999999d" % 1 }}',
    '{{ "%*d" % (5, 1) }}',
    '{{ "%0999999999d"|format(1) }}',
    '{{ "a"|center(300000000) }}',
    '{{ "x"|indent(10**9) }}',
    "{{ [1, 2]|tojson(10**8) }}",
    '{{ "a".ljust(10**9) }}',
    '{{ "{:>999999999}".format(1) }}',
    '{{ "{:>{}}".format(1, 10**9) }}',
    "{{ lipsum(10**6) }}",
    '{{ range(100000)|join("x" * 1000) }}',
    '{% set s = namespace(v="a") %}{% for i in range(60) %}{% set s.v = s.v ~ s.v %}{% endfor %}{{ s.v }}',
    '{% set s = namespace(v="a") %}{% for i in range(60) %}{% set s.v = s.v + s.v %}{% endfor %}{{ s.v }}',
]


@pytest.mark.parametrize("template", HUGE)
def test_template_operations_refuse_values_over_the_size_limits(template: str) -> None:
    started = time.monotonic()
    with pytest.raises(TemplateTooLarge):
        render_template(template, {})
    assert time.monotonic() - started < 2


@pytest.mark.parametrize(("template", "expected"), [
    ("{{ 2**10 }} {{ 7 // 2 }} {{ 7 / 2 }} {{ -3 }} {{ +3 }} {{ 5 - 8 }} {{ 7 % 3 }}", "1024 3 3.5 -3 3 -3 1"),
    ('{{ "ab" * 3 }} {{ [1] * 2 }} {{ "%05d" % 42 }} {{ "a" ~ 1 ~ x }}', "ababab [1, 1] 00042 a1X"),
    ("{{ range(3)|list }} {{ range(3)|length }} {{ range(5)|reverse|join(',') }} {{ 2 in range(3) }}",
     "[0, 1, 2] 3 4,3,2,1,0 True"),
    ("{% for i in range(3) %}{{ loop.index }}/{{ loop.length }} {% endfor %}", "1/3 2/3 3/3 "),
    ('{{ "{} and {:>3}".format(1, 2) }} {{ "x"|center(5) }}|{{ "a\nb"|indent(2) }}', "1 and   2   x  |a\n  b"),
])
def test_ordinary_templates_render_as_before(template: str, expected: str) -> None:
    assert render_template(template, {"x": "X"}) == expected


@pytest.mark.parametrize("template", [
    "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
    "{% for i in range(100000) %}{% for j in range(100000) %}{{ j }}{% endfor %}{% endfor %}",
    "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(40) }}",
    "{% for c in text %}{% for d in text %}{% endfor %}{% endfor %}",
])
def test_a_render_stops_at_its_deadline(template: str) -> None:
    started = time.monotonic()
    with pytest.raises(TemplateDeadlineExceeded):
        render_template(template, {"text": "x" * 100_000}, deadline=time.monotonic() + 0.5)
    assert time.monotonic() - started < 3


def test_the_check_and_the_runtime_compute_constants_with_the_same_bounded_operators() -> None:
    assert bounded_binop("**", 2, 10) == 1024
    with pytest.raises(TemplateTooLarge):
        bounded_binop("**", 10, 10**10)
    with pytest.raises(ZeroDivisionError):
        bounded_binop("/", 1, 0)


def test_a_template_that_does_not_compile_is_a_render_error_not_a_crash() -> None:
    deep = "{{ " + "(" * 3000 + "1" + ")" * 3000 + " }}"
    with pytest.raises(TemplateRenderError):
        render_template(deep, {})


LOOPING = """machine m {
    limits { seconds 1 }
    agent w { prompt "You write." }
    start state a {
        agent w
        do "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}Write."
        -> done
    }
    final state done
}
"""


def test_limits_seconds_is_enforced_while_a_template_renders() -> None:
    comp = api.check_text(LOOPING, "m.fsm")
    assert comp.ok, [d.message for d in comp.diagnostics]
    started = time.monotonic()
    result = Engine(api.runtime_machine(comp), client=FakeClient(default=lambda request: "x")).run({})
    assert time.monotonic() - started < 5
    assert result.status == "failed"
    assert "time limit" in result.failure.message


@pytest.mark.parametrize("template", [
    "{{ [[1] * 99999] * 99999 }}",
    "{% set a = [1] * 1000000 %}{{ [a, a, a, a, a, a, a, a, a, a, a] }}",
    "{% set a = [1] * 1000000 %}{{ [a, a, a, a, a, a, a, a, a, a, a] ~ '' }}",
    "{% set a = [1] * 1000000 %}{{ [a, a, a, a, a, a, a, a, a, a, a] | string }}",
])
def test_a_list_holding_one_list_many_times_weighs_what_printing_it_costs(template: str) -> None:
    with pytest.raises(TemplateTooLarge):
        render_template(template, {})
