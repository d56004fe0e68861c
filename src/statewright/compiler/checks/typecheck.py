"""Type checking: type declarations, input defaults, tool options, guards and tool-call arguments.

Types here are the IR's own (`ir.Type`) plus two the checker needs while inferring: `Record` (a standard
tool's result, an object without a declared type) and `TextOutput` (the plain-text output of an agent state
without `output TYPE`: a str whose fields are a mistake worth its own message). Anything unknown is `any`,
which keeps one mistake from cascading into many. What a value must look like to fit a type
(`value_problems`) is shared with the test-block checks.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from ...diagnostics import Diagnostics, Span, did_you_mean, quoted_list
from ...grammar import ast
from ...runtime.tool_signatures import STD_TOOLS
from .. import ir
from .callees import UntypedResult, outcome_type
from .constraints import constraint_of, lower_range, range_text, value_violations
from .flow import EntryFacts, Flow
from .resolve import (
    BUILTIN_TYPES,
    GUARD_OUTPUT,
    FieldRead,
    InputRead,
    StateView,
    Symbols,
    closest,
    unknown_state_help,
)

FUNCTIONS = ("len", "visits", *ast.QUANTIFIERS, *ast.AGGREGATES)


@dataclass(frozen=True)
class Record:
    """An object type without a declaration: a standard tool's result."""

    fields: tuple[tuple[str, ir.Type], ...]
    label: str


@dataclass(frozen=True)
class TextOutput:
    """The plain-text output of agent state `state` (no `output TYPE`): a str."""

    state: str


@dataclass(frozen=True)
class MaybeAbsent:
    """`STATE.output` where state `state` may not have run yet: `inner`, or none.

    Comparing it with `==` / `!=` is fine (with none, too); reading a field or an item of it, ordering,
    arithmetic and `len()` are not (SW4014) until a test for none narrows it (`none_tests`).
    """

    inner: TypeLike
    state: str


TypeLike = (ir.Prim | ir.ListOf | ir.Optional_ | ir.Enum | ir.Named | ir.Variant | Record | TextOutput
            | MaybeAbsent | UntypedResult)


def type_text(t: TypeLike) -> str:
    """A type the way a user writes it."""
    if isinstance(t, ir.Prim):
        return t.name
    if isinstance(t, ir.ListOf):
        return f"list[{type_text(t.item)}]"
    if isinstance(t, ir.Optional_):
        return f"{type_text(t.inner)}?"
    if isinstance(t, ir.Enum):
        return " | ".join(f'"{v}"' for v in t.values)
    if isinstance(t, ir.Named):
        return t.name
    if isinstance(t, ir.Variant):
        return " | ".join(t.options)
    if isinstance(t, Record):
        return t.label
    if isinstance(t, MaybeAbsent):
        return type_text(t.inner)
    if isinstance(t, UntypedResult):
        return f"the untyped result of {t.machine}"
    return "str"  # TextOutput


def parse_signature_type(text: str) -> ir.Type:
    """A type written in tool_signatures.py's notation ("str", "list[str]", "float?") as an IR type."""
    text = text.strip()
    if text.endswith("?"):
        return ir.Optional_(parse_signature_type(text[:-1]))
    if text.startswith("list[") and text.endswith("]"):
        return ir.ListOf(parse_signature_type(text[5:-1]))
    return BUILTIN_TYPES.get(text, ir.ANY)


def std_tool_result(name: str) -> TypeLike:
    returns = STD_TOOLS[name]["returns"]
    if isinstance(returns, dict):
        return Record(tuple((k, parse_signature_type(v)) for k, v in returns.items()),
                      f"the result of {name}")
    return parse_signature_type(returns)


def tool_result_type(name: str, symbols: Symbols) -> TypeLike:
    """What an action state calling `name` outputs (for tools outside the standard set: `any`)."""
    if name in STD_TOOLS and (name not in symbols.tools or symbols.tools[name].import_path is None):
        return std_tool_result(name)
    return ir.ANY


def output_type(view: StateView, symbols: Symbols) -> TypeLike:
    """The type of a state's output: its `output TYPE`, plain text for an agent, a tool's result; for a
    state that maps over a list, the list of those; for a parallel state, the list of its branches'
    outputs (`list[any]` when the branches end in outputs of different types)."""
    if view.parallel is not None:
        found = symbols.parallel_outputs.get(view.name)
        if found is None:
            found = ir.ListOf(_as_ir(common_type([branch_output_type(ends, symbols)
                                                  for _, ends in symbols.branches.get(view.name, ())])))
            symbols.parallel_outputs[view.name] = found
        return found
    one = step_output_type(view, symbols)
    return ir.ListOf(_as_ir(one)) if view.each is not None else one


def step_output_type(view: StateView, symbols: Symbols) -> TypeLike:
    """What one step of a state gives: its `output TYPE`, plain text for an agent, a tool's result (for a
    map, what one element's step gives)."""
    if view.output is not None:
        return symbols.resolve_output(view.output.type)
    if view.kind in ("agent", "human"):
        return TextOutput(view.name)
    if view.kind == "action" and view.call is not None:
        return tool_result_type(view.call.tool.dotted, symbols)
    if view.kind == "call" and view.run is not None:  # the call's outcome (checks/callees.py)
        callee = symbols.callees.get(view.run.machine.value)
        return outcome_type(symbols, callee) if callee is not None else ir.ANY
    return ir.ANY


def branch_output_type(ends: tuple[str, ...], symbols: Symbols) -> TypeLike:
    """The output of a branch: the output of the state it ended in."""
    views = [symbols.states[e] for e in ends if e in symbols.states]
    # (a parallel state ending a branch is an error of its own, SW3069: its type is not worked out)
    return common_type([output_type(v, symbols) if v.parallel is None else ir.ANY for v in views])


def common_type(types: list[TypeLike]) -> TypeLike:
    """The one type all of `types` have (plain text counting as str), else `any`."""
    normal = [ir.STR if isinstance(t, TextOutput) else t for t in types]
    if normal and all(t == normal[0] for t in normal):
        return normal[0]
    return ir.ANY


def _as_ir(t: TypeLike) -> ir.Type:
    """A checker type as the IR type of a list's items (the checker's own kinds as what they are at run time)."""
    if isinstance(t, (ir.Prim, ir.ListOf, ir.Optional_, ir.Enum, ir.Named, ir.Variant)):
        return t
    if isinstance(t, TextOutput):
        return ir.STR
    return ir.ANY


def fields_of(t: TypeLike, symbols: Symbols) -> dict[str, ir.Type]:
    """The fields of a declared type or of a tool's result; {} for every other type."""
    if isinstance(t, ir.Named):
        return symbols.fields_of(t.name)
    if isinstance(t, Record):
        return dict(t.fields)
    return {}


def unknown_field_help(name: str, fields: dict[str, ir.Type]) -> str:
    """Help for a field `name` that a type lacks: the likely intended field, or the fields there are."""
    if not fields:
        return "the type has no fields"
    return did_you_mean(name, fields) or f"its fields are {quoted_list(fields)}"


def shorten_source(e: ast.Expr | None) -> str:
    from ..tools.formatter import expr_to_source  # here, not at import: only messages need the printer
    from ..tools.graph import shorten

    return shorten(expr_to_source(e), 60) if e is not None else "..."


def _norm(t: TypeLike) -> TypeLike:
    if isinstance(t, MaybeAbsent):  # otherwise it behaves like an optional value
        inner = _norm(t.inner)
        return inner if isinstance(inner, ir.Optional_) else ir.Optional_(inner)  # type: ignore[arg-type]
    if isinstance(t, UntypedResult):  # a value whose type is not known: anything may be done with it
        return ir.ANY
    return ir.STR if isinstance(t, TextOutput) else t


def _strip_optional(t: TypeLike) -> TypeLike:
    t = _norm(t)
    return _norm(t.inner) if isinstance(t, ir.Optional_) else t


def _numeric(t: TypeLike) -> bool:
    return t in (ir.INT, ir.FLOAT)


def _stringy(t: TypeLike) -> bool:
    return t == ir.STR or isinstance(t, ir.Enum)


def _is_bool(t: TypeLike) -> bool:
    return _strip_optional(t) in (ir.BOOL, ir.ANY)


def _comparable(a: TypeLike, b: TypeLike) -> bool:
    """Whether `==` / `!=` between values of these types can ever be true (ints and floats mix)."""
    a, b = _norm(a), _norm(b)
    if ir.ANY in (a, b):
        return True
    if ir.NONE in (a, b):
        other = b if a == ir.NONE else a
        return other == ir.NONE or isinstance(other, ir.Optional_)
    a, b = _strip_optional(a), _strip_optional(b)
    if ir.ANY in (a, b):
        return True
    if (_numeric(a) and _numeric(b)) or (_stringy(a) and _stringy(b)):
        return True
    if isinstance(a, ir.ListOf) and isinstance(b, ir.ListOf):
        return _comparable(a.item, b.item)
    return a == b


def _assignable(src: TypeLike, dst: TypeLike) -> bool:
    """Whether a value of type `src` can be passed where `dst` is expected (lenient about optionals)."""
    src, dst = _norm(src), _norm(dst)
    if ir.ANY in (src, dst):
        return True
    if isinstance(dst, ir.Optional_):
        return src == ir.NONE or _assignable(src, dst.inner)
    if isinstance(src, ir.Optional_):
        return _assignable(src.inner, dst)
    if dst == ir.FLOAT and src == ir.INT:
        return True
    if _stringy(src) and _stringy(dst):
        return True
    if isinstance(src, ir.ListOf) and isinstance(dst, ir.ListOf):
        return _assignable(src.item, dst.item)
    return src == dst


def _join(a: TypeLike, b: TypeLike) -> TypeLike | None:
    """The one type for a value of type `a` or `b` (neither optional): the same type, float for ints and
    floats, str for texts and enums, a list of the items' join, the variant of the declared types both may
    be, `any` when either is; None when they do not go together. `none` joins anything (as its optional)."""
    a, b = _norm(a), _norm(b)
    if ir.ANY in (a, b):
        return ir.ANY
    if a == ir.NONE or b == ir.NONE:
        return b if a == ir.NONE else a
    if a == b:
        return a
    if _numeric(a) and _numeric(b):
        return ir.FLOAT
    if _stringy(a) and _stringy(b):
        if isinstance(a, ir.Enum) and isinstance(b, ir.Enum):
            return ir.Enum(tuple(dict.fromkeys((*a.values, *b.values))))
        return ir.STR
    if isinstance(a, ir.ListOf) and isinstance(b, ir.ListOf):
        if a.item == ir.ANY or b.item == ir.ANY:
            return ir.ListOf(ir.ANY)
        item = _join(a.item, b.item)
        return ir.ListOf(_as_ir(item)) if item is not None else None
    declared = [_declared_options(t) for t in (a, b)]
    if declared[0] and declared[1]:
        return _variant_of((*declared[0], *declared[1]))
    return None


def _declared_options(t: TypeLike) -> tuple[str, ...]:
    if isinstance(t, ir.Named):
        return (t.name,)
    if isinstance(t, ir.Variant):
        return t.options
    return ()


def _variant_of(options: tuple[str, ...]) -> ir.Named | ir.Variant:
    names = tuple(dict.fromkeys(options))
    return ir.Named(names[0]) if len(names) == 1 else ir.Variant(names)


def _coalesces(left: TypeLike, right: TypeLike) -> bool:
    """Whether `left or right` picks a value rather than combining truth values: neither side is a boolean,
    and not both are of unknown type (`any or any` stays a boolean `or`)."""
    kinds = [_strip_optional(t) for t in (left, right)]
    if any(k == ir.BOOL for k in kinds):
        return False
    return not all(k == ir.ANY for k in kinds)


# ---- values against types ------------------------------------------------------------------------


@dataclass(frozen=True)
class ValueProblem:
    span: Span
    message: str
    help: str = ""
    constraint: bool = False  # the value fits the type but breaks a constraint (`in`, `len`, `matches`)


_KIND_WORDS = {"str": "a string", "int": "a whole number", "float": "a number", "bool": "true or false",
               "none": "none", "list": "a list", "object": "an object"}


def value_problems(value: ast.Value, t: TypeLike, symbols: Symbols,
                   constraints: tuple[ast.Constraint, ...] = (), *, partial: bool = False) -> list[ValueProblem]:
    """Every place where `value` does not fit `t` (and, with them, `constraints`; the fields of declared
    types bring their own), innermost first within each branch. With `partial`, an object may leave fields
    out (a test's `expect output` names only the fields it checks)."""
    out: list[ValueProblem] = []
    stack: list[tuple[ast.Value, TypeLike, tuple[ast.Constraint, ...]]] = [(value, t, constraints)]
    while stack:
        v, want, limits = stack.pop()
        want = _norm(want)
        if limits and v.kind != "none":
            out.extend(ValueProblem(span, message, help, True) for span, message, help in value_violations(v, limits))
        got = _KIND_WORDS.get(v.kind, v.kind)
        if want == ir.ANY:
            continue
        if isinstance(want, ir.Optional_):
            if v.kind != "none":
                stack.append((v, want.inner, ()))
            continue
        if v.kind == "none":
            out.append(ValueProblem(v.span, f"none does not fit {type_text(want)}",
                                    f"make the type optional ({type_text(want)}?) or give a value"))
            continue
        if isinstance(want, ir.Prim):
            fits = (v.kind == want.name) or (want == ir.FLOAT and v.kind == "int")
            if not fits:
                out.append(ValueProblem(v.span, f"expected {type_text(want)}, found {got}",
                                        _scalar_hint(v, want)))
        elif isinstance(want, ir.Enum):
            if v.kind != "str":
                out.append(ValueProblem(v.span, f"expected one of {type_text(want)}, found {got}",
                                        "write one of the values, in quotes"))
            elif v.value not in want.values:
                out.append(ValueProblem(v.span, f"\"{v.value}\" is not one of {type_text(want)}",
                                        did_you_mean(str(v.value), want.values)))
        elif isinstance(want, ir.ListOf):
            if v.kind != "list":
                out.append(ValueProblem(v.span, f"expected {type_text(want)}, found {got}",
                                        "write a list in brackets: [ITEM, ...], or [] for none"))
            else:
                stack.extend((item, want.item, ()) for item in reversed(ast.list_items(v)))
        elif isinstance(want, ir.Variant):
            continue  # a reply for a variant output is checked against its variant (testblocks.py)
        elif isinstance(want, (ir.Named, Record)):
            fields = fields_of(want, symbols)
            if v.kind != "object":
                out.append(ValueProblem(v.span, f"expected an object of type {type_text(want)}, found {got}",
                                        "write { " + "  ".join(f"{k} ..." for k in fields) + " }"))
                continue
            seen: set[str] = set()
            pending: list[tuple[ast.Value, TypeLike, tuple[ast.Constraint, ...]]] = []
            for entry in ast.object_entries(v):
                key = entry.key.value
                if key in seen:
                    out.append(ValueProblem(entry.key.span, f"field '{key}' is given twice"))
                    continue
                seen.add(key)
                if key not in fields:
                    out.append(ValueProblem(entry.key.span, f"{type_text(want)} has no field '{key}'",
                                            unknown_field_help(key, fields)))
                    continue
                decl = symbols.field_decl(want.name, key) if isinstance(want, ir.Named) else None
                pending.append((entry.value, fields[key], decl.constraints if decl is not None else ()))
            stack.extend(reversed(pending))
            missing = [k for k, ft in fields.items() if k not in seen and not isinstance(ft, ir.Optional_)]
            if missing and not partial:
                out.append(ValueProblem(v.span, f"missing field{'s' if len(missing) > 1 else ''} "
                                        f"{quoted_list(missing, len(missing))} of {type_text(want)}",
                                        "optional fields (T?) may be left out; the others are required"))
    return out


_EXAMPLES = {"int": "a whole number, e.g. 3", "float": "a number, e.g. 0.5", "bool": "true or false",
             "str": 'text in quotes, e.g. "..."'}


def _scalar_hint(v: ast.Value, want: ir.Prim) -> str:
    """How to write a value of the wanted built-in type, from the value that was written instead."""
    text = str(v.value).strip() if v.kind == "str" else ""
    if text and want in (ir.INT, ir.FLOAT) and _is_number_text(text, want):
        return f"write the number without quotes: {text}"
    if text.lower() in ("true", "false") and want == ir.BOOL:
        return f"write {text.lower()} without quotes"
    if want == ir.STR and v.kind in ("int", "float", "bool") and v.span is not None:
        return f'write it in quotes: "{v.span.text}"'
    return f"write {_EXAMPLES[want.name]}" if want.name in _EXAMPLES else ""


def _is_number_text(text: str, want: ir.Prim) -> bool:
    """Whether `text` (a string's content) is a number of type `want` as the language writes numbers."""
    pattern = _INT_TEXT if want == ir.INT else _NUMBER_TEXT if want == ir.FLOAT else None
    return pattern is not None and pattern.fullmatch(text.strip()) is not None


_INT_TEXT = re.compile(r"-?[0-9]+")
_NUMBER_TEXT = re.compile(r"-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?")


# ---- expressions ---------------------------------------------------------------------------------


def state_output_read(e: ast.Expr, symbols: Symbols) -> str | None:
    """The state whose output `e` is, for `e` written `STATE.output`; else None."""
    if (isinstance(e, ast.Attribute) and e.attr.value == "output" and isinstance(e.value, ast.NameExpr)
            and e.value.name in symbols.states and e.value.name not in symbols.inputs):
        return e.value.name
    return None


def expr_path(e: ast.Expr) -> str | None:
    """`e` as a path of names and fields (`tags`, `output.note`, `review.output`), or None."""
    fields: list[str] = []
    while isinstance(e, ast.Attribute):
        fields.append(e.attr.value)
        e = e.value
    if not isinstance(e, ast.NameExpr):
        return None
    return ".".join([e.name, *reversed(fields)])


def none_tests(e: ast.Expr, value: bool, symbols: Symbols) -> set[str]:
    """The paths (`expr_path`) surely not none when guard expression `e` has the truth value `value`.

    `P != none` true, or `P == none` false, shows P is there (for `STATE.output`: that STATE has run);
    `and`, `or` and `not` combine what their operands show. This is the narrowing rule for guards;
    templates follow the same rule (checks/templates.py), where a bare `P` also tests it.
    """
    if isinstance(e, ast.UnaryOp) and e.op == "not":
        return none_tests(e.operand, not value, symbols)
    if isinstance(e, ast.BinaryOp) and e.op in ("and", "or"):
        left, right = none_tests(e.left, value, symbols), none_tests(e.right, value, symbols)
        both = (e.op == "and") == value  # `a and b` true, or `a or b` false: both operands are known
        return left | right if both else left & right
    if isinstance(e, ast.BinaryOp) and e.op in ("==", "!="):
        for side, other in ((e.left, e.right), (e.right, e.left)):
            path = expr_path(side)
            if path is not None and isinstance(other, ast.Literal) and other.value is None:
                return {path} if (e.op == "!=") == value else set()
    if isinstance(e, ast.IsVariant) and value != e.negated:
        path = expr_path(e.value)  # none is no variant: `x is T` true shows x is there
        return {path} if path is not None else set()
    return set()


def merge_variant_tests(known: dict[str, frozenset[str]], shown: dict[str, frozenset[str]]
                        ) -> dict[str, frozenset[str]]:
    """What is known about which variants paths may be, once `shown` is known too (both hold)."""
    merged = dict(known)
    for path, options in shown.items():
        merged[path] = merged[path] & options if path in merged else options
    return merged


def _number_literal(e: ast.Expr) -> int | float | None:
    """The number a literal (or a negated literal) writes; None for anything else."""
    negate = isinstance(e, ast.UnaryOp) and e.op == "-"
    inner = e.operand if isinstance(e, ast.UnaryOp) and negate else e
    if isinstance(inner, ast.Literal) and isinstance(inner.value, (int, float)) and not isinstance(inner.value, bool):
        return -inner.value if negate else inner.value
    return None


_FLIPPED = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "==": "==", "!=": "!="}


def comparison_outcome(op: str, low: float | None, high: float | None, n: float) -> bool | None:
    """The value of `X op n` for every X in the inclusive range low..high (None: an open end), or None
    when it depends on X."""
    below = low is not None and low > n  # every X is above n
    above = high is not None and high < n  # every X is below n
    if op == ">":
        return False if high is not None and high <= n else True if below else None
    if op == ">=":
        return False if above else True if low is not None and low >= n else None
    if op == "<":
        return False if low is not None and low >= n else True if above else None
    if op == "<=":
        return False if below else True if high is not None and high <= n else None
    exactly = low is not None and low == high == n
    if op == "==":
        return False if below or above else True if exactly else None
    if op == "!=":
        return True if below or above else False if exactly else None
    return None


def absent_output_notes(state: str, reader: str, flow: Flow | None) -> list[str]:
    """Notes on how a run reaches `reader` with no output from `state` yet."""
    if flow is None:
        return []
    path = flow.path_avoiding(state, reader)
    if path is None:
        return []
    if state == reader:
        return [f"the first time a run enters '{reader}', it has not run yet: "
                + " -> ".join(path)]
    return ["for example, a run can go " + " -> ".join(path) + f" without running '{state}'"]


def _update_help(e: ast.Expr, maybe_none: str, first: str) -> str:
    """How an update's value reads `maybe_none` (an output whose state may not have run, an optional value)
    safely where `e` uses it: tested in a conditional, or coalesced when `e` is that value itself."""
    used = shorten_source(e)
    help = f"{first}: '{used} if {maybe_none} != none else ...'"
    if used == maybe_none:
        help += f", or give a value for when it is none: '{maybe_none} or ...'"
    return help


class ExprChecker:
    """Infers expression types in one scope and reports what cannot work.

    `state` is the state whose guard is checked (its `output` is in scope); None for tool-call arguments,
    which are evaluated before the state has an output.
    """

    def __init__(self, symbols: Symbols, diags: Diagnostics, state: StateView | None, *,
                 reader: str | None = None, flow: Flow | None = None,
                 local: dict[str, TypeLike] | None = None, output: TypeLike | None = None) -> None:
        self.symbols = symbols
        self.diags = diags
        self.state = state
        self.output = output  # what `output` is when not the state's own output (a join guard: one branch's)
        # the state whose guard or tool call this is, and the machine's flow: together they say whose
        # output is surely there (SW4014)
        self.reader = reader if reader is not None else (state.name if state is not None else None)
        self.flow = flow
        self.narrowed: set[str] = set()  # paths a none test on the way here has shown to be there
        self.variants: dict[str, frozenset[str]] = {}  # paths an `is` test has shown to be some variants
        # names bound by all(), any() and count(), with their types; in a map's step, also the element's
        # and its position's
        self.locals: dict[str, TypeLike] = dict(local or {})
        # expressions that read a constrained field or input: the declaration, for SW7020
        self.declared: dict[int, ast.FieldDecl | ast.InputDecl] = {}
        self.guard: ast.Transition | None = None  # the transition whose guard is checked, for help texts
        self.what: str | None = None  # what the expression is, for messages, when not a guard or an argument

    def knowing(self, facts: EntryFacts) -> ExprChecker:
        """This checker, with what the transitions into its state show taken as known."""
        self.narrowed |= facts.present
        self.variants = merge_variant_tests(self.variants, dict(facts.variants))
        return self

    def has_run(self, name: str) -> bool:
        """Whether state `name` has surely run when this expression is evaluated."""
        if f"{name}.output" in self.narrowed or self.flow is None or self.reader is None:
            return True
        if self.state is not None and name == self.reader:
            return True  # a guard is evaluated after its own state's step
        return self.flow.runs_before(name, self.reader)

    def present(self, t: TypeLike, e: ast.Expr, value: ast.Expr | None = None) -> TypeLike:
        """`t`, the type of `value` (by default `e` itself), for a use `e` that needs it there: SW4014 when
        it may be none (an optional value, or an output whose state may not have run), then the type it
        has when it is there."""
        if isinstance(t, ir.Optional_):
            self._maybe_none(e, value if value is not None else e, t)
            return t.inner
        if not isinstance(t, MaybeAbsent):
            return t
        reader = self.reader or "?"
        if self.state is not None and self.guard is not None:
            target = self.guard.target.value if self.guard.target is not None else "..."
            guard = shorten_source(self.guard.guard)
            if isinstance(self.guard.guard, ast.BinaryOp) and self.guard.guard.op == "or":
                guard = f"({guard})"
            help = f"test that it ran first: 'when {t.state}.output != none and {guard} -> {target}'"
        elif self.what == "an update":
            help = _update_help(e, f"{t.state}.output", "test that it ran in the value")
        else:
            help = (f"a tool call's arguments cannot test it; make sure '{t.state}' runs before '{reader}' on "
                    "every path, or read something every run has")
        where = f"state '{reader}'" if t.state != reader else f"the call in '{reader}'"
        self.diags.report("SW4014", f"'{t.state}.output' may be none here: '{t.state}' may not have run "
                          f"before {where}", e.span, label=f"'{t.state}' may not have run yet",
                          notes=absent_output_notes(t.state, reader, self.flow), help=help)
        return t.inner

    def _maybe_none(self, e: ast.Expr, value: ast.Expr, t: ir.Optional_) -> None:
        shown = value.span.text if value.span is not None else "the value"
        if self.guard is not None and self.guard.guard is not None:
            guard = shorten_source(self.guard.guard)
            if isinstance(self.guard.guard, ast.BinaryOp) and self.guard.guard.op == "or":
                guard = f"({guard})"
            target = self.guard.target.value if self.guard.target is not None else "..."
            help = f"test it first: 'when {shown} != none and {guard} -> {target}'"
        elif self.what == "an update":
            help = _update_help(e, shown, "test it in the value")
        else:
            help = "a tool call's arguments cannot test it; pass it whole, or read something that is always there"
        self.diags.report("SW4014", f"'{shown}' may be none here", e.span,
                          label=f"'{shown}' is {type_text(t)}: it may be none", help=help)

    def infer(self, e: ast.Expr) -> TypeLike:
        t = self._infer(e)
        if isinstance(t, ir.Optional_) and self.narrowed and expr_path(e) in self.narrowed:
            return t.inner  # a none test on the way here showed it is there
        if self.variants:
            return self._narrow_variant(e, t)
        return t

    def _narrow_variant(self, e: ast.Expr, t: TypeLike) -> TypeLike:
        """A variant value where `is` tests on the way here showed which of its types it can be."""
        inner = t.inner if isinstance(t, MaybeAbsent) else t
        if not isinstance(inner, ir.Variant):
            return t
        allowed = self.variants.get(expr_path(e) or "")
        if allowed is None:
            return t
        options = tuple(o for o in inner.options if o in allowed)
        narrowed: TypeLike = (ir.Named(options[0]) if len(options) == 1 else ir.Variant(options) if options
                              else ir.ANY)  # every variant ruled out: the read is never made
        return MaybeAbsent(narrowed, t.state) if isinstance(t, MaybeAbsent) else narrowed

    def variant_options(self, e: ast.Expr) -> tuple[str, ...] | None:
        """The variants `e` may be, for `e` written `output` or `STATE.output` of a variant output."""
        if isinstance(e, ast.NameExpr) and e.name == GUARD_OUTPUT and self.state is not None:
            t = output_type(self.state, self.symbols)
        else:
            state = state_output_read(e, self.symbols)
            if state is None:
                return None
            t = output_type(self.symbols.states[state], self.symbols)
        return t.options if isinstance(t, ir.Variant) else None

    def variant_tests(self, e: ast.Expr, value: bool) -> dict[str, frozenset[str]]:
        """The paths whose variants are known when `e` has the truth value `value`, and those variants:
        the narrowing rule of `none_tests`, for `is`."""
        if isinstance(e, ast.UnaryOp) and e.op == "not":
            return self.variant_tests(e.operand, not value)
        if isinstance(e, ast.BinaryOp) and e.op in ("and", "or"):
            left, right = self.variant_tests(e.left, value), self.variant_tests(e.right, value)
            if (e.op == "and") == value:  # both operands are known
                return merge_variant_tests(left, right)
            return {p: left[p] | right[p] for p in left.keys() & right.keys()}
        if isinstance(e, ast.IsVariant):
            path, options = expr_path(e.value), self.variant_options(e.value)
            if path is None or options is None or e.type.value not in options:
                return {}
            shown = {e.type.value} if value != e.negated else set(options) - {e.type.value}
            return {path: frozenset(shown)}
        return {}

    def _infer(self, e: ast.Expr) -> TypeLike:
        if isinstance(e, ast.Literal):
            return self._literal_type(e.value)
        if isinstance(e, ast.NameExpr):
            return self._name(e)
        if isinstance(e, ast.Attribute):
            return self._attribute(e)
        if isinstance(e, ast.Index):
            return self._index(e)
        if isinstance(e, ast.Call):
            return self._call(e)
        if isinstance(e, ast.Quantifier):
            return self._quantifier(e)
        if isinstance(e, ast.IsVariant):
            return self._is_variant(e)
        if isinstance(e, ast.Conditional):
            return self._conditional(e)
        if isinstance(e, ast.ListExpr):
            return self._list(e)
        if isinstance(e, ast.UnaryOp):
            return self._unary(e)
        return self._binary(e)

    @staticmethod
    def _literal_type(value: object) -> TypeLike:
        if isinstance(value, bool):
            return ir.BOOL
        if isinstance(value, int):
            return ir.INT
        if isinstance(value, float):
            return ir.FLOAT
        if isinstance(value, str):
            return ir.STR
        return ir.NONE

    def _scope_names(self) -> list[str]:
        names = list(self.locals) + list(self.symbols.inputs) + list(self.symbols.variables) + list(self.symbols.states)
        return ([GUARD_OUTPUT] if self.state is not None else []) + names

    def _name(self, e: ast.NameExpr) -> TypeLike:
        s = self.symbols
        # `output` is this state's output even where an input is (wrongly, SW2001) named so: the runtime
        # reads it that way too
        if e.name == GUARD_OUTPUT:
            if self.state is None:
                self.diags.report("SW2007", "'output' is not available in a tool call's arguments", e.span,
                                  label="the call runs before this state has an output",
                                  help="use the machine's inputs or another state's 'STATE.output'")
                return ir.ANY
            return self.output if self.output is not None else output_type(self.state, s)
        if e.name in self.locals:
            return self.locals[e.name]
        if e.name in s.inputs:
            s.used_inputs.add(e.name)
            s.input_reads.append(InputRead(e.name, e.span))
            decl = s.inputs[e.name]
            if decl.constraints:
                self.declared[id(e)] = decl
            return s.resolve_type(decl.type)
        if e.name in s.variables:
            s.used_variables.add(e.name)
            s.variable_reads.append(InputRead(e.name, e.span))
            return s.resolve_type(s.variables[e.name].type)
        if e.name in s.states:
            self.diags.report("SW4013", f"'{e.name}' is a state, not a value", e.span,
                              label="a state name on its own",
                              help=f"write '{e.name}.output' for its output or 'visits({e.name})' for the "
                                   "number of times it ran")
            return ir.ANY
        hint = ""
        if self.state is not None and e.name in fields_of(_strip_optional(output_type(self.state, s)), s):
            hint = f"did you mean 'output.{e.name}'?"
        each = self.state.each if self.state is not None else None
        if each is not None and e.name in (each.item.value, each.index.value if each.index else None):
            hint = (f"'{e.name}' names an element only in the step that runs for it (the instruction and the "
                    "tool call); the state's guards run once, after every element: 'output' is the list of "
                    "the outputs")
        if not hint and e.name in ("True", "False", "None", "null"):
            # before did-you-mean: Python's `None` is one letter from a state named `done`
            hint = "the literals are written true, false and none"
        hint = hint or did_you_mean(e.name, self._scope_names())
        s.used_inputs.add(closest(e.name, s.inputs) or "")
        where = self.what or ("a guard" if self.state is not None else "a tool call's arguments")
        scope = ("the machine's inputs, its run variables, 'STATE.output', len() and visits()" if s.variables
                 else "the machine's inputs, 'STATE.output', len() and visits()")
        if self.state is not None:
            scope = "'output', " + scope
        self.diags.report("SW2007", f"unknown name '{e.name}' in {where}", e.span, label="not in scope",
                          help=hint or f"in scope: {scope}")
        return ir.ANY

    def _attribute(self, e: ast.Attribute) -> TypeLike:
        attr = e.attr.value
        base_expr = e.value
        if (isinstance(base_expr, ast.NameExpr) and base_expr.name in self.symbols.states
                and base_expr.name not in self.symbols.inputs and base_expr.name not in self.locals):
            if attr == "output":
                t = output_type(self.symbols.states[base_expr.name], self.symbols)
                return t if self.has_run(base_expr.name) else MaybeAbsent(t, base_expr.name)
            self.diags.report("SW2006", f"state '{base_expr.name}' has no field '{attr}'", e.attr.span,
                              label="unknown field",
                              help=f"in a guard, count its runs with 'visits({base_expr.name})'" if attr == "visits"
                              else f"a state's value in a guard is '{base_expr.name}.output'")
            return ir.ANY
        base = self.present(self.infer(base_expr), e, base_expr)
        if isinstance(base, UntypedResult):
            self.diags.report("SW4105", f"the result of machine '{base.machine}' has no declared type",
                              e.attr.span, label=f"so it has no field '{attr}' to read",
                              help=f"declare 'returns TYPE' in the machine that '{base.machine}' runs, or use "
                                   "the result as a whole")
            return ir.ANY
        if isinstance(base, TextOutput):
            self.diags.report("SW4002", f"state '{base.state}' has no typed output", e.attr.span,
                              label=f"its output is plain text, so it has no field '{attr}'",
                              help=f"declare 'output TYPE' in state '{base.state}' to give its output fields")
            return ir.ANY
        stripped = _strip_optional(base)
        if stripped == ir.ANY:
            return ir.ANY
        if isinstance(stripped, ir.Variant):
            return self._variant_field(e, stripped, attr)
        if isinstance(stripped, (ir.Named, Record)):
            fields = fields_of(stripped, self.symbols)
            if attr in fields:
                if isinstance(stripped, ir.Named):
                    self.symbols.field_reads.append(FieldRead(stripped.name, attr, e.attr.span))
                decl = self.symbols.field_decl(stripped.name, attr) if isinstance(stripped, ir.Named) else None
                if decl is not None and decl.constraints:
                    self.declared[id(e)] = decl
                return fields[attr]
            self.diags.report("SW2006", f"{type_text(stripped)} has no field '{attr}'", e.attr.span,
                              label="unknown field", help=unknown_field_help(attr, fields))
            return ir.ANY
        self.diags.report("SW4012", f"'{base_expr.span.text}' is {type_text(stripped)} and has no fields",
                          e.attr.span, label=f"no field '{attr}' on {type_text(stripped)}",
                          help="only values of a declared type (and tool results) have fields")
        return ir.ANY

    def _variant_field(self, e: ast.Attribute, t: ir.Variant, attr: str) -> TypeLike:
        """A field of a variant value: there when every variant it may be has it, with one type (SW4031)."""
        fields = {o: self.symbols.fields_of(o) for o in t.options}
        having = [o for o in t.options if attr in fields[o]]
        base = e.value.span.text
        if not having:
            every = [f for o in t.options for f in fields[o]]
            self.diags.report("SW2006", f"no variant of {type_text(t)} has a field '{attr}'", e.attr.span,
                              label="unknown field", help=did_you_mean(attr, every)
                              or f"the variants' fields are {quoted_list(list(dict.fromkeys(every)))}")
            return ir.ANY
        types = {type_text(fields[o][attr]) for o in having}
        if len(having) == len(t.options) and len(types) == 1:
            return fields[having[0]][attr]
        if len(having) == len(t.options):
            label = "its type differs: " + ", ".join(f"{o}.{attr} is {type_text(fields[o][attr])}" for o in having)
        else:
            label = f"only {quoted_list(having, last='and')} {'has' if len(having) == 1 else 'have'} it"
        if self.guard is not None and self.guard.guard is not None:
            guard = shorten_source(self.guard.guard)
            if isinstance(self.guard.guard, ast.BinaryOp) and self.guard.guard.op == "or":
                guard = f"({guard})"
            target = self.guard.target.value if self.guard.target is not None else "..."
            help = f"test the variant first: 'when {base} is {having[0]} and {guard} -> {target}'"
        else:
            help = f"a tool call's arguments cannot test which variant '{base}' is; pass it whole"
        self.diags.report("SW4031", f"'{attr}' is not a field of every variant '{base}' may be", e.attr.span,
                          label=label, help=help,
                          notes=[f"'{base}' is {type_text(t)} here"])
        return ir.ANY

    def _is_variant(self, e: ast.IsVariant) -> TypeLike:
        """`VALUE is TYPE`: VALUE is a variant output, TYPE one of its variants (SW4032)."""
        t = self._infer(e.value)  # what it is before any narrowing: `is` may test it again
        inner = _norm(t.inner) if isinstance(t, MaybeAbsent) else _norm(t)
        name = e.type.value
        shown = e.value.span.text
        if inner == ir.ANY:
            return ir.BOOL
        if not isinstance(inner, ir.Variant):
            help = (f"to test for none, write '{shown} {'!=' if e.negated else '=='} none'" if name == "none" else
                    "'is' tells which type arrived from a state whose output is one of several types "
                    "(`output Answer | Escalation`)")
            self.diags.report("SW4032", f"'{shown}' is not a variant output", e.value.span,
                              label=f"it is {type_text(inner)}", help=help)
            return ir.BOOL
        if name not in inner.options:
            self.diags.report("SW4032", f"'{name}' is not a variant of '{shown}'", e.type.span,
                              label=f"'{shown}' is {type_text(inner)}",
                              help=did_you_mean(name, inner.options)
                              or f"its variants are {quoted_list(inner.options, len(inner.options), 'and')}")
        return ir.BOOL

    def _quantifier(self, e: ast.Quantifier) -> TypeLike:
        """`all(TEST for NAME in LIST)`, `any(...)`, `count(...)`: LIST a list, TEST a boolean, NAME new."""
        func = e.func.value
        takes_for = (*ast.QUANTIFIERS, *ast.AGGREGATES)
        if func not in takes_for:
            self.diags.report("SW2009", f"'{func}' does not take 'for'", e.func.span,
                              label="not all, any, count, sum, min or max",
                              help=did_you_mean(func, takes_for)
                              or "all(TEST for NAME in LIST), any(...), count(...), sum(VALUE for NAME in LIST), "
                                 "min(...) and max(...) go over a list")
        items = self.present(self.infer(e.items), e.items)
        base = _strip_optional(items)
        item: TypeLike = ir.ANY
        if isinstance(base, ir.ListOf):
            item = base.item
        elif base != ir.ANY:
            if base == ir.STR or isinstance(base, ir.Enum):
                hint = f"test the text itself, e.g. \"x\" in {e.items.span.text}"
            elif isinstance(base, (ir.Named, Record)):
                hint = f"go over one of its list fields: {e.items.span.text}.FIELD"
            else:
                hint = "write a list after 'in': a list field, a list input, or [a, b]"
            self.diags.report("SW4021", f"{func}() goes over a list; '{e.items.span.text}' is {type_text(base)}",
                              e.items.span, label=f"this is {type_text(base)}", help=hint)
        var = e.var.value
        clash = ("the current state's output" if var == GUARD_OUTPUT else
                 "an input" if var in self.symbols.inputs else "a state" if var in self.symbols.states else
                 "a run variable" if var in self.symbols.variables else
                 f"the item of an enclosing {func}()" if var in self.locals else None)
        if clash is not None:
            self.diags.report("SW4020", f"'{var}' already names {clash}", e.var.span,
                              label="the item needs a name of its own",
                              help=f"choose another name for the item, e.g. '{var}_item'"
                                   + (f" ('{var}' names {clash} everywhere in the guard)" if var != GUARD_OUTPUT
                                      else ""))
        outer = self.locals.get(var)
        self.locals[var] = item
        try:
            test = self.infer(e.element)
        finally:
            if outer is None:
                del self.locals[var]
            else:
                self.locals[var] = outer
        if func in ast.AGGREGATES:
            value = self.present(test, e.element) if not isinstance(test, ir.Optional_) else test
            return self._aggregated(func, [value], [e.element], False)
        if func not in takes_for:
            return ir.ANY  # reported: what it would give is unknown
        if not _is_bool(test):
            self.diags.report("SW4004", f"the test in {func}() is {type_text(_norm(test))}, not a boolean",
                              e.element.span, label="not true/false",
                              help=_boolean_hint(e.element.span.text, _strip_optional(test)))
        return ir.INT if func == "count" else ir.BOOL

    def _index(self, e: ast.Index) -> TypeLike:
        base = _strip_optional(self.present(self.infer(e.value), e, e.value))
        idx = _strip_optional(self.infer(e.index))
        if base == ir.ANY:
            return ir.ANY
        if isinstance(base, ir.ListOf) or base == ir.STR:
            if idx not in (ir.INT, ir.ANY):
                self.diags.report("SW4008", f"an index must be an int, not {type_text(idx)}", e.index.span,
                                  label="not an int",
                                  help="index a list with a position: items[0], items[-1]")
            return base.item if isinstance(base, ir.ListOf) else ir.STR
        self.diags.report("SW4008", f"'{e.value.span.text}' is {type_text(base)} and cannot be indexed",
                          e.span, label="only lists and strings can be indexed",
                          help="read a field with '.NAME'" if isinstance(base, (ir.Named, Record))
                          else f"index a list or a str; '{e.value.span.text}' is {type_text(base)}")
        return ir.ANY

    def _call(self, e: ast.Call) -> TypeLike:
        func = e.func.value
        if func == "visits":
            self._visits_args(e)
            return ir.INT
        arg_types = [self.infer(a) for a in e.args]
        if func == "len" and len(e.args) == 1:
            arg_types[0] = self.present(arg_types[0], e.args[0])
        if func == "len":
            if len(e.args) != 1:
                self.diags.report("SW4005", f"len() takes one argument, {len(e.args)} given", e.span,
                                  label="wrong number of arguments", help="write len(VALUE)")
            else:
                t = _norm(arg_types[0])
                if not (t == ir.ANY or t == ir.STR or isinstance(t, (ir.ListOf, ir.Enum))):
                    self.diags.report("SW4005", f"len() takes a str or a list, not {type_text(t)}",
                                      e.args[0].span, label=f"this is {type_text(t)}",
                                      help="len() counts the characters of a str or the items of a list; "
                                      f"use the number itself: {e.args[0].span.text}")
            return ir.INT
        if func in ast.AGGREGATES:
            return self._aggregate(e, arg_types)
        self.diags.report("SW2009", f"unknown function '{func}'", e.func.span, label="not a function",
                          help=did_you_mean(func, FUNCTIONS)
                          or "guards may call len(x), visits(STATE), sum(LIST), min(...) and max(...)")
        return ir.ANY

    def _aggregate(self, e: ast.Call, arg_types: list[TypeLike]) -> TypeLike:
        """`sum(LIST)` of numbers; `min(LIST)` and `max(LIST)` of numbers or texts, or of two or more values."""
        func = e.func.value
        if not e.args or (func == "sum" and len(e.args) > 1):
            usage = "sum(LIST)" if func == "sum" else f"{func}(LIST) or {func}(a, b, ...)"
            self.diags.report("SW4005", f"{func}() takes {'one list' if func == 'sum' else 'a list, or two or more values'}"
                              f", {len(e.args)} given", e.span, label="wrong number of arguments",
                              help=f"write {usage}")
            return ir.ANY
        if len(e.args) == 1:
            listed = _strip_optional(self.present(arg_types[0], e.args[0]))
            if listed == ir.ANY:
                return ir.ANY
            if not isinstance(listed, ir.ListOf):
                self.diags.report("SW4005", f"{func}() takes a list, not {type_text(listed)}", e.args[0].span,
                                  label=f"this is {type_text(listed)}",
                                  help=f"{func}() goes over the items of a list"
                                       + ("" if func == "sum" else f"; compare two values with {func}(a, b)"))
                return ir.ANY
            return self._aggregated(func, [listed.item], [e.args[0]], True)
        values = [_strip_optional(self.present(t, a)) for t, a in zip(arg_types, e.args, strict=True)]
        return self._aggregated(func, values, list(e.args), False)

    def _aggregated(self, func: str, types: list[TypeLike], where: list[ast.Expr], items: bool) -> TypeLike:
        """The value of sum/min/max over values of `types` (`items`: the items of the one list at `where[0]`):
        numbers for sum, numbers or texts for min and max; `any` while some type is unknown."""
        normal = [_norm(t) for t in types]
        if all(_numeric(t) for t in normal):
            return ir.INT if all(t == ir.INT for t in normal) else ir.FLOAT
        if func != "sum" and all(_stringy(t) for t in normal):
            return normal[0] if len(set(normal)) == 1 else ir.STR
        numbers = [t for t in normal if _numeric(t)]
        texts = [t for t in normal if _stringy(t)]
        others = [t for t in normal if t != ir.ANY and t not in numbers and t not in texts]
        if not others and (not numbers or not texts) and (func != "sum" or not texts):
            return ir.ANY  # the known ones go together; the unknown ones are the run's to decide
        odd = others[0] if others else texts[0] if func == "sum" or len(texts) <= len(numbers) else numbers[0]
        spot = where[0] if items else where[normal.index(odd)]
        shown = f"the items of '{spot.span.text}' are" if items else f"'{spot.span.text}' is"
        wanted = "numbers" if func == "sum" else "numbers, or texts"
        self.diags.report("SW4005", f"{func}() takes {wanted}; {shown} {type_text(odd)}", spot.span,
                          label=f"this is {'a list of ' if items else ''}{type_text(odd)}",
                          help="sum() adds numbers; sum a number field of each item: sum(x.FIELD for x in LIST)"
                          if func == "sum" else f"{func}() compares numbers with numbers, or texts with texts")
        return ir.ANY

    def _visits_args(self, e: ast.Call) -> None:
        if len(e.args) != 1:
            self.diags.report("SW4005", f"visits() takes one state name, {len(e.args)} given", e.span,
                              label="wrong number of arguments", help="write visits(STATE)")
            for a in e.args:
                if not isinstance(a, ast.NameExpr):
                    self.infer(a)
            return
        arg = e.args[0]
        if isinstance(arg, ast.NameExpr) and arg.name in self.symbols.states:
            return
        if isinstance(arg, ast.NameExpr) and arg.name not in self.symbols.inputs and arg.name != GUARD_OUTPUT:
            self.diags.report("SW2002", f"unknown state '{arg.name}'", arg.span,
                              label="no state with this name",
                              help=unknown_state_help(arg.name, self.symbols))
            return
        self.infer(arg)
        states = self.symbols.states
        self.diags.report("SW4005", "visits() takes a state name", arg.span, label="not a state name",
                          help="write visits(STATE) with the name of a state"
                               + (f": {quoted_list(states, last='or')}" if states else ""))

    def _list(self, e: ast.ListExpr) -> TypeLike:
        types = [_norm(self.infer(i)) for i in e.items]
        if not types:
            return ir.ListOf(ir.ANY)
        first = types[0]
        if all(t == first for t in types):
            return ir.ListOf(first)  # type: ignore[arg-type]
        if all(_numeric(t) for t in types):
            return ir.ListOf(ir.FLOAT)
        if all(_stringy(t) for t in types):
            return ir.ListOf(ir.STR)
        return ir.ListOf(ir.ANY)

    def _unary(self, e: ast.UnaryOp) -> TypeLike:
        t = self.infer(e.operand)
        if e.op == "not":
            self._require_bool(t, e.operand, "'not'")
            return ir.BOOL
        t = _strip_optional(self.present(t, e.operand))
        if not (_numeric(t) or t == ir.ANY):
            self.diags.report("SW4001", f"cannot negate {type_text(t)}", e.operand.span,
                              label=f"this is {type_text(t)}", help="'-' applies to numbers")
            return ir.ANY
        return t

    def _require_bool(self, t: TypeLike, expr: ast.Expr, where: str) -> None:
        if not _is_bool(t):
            self.diags.report("SW4004", f"operand of {where} is {type_text(_norm(t))}, not a boolean",
                              expr.span, label="not true/false",
                              help=_boolean_hint(expr.span.text, _strip_optional(t)))

    def _binary(self, e: ast.BinaryOp) -> TypeLike:  # type: ignore[override]
        op = e.op
        if op in ("and", "or"):
            left = self.infer(e.left)
            # the right operand is evaluated only when the left one is true (`and`) or false (`or`)
            right = self.infer_where(e.left, op == "and", e.right)
            if op == "or" and _coalesces(left, right):
                # `a or b` of values that are not booleans: `a` when it is there (and not empty or 0), else `b`
                return self._either(e, _strip_optional(left), right)
            self._require_bool(left, e.left, f"'{op}'")
            self._require_bool(right, e.right, f"'{op}'")
            return ir.BOOL
        left, right = self.infer(e.left), self.infer(e.right)
        if op in ("==", "!=") and any(
                state_output_read(side, self.symbols) is not None and isinstance(other, ast.Literal)
                and other.value is None for side, other in ((e.left, e.right), (e.right, e.left))):
            return ir.BOOL  # `STATE.output != none`: whether the state has run, always a fair question
        if op in ("==", "!="):
            if not (self._enum_literal(e.left, left, e.right) and self._enum_literal(e.right, right, e.left)):
                return ir.BOOL
            if not _comparable(left, right):
                self._mismatch(e, left, right, f"cannot compare {type_text(_norm(left))} with "
                                                f"{type_text(_norm(right))}")
            else:
                self._decided_by_constraint(e)
            return ir.BOOL
        if op in ("<", "<=", ">", ">="):
            left, right = self.present(left, e.left), self.present(right, e.right)
            a, b = _strip_optional(left), _strip_optional(right)
            ok = ir.ANY in (a, b) or (_numeric(a) and _numeric(b)) or (a == ir.STR and b == ir.STR)
            if not ok:
                self._mismatch(e, left, right, f"cannot order {type_text(a)} and {type_text(b)} with '{op}'")
            else:
                self._decided_by_constraint(e)
            return ir.BOOL
        if op in ("in", "not in"):
            right = self.present(right, e.right)
            if _strip_optional(right) == ir.STR:
                left = self.present(left, e.left)  # `none in "text"` fails
            self._membership(e, left, right)
            return ir.BOOL
        return self._arithmetic(e, self.present(left, e.left), self.present(right, e.right))

    def infer_where(self, test: ast.Expr, value: bool, e: ast.Expr) -> TypeLike:
        """The type of `e`, which is evaluated only when `test` has the truth value `value`: what the test
        shows (none tests, `is` tests) holds while `e` is checked."""
        shown = none_tests(test, value, self.symbols) - self.narrowed
        self.narrowed |= shown
        known = self.variants
        tests = self.variant_tests(test, value)
        if tests:
            self.variants = merge_variant_tests(known, tests)
        try:
            return self.infer(e)
        finally:
            self.narrowed -= shown
            self.variants = known

    def _conditional(self, e: ast.Conditional) -> TypeLike:
        """`THEN if TEST else OTHERWISE`: TEST a boolean; THEN checked with what TEST true shows, OTHERWISE
        with what TEST false shows; the value has the type both sides have."""
        test = self.infer(e.test)
        if not _is_bool(test):
            self.diags.report("SW4004", f"the test of 'if ... else' is {type_text(_norm(test))}, not a boolean",
                              e.test.span, label="not true/false",
                              help=_boolean_hint(e.test.span.text, _strip_optional(test)))
        then = self.infer_where(e.test, True, e.then)
        orelse = self.infer_where(e.test, False, e.orelse)
        return self._either(e, then, orelse)

    def _either(self, e: ast.Conditional | ast.BinaryOp, first: TypeLike, second: TypeLike) -> TypeLike:
        """The type of a value that is one of two (`x if c else y`, `a or b`): the type both have (ints and
        floats give float, texts and enums str, two declared types the variant of both); it may be none when
        either may be. Values of types that do not go together are SW4001."""
        one, other = _strip_optional(first), _strip_optional(second)
        joined = _join(one, other)
        if joined is None:
            what = "the two values of 'if ... else'" if isinstance(e, ast.Conditional) else "the two sides of 'or'"
            sides = (e.then, e.orelse) if isinstance(e, ast.Conditional) else (e.left, e.right)
            self.diags.report("SW4001", f"{what} have different types: {type_text(one)} and {type_text(other)}",
                              e.span, label=f"{type_text(one)} or {type_text(other)}",
                              help=f"give both the same type, e.g. '{sides[0].span.text}' and a "
                                   f"{type_text(one)} in place of '{sides[1].span.text}'")
            return ir.ANY
        absent = next((t for t in (first, second) if isinstance(t, MaybeAbsent)), None)
        if absent is not None:
            return MaybeAbsent(joined, absent.state)
        maybe_none = any(isinstance(_norm(t), ir.Optional_) or _norm(t) == ir.NONE for t in (first, second))
        return ir.Optional_(joined) if maybe_none and joined != ir.ANY else joined  # type: ignore[arg-type]

    def _bounded(self, e: ast.Expr) -> tuple[ast.Range, str, ast.FieldDecl | ast.InputDecl] | None:
        """The range a constrained field or input (`in`), or the length of one (`len(x)`, `len`), keeps
        `e` in; None when nothing constrains it."""
        if isinstance(e, ast.Call) and e.func.value == "len" and len(e.args) == 1:
            decl, kind, shown = self.declared.get(id(e.args[0])), "len", e.span.text
        else:
            decl, kind, shown = self.declared.get(id(e)), "in", e.span.text
        c = constraint_of(decl.constraints, kind) if decl is not None else None
        if c is None or c.range is None or decl is None:
            return None
        return c.range, shown, decl

    def _decided_by_constraint(self, e: ast.BinaryOp) -> None:
        """SW7020 for a comparison of a constrained value with a number that its range decides."""
        for side, other, flipped in ((e.left, e.right, False), (e.right, e.left, True)):
            number = _number_literal(other)
            bounded = self._bounded(side) if number is not None else None
            if bounded is None or number is None:
                continue
            r, shown, decl = bounded
            low, high = lower_range(r)
            outcome = comparison_outcome(_FLIPPED[e.op] if flipped else e.op, low, high, number)
            if outcome is None:
                return
            kind = "field" if isinstance(decl, ast.FieldDecl) else "input"
            where = decl.span.start_pos.line if decl.span is not None else "?"
            self.diags.report(
                "SW7020", f"the comparison is always {'true' if outcome else 'false'}", e.span,
                label=f"'{shown}' is always in {range_text(r)}",
                help=f"the {kind} '{decl.name.value}' is constrained to {range_text(r)} (line {where}), which "
                     f"decides this comparison: compare with a number the range leaves open, or change the "
                     "constraint")
            return

    def _enum_literal(self, expr: ast.Expr, t: TypeLike, other: ast.Expr) -> bool:
        """Comparing an enum with a string literal: the literal must be one of the enum's values."""
        enum = _strip_optional(t)
        if not isinstance(enum, ir.Enum):
            return True
        if isinstance(other, ast.Literal) and isinstance(other.value, str) and other.value not in enum.values:
            self.diags.report("SW4001", f"\"{other.value}\" is not a value of {type_text(enum)}", other.span,
                              label="never equal", help=did_you_mean(other.value, enum.values)
                              or f"'{expr.span.text}' is one of {type_text(enum)}")
            return False
        return True

    def _membership(self, e: ast.BinaryOp, left: TypeLike, right: TypeLike) -> None:
        container = _strip_optional(right)
        item = _norm(left)
        if container == ir.ANY:
            return
        if container == ir.STR or isinstance(container, ir.Enum):
            if not (_strip_optional(item) in (ir.STR, ir.ANY) or isinstance(_strip_optional(item), ir.Enum)):
                self._mismatch(e, left, right, f"'{e.op}' with a str on the right needs a str on the left, "
                                               f"not {type_text(item)}")
            return
        if isinstance(container, ir.ListOf):
            if isinstance(_strip_optional(item), ir.Enum) and isinstance(e.right, ast.ListExpr):
                for lit in e.right.items:
                    self._enum_literal(e.left, item, lit)
            if not _comparable(item, container.item):
                self._mismatch(e, left, right, f"a {type_text(item)} is never in a {type_text(container)}")
            return
        self.diags.report("SW4001",
                          f"'{e.op}' needs a str or a list on the right, not {type_text(container)}",
                          e.right.span, label=f"this is {type_text(container)}",
                          help="test membership in a list (x in [\"a\", \"b\"]) or a substring of a str")

    def _arithmetic(self, e: ast.BinaryOp, left: TypeLike, right: TypeLike) -> TypeLike:
        a, b = _strip_optional(left), _strip_optional(right)
        if ir.ANY in (a, b):
            return ir.ANY
        if _numeric(a) and _numeric(b):
            return ir.INT if a == b == ir.INT and e.op != "/" else ir.FLOAT
        if e.op == "+" and _stringy(a) and _stringy(b):
            return ir.STR
        if e.op == "+" and isinstance(a, ir.ListOf) and isinstance(b, ir.ListOf):
            return a if a == b else ir.ListOf(ir.ANY)
        self._mismatch(e, left, right, f"cannot apply '{e.op}' to {type_text(a)} and {type_text(b)}")
        return ir.ANY

    def _mismatch(self, e: ast.BinaryOp, left: TypeLike, right: TypeLike, message: str) -> None:
        self.diags.report("SW4001", message, e.span,
                          label=f"{type_text(_norm(left))} {e.op} {type_text(_norm(right))}",
                          help=_mismatch_hint(e, _strip_optional(left), _strip_optional(right)))


def _mismatch_hint(e: ast.BinaryOp, lt: TypeLike, rt: TypeLike) -> str:
    """How to repair an operation on operands of the types `lt` and `rt` that do not go together."""
    if (_numeric(lt) and _stringy(rt)) or (_stringy(lt) and _numeric(rt)):
        number_side, text_side = (e.left, e.right) if _numeric(lt) else (e.right, e.left)
        if (isinstance(text_side, ast.Literal) and isinstance(text_side.value, str)
                and _is_number_text(text_side.value, ir.FLOAT)):
            return f"write the number without quotes: {text_side.value.strip()}"
        if e.op in ("+", "-", "*", "/", "%"):
            if e.op == "+":
                return "'+' adds two numbers or joins two strings"
            return f"'{e.op}' takes two numbers"
        return f"'{number_side.span.text}' is a number; compare it with a number, not a string"
    for side, t in ((e.left, lt), (e.right, rt)):
        if isinstance(t, (ir.Named, Record)):
            return f"use one of its fields: {side.span.text}.FIELD"
    if e.op in ("<", "<=", ">", ">="):
        return f"'{e.op}' orders two numbers or two strings"
    if e.op in ("==", "!="):
        return "values of these types are never equal"
    if e.op in ("in", "not in"):
        return "an item is looked for in a list of items of its type, or a str in a str"
    return "'+' adds numbers or joins two strings or two lists; '-', '*', '/' and '%' take numbers"


# ---- checks over the machine ---------------------------------------------------------------------


def _type_refs(machine: ast.Machine) -> Iterator[ast.TypeRef]:
    for item in machine.items:
        if isinstance(item, ast.InputDecl):
            yield item.type
        elif isinstance(item, ast.TypeDecl):
            yield from (f.type for f in item.fields)
        elif isinstance(item, ast.StateDecl):
            yield from (i.type for i in item.items
                        if isinstance(i, ast.OutputDecl) and not isinstance(i.type, ast.VariantType))


def _check_enums(machine: ast.Machine, diags: Diagnostics) -> None:
    for ref in _type_refs(machine):
        for node in ast.iter_type_ref(ref):
            if not isinstance(node, ast.EnumType):
                continue
            seen: set[str] = set()
            for v in node.values:
                if v.value in seen:
                    diags.report("SW4010", f"enum value \"{v.value}\" is listed twice", v.span,
                                 label="repeated value", help="list each value once")
                elif v.value.strip() == "":
                    diags.report("SW4010", "an enum value may not be empty", v.span,
                                 label="empty value", help="give each choice a name: \"ok\" | \"failed\"")
                seen.add(v.value)


def _named_refs(ref: ast.TypeRef) -> Iterator[ast.NamedType]:
    return (node for node in ast.iter_type_ref(ref) if isinstance(node, ast.NamedType))


def _check_recursive_types(symbols: Symbols, diags: Diagnostics) -> None:
    """Report each cycle of types containing themselves once, at the field that closes it.

    Only a type on a cycle can contain itself: the types of the graph's strongly connected components
    that have a cycle are searched, each for its first path back to itself (depth first, fields in order),
    within its component. A chain of types as long as a spec can hold is linear to check."""
    edges: dict[str, list[tuple[str, ast.FieldDecl]]] = {}
    for name, decl in symbols.types.items():
        edges[name] = [(ref.name.value, f) for f in decl.fields for ref in _named_refs(f.type)
                       if ref.name.value in symbols.types]
    component = _cyclic_components(edges)
    reported: set[frozenset[str]] = set()
    for start in symbols.types:
        if start not in component:
            continue
        step = _path_back(start, edges, component)
        members = frozenset(n for n, _ in step)
        if members in reported:
            continue
        reported.add(members)
        chain = " -> ".join(f"{n}.{f.name.value}" for n, f in step) + f" -> {start}"
        diags.report("SW4009", f"type '{start}' contains itself", step[0][1].type.span, label=chain,
                     help="a structured output needs a finite schema; store references as str ids or flatten "
                          "the nesting")


def _check_type_depth(symbols: Symbols, diags: Diagnostics) -> None:
    """Report each type whose values nest more than MAX_NESTING levels of records and lists, counted through
    the types it uses (a chain of named types nests as deep as one type written out): a structured output's
    schema and its replies stay within what every face reads (the reply's depth limit, the JSON schema).

    Only the outermost type of a chain too deep is reported (those that use it are deeper still, and say
    nothing new). Depths are worked out once each, with a stack: a chain of thousands of types is linear and
    recursion-free. Types on a cycle are SW4009's and are left out."""
    from ...grammar.nesting import MAX_NESTING

    types = symbols.types
    # the named types each field refers to, with the levels of lists the field puts around it
    uses: dict[str, list[tuple[str, int]]] = {}
    for name, decl in types.items():
        refs = []
        for f in decl.fields:
            lists = 0
            for node in ast.iter_type_ref(f.type):
                if isinstance(node, ast.ListType):
                    lists += 1
                elif isinstance(node, ast.NamedType) and node.name.value in types:
                    refs.append((node.name.value, lists))
            refs.append(("", lists))  # the field's own lists, whatever it holds
        uses[name] = refs
    depth: dict[str, int] = {}
    deepest: dict[str, str] = {}  # type -> the type its depth comes through ("" for none)
    on_stack: set[str] = set()
    for root in types:
        stack = [root]
        while stack:
            name = stack[-1]
            if name in depth:
                stack.pop()
                continue
            pending = [used for used, _ in uses[name] if used and used not in depth]
            if pending and name not in on_stack:
                on_stack.add(name)
                stack.extend(u for u in pending if u not in on_stack)
                continue
            on_stack.discard(name)
            stack.pop()
            best, through = 0, ""
            for used, lists in uses[name]:
                d = lists + (depth.get(used, 0) if used else 0)  # a cycle's types count 0 here (SW4009)
                if d > best:
                    best, through = d, used
            depth[name], deepest[name] = 1 + best, through
    too_deep = {name for name, d in depth.items() if d > MAX_NESTING}
    inner = {deepest[name] for name in too_deep}
    for name in types:
        if name not in too_deep or name in inner:
            continue
        chain = [name]
        while deepest[chain[-1]] and len(chain) < 4:
            chain.append(deepest[chain[-1]])
        shown = " -> ".join(chain) + (" -> ..." if deepest[chain[-1]] else "")
        diags.report("SW4015", f"type '{name}' nests {depth[name]} levels of records and lists deep, through the "
                     f"types it uses; at most {MAX_NESTING} are allowed", types[name].name.span, label=shown,
                     help="flatten the nesting: a structured output this deep is no schema a model can fill; "
                          "refer to deeper parts by str ids or split them into states of their own")


def _path_back(start: str, edges: dict[str, list[tuple[str, ast.FieldDecl]]],
               component: dict[str, int]) -> list[tuple[str, ast.FieldDecl]]:
    """The first path from `start` back to itself that a depth-first search finds, as (type, field) steps;
    `start` is on a cycle, so there is one, and it stays in `start`'s component."""
    within = component[start]
    came_from: dict[str, tuple[str, ast.FieldDecl]] = {}
    stack = [start]
    while stack:
        node = stack.pop()
        for target, fld in edges[node]:
            if target == start:
                step = [(node, fld)]
                while node != start:
                    node, f = came_from[node]
                    step.append((node, f))
                return step[::-1]
            if target not in came_from and component.get(target) == within:
                came_from[target] = (node, fld)
                stack.append(target)
    raise AssertionError(f"type {start!r} is on no cycle")


def _cyclic_components(edges: dict[str, list[tuple[str, ast.FieldDecl]]]) -> dict[str, int]:
    """Each type on a cycle -> the number of its strongly connected component."""
    from .graph import strongly_connected_components

    names = list(edges)
    number = {name: i for i, name in enumerate(names)}
    successors = [[number[target] for target, _ in edges[name]] for name in names]
    component: dict[str, int] = {}
    for k, members in enumerate(strongly_connected_components(len(names), successors)):
        if len(members) > 1 or members[0] in successors[members[0]]:
            component.update((names[m], k) for m in members)
    return component


def _check_inputs(symbols: Symbols, diags: Diagnostics) -> None:
    for decl in symbols.inputs.values():
        if decl.default is None:
            continue
        want = symbols.resolve_type(decl.type)
        for p in value_problems(decl.default, want, symbols, decl.constraints):
            fits = "its constraints" if p.constraint else f"its type {type_text(want)}"
            diags.report("SW4006", f"the default of input '{decl.name.value}' does not fit {fits}", p.span,
                         label=p.message, help=p.help)


def _check_tool_options(symbols: Symbols, diags: Diagnostics) -> None:
    for name, decl in symbols.tools.items():
        if not decl.options:
            continue
        if name not in STD_TOOLS:
            if decl.name.parts[0] != "std":
                first = decl.options[0]
                diags.report("SW2011", f"user tool '{name}' takes no options", first.name.span,
                             label="not an option of a user tool",
                             help="configure a user tool in its own Python code")
            continue
        allowed: dict[str, str] = STD_TOOLS[name]["options"]
        seen: set[str] = set()
        for opt in decl.options:
            key = opt.name.value
            if key in seen:
                diags.report("SW2010", f"option '{key}' is given twice for '{name}'", opt.name.span,
                             label="second occurrence", help=f"keep one '{key}'; the first one is used")
                continue
            seen.add(key)
            if key not in allowed:
                diags.report("SW2011", f"'{name}' has no option '{key}'", opt.name.span,
                             label="unknown option",
                             help=did_you_mean(key, allowed) or (
                                 f"its options are {quoted_list(sorted(allowed))}" if allowed else
                                 f"'{name}' takes no options"))
                continue
            want = parse_signature_type(allowed[key])
            for p in value_problems(opt.value, want, symbols):
                diags.report("SW4006", f"option '{key}' of '{name}' must be {type_text(want)}", p.span,
                             label=p.message, help=p.help)


def _check_each(view: StateView, each: ast.ForEach, symbols: Symbols, diags: Diagnostics,
                flow: Flow | None, entered: EntryFacts) -> None:
    """The list a state maps over is a list; its element's type (and the index's) is noted for the state's
    tool call and templates."""
    checker = ExprChecker(symbols, diags, None, reader=view.name, flow=flow).knowing(entered)
    listed = _strip_optional(checker.present(checker.infer(each.items), each.items))
    element: TypeLike = ir.ANY
    if isinstance(listed, ir.ListOf):
        element = listed.item
    elif listed != ir.ANY:
        diags.report("SW4060", f"state '{view.name}' maps over {type_text(listed)}, not a list", each.items.span,
                     label=f"this is {type_text(listed)}",
                     help="map over a list: a list input, a list field of a state's output ('STATE.output.FIELD'), "
                          "or the output of a map or a parallel state")
    names: dict[str, TypeLike] = {each.item.value: element}
    if each.index is not None:
        names.setdefault(each.index.value, ir.INT)
    symbols.each_names[view.name] = names


def _check_join_guard(view: StateView, join: ast.Join, symbols: Symbols, diags: Diagnostics,
                      flow: Flow | None) -> None:
    """`join first where GUARD`: a boolean over one branch's output, as `output`."""
    if join.guard is None:
        return
    branch = common_type([branch_output_type(ends, symbols) for _, ends in symbols.branches.get(view.name, ())])
    checker = ExprChecker(symbols, diags, view, flow=flow, output=branch)
    result = checker.infer(join.guard)
    if not _is_bool(result):
        diags.report("SW4004", f"the join guard is {type_text(_norm(result))}, not a boolean", join.guard.span,
                     label="not true/false", help=_boolean_hint(join.guard.span.text, _strip_optional(result)))


def _check_guards_and_calls(symbols: Symbols, diags: Diagnostics, flow: Flow | None) -> None:
    facts: dict[str, EntryFacts] = symbols.entry_facts
    in_branch: dict[str, set[str]] = {}  # a branch's entry -> its states
    for state, entry in symbols.branch_of.items():
        in_branch.setdefault(entry, set()).add(state)
    for view in symbols.states.values():
        entered = facts.get(view.name, EntryFacts())
        branches = (frozenset().union(*(in_branch.get(e, ()) for e, _ in symbols.branches.get(view.name, ())))
                    if view.name in facts else frozenset())
        after = entered.after_step(view.name, branches)
        if view.each is not None:
            _check_each(view, view.each, symbols, diags, flow, entered)
        if view.parallel is not None and view.join is not None:
            _check_join_guard(view, view.join, symbols, diags, flow)
        if not view.decl.final:
            guards = ExprChecker(symbols, diags, view, flow=flow).knowing(after)
            for t in view.transitions:
                if t.kind == "guard" and t.guard is not None:
                    guards.guard = t
                    result = guards.infer(t.guard)
                    if not _is_bool(result):
                        diags.report("SW4004", f"the guard is {type_text(_norm(result))}, not a boolean",
                                     t.guard.span, label="not true/false",
                                     help=_boolean_hint(t.guard.span.text, _strip_optional(result)))
        if view.call is not None:
            args = ExprChecker(symbols, diags, None, reader=view.name, flow=flow,
                               local=symbols.each_names.get(view.name)).knowing(entered)
            _check_call(view.call, symbols, diags, args)



def _boolean_hint(text: str, t: TypeLike) -> str:
    if _numeric(t):
        return f"compare the number with something, e.g. {text} > 0"
    if _stringy(t):
        return f'compare the text with something, e.g. {text} == "..." or "..." in {text}'
    if isinstance(t, ir.ListOf):
        return f"test the list, e.g. len({text}) > 0"
    if isinstance(t, (ir.Named, Record)):
        return f"compare one of its fields, e.g. {text}.FIELD == ..."
    if isinstance(t, ir.Variant):
        return f"test which variant it is, e.g. {text} is {t.options[0]}"
    return "compare the value with something: ==, !=, <, >, in"


def _check_call(call: ast.ToolCall, symbols: Symbols, diags: Diagnostics, args: ExprChecker) -> None:
    name = call.tool.dotted
    params: dict[str, tuple[str, bool]] | None = None
    if name in STD_TOOLS:
        params = STD_TOOLS[name]["params"]
    given = {a.name.value for a in call.args}
    missing = [p for p, (_, required) in (params or {}).items() if required and p not in given]
    unknown = [a for a in call.args if params is not None and a.name.value not in params]
    seen: set[str] = set()
    for arg in call.args:
        t = args.infer(arg.value)
        key = arg.name.value
        if key in seen:
            diags.report("SW4011", f"argument '{key}' is given twice", arg.name.span,
                         label="second occurrence",
                         help=f"pass '{key}' once")
            continue
        seen.add(key)
        if params is None:
            continue  # user tools take any arguments; their own signature decides at run time
        if key not in params:
            hint = did_you_mean(key, params)
            if not hint and len(unknown) == 1 and len(missing) == 1:
                hint = f"did you mean '{missing[0]}'? ('{name}' needs it)"
            diags.report("SW4011", f"'{name}' has no parameter '{key}'", arg.name.span,
                         label="unknown parameter",
                         help=hint or f"its parameters are {quoted_list(params)}")
            continue
        want = parse_signature_type(params[key][0])
        if not isinstance(want, ir.Optional_):
            t = args.present(t, arg.value)
        if not _assignable(t, want):
            diags.report("SW4006", f"argument '{key}' of '{name}' must be {type_text(want)}, "
                         f"not {type_text(_norm(t))}", arg.value.span, label=f"this is {type_text(_norm(t))}",
                         help=_argument_hint(key, arg.value, want))
    misspelled = len(unknown) == 1 and len(missing) == 1  # then reported above as a misspelling
    if missing and not misspelled:
        diags.report("SW4011", f"'{name}' needs the argument{'s' if len(missing) > 1 else ''} "
                     + ", ".join(f"'{m}'" for m in missing), call.tool.span,
                     label="missing " + ", ".join(missing),
                     help=f"write {name}(" + ", ".join(f"{m} = ..." for m in missing) + ")")


def _argument_hint(key: str, value: ast.Expr, want: ir.Type) -> str:
    """How to pass a value of the wanted type as argument `key`."""
    wanted = _strip_optional(want)
    if not isinstance(wanted, ir.Prim) or wanted.name not in _EXAMPLE_ARGUMENTS:
        return ""
    if (isinstance(value, ast.Literal) and isinstance(value.value, str)
            and _is_number_text(value.value, wanted)):
        return f"write the number without quotes: {key} = {value.value.strip()}"
    return f"write e.g. {key} = {_EXAMPLE_ARGUMENTS[wanted.name]}"


_EXAMPLE_ARGUMENTS = {"int": "3", "float": "30", "bool": "true", "str": '"..."'}


def check_types(machine: ast.Machine, symbols: Symbols, diagnostics: Diagnostics,
                flow: Flow | None = None) -> None:
    """Type declarations, input defaults, tool options, guards and tool-call arguments.

    With `flow`, a state's output read where that state may not have run yet is reported (SW4014)."""
    _check_enums(machine, diagnostics)
    _check_recursive_types(symbols, diagnostics)
    _check_type_depth(symbols, diagnostics)
    _check_inputs(symbols, diagnostics)
    _check_tool_options(symbols, diagnostics)
    _check_guards_and_calls(symbols, diagnostics, flow)

