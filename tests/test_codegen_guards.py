"""Guards: the Python that every face executes computes what the language means — the value, or the same
error — checked against a reference interpreter (tests/support/guard_oracle.py) over the same scopes."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.guard_oracle import compile_expr, compile_guard
from support.machines import runtime_of

from statewright.api import check_text, parse_text
from statewright.compiler import ir
from statewright.compiler.codegen.python_expr import (
    ExprContext,
    GuardCompileError,
    GuardNames,
    python_source,
    spec_source,
)
from statewright.compiler.codegen.types_py import plan_models
from statewright.compiler.views.source_text import double_quoted as spec_string
from statewright.grammar import ast
from statewright.runtime.guard_access import guard_attribute
from statewright.runtime.guard_aggregates import guard_max, guard_min, guard_sum
from statewright.runtime.spec import Scope

SPEC = '''
machine m {
    input topic: str
    input count: int = 2
    input tags: list[str] = []
    type Critique {
        score: int "0-100"
        fixes: list[str]
        level: "low" | "high"
        note: str?
        class: str?
        marks: list[int]
    }
    agent critic { prompt "p" }
    tool lookup = "json:loads"
    start state review {
        agent critic
        do "x"
        output Critique
        when output.score >= 85 and len(output.fixes) == 0 and count > 0 and len(tags) >= 0 -> run
        -> draft max 2
        otherwise -> done
    }
    state draft { agent critic  do "d"  -> review }
    state run { call lookup(s = topic) -> done }
    state reply {
        agent critic
        do "r"
        output Answer | Escalation
        when output is Answer and all(f != "" for f in output.notes) -> done
        -> done
    }
    final state done
    type Answer { text: str  notes: list[str] }
    type Escalation { reason: str  notes: list[str] }
}
'''


def machine() -> ir.Machine:
    comp = check_text(SPEC, "m.fsm")
    assert comp.ok, comp.diagnostics
    return comp.ir  # type: ignore[return-value]


MACHINE = machine()
RUNTIME = runtime_of(MACHINE)
Critique = RUNTIME.states["review"].output
assert Critique is not None


Answer = RUNTIME.variant_types["Answer"]
Escalation = RUNTIME.variant_types["Escalation"]
CLASSES = {"Critique": Critique, "Answer": Answer, "Escalation": Escalation}


def critique(**values: Any) -> Any:
    fields = {"score": 90, "fixes": [], "level": "low", "marks": [3, 1, 2], **values}
    return Critique.model_validate(fields)


def generated(expr: ast.Expr, state: str = "review") -> Any:
    """The generated runner's form of `expr`, compiled: a function of the scope."""
    context = ExprContext(MACHINE, plan_models(MACHINE), GuardNames.of(MACHINE), MACHINE.state(state))
    code = python_source(expr, context)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)  # `1[0]` and the like, which the checker rejects
        return eval(f"lambda s: {code}", {"guard_attribute": guard_attribute, "guard_sum": guard_sum,
                                          "guard_min": guard_min, "guard_max": guard_max, **CLASSES})


def outcome(function: Any, scope: Scope) -> tuple[str, Any]:
    try:
        value = function(scope)
    except Exception as e:  # noqa: BLE001 - the error itself is what is compared
        return ("error", (type(e).__name__, str(e)))
    if hasattr(value, "model_dump"):
        return ("model", (type(value).__name__, value.model_dump()))
    return ("value", (type(value).__name__, value))


def guard(text: str) -> ast.Expr:
    """A guard expression parsed from spec source."""
    parsed = parse_text(f"machine g {{ start state a {{ when {text} -> a }} }}")
    assert parsed.machine is not None, [d.message for d in parsed.diagnostics]
    state = parsed.machine.of(ast.StateDecl)[0]
    return state.transitions[0].guard


SCOPES = [
    Scope(critique(), {"topic": "FSMs", "count": 2, "tags": ["a", "b"]}, {"review": critique()}, {"review": 1}),
    Scope(critique(score=10, fixes=["x"], note="n"), {"topic": "", "count": 0, "tags": []},
          {"review": critique(score=10), "run": {"status": 200, "body": "ok"}}, {"review": 3, "draft": 2}),
    Scope(None, {"topic": "t", "count": -1, "tags": ["t"]}, {}, {}),
    Scope(critique(**{"class": "c"}), {"topic": "x", "count": 5, "tags": ["x"]}, {"run": {"status": 404}}, {}),
    Scope(Answer(text="t", notes=["a", ""]), {"topic": "a", "count": 1, "tags": ["a", "", "a"]},
          {"reply": Escalation(reason="r", notes=[]), "review": critique(fixes=["a", "b"])}, {"reply": 1}),
]


# ---- what guards mean ------------------------------------------------------------------------------


@pytest.mark.parametrize("text, expected", [
    ("output.score >= 85", [True, False, "error", True, "error"]),
    ("review.output.score >= 85", [True, False, "error", "error", True]),
    ("len(output.fixes) == 0 and count > 0", [True, False, "error", True, "error"]),
    ("topic in tags or \"a\" in tags", [True, False, True, True, True]),
    ("visits(review) >= 2 or visits(draft) == 2", [False, True, False, False, False]),
    ("run.output.status == 200", ["error", True, "error", False, "error"]),
    ("not output.note == none", [False, True, "error", False, "error"]),
    ("output.class == \"c\"", [False, False, "error", True, "error"]),
    ("count * 2 + 1 > 4 and count % 2 == 0", [True, False, False, False, False]),
    ("tags[0] == topic", [False, "error", True, True, True]),
    ("output.level in [\"low\", \"mid\"]", [True, True, "error", True, "error"]),
    ("all(t != \"\" for t in tags)", [True, True, True, True, False]),
    ("any(t == topic for t in tags)", [False, False, True, True, True]),
    ("count(t == \"a\" for t in tags) >= 2", [False, False, False, False, True]),
    ("all(f in tags for f in review.output.fixes)", [True, True, "error", "error", False]),
    ("count(all(c != t for c in tags) for t in [\"a\", \"x\"])", [1, 2, 2, 1, 1]),
    ("output is Answer", [False, False, False, False, True]),
    ("reply.output is not Escalation", [True, True, True, True, False]),
    ("output is Answer and any(n == \"\" for n in output.notes)", [False, False, False, False, True]),
    ("count if count > 0 else -count", [2, 0, 1, 5, 1]),
    ("topic if topic else \"untitled\"", ["FSMs", "untitled", "t", "x", "a"]),
    ("tags or [\"x\"]", [["a", "b"], ["x"], ["t"], ["x"], ["a", "", "a"]]),
    ("output.note or \"-\"", ["-", "n", "error", "-", "error"]),
    ("review.output.score if review.output != none else 0", [90, 10, 0, 0, 90]),
    ("a if true else b if false else c", ["error", "error", "error", "error", "error"]),
    ("sum(output.marks)", [6, 6, "error", 6, "error"]),
    ("sum(len(t) for t in tags)", [2, 0, 1, 1, 2]),
    ("max(len(t) for t in tags)", [1, "error", 1, 1, 1]),
    ("min(t for t in tags)", ["a", "error", "t", "x", ""]),
    ("max(count, 3)", [3, 3, 3, 5, 3]),
    ("min(count, 0, -count)", [-2, 0, -1, -5, -1]),
    ("sum(f.score for f in [output]) + min(output.marks)", [91, 11, "error", 91, "error"]),
])
def test_generated_code_computes_what_the_guard_means(text: str, expected: list) -> None:
    expr = guard(text)
    interpreted = compile_expr(expr, GuardNames.of(MACHINE))
    compiled = generated(expr)
    for scope, want in zip(SCOPES, expected, strict=True):
        got = outcome(interpreted, scope)
        assert outcome(compiled, scope) == got
        assert (got[0] if want == "error" else got[1][1]) == want, (text, scope)


def test_state_output_is_none_until_the_state_has_run() -> None:
    expr = guard("review.output == none")
    assert compile_guard(expr, GuardNames.of(MACHINE))(SCOPES[2]) is True
    assert generated(expr)(SCOPES[2]) is True


def test_and_or_yield_an_operand_as_in_python_and_guards_yield_bools() -> None:
    expr = guard("topic or count")
    names = GuardNames.of(MACHINE)
    assert compile_expr(expr, names)(SCOPES[1]) == 0
    assert generated(expr)(SCOPES[1]) == 0
    assert compile_guard(expr, names)(SCOPES[1]) is False


def test_a_field_a_tool_result_lacks_is_an_error_naming_the_field() -> None:
    expr = guard("run.output.missing")
    with pytest.raises(AttributeError, match="no field 'missing'.*'status'"):
        generated(expr)(SCOPES[3])


@pytest.mark.parametrize("text", ["nope(1)", "len(1, 2)", "visits(1)"])
def test_an_expression_the_checker_would_reject_is_a_compile_error(text: str) -> None:
    with pytest.raises(GuardCompileError):
        python_source(guard(text), ExprContext(MACHINE, plan_models(MACHINE), GuardNames.of(MACHINE),
                                               MACHINE.state("review")))


# ---- generated Python reads well -------------------------------------------------------------------


@pytest.mark.parametrize("text, python", [
    ("output.score >= 85", "s.output.score >= 85"),
    ("review.output.fixes", "s.outputs.get(\"review\").fixes"),
    ("len(output.fixes) > visits(draft)", "len(s.output.fixes) > s.visits.get(\"draft\", 0)"),
    ("run.output.status == 200", "guard_attribute(s.outputs.get(\"run\"), \"status\") == 200"),
    ("output.class", "guard_attribute(s.output, \"class\")"),
    ("topic", "s.inputs[\"topic\"]"),
    ("not output.score == 1", "not s.output.score == 1"),
    ("not (topic in tags)", "not s.inputs[\"topic\"] in s.inputs[\"tags\"]"),
    ("not not count", "not not s.inputs[\"count\"]"),
    ("1 < count and count < 5", "1 < s.inputs[\"count\"] and s.inputs[\"count\"] < 5"),
    ("(count + 1) * 2", "(s.inputs[\"count\"] + 1) * 2"),
    ("count - (1 - 2)", "s.inputs[\"count\"] - (1 - 2)"),
    ("- -count", "-(-s.inputs[\"count\"])"),
    ("(1 == 1) == true", "(1 == 1) == True"),
    ("not (count > 1 and count < 0)", "not (s.inputs[\"count\"] > 1 and s.inputs[\"count\"] < 0)"),
    ("all(f != \"\" for f in output.fixes)", "all(f != \"\" for f in s.output.fixes)"),
    ("count(t in output.fixes for t in tags) >= 2",
     "sum(1 for t in s.inputs[\"tags\"] if t in s.output.fixes) >= 2"),
    ("any(s != topic for s in tags)", "any(s_ != s.inputs[\"topic\"] for s_ in s.inputs[\"tags\"])"),
    ("all(any(x == len for x in tags) for len in tags)",
     "all(any(x == len_ for x in s.inputs[\"tags\"]) for len_ in s.inputs[\"tags\"])"),
    ("output is Critique", "isinstance(s.output, Critique)"),
    ("not (output is not Critique)", "not not isinstance(s.output, Critique)"),
    ("count if count > 0 else 0", "s.inputs[\"count\"] if s.inputs[\"count\"] > 0 else 0"),
    ("(count if true else 1) + 1", "(s.inputs[\"count\"] if True else 1) + 1"),
    ("1 if (2 if true else 3) else 4 if false else 5", "1 if (2 if True else 3) else 4 if False else 5"),
    ("tags or []", "s.inputs[\"tags\"] or []"),
    ("sum(output.marks)", "guard_sum(s.output.marks)"),
    ("max(count, 2)", "guard_max(s.inputs[\"count\"], 2)"),
    ("min(len(t) for t in tags)", "guard_min(len(t) for t in s.inputs[\"tags\"])"),
    ("count(t == \"a\" for t in (tags if count > 0 else []))",
     "sum(1 for t in (s.inputs[\"tags\"] if s.inputs[\"count\"] > 0 else []) if t == \"a\")"),
    ("count(t if true else false for t in tags)", "sum(1 for t in s.inputs[\"tags\"] if (t if True else False))"),
    ("all(t if true else false for t in tags)", "all(t if True else False for t in s.inputs[\"tags\"])"),
])
def test_generated_python_is_the_plain_expression(text: str, python: str) -> None:
    context = ExprContext(MACHINE, plan_models(MACHINE), GuardNames.of(MACHINE), MACHINE.state("review"))
    assert python_source(guard(text), context) == python


# ---- random expressions ----------------------------------------------------------------------------

_LEAVES = [
    ast.NameExpr("output"), ast.NameExpr("topic"), ast.NameExpr("count"), ast.NameExpr("tags"),
    ast.Attribute(ast.NameExpr("review"), ast.Name("output")),
    ast.Attribute(ast.NameExpr("run"), ast.Name("output")),
    ast.Attribute(ast.NameExpr("reply"), ast.Name("output")),
    ast.Call(ast.Name("visits"), (ast.NameExpr("draft"),)),
    ast.NameExpr("it"),  # the item of an all/any/count around it (an unknown input elsewhere)
]
_FIELDS = ["score", "fixes", "level", "note", "class", "status", "body", "missing", "notes", "text", "output"]

literals = st.one_of(
    st.integers(0, 10**20), st.floats(0, 1e20, allow_nan=False, allow_infinity=False),
    st.text(max_size=8), st.booleans(), st.none(),
).map(ast.Literal)


def expressions() -> st.SearchStrategy[ast.Expr]:
    leaves = st.one_of(st.sampled_from(_LEAVES), literals)

    def extend(children: st.SearchStrategy[ast.Expr]) -> st.SearchStrategy[ast.Expr]:
        return st.one_of(
            st.builds(ast.Attribute, children, st.sampled_from(_FIELDS).map(ast.Name)),
            st.builds(ast.Index, children, children),
            st.builds(lambda a: ast.Call(ast.Name("len"), (a,)), children),
            st.builds(ast.UnaryOp, st.sampled_from(["not", "-"]), children),
            st.builds(ast.BinaryOp, st.sampled_from(sorted(
                ["and", "or", "==", "!=", "<", "<=", ">", ">=", "in", "not in", "+", "-", "*", "/", "%"])),
                children, children),
            st.builds(lambda items: ast.ListExpr(tuple(items)), st.lists(children, max_size=3)),
            st.builds(lambda func, var, element, items: ast.Quantifier(ast.Name(func), element, ast.Name(var), items),
                      st.sampled_from(["all", "any", "count", "sum", "min", "max"]),
                      st.sampled_from(["it", "it", "s", "tags"]), children, children),
            st.builds(ast.Conditional, children, children, children),
            st.builds(lambda func, args: ast.Call(ast.Name(func), tuple(args[:1] if func == "sum" else args)),
                      st.sampled_from(["sum", "min", "max"]), st.lists(children, min_size=1, max_size=3)),
            st.builds(lambda value, t, negated: ast.IsVariant(value, ast.Name(t), negated), children,
                      st.sampled_from(sorted(CLASSES)), st.booleans()),
        )

    return st.recursive(leaves, extend, max_leaves=12)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(expressions())
def test_random_expressions_agree_between_the_faces(expr: ast.Expr) -> None:
    interpreted = compile_expr(expr, GuardNames.of(MACHINE))
    compiled = generated(expr)
    for scope in SCOPES:
        expected = outcome(interpreted, scope)
        if expected[0] == "error" and expected[1][0] in ("RecursionError", "MemoryError", "OverflowError"):
            continue
        assert outcome(compiled, scope) == expected, python_source(
            expr, ExprContext(MACHINE, plan_models(MACHINE), GuardNames.of(MACHINE), MACHINE.state("review")))


def read_back(source: str) -> ast.Expr:
    # inside a list, so that a lone string reads as an expression and not as a verifier condition
    listed = guard(f"[{source}]")
    assert isinstance(listed, ast.ListExpr)
    return listed.items[0]


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(expressions())
def test_spec_source_reads_back_as_the_same_expression(expr: ast.Expr) -> None:
    assert read_back(spec_source(expr)) == expr


@given(st.text())
def test_spec_strings_read_back_verbatim(value: str) -> None:
    assert read_back(spec_string(value)) == ast.Literal(value)
