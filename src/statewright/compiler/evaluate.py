"""The guard interpreter: guard and tool-argument expressions turned into closures over a runtime Scope.

`statewright run` evaluates guards with it; a generated runner carries the equivalent Python written by
codegen/python_expr.py. Every operator is Python's own, and field access goes through the runtime's
`guard_attribute`, so both faces agree on values and on the errors a bad value raises (the engine turns
those into guard failures).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from ..grammar import ast
from ..runtime.guard_access import guard_attribute
from ..runtime.spec import Scope
from . import ir

Evaluator = Callable[[Scope], Any]

FUNCTIONS = {"len": 1, "visits": 1}  # name -> number of arguments

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


class GuardCompileError(Exception):
    """An expression the checker should have rejected: an unknown name, function or operator."""


@dataclass(frozen=True)
class GuardNames:
    """The names a guard may mention. `None` leaves the choice to run time (inputs present in the scope win)."""

    inputs: Collection[str] | None = None
    states: Collection[str] | None = None

    @classmethod
    def of(cls, machine: ir.Machine) -> GuardNames:
        return cls(inputs=tuple(i.name for i in machine.inputs), states=tuple(s.name for s in machine.states))

    def is_state(self, name: str) -> bool | None:
        """Whether `name.output` means a state's output; None when only the scope can tell."""
        if self.states is None:
            return None
        return name in self.states


@dataclass(frozen=True)
class Reference:
    """What a name in a guard stands for.

    kind: "output" | "input" | "state_output" | "unresolved_output" (`X.output` where only the scope can tell
    whether X is a state or an input; never produced when the machine's names are known).
    """

    kind: str
    name: str = ""


def reference_of(expr: ast.Expr, names: GuardNames) -> Reference | None:
    """The scope value `expr` names directly, if it is `output`, an input or `STATE.output`.

    Shared with codegen so both faces resolve a name the same way: `output` is always this state's output;
    `X.output` is state X's output when X is a state; any other bare name is a machine input.
    """
    if isinstance(expr, ast.NameExpr):
        return Reference("output") if expr.name == "output" else Reference("input", expr.name)
    if (
        isinstance(expr, ast.Attribute)
        and expr.attr.value == "output"
        and isinstance(expr.value, ast.NameExpr)
        and expr.value.name != "output"
    ):
        is_state = names.is_state(expr.value.name)
        if is_state is None:
            return Reference("unresolved_output", expr.value.name)
        if is_state:
            return Reference("state_output", expr.value.name)
    return None


def compile_guard(expr: ir.Expr, names: GuardNames | None = None) -> Callable[[Scope], bool]:
    """A guard as a callable: the expression's truth value over a scope."""
    evaluate = compile_expr(expr, names)

    def guard(scope: Scope) -> bool:
        return bool(evaluate(scope))

    return guard


def compile_expr(expr: ir.Expr, names: GuardNames | None = None) -> Evaluator:
    """An expression as a callable returning its value (tool-call arguments use the raw value)."""
    return _compile(expr, names or GuardNames())


def _compile(expr: ast.Expr, names: GuardNames) -> Evaluator:
    ref = reference_of(expr, names)
    if ref is not None:
        return _compile_reference(ref)
    if isinstance(expr, ast.Literal):
        value = expr.value
        return lambda scope: value
    if isinstance(expr, ast.ListExpr):
        items = [_compile(item, names) for item in expr.items]
        return lambda scope: [item(scope) for item in items]
    if isinstance(expr, ast.Attribute):
        owner = _compile(expr.value, names)
        attr = expr.attr.value
        return lambda scope: guard_attribute(owner(scope), attr)
    if isinstance(expr, ast.Index):
        container = _compile(expr.value, names)
        key = _compile(expr.index, names)
        return lambda scope: container(scope)[key(scope)]
    if isinstance(expr, ast.Call):
        return _compile_call(expr, names)
    if isinstance(expr, ast.UnaryOp):
        operand = _compile(expr.operand, names)
        if expr.op == "not":
            return lambda scope: not operand(scope)
        if expr.op == "-":
            return lambda scope: -operand(scope)
        raise GuardCompileError(f"unknown operator {expr.op!r}")
    if isinstance(expr, ast.BinaryOp):
        return _compile_binary(expr, names)
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


def _compile_call(expr: ast.Call, names: GuardNames) -> Evaluator:
    func = expr.func.value
    if FUNCTIONS.get(func) != len(expr.args):
        raise GuardCompileError(f"unknown function {func}() with {len(expr.args)} argument(s)")
    if func == "visits":
        state = state_argument(expr)
        return lambda scope: scope.visits.get(state, 0)
    argument = _compile(expr.args[0], names)
    return lambda scope: len(argument(scope))


def state_argument(call: ast.Call) -> str:
    """The state named by `visits(STATE)`."""
    arg = call.args[0]
    if not isinstance(arg, ast.NameExpr):
        raise GuardCompileError("visits() takes a state name")
    return arg.name


def _compile_binary(expr: ast.BinaryOp, names: GuardNames) -> Evaluator:
    left = _compile(expr.left, names)
    right = _compile(expr.right, names)
    # `and`/`or` short-circuit and yield an operand, exactly as in Python.
    if expr.op == "and":
        return lambda scope: left(scope) and right(scope)
    if expr.op == "or":
        return lambda scope: left(scope) or right(scope)
    apply = BINARY_OPERATORS.get(expr.op)
    if apply is None:
        raise GuardCompileError(f"unknown operator {expr.op!r}")
    return lambda scope: apply(left(scope), right(scope))
