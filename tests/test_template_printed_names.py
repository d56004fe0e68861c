"""Templates that only print names (`Hello {{ name }}`, `{{ draft.output.title }}`) render without Jinja, to
exactly the text Jinja gives them: checked against Jinja itself, template by template, on hand-picked edge
cases and on generated templates and values. A run of such a machine never imports Jinja."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field

from statewright.runtime.rendering import (
    MAX_RENDERED_CHARS,
    TemplateDeadlineExceeded,
    TemplateRenderError,
    TemplateSet,
    TemplateTooLarge,
    printed_names,
)


class Report(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    title: str
    score: float = 0.5
    klass: str = Field("k", alias="class")
    tags: list[str] = []


class Loud:
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


def rendered(source: str, context: dict[str, Any], jinja: bool = False) -> tuple[str, str]:
    """What rendering `source` gives: its text, or its error's kind and message (`jinja`: by Jinja alone)."""
    templates = TemplateSet()
    if jinja:
        templates._printed[source] = None  # as if the template were not names only
    try:
        return "ok", templates.render(source, context)
    except TemplateRenderError as exc:
        return type(exc).__name__, str(exc)


def by_jinja(source: str, context: dict[str, Any]) -> tuple[str, str]:
    return rendered(source, context, jinja=True)


def same(source: str, context: dict[str, Any]) -> None:
    """The fast path and Jinja agree (a function printed by each environment differs only in its address)."""
    fast, jinja = rendered(source, context), by_jinja(source, context)
    assert [re.sub("0x[0-9a-f]+", "0x", part) for part in fast] == [re.sub("0x[0-9a-f]+", "0x", part)
                                                                     for part in jinja]


CONTEXT: dict[str, Any] = {
    "name": "Ada", "n": 3, "x": 2.5, "nan": math.nan, "yes": True, "nothing": None, "empty": "",
    "items": [1, "two", None], "data": {"a": {"b": "deep"}, "class": "c", "items": "the key"},
    "report": Report(title="T", tags=["a"]), "draft": {"output": Report(title="Draft"), "visits": 2},
    "markup": "{{ name }} {% if %}", "unicode": "é\u200b\U0001f600", "loud": Loud(),
    "crlf": "a\r\nb", "subclass": type("S", (str,), {})("sub"),
}

CASES = [
    "Hello {{ name }}", "{{name}}", "{{   name\t}}", "{{\nname\n}}", "{{ n }} {{ x }} {{ nan }} {{ yes }}",
    "{{ nothing }}|{{ empty }}|", "{{ items }}", "{{ data }}", "{{ data.a.b }}", "{{ data.class }}",
    "{{ data.items }}", "{{ report }}", "{{ report.title }}", "{{ report.class }}", "{{ report.tags }}",
    "{{ draft.output.title }} after {{ draft.visits }}", "{{ markup }}", "{{ unicode }}", "{{ crlf }}",
    "{{ subclass }}", "line\n{{ name }}\n", "line\r\n{{ name }}\r\n", "a\rb{{ name }}\r", "{{ name }}\n\n",
    "{{ name }}}", "}}{{ name }}", "{{ missing }}", "{{ data.missing }}", "{{ report.missing }}",
    "{{ name.upper }}", "{{ items.0 }}", "{{ true }}", "{{ none }}", "{{ self }}", "{{ loud }}",
    "{{ name }}{# c #}", "{{ name }} {% raw %}x{% endraw %}", "{{- name }}", "{{ name -}} x", "{{{ name }}",
    "{ {{ name }}", "{{ name|upper }}", "{{ name ~ name }}", "{{ n + 1 }}", "{{ data['a'] }}", "{{ range }}",
    "{{ lipsum }}", "{{ namespace }}", "{{ data . a }}", "{{ name }}{{ name }}", "",
]


@pytest.mark.parametrize("source", CASES)
def test_renders_as_jinja(source: str) -> None:
    same(source, CONTEXT)


def test_only_names_take_the_fast_path() -> None:
    assert printed_names("Hi {{ name }}, {{ draft.output.title }}.\n") == (
        "Hi ", ("name",), ", ", ("draft", "output", "title"), ".")
    for source in ["no markup", "{{ name|upper }}", "{{- name }}", "{ {{ name }}", "{{ true }}", "{{ self }}",
                   "{% if x %}{% endif %}", "{{ name }}{# c #}", "{{ a.0 }}", "{{ a . b }}"]:
        assert printed_names(source) is None, source


def test_bounds_hold_on_the_fast_path() -> None:
    big = "x" * (MAX_RENDERED_CHARS // 2 + 1)
    with pytest.raises(TemplateTooLarge):
        TemplateSet().render("{{ a }}{{ a }}", {"a": big})
    with pytest.raises(TemplateDeadlineExceeded):
        TemplateSet().render("{{ a }}", {"a": "x"}, seconds=-1.0)
    with pytest.raises(TemplateTooLarge):  # a value printed as JSON is weighed before it is printed
        TemplateSet().render("{{ a }}", {"a": ["x" * 1000] * 20_000})


class Raises:
    def __str__(self) -> str:
        raise ValueError("boom")


class Counted:
    printed = 0

    def __str__(self) -> str:
        Counted.printed += 1
        return "counted"


class Overriding(dict):  # type: ignore[type-arg]
    def __getitem__(self, key: Any) -> Any:
        return "from __getitem__"


@pytest.mark.parametrize("source", ["x{{ r }}", "{{ a }}{{ r }}", "{{ r }}", "x{{ huge }}", "{{ a }}{{ big }}",
                                    "{{ big }}x", "{{ a }}{{ missing }}", "x{{ a.missing }}", "{{ lst }}"])
def test_a_render_past_its_deadline_fails_as_jinja_s_does(source: str) -> None:
    """Jinja checks the deadline after each piece it writes (then the length): the same error wins either
    way, whether a value would fail to print, a piece is too long, or the time is up first."""
    context = {"a": "A", "r": Raises(), "big": "x" * MAX_RENDERED_CHARS, "huge": 10**5000,
               "lst": ["y" * 1000] * 20_000}
    for seconds in (-1.0, 0.0, None):
        fast, jinja = TemplateSet(), TemplateSet()
        jinja._printed[source] = None
        outcomes = []
        for templates in (fast, jinja):
            try:
                outcomes.append(("ok", templates.render(source, context, seconds=seconds)))
            except TemplateRenderError as exc:
                outcomes.append((type(exc).__name__, str(exc)))
        assert outcomes[0] == outcomes[1], (source, seconds)


def test_odd_contexts_and_values_printed_once() -> None:
    same("{{ a }}", Overriding(a="A"))  # Jinja reads a copy made with dict()
    same("{{ a }}", {"a": "A", 1: "one"})  # (which needs text keys)
    Counted.printed = 0
    same("{{ c }} {{ s.upper }}", {"c": Counted(), "s": "text"})  # the second tag is Jinja's: so is the first
    assert Counted.printed == 2  # once by each way, not twice by the fast one


KNOWN = ["a", "b", "_d", "class", "items"]
# mostly names the context has, text without markup; now and then a word Jinja reads otherwise, or markup
names = st.one_of(*[st.sampled_from(KNOWN)] * 5, st.sampled_from(["true", "self", "missing", "c"]))
plain = st.text(alphabet=st.sampled_from(list("ab }%#\n\r\t-|.~é")), max_size=6)
texts = st.one_of(*[plain] * 9, st.sampled_from(["{", "{%", "{#"]))
values: Any = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(names, inner, max_size=4),
    max_leaves=8,
)
contexts = st.fixed_dictionaries({name: values for name in KNOWN})


@st.composite
def templates(draw: Any, anything: bool = True) -> str:
    """Text and `{{ path }}` tags; `anything`: now and then markup or a name Jinja reads otherwise."""
    text, name = (texts, names) if anything else (plain, st.sampled_from(KNOWN))
    out = [draw(text)]
    for _ in range(draw(st.integers(1, 3))):
        path = ".".join(draw(st.lists(name, min_size=1, max_size=3)))
        space = draw(st.sampled_from(["", " ", "  ", "\n"]))
        out += ["{{" + space + path + space + "}}", draw(text)]
    return "".join(out)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(source=templates(), context=contexts)
def test_generated_templates_render_as_jinja(source: str, context: dict[str, Any]) -> None:
    same(source, context)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(source=templates(anything=False), context=contexts)
def test_generated_name_only_templates_render_as_jinja(source: str, context: dict[str, Any]) -> None:
    assert printed_names(source) is not None
    same(source, context)


def test_a_run_of_name_only_templates_never_imports_jinja(tmp_path: Any) -> None:
    spec = tmp_path / "greet.fsm"
    spec.write_text('machine greet {\n    input who: str\n    model "openai/gpt-4o-mini"\n'
                    '    agent a { prompt "You greet {{ who }}." }\n'
                    '    start state hello { agent a  do "Say hello to {{ who }}."  -> done }\n'
                    '    final state done { result "{{ hello.output }}" }\n}\n')
    runner = tmp_path / "greet_runner.py"
    subprocess.run([sys.executable, "-m", "statewright", "compile", str(spec), "-o", str(runner)], check=True, capture_output=True)
    code = ("import sys, json, greet_runner\n"
            "from statewright_runtime.scripted import Script\n"
            "result = greet_runner.run({'who': 'Ada'}, script=Script.from_json({'agent': {'hello': ['Hi Ada']}}))\n"
            "print(json.dumps([result.status, result.result, 'jinja2' in sys.modules]))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, check=True, capture_output=True, text=True)
    assert out.stdout.strip() == '["final", "Hi Ada", false]'
