"""A reference interpreter for guard expressions: the oracle the generated Python is tested against.

statewright executes one guard implementation, the Python that codegen/python_expr.py writes. This
interpreter states the language's meaning independently — every operator Python's own, field access
through the runtime's `guard_attribute`, names resolved by `reference_of` — so property tests can check
that the generated code computes exactly that, value for value and error for error.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from statewright.compiler import ir
from statewright.compiler.codegen.python_expr import (
    GuardCompileError,
    GuardNames,
    Reference,
    reference_of,
    state_argument,
    takes,
)
from statewright.grammar import ast
from statewright.runtime.guard_access import guard_attribute
from statewright.runtime.spec import Scope

Evaluator = Callable[[Scope], Any]

BINARY_OPERATORS: dict[str, Callable[[Any, Any], Any]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "%": operator.mod,
    "in": lambda item, container: item in container,
    "not in": lambda item, container: item not in container,
}


@dataclass
class ItemScope(Scope):
    """A scope inside all/any/count: the names they bind to the current items, beside the run's values."""

    items: Mapping[str, Any] = field(default_factory=dict)


def _with_item(scope: Scope, name: str, item: Any) -> ItemScope:
    items = {**getattr(scope, "items", {}), name: item}
    return ItemScope(scope.output, scope.inputs, scope.outputs, scope.visits, items=items)


def _variant_name(value: Any) -> str | None:
    """The declared type a value is an instance of, by the title the spec gave it."""
    config = getattr(type(value), "model_config", None)
    if not isinstance(config, Mapping) or not hasattr(value, "model_dump"):
        return None
    title = config.get("title")
    return title if isinstance(title, str) else type(value).__name__


def compile_guard(expr: ir.Expr, names: GuardNames | None = None) -> Callable[[Scope], bool]:
    """A guard as a callable: the expression's truth value over a scope."""
    evaluate = compile_expr(expr, names)

    def guard(scope: Scope) -> bool:
        return bool(evaluate(scope))

    return guard


def compile_expr(expr: ir.Expr, names: GuardNames | None = None) -> Evaluator:
    """An expression as a callable returning its value (tool-call arguments use the raw value)."""
    return _compile(expr, names or GuardNames())


def _compile(expr: ast.Expr, names: GuardNames, bound: frozenset[str] = frozenset()) -> Evaluator:
    """`bound`: the names all/any/count bind where `expr` stands (an item, never an input or a state)."""
    if isinstance(expr, ast.NameExpr) and expr.name in bound:
        name = expr.name
        return lambda scope: scope.items[name]  # type: ignore[attr-defined]
    if isinstance(expr, ast.Quantifier):
        return _compile_quantifier(expr, names, bound)
    if isinstance(expr, ast.Conditional):
        then, test, orelse = (_compile(e, names, bound) for e in (expr.then, expr.test, expr.orelse))
        return lambda scope: then(scope) if test(scope) else orelse(scope)
    if isinstance(expr, ast.IsVariant):
        value = _compile(expr.value, names, bound)
        type_name, negated = expr.type.value, expr.negated
        return lambda scope: (_variant_name(value(scope)) == type_name) != negated
    item_field = (isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.NameExpr)
                  and expr.value.name in bound)
    ref = reference_of(expr, names) if not item_field else None
    if ref is not None:
        return _compile_reference(ref)
    if isinstance(expr, ast.Literal):
        value = expr.value
        return lambda scope: value
    if isinstance(expr, ast.ListExpr):
        items = [_compile(item, names, bound) for item in expr.items]
        return lambda scope: [item(scope) for item in items]
    if isinstance(expr, ast.Attribute):
        owner = _compile(expr.value, names, bound)
        attr = expr.attr.value
        return lambda scope: guard_attribute(owner(scope), attr)
    if isinstance(expr, ast.Index):
        container = _compile(expr.value, names, bound)
        key = _compile(expr.index, names, bound)
        return lambda scope: container(scope)[key(scope)]
    if isinstance(expr, ast.Call):
        return _compile_call(expr, names, bound)
    if isinstance(expr, ast.UnaryOp):
        operand = _compile(expr.operand, names, bound)
        if expr.op == "not":
            return lambda scope: not operand(scope)
        if expr.op == "-":
            return lambda scope: -operand(scope)
        raise GuardCompileError(f"unknown operator {expr.op!r}")
    if isinstance(expr, ast.BinaryOp):
        return _compile_binary(expr, names, bound)
    raise GuardCompileError(f"not an expression: {type(expr).__name__}")


def _compile_reference(ref: Reference) -> Evaluator:
    name = ref.name
    if ref.kind == "output":
        return lambda scope: scope.output
    if ref.kind == "input":
        return lambda scope: scope.inputs[name]
    if ref.kind == "state_output":
        return lambda scope: scope.outputs.get(name)

    # Without the machine's names, `X.output` is an input's field when X is an input (inputs are always in
    # the scope) and no state of that name has run; otherwise it is state X's output.
    def unresolved_output(scope: Scope) -> Any:
        if name in scope.inputs and name not in scope.outputs:
            return guard_attribute(scope.inputs[name], "output")
        return scope.outputs.get(name)

    return unresolved_output


def _compile_quantifier(expr: ast.Quantifier, names: GuardNames, bound: frozenset[str]) -> Evaluator:
    """all/any: whether every (some) item makes the test true, stopping at the first that decides, as
    Python's all() and any() do; count: how many items make it true. The list is read first, once."""
    func = expr.func.value
    if func not in ("all", "any", "count", *AGGREGATES):
        raise GuardCompileError(f"unknown function {func}() over a list")
    items = _compile(expr.items, names, bound)
    var = expr.var.value
    test = _compile(expr.element, names, bound | {var})

    def quantified(scope: Scope) -> Any:
        values = items(scope)
        if func in AGGREGATES:
            return AGGREGATES[func](test(_with_item(scope, var, item)) for item in values)
        if func == "count":
            total = 0
            for item in values:
                if test(_with_item(scope, var, item)):
                    total += 1
            return total
        wanted = func == "any"  # the truth value that decides at once
        for item in values:
            if bool(test(_with_item(scope, var, item))) == wanted:
                return wanted
        return not wanted

    return quantified


def _compile_call(expr: ast.Call, names: GuardNames, bound: frozenset[str] = frozenset()) -> Evaluator:
    func = expr.func.value
    if not takes(func, len(expr.args)):
        raise GuardCompileError(f"unknown function {func}() with {len(expr.args)} argument(s)")
    if func == "visits":
        state = state_argument(expr)
        return lambda scope: scope.visits.get(state, 0)
    arguments = [_compile(a, names, bound) for a in expr.args]
    if func in AGGREGATES:
        aggregate = AGGREGATES[func]
        if len(arguments) == 1:
            return lambda scope: aggregate(arguments[0](scope))
        return lambda scope: aggregate([a(scope) for a in arguments])
    return lambda scope: len(arguments[0](scope))


def _total(values: Iterable[Any]) -> Any:
    """sum: the items added left to right, from 0."""
    return functools.reduce(operator.add, iter(values), 0)


def _pick(func: str, keep: Callable[[Any, Any], bool]) -> Callable[[Iterable[Any]], Any]:
    """min or max: the first item that no later item is `keep`-than (smaller, larger); an empty list fails."""
    def pick(values: Iterable[Any]) -> Any:
        items = iter(values)  # lazily: an item is computed only after the ones before it are compared
        empty = object()
        first = next(items, empty)
        if first is empty:
            raise ValueError(f"{func}() of an empty list")
        return functools.reduce(lambda best, item: item if keep(item, best) else best, items, first)

    return pick


AGGREGATES: dict[str, Callable[[Iterable[Any]], Any]] = {
    "sum": _total, "min": _pick("min", operator.lt), "max": _pick("max", operator.gt)}


def _compile_binary(expr: ast.BinaryOp, names: GuardNames, bound: frozenset[str] = frozenset()) -> Evaluator:
    left = _compile(expr.left, names, bound)
    right = _compile(expr.right, names, bound)
    # `and`/`or` short-circuit and yield an operand, exactly as in Python.
    if expr.op == "and":
        return lambda scope: left(scope) and right(scope)
    if expr.op == "or":
        return lambda scope: left(scope) or right(scope)
    apply = BINARY_OPERATORS.get(expr.op)
    if apply is None:
        raise GuardCompileError(f"unknown operator {expr.op!r}")
    return lambda scope: apply(left(scope), right(scope))
