"""Guard and tool-argument expressions as text: Python for runners, the spec's own syntax for messages.

Readable Python for generated runners, and the spec's own syntax for messages and traces.

Guards have one semantics: the Python written here, which every face executes (runners, and `run`, `test`
and the Python API through the same module compiled in memory). Field access goes through the runtime's
`guard_attribute` wherever a field's owner is not statically a declared type.
"""

from __future__ import annotations

import builtins
import keyword
import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from ...grammar import ast
from ...grammar.operators import ATOM, BINARY_PRECEDENCE, COMPARE, CONDITIONAL, NEGATE, NOT, OR, POSTFIX
from .. import ir
from ..views.source_text import expr_to_source
from .types_py import ModelPlans, is_plain_attribute, py_string

# ---- what a name in an expression means ----------------------------------------------------------

# name -> the fewest and the most arguments it takes (None: any number)
FUNCTIONS: dict[str, tuple[int, int | None]] = {"len": (1, 1), "visits": (1, 1), "sum": (1, 1), "min": (1, None),
                                                "max": (1, None)}
# sum, min and max as the runtime's helpers (runtime/guard_aggregates.py): one value on every Python
AGGREGATE_HELPERS = {"sum": "guard_sum", "min": "guard_min", "max": "guard_max"}


def takes(func: str, count: int) -> bool:
    """Whether function `func` takes `count` arguments."""
    fewest, most = FUNCTIONS.get(func, (-1, -1))
    return fewest <= count and (most is None or count <= most)


class GuardCompileError(Exception):
    """An expression the checker should have rejected: an unknown name, function or operator."""


@dataclass(frozen=True)
class GuardNames:
    """The names a guard may mention. `None` leaves the choice to run time (inputs present in the scope win).

    `types` and `state_table` hold the machine's types and states by name (the first of a name, as
    `ir.Machine.type` and `.state` find it): codegen reads a field's type and a state's output for each
    guard that mentions them, and a walk over every declaration for each would make a machine's code
    grow with the square of its size."""

    inputs: Collection[str] | None = None
    states: Collection[str] | None = None
    types: Mapping[str, ir.TypeDef] = field(default_factory=dict)
    state_table: Mapping[str, ir.State] = field(default_factory=dict)
    variables: Mapping[str, ir.Type] = field(default_factory=dict)  # the run variables' types, by name

    @classmethod
    def of(cls, machine: ir.Machine) -> GuardNames:
        types: dict[str, ir.TypeDef] = {}
        for t in machine.types:
            types.setdefault(t.name, t)
        states: dict[str, ir.State] = {}
        for s in machine.states:
            states.setdefault(s.name, s)
        return cls(inputs=frozenset(i.name for i in machine.inputs), states=frozenset(states), types=types,
                   state_table=states, variables={v.name: v.type for v in machine.variables})

    def type(self, machine: ir.Machine, name: str) -> ir.TypeDef:
        """The type `name` of `machine` (through the table when this GuardNames was made for it)."""
        found = self.types.get(name)
        return found if found is not None else machine.type(name)

    def state(self, machine: ir.Machine, name: str) -> ir.State:
        found = self.state_table.get(name)
        return found if found is not None else machine.state(name)

    def is_state(self, name: str) -> bool | None:
        """Whether `name.output` means a state's output; None when only the scope can tell."""
        if self.states is None:
            return None
        return name in self.states


@dataclass(frozen=True)
class Reference:
    """What a name in a guard stands for.

    kind: "output" | "input" | "variable" (a run variable) | "state_output" | "unresolved_output" (`X.output`
    where only the scope can tell whether X is a state or an input; never produced when the machine's names
    are known).
    """

    kind: str
    name: str = ""


def reference_of(expr: ast.Expr, names: GuardNames) -> Reference | None:
    """The scope value `expr` names directly, if it is `output`, an input or `STATE.output`.

    Shared with codegen so both faces resolve a name the same way: `output` is always this state's output;
    `X.output` is state X's output when X is a state; any other bare name is a machine input.
    """
    if isinstance(expr, ast.NameExpr):
        if expr.name == "output":
            return Reference("output")
        return Reference("variable" if expr.name in names.variables else "input", expr.name)
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


def state_argument(call: ast.Call) -> str:
    """The state named by `visits(STATE)`."""
    arg = call.args[0]
    if not isinstance(arg, ast.NameExpr):
        raise GuardCompileError("visits() takes a state name")
    return arg.name



# ---- the spec's own syntax -----------------------------------------------------------------------


def spec_source(expr: ast.Expr) -> str:
    """A guard written back in the spec's syntax, with only the parentheses its meaning needs."""
    return expr_to_source(expr)


# ---- Python --------------------------------------------------------------------------------------


@dataclass
class ExprContext:
    """What Python rendering needs to know about where an expression sits."""

    machine: ir.Machine
    plans: ModelPlans
    names: GuardNames  # the machine's (GuardNames.of, made once per machine)
    state: ir.State | None = None  # the state whose `output` the expression sees
    scope: str = "s"  # the name of the Scope parameter in the generated function
    # a map's element and position names, with their types, where its step runs (`Scope.each`)
    each: Mapping[str, ir.Type | None] = field(default_factory=dict)
    # a join guard (or a map's update): `output` is one branch's (one element's) output, not the state's list
    join: bool = False


def python_source(expr: ast.Expr, context: ExprContext) -> str:
    """The expression as Python over a Scope named `context.scope`."""
    return _PythonWriter(context).write(expr)[0]


def guard_return(expr: ast.Expr, context: ExprContext) -> str:
    """The `return` line of a guard function: the expression, as a bool."""
    code = python_source(expr, context)
    if not yields_bool(expr):
        code = f"bool({code})"
    return f"return {code}"


def yields_bool(expr: ast.Expr) -> bool:
    """Whether the Python for `expr` already yields a bool (so a guard needs no bool() around it)."""
    if isinstance(expr, ast.BinaryOp):
        return expr.op not in ("and", "or", "+", "-", "*", "/", "%")
    if isinstance(expr, ast.UnaryOp):
        return expr.op == "not"
    if isinstance(expr, ast.Quantifier):
        return expr.func.value in ("all", "any")
    if isinstance(expr, ast.IsVariant):
        return True
    if isinstance(expr, ast.Conditional):
        return yields_bool(expr.then) and yields_bool(expr.orelse)
    return isinstance(expr, ast.Literal) and isinstance(expr.value, bool)


def python_literal(value: object) -> str:
    """A scalar as a Python literal; the non-finite floats (which have no literal) as a float() call."""
    if isinstance(value, str):
        return py_string(value)
    if isinstance(value, float) and not math.isfinite(value):
        return f'float("{value}")'
    return repr(value)


# Names the Python of an expression may use besides the scope: an item of all/any/count never takes one.
_EXPRESSION_GLOBALS = frozenset({"guard_attribute", "isinstance", "sum", *AGGREGATE_HELPERS.values(),
                                 *dir(builtins)})


class _PythonWriter:
    """An expression as Python over the run's Scope. The spec's binding strengths are Python's
    (grammar/operators.py), so the code reads as the guard does in the spec."""

    def __init__(self, context: ExprContext) -> None:
        self.context = context
        # the items all/any/count bind around the expression being written: spec name -> (Python name, type)
        self.bound: dict[str, tuple[str, ir.Type | None]] = {}

    def write(self, expr: ast.Expr) -> tuple[str, int]:
        if isinstance(expr, ast.BinaryOp):
            return self.binary(expr)
        if isinstance(expr, ast.UnaryOp):
            return self.unary(expr)
        if isinstance(expr, ast.ListExpr):
            return "[" + ", ".join(self.write(i)[0] for i in expr.items) + "]", ATOM
        if isinstance(expr, ast.Index):
            return f"{self.operand(expr.value, POSTFIX)}[{self.write(expr.index)[0]}]", POSTFIX
        if isinstance(expr, ast.Conditional):
            # nests to the right as in the spec; the value and the test are tighter than a conditional
            then, test = self.operand(expr.then, OR), self.operand(expr.test, OR)
            return f"{then} if {test} else {self.operand(expr.orelse, CONDITIONAL)}", CONDITIONAL
        return self.leaf(expr)

    def operand(self, expr: ast.Expr, at_least: int, *, strictly: bool = False) -> str:
        text, prec = self.write(expr)
        return f"({text})" if prec < at_least or (strictly and prec == at_least) else text

    def binary(self, expr: ast.BinaryOp) -> tuple[str, int]:
        prec = BINARY_PRECEDENCE[expr.op]
        # Comparisons do not chain in the spec and chain differently in Python: parenthesize both sides.
        left = self.operand(expr.left, prec, strictly=prec == COMPARE)
        right = self.operand(expr.right, prec, strictly=True)
        return f"{left} {expr.op} {right}", prec

    def unary(self, expr: ast.UnaryOp) -> tuple[str, int]:
        if expr.op == "not":
            return f"not {self.operand(expr.operand, NOT)}", NOT
        inner = expr.operand
        nested = isinstance(inner, ast.UnaryOp) or (
            isinstance(inner, ast.Literal) and isinstance(inner.value, (int, float)) and inner.value < 0
        )
        return f"-{self.operand(inner, NEGATE, strictly=nested)}", NEGATE

    def _item_name(self, name: str) -> str:
        """The Python name of an item of all/any/count: the spec's own unless that would hide something
        the expression uses (the scope, a builtin, a class, an item of an enclosing all/any/count)."""
        taken = {self.context.scope, *self.context.plans.class_names.values(),
                 *(python for python, _ in self.bound.values())}
        candidate = name
        while candidate in taken or candidate in _EXPRESSION_GLOBALS or keyword.iskeyword(candidate):
            candidate += "_"
        return candidate

    def leaf(self, expr: ast.Expr) -> tuple[str, int]:
        ctx = self.context
        if isinstance(expr, ast.NameExpr) and expr.name in self.bound:
            return self.bound[expr.name][0], ATOM
        if isinstance(expr, ast.Quantifier):
            return self.quantifier(expr)
        if isinstance(expr, ast.IsVariant):
            return self.is_variant(expr)
        if isinstance(expr, ast.NameExpr) and expr.name in ctx.each:  # a map's element or its position
            return f"{ctx.scope}.each[{py_string(expr.name)}]", POSTFIX
        ref = reference_of(expr, ctx.names) if not self._reads_item(expr) else None
        if ref is not None:
            if ref.kind == "output":
                return f"{ctx.scope}.output", POSTFIX
            if ref.kind == "input":
                return f"{ctx.scope}.inputs[{py_string(ref.name)}]", POSTFIX
            if ref.kind == "variable":
                return f"{ctx.scope}.vars[{py_string(ref.name)}]", POSTFIX
            if ref.kind == "state_output":
                return f"{ctx.scope}.outputs.get({py_string(ref.name)})", POSTFIX
            raise GuardCompileError(f"cannot resolve {ref.name}.output")
        if isinstance(expr, ast.Literal):
            text = python_literal(expr.value)
            return text, NEGATE if text.startswith("-") else ATOM
        if isinstance(expr, ast.Attribute):
            return self.attribute(expr)
        if isinstance(expr, ast.Call):
            func = expr.func.value
            if not takes(func, len(expr.args)):
                raise GuardCompileError(f"unknown function {func}()")
            if func == "visits":
                return f"{ctx.scope}.visits.get({py_string(state_argument(expr))}, 0)", POSTFIX
            args = ", ".join(self.write(a)[0] for a in expr.args)
            return f"{AGGREGATE_HELPERS.get(func, func)}({args})", POSTFIX
        if isinstance(expr, ast.NameExpr):
            raise GuardCompileError(f"unknown name {expr.name!r}")
        raise GuardCompileError(f"not an expression: {type(expr).__name__}")

    def _reads_item(self, expr: ast.Expr) -> bool:
        """`ITEM.output` for an item of all/any/count is a field of the item, never a state's output."""
        return isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.NameExpr) and expr.value.name in self.bound

    def quantifier(self, expr: ast.Quantifier) -> tuple[str, int]:
        """`all(TEST for x in LIST)` as Python's own; `count(...)` as `sum(1 for x in LIST if TEST)`."""
        func = expr.func.value
        if func not in ast.QUANTIFIERS and func not in ast.AGGREGATES:
            raise GuardCompileError(f"unknown function {func}() over a list")
        items = self.operand(expr.items, OR)  # `in a if b else c` would read as a filter
        owner = self.type_of(expr.items)
        item_type = owner.item if isinstance(owner, ir.ListOf) else None
        name = expr.var.value
        python = self._item_name(name)
        outer = self.bound.get(name)
        self.bound[name] = (python, item_type)
        try:
            element = self.write(expr.element)[0]
        finally:
            if outer is None:
                del self.bound[name]
            else:
                self.bound[name] = outer
        if func == "count":
            if isinstance(expr.element, ast.Conditional):
                element = f"({element})"  # a filter takes no conditional without parentheses
            return f"sum(1 for {python} in {items} if {element})", POSTFIX
        return f"{AGGREGATE_HELPERS.get(func, func)}({element} for {python} in {items})", POSTFIX

    def is_variant(self, expr: ast.IsVariant) -> tuple[str, int]:
        """`x is Answer` as `isinstance(x, Answer)`: a variant value is an instance of its type's class."""
        cls = self.context.plans.class_names.get(expr.type.value)
        if cls is None:
            raise GuardCompileError(f"unknown type {expr.type.value!r}")
        test = f"isinstance({self.write(expr.value)[0]}, {cls})"
        return (f"not {test}", NOT) if expr.negated else (test, POSTFIX)

    def attribute(self, expr: ast.Attribute) -> tuple[str, int]:
        owner = self.operand(expr.value, POSTFIX)
        if isinstance(expr.value, ast.Literal) and type(expr.value.value) is int:
            owner = f"({owner})"  # `1.x` would read as a float literal
        name = expr.attr.value
        owner_type = self.type_of(expr.value)
        if isinstance(owner_type, ir.Named) and is_plain_attribute(name):
            fields = self.context.names.type(self.context.machine, owner_type.name).fields
            if any(f.name == name for f in fields):
                return f"{owner}.{name}", POSTFIX
        return f"guard_attribute({owner}, {py_string(name)})", POSTFIX

    def type_of(self, expr: ast.Expr) -> ir.Type | None:
        """The declared type of a value, as far as codegen needs it: whether it is a model (or may be one)."""
        t = _static_type(expr, self.context, {name: t for name, (_, t) in self.bound.items()})
        while isinstance(t, ir.Optional_):
            t = t.inner
        return t


def _static_type(expr: ast.Expr, ctx: ExprContext, bound: Mapping[str, ir.Type | None]) -> ir.Type | None:
    if isinstance(expr, ast.NameExpr) and expr.name in bound:
        return bound[expr.name]
    if isinstance(expr, ast.NameExpr) and expr.name in ctx.each:
        return ctx.each[expr.name]
    item_field = isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.NameExpr) and expr.value.name in bound
    ref = reference_of(expr, ctx.names) if not item_field else None
    if ref is not None:
        if ref.kind == "output":
            if ctx.join and ctx.state is not None:
                return ctx.state.output  # one branch's (or, in a map's update, one element's) output
            return _output_type(ctx.state)
        if ref.kind == "input":
            return next((i.type for i in ctx.machine.inputs if i.name == ref.name), None)
        if ref.kind == "variable":
            return ctx.names.variables.get(ref.name)
        if ref.kind == "state_output":
            return _output_type(ctx.names.state(ctx.machine, ref.name))
        return None
    if isinstance(expr, ast.Attribute):
        owner = _static_type(expr.value, ctx, bound)
        while isinstance(owner, ir.Optional_):
            owner = owner.inner
        if isinstance(owner, ir.Named):
            for f in ctx.names.type(ctx.machine, owner.name).fields:
                if f.name == expr.attr.value:
                    return f.type
        return None
    if isinstance(expr, ast.Index):
        owner = _static_type(expr.value, ctx, bound)
        while isinstance(owner, ir.Optional_):
            owner = owner.inner
        return owner.item if isinstance(owner, ir.ListOf) else None
    return None


def _output_type(state: ir.State | None) -> ir.Type | None:
    """A state's output type: the declared one, str for an untyped agent state; None for a tool's result.
    A map's or a parallel state's output is the list of its elements' or branches' outputs."""
    if state is None:
        return None
    if state.parallel is not None:
        return ir.ListOf(state.output) if state.output is not None else None
    one = state.output if state.output is not None else (ir.STR if state.kind == "agent" else None)
    if state.each is not None:
        return ir.ListOf(one) if one is not None else None
    return one


def each_names(machine: ir.Machine, state: ir.State) -> dict[str, ir.Type | None]:
    """The names a map gives its step, with their static types: the element's (the list's item type, when
    known) and the position's (int)."""
    each = state.each
    if each is None:
        return {}
    listed = _static_type(each.items, ExprContext(machine, ModelPlans((), {}, {}), GuardNames.of(machine)), {})
    while isinstance(listed, ir.Optional_):
        listed = listed.inner
    names: dict[str, ir.Type | None] = {each.item: listed.item if isinstance(listed, ir.ListOf) else None}
    if each.index is not None:
        names[each.index] = ir.INT
    return names
