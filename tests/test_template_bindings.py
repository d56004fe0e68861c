"""The template check follows every binding: a value copied into a name — with `set`, `with`, a `for` target,
a macro's parameter or a `namespace()` — or read through `attr` and the filters that take `attribute=`, is
checked like the value it came from (SW4031, SW2006, SW4014), and a value the check does not follow is
refused where a template reads into it (SW5010). Narrowing follows the machine: `X.output is T` shows that X
has run, and a state entered only by edges guarded by `output is T` reads that output as a T.

The property at the end is the point of it all: random templates over random variant types, once `check`
accepts them, render without error in a real run, for every variant the model may reply with.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import statewright
from statewright.api import check_text

SPEC = '''machine support {
    type Answer {
        text: str
        tags: list[str]
        note: str?
    }

    type Escalation {
        reason: str
        tags: list[str]
    }

    type Item {
        name: str
        cost: int
    }

    type Basket {
        items: list[Item]
    }

    agent helper {
        prompt "You help."
    }

    start state answer {
        agent helper
        do "Answer."
        output Answer | Escalation
        when output is Answer -> confident
        when output is Escalation -> basket
        -> review
    }

    state confident {
        agent helper
        do """TEMPLATE"""
        -> done
    }

    state basket {
        agent helper
        do "List the items."
        output Basket
        -> review
    }

    state review {
        agent helper
        do """REVIEW"""
        -> done
    }

    final state done
}
'''


def errors(template: str = "", review: str = "Review.") -> list[tuple[str, str]]:
    text = SPEC.replace("TEMPLATE", template or "Go.").replace("REVIEW", review)
    return [(d.code, d.message) for d in check_text(text, "support.fsm").diagnostics if d.severity.value == "error"]


def codes(template: str = "", review: str = "Review.") -> list[str]:
    return [c for c, _ in errors(template, review)]


# ---- copies of a variant output: the field must be on every variant (SW4031) --------------------------

@pytest.mark.parametrize("review", [
    "{% set a = answer.output %}{{ a.text }}",
    "{% with a = answer.output %}{{ a.text }}{% endwith %}",
    "{% for a in [answer.output] %}{{ a.text }}{% endfor %}",
    "{% set ns = namespace(last=answer.output) %}{{ ns.last.text }}",
    "{% set ns = namespace(last=answer.output) %}{% set ns.last = answer.output %}{{ ns.last.text }}",
    "{% macro show(a) %}{{ a.text }}{% endmacro %}{{ show(answer.output) }}",
    "{{ answer.output | attr('text') }}",
    "{{ [answer.output] | map(attribute='text') | join(', ') }}",
    "{{ [answer.output] | selectattr('text') | list }}",
    "{{ [answer.output] | rejectattr('text') | list }}",
    "{{ [answer.output] | groupby('text') | list }}",
    "{{ [answer.output] | join(', ', attribute='text') }}",
    "{{ [answer.output] | sum(attribute='text') }}",
    "{{ [answer.output] | sort(attribute='text') | list }}",
    "{{ ([answer.output] | first).text }}",
    "{{ (answer.output if true else answer.output).text }}",
    "{% set a = answer.output %}{% set b = a %}{{ b.text }}",
])
def test_a_copied_variant_output_is_read_like_the_original(review: str) -> None:
    assert codes(review=review) == ["SW4031"], errors(review=review)


@pytest.mark.parametrize("review", [
    "{% set a = answer.output %}{% if a is Answer %}{{ a.text }}{% endif %}",
    "{% with a = answer.output %}{% if a is Answer %}{{ a.text }}{% else %}{{ a.reason }}{% endif %}{% endwith %}",
    "{% for a in [answer.output] %}{{ a.text if a is Answer else a.reason }}{% endfor %}",
    "{% set a = answer.output %}{{ a.tags | join(', ') }}",  # a field every variant has
    "{{ [answer.output] | map(attribute='tags') | list }}",
    "{{ [answer.output] | selectattr('text', 'defined') | list }}",
    "{{ ([answer.output] | select('Answer') | first).text }}",
    "{% if answer.output is Answer %}{% set a = answer.output %}{{ a.text }}{% endif %}",
    "{% macro show(a) %}{{ a.tags }}{% endmacro %}{{ show(answer.output) }}",
])
def test_the_same_reads_without_the_mistake_check(review: str) -> None:
    assert codes(review=review) == [], errors(review=review)


# ---- unknown fields and values that may be none, through a copy -------------------------------------

@pytest.mark.parametrize("review, code", [
    ("{% set a = answer.output %}{{ a.txet }}", "SW2006"),
    ("{% set b = basket.output %}{% if b %}{{ b.itmes }}{% endif %}", "SW2006"),
    ("{% if basket.output %}{% for i in basket.output.items %}{{ i.nmae }}{% endfor %}{% endif %}", "SW2006"),
    ("{% if basket.output %}{{ basket.output.items | map(attribute='nmae') | join }}{% endif %}", "SW2006"),
    ("{% if basket.output %}{% set i = basket.output.items | first %}{{ i.cots }}{% endif %}", "SW2006"),
    ("{% set ns = namespace(a=1) %}{{ ns.b }}", "SW2006"),
    ("{% set b = basket.output %}{{ b.items }}", "SW4014"),
    ("{% with b = basket.output %}{{ b.items }}{% endwith %}", "SW4014"),
    ("{% for b in [basket.output] %}{{ b.items }}{% endfor %}", "SW4014"),
    ("{% set note = answer.output.note if answer.output is Answer else none %}{{ note.upper() }}", "SW4014"),
    ("{% set a = answer.output %}{% if a is Answer %}{% set n = a.note %}{{ n.upper() }}{% endif %}", "SW4014"),
    (("{% set n = answer.output.note if answer.output is Answer else none %}{% if n %}{% set n = none %}"
      "{{ n.upper() }}{% endif %}"), "SW4014"),
])
def test_unknown_fields_and_reads_that_may_be_none_are_caught_through_a_copy(review: str, code: str) -> None:
    assert codes(review=review) == [code], errors(review=review)


@pytest.mark.parametrize("review, words", [
    ("{% set xs = [answer.output] | dictsort %}{{ xs[0].text }}", "the filter 'dictsort'"),
    ("{% for a in [1, 2] %}{{ loop.previtem.text }}{% endfor %}", "'loop.previtem' is undefined"),
    ("{% macro show(a) %}{{ a.tags }}{% endmacro %}{{ show() }}", "gives 'a' no value"),
    ("{% set k = 'text' %}{{ answer.output[k] }}", "decided at run time"),
    ("{{ [answer.output] | map(attribute=answer.output.tags[0]) | list }}", "decided at run time"),
    ("{% set d = {'k': answer.output} %}{{ d.k.tags }}", "a mapping written in the template"),
    ("{% for k, v in answer.output | items %}{{ v.tags }}{% endfor %}", "the filter 'items'"),
    ("{% macro show(p) %}{{ caller(p) }}{% endmacro %}{% call(q) show(answer.output) %}{{ q.tags }}{% endcall %}",
     "caller"),
    ("{% for x in [answer.output] recursive %}{{ x.tags }}{% endfor %}", "recursive loop"),
])
def test_a_read_the_check_cannot_follow_is_refused_and_says_why(review: str, words: str) -> None:
    found = errors(review=review)
    assert [c for c, _ in found] == ["SW5010"], found
    assert words in found[0][1]


# ---- narrowing follows the machine ------------------------------------------------------------------

def test_a_variant_test_shows_that_the_state_has_run() -> None:
    # basket runs only after an Escalation: in review it may not have run, unless a test shows it did
    assert codes(review="{{ basket.output.items }}") == ["SW4014"]
    assert codes(review="{% if answer.output is Escalation %}{{ answer.output.reason }}{% endif %}") == []


def test_a_variant_test_of_a_state_that_may_not_have_run_shows_it_ran() -> None:
    text = SPEC.replace("output Basket", "output Basket | Answer").replace("TEMPLATE", "Go.").replace(
        "REVIEW", "{% if basket.output is Basket %}{{ basket.output.items }}{% endif %}")
    assert [d.code for d in check_text(text, "support.fsm").diagnostics if d.severity.value == "error"] == []


def test_a_state_entered_only_by_a_variant_guard_reads_that_variant() -> None:
    # confident is entered only by `when output is Answer`: its instruction reads answer.output as an Answer
    assert codes("{{ answer.output.text }} {{ answer.output.note or '' }}") == []
    assert codes("{% set a = answer.output %}{{ a.text }}") == []
    assert codes("{{ answer.output.reason }}") == ["SW2006"]
    # review is also entered by the catch-all: nothing is known there
    assert codes(review="{{ answer.output.text }}") == ["SW4031"]


def test_the_guards_and_tool_calls_of_such_a_state_read_that_variant_too() -> None:
    text = SPEC.replace("TEMPLATE", "Go.").replace("REVIEW", "Review.").replace(
        '''    state confident {
        agent helper
        do """Go."""
        -> done
    }''', '''    state confident {
        for tag in answer.output.tags + [answer.output.text] max 5
        call std.python(code = answer.output.text + tag)
        when answer.output.note != none -> review
        -> done
    }''')
    assert [d.code for d in check_text(text, "support.fsm").diagnostics if d.severity.value == "error"] == []
    # the same reads in a state also entered by a catch-all are refused
    widened = text.replace("        when output is Escalation -> basket\n", "        when output is Escalation -> confident\n")
    found = [d.code for d in check_text(widened, "support.fsm").diagnostics if d.severity.value == "error"]
    assert found and set(found) == {"SW4031"}


# ---- the property: accepted templates render, whatever variant arrives --------------------------------

VARIANT_FIELDS = {
    "a": ["str", "int"],
    "c": ["str?"],
    "d": ["list[str]"],
    "e": ["list[Sub]"],
    "f": ["Sub?"],
}


@st.composite
def variant_types(draw: Any) -> dict[str, dict[str, str]]:
    """Two or three declared types, each with some of the fields (a field may differ in type between them)."""
    count = draw(st.integers(2, 3))
    types: dict[str, dict[str, str]] = {}
    for k in range(count):
        names = draw(st.lists(st.sampled_from(sorted(VARIANT_FIELDS)), min_size=1, max_size=4, unique=True))
        types[f"T{k}"] = {n: draw(st.sampled_from(VARIANT_FIELDS[n])) for n in sorted(names)}
    return types


class Writer:
    """Writes a random template over the variant types: mostly reads that a careful author would write
    (a field read inside a test of its variant, an optional one inside a test that it is there), through
    copies, loops, namespaces, macros and filters; sometimes a careless one. Each value written is kept
    with what it holds — "answer" (any of the types), "maybe" (T0 | T1, from a state that may not have run),
    "sub" (a Sub), "list" (a list of Sub) — so the reads can follow it."""

    def __init__(self, draw: Any, types: dict[str, dict[str, str]]) -> None:
        self.draw = draw
        self.types = types
        self.count = 0

    def pick(self, options: list[Any]) -> Any:
        return self.draw(st.sampled_from(options))

    def value(self, names: dict[str, str]) -> tuple[str, str]:
        choices = [("answer.output", "answer"), ("answer.output", "answer"), ("maybe.output", "maybe"),
                   *names.items()]
        return self.pick(choices)

    def variants(self, kind: str) -> list[str]:
        return ["T0", "T1"] if kind == "maybe" else list(self.types)

    def read(self, text: str, kind: str) -> str:
        """A statement reading into `text`, a value of `kind`."""
        if kind == "sub":
            return "{{ " + text + self.pick([".x", ".x", ".y"]) + " }}"
        if kind == "list":
            return self.pick(["{{ " + text + " | map(attribute='x') | join(',') }}",
                              "{{ (" + text + " | first).x }}", "{{ " + text + "[0].x }}",
                              "{{ " + text + " | join(',', attribute='x') }}"])
        variant = self.pick(self.variants(kind))
        fields = self.types[variant]
        field = self.pick(sorted(fields)) if self.draw(st.integers(0, 4)) else self.pick(["a", "c", "zz"])
        inner = self.field_read(f"{text}.{field}", fields.get(field, "str"))
        careful = self.draw(st.integers(0, 4)) > 0
        if not careful:
            return inner
        form = self.draw(st.integers(0, 3))
        if form == 0:
            return f"{{% if {text} is {variant} %}}{inner}{{% endif %}}"
        if form == 1:
            return f"{{% if {text} is not {variant} %}}{{% else %}}{inner}{{% endif %}}"
        if form == 2:
            return ("{{ " + f"{text} | attr('{field}')" + f" if {text} is {variant} else '' }}}}")
        return ("{{ " + f"[{text}] | selectattr('{field}', 'defined') | map(attribute='{field}') | list" + " }}")

    def field_read(self, text: str, field_type: str) -> str:
        if field_type == "list[Sub]":
            return self.pick(["{{ " + text + " | map(attribute='x') | join(',') }}", "{{ " + text + "[0].x }}",
                              "{% for s in " + text + " %}{{ s.x }}{% endfor %}"])
        if field_type in ("Sub?", "str?"):
            read = ".x" if field_type == "Sub?" else ".upper()"
            return self.pick(["{% if " + text + " %}{{ " + text + read + " }}{% endif %}",
                              "{{ " + text + read + " }}", "{{ " + text + " or '' }}"])
        return "{{ " + text + " }}"

    def statements(self, names: dict[str, str], depth: int) -> str:
        out = []
        for _ in range(self.draw(st.integers(1, 3))):
            kind = self.draw(st.integers(0, 8 if depth < 2 else 1))
            text, held = self.value(names)
            name = f"n{self.count}"
            self.count += 1
            if kind <= 1:
                out.append(self.read(text, held))
            elif kind == 2:
                out.append(f"{{% set {name} = {text} %}}" + self.read(name, held))
                names = {**names, name: held}
            elif kind == 3:
                out.append(f"{{% with {name} = {text} %}}{self.statements({**names, name: held}, depth + 1)}"
                           "{% endwith %}")
            elif kind == 4 and held in ("answer", "maybe"):
                variant = self.pick(self.variants(held))
                listed = [f for f, t in self.types[variant].items() if t == "list[Sub]"]
                if listed:
                    body = self.statements({**names, name: "sub"}, depth + 1)
                    out.append(f"{{% if {text} is {variant} %}}{{% for {name} in {text}.{listed[0]} %}}{body}"
                               "{% endfor %}{% endif %}")
                else:
                    out.append(f"{{% for {name} in [{text}] %}}{self.statements({**names, name: held}, depth + 1)}"
                               "{% endfor %}")
            elif kind == 5:
                out.append(f"{{% set ns = namespace(v={text}) %}}")
                if self.draw(st.booleans()):
                    other, other_held = self.value(names)
                    held = held if other_held == held else "answer" if {held, other_held} <= {"answer"} else held
                    out.append(f"{{% set ns.v = {other} %}}")
                out.append(self.read("ns.v", held))
            elif kind == 6:
                out.append("{% macro show(p) %}" + self.read("p", held) + "{% endmacro %}{{ show(" + text + ") }}")
            elif kind == 7 and held == "maybe":
                out.append(f"{{% if {text} %}}{self.read(text, held)}{{% endif %}}")
            else:
                other, _ = self.value(names)
                out.append(f"{{% set {name} = {other} if {text} is defined else {text} %}}" + self.read(name, held))
        return "".join(out)


@st.composite
def cases(draw: Any) -> tuple[dict[str, dict[str, str]], str]:
    types = draw(variant_types())
    return types, Writer(draw, types).statements({}, 0)


def machine_text(types: dict[str, dict[str, str]], template: str, entered_by_guard: bool) -> str:
    declared = "\n".join("    type " + name + " {\n" + "".join(f"        {f}: {t}\n" for f, t in fields.items())
                         + "    }\n" for name, fields in types.items())
    variants = " | ".join(types)
    routes = ("        when output is T0 -> show\n        when output is T1 -> maybe\n        -> done\n"
              if entered_by_guard else "        when output is T1 -> maybe\n        -> show\n")
    return f'''machine prop {{
    type Sub {{
        x: str
    }}

{declared}
    agent helper {{
        prompt "You help."
    }}

    start state answer {{
        agent helper
        do "Answer."
        output {variants}
{routes}    }}

    state maybe {{
        agent helper
        do "Maybe."
        output T0 | T1
        -> show
    }}

    state show {{
        agent helper
        do """{template}"""
        -> done
    }}

    final state done
}}
'''


def reply(fields: dict[str, str], seed: int) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name, t in fields.items():
        present = seed % 2 == 0
        values[name] = {
            "str": "s", "int": 3, "str?": "z" if present else None, "list[str]": ["p", "q"],
            "list[Sub]": [{"x": "u"}, {"x": "v"}], "Sub?": {"x": "w"} if present else None,
        }[t]
    return values


@pytest.mark.slow
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(cases(), st.booleans())
def test_an_accepted_template_renders_for_every_variant_the_model_may_reply(
        case: tuple[dict[str, dict[str, str]], str], entered_by_guard: bool) -> None:
    types, template = case
    text = machine_text(types, template, entered_by_guard)
    compilation = check_text(text, "prop.fsm")
    assume(compilation.ok)
    machine = statewright.Machine(compilation)
    for variant, fields in types.items():
        for seed in (0, 1):  # optional fields there, and none
            for maybe_variant in ("T0", "T1"):
                script = {"agent": {
                    "answer": [{"value": {variant: reply(fields, seed)}}],
                    "maybe": [{"value": {maybe_variant: reply(types[maybe_variant], seed + 1)}}],
                    "show": ["ok"],
                }}
                result = machine.run({}, script=script)
                assert result.failure is None or result.failure.kind != "template", (
                    template, variant, seed, result.failure.message)
