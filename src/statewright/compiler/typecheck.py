"""Type checking: type declarations, guards, tool-call arguments, defaults, tool options and test data.

Types here are the IR's own (`ir.Type`) plus two the checker needs while inferring: `Record` (a standard
tool's result, an object without a declared type) and `TextOutput` (the plain-text output of an agent state
without `output TYPE`: a str whose fields are a mistake worth its own message). Anything unknown is `any`,
which keeps one mistake from cascading into many.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ..diagnostics import Diagnostics, Span, did_you_mean
from ..grammar import ast
from ..runtime.result import FAILURE_KINDS
from ..runtime.tool_signatures import STD_TOOLS
from . import ir
from .resolve import (
    BUILTIN_TYPES,
    GUARD_OUTPUT,
    StateView,
    Symbols,
    TestView,
    closest,
    list_items,
    object_entries,
)

LIMIT_NAMES = ("steps", "cost_usd", "tokens", "seconds")
FUNCTIONS = ("len", "visits")


@dataclass(frozen=True)
class Record:
    """An object type without a declaration: a standard tool's result."""

    fields: tuple[tuple[str, ir.Type], ...]
    label: str


@dataclass(frozen=True)
class TextOutput:
    """The plain-text output of agent state `state` (no `output TYPE`): a str."""

    state: str


TypeLike = ir.Prim | ir.ListOf | ir.Optional_ | ir.Enum | ir.Named | Record | TextOutput


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
    if isinstance(t, Record):
        return t.label
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


def _norm(t: TypeLike) -> TypeLike:
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


# ---- values against types ------------------------------------------------------------------------


@dataclass(frozen=True)
class ValueProblem:
    span: Span
    message: str
    help: str = ""


_KIND_WORDS = {"str": "a string", "int": "a whole number", "float": "a number", "bool": "true or false",
               "none": "none", "list": "a list", "object": "an object"}


def value_problems(value: ast.Value, t: TypeLike, symbols: Symbols) -> list[ValueProblem]:
    """Every place where `value` does not fit `t`, innermost first within each branch."""
    out: list[ValueProblem] = []
    stack: list[tuple[ast.Value, TypeLike]] = [(value, t)]
    while stack:
        v, want = stack.pop()
        want = _norm(want)
        got = _KIND_WORDS.get(v.kind, v.kind)
        if want == ir.ANY:
            continue
        if isinstance(want, ir.Optional_):
            if v.kind != "none":
                stack.append((v, want.inner))
            continue
        if v.kind == "none":
            out.append(ValueProblem(v.span, f"none does not fit {type_text(want)}",
                                    f"make the type optional ({type_text(want)}?) or give a value"))
            continue
        if isinstance(want, ir.Prim):
            fits = (v.kind == want.name) or (want == ir.FLOAT and v.kind == "int")
            if not fits:
                out.append(ValueProblem(v.span, f"expected {type_text(want)}, found {got}"))
        elif isinstance(want, ir.Enum):
            if v.kind != "str":
                out.append(ValueProblem(v.span, f"expected one of {type_text(want)}, found {got}"))
            elif v.value not in want.values:
                out.append(ValueProblem(v.span, f"\"{v.value}\" is not one of {type_text(want)}",
                                        did_you_mean(str(v.value), want.values)))
        elif isinstance(want, ir.ListOf):
            if v.kind != "list":
                out.append(ValueProblem(v.span, f"expected {type_text(want)}, found {got}"))
            else:
                stack.extend((item, want.item) for item in reversed(list_items(v)))
        elif isinstance(want, (ir.Named, Record)):
            fields = symbols.fields_of(want.name) if isinstance(want, ir.Named) else dict(want.fields)
            if v.kind != "object":
                out.append(ValueProblem(v.span, f"expected an object of type {type_text(want)}, found {got}",
                                        "write { " + "  ".join(f"{k} ..." for k in fields) + " }"))
                continue
            seen: set[str] = set()
            pending: list[tuple[ast.Value, TypeLike]] = []
            for entry in object_entries(v):
                key = entry.key.value
                if key in seen:
                    out.append(ValueProblem(entry.key.span, f"field '{key}' is given twice"))
                    continue
                seen.add(key)
                if key not in fields:
                    out.append(ValueProblem(entry.key.span, f"{type_text(want)} has no field '{key}'",
                                            did_you_mean(key, fields)))
                    continue
                pending.append((entry.value, fields[key]))
            stack.extend(reversed(pending))
            missing = [k for k, ft in fields.items() if k not in seen and not isinstance(ft, ir.Optional_)]
            if missing:
                out.append(ValueProblem(v.span, f"missing field{'s' if len(missing) > 1 else ''} "
                                        + ", ".join(f"'{k}'" for k in missing) + f" of {type_text(want)}",
                                        "optional fields (T?) may be left out; the others are required"))
    return out


# ---- expressions ---------------------------------------------------------------------------------


class ExprChecker:
    """Infers expression types in one scope and reports what cannot work.

    `state` is the state whose guard is checked (its `output` is in scope); None for tool-call arguments,
    which are evaluated before the state has an output.
    """

    def __init__(self, symbols: Symbols, diags: Diagnostics, state: StateView | None) -> None:
        self.symbols = symbols
        self.diags = diags
        self.state = state

    def output_type(self, view: StateView) -> TypeLike:
        if view.output is not None:
            return self.symbols.resolve_type(view.output.type)
        if view.kind == "agent":
            return TextOutput(view.name)
        if view.kind == "action" and view.call is not None:
            return tool_result_type(view.call.tool.dotted, self.symbols)
        return ir.ANY

    def infer(self, e: ast.Expr) -> TypeLike:
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
        names = list(self.symbols.inputs) + list(self.symbols.states)
        return ([GUARD_OUTPUT] if self.state is not None else []) + names

    def _name(self, e: ast.NameExpr) -> TypeLike:
        s = self.symbols
        if e.name in s.inputs:
            s.used_inputs.add(e.name)
            return s.resolve_type(s.inputs[e.name].type)
        if e.name == GUARD_OUTPUT:
            if self.state is None:
                self.diags.report("SW2007", "'output' is not available in a tool call's arguments", e.span,
                                  label="the call runs before this state has an output",
                                  help="use the machine's inputs or another state's 'STATE.output'")
                return ir.ANY
            return self.output_type(self.state)
        if e.name in s.states:
            self.diags.report("SW4013", f"'{e.name}' is a state, not a value", e.span,
                              label="a state name on its own",
                              help=f"write '{e.name}.output' for its output or 'visits({e.name})' for the "
                                   "number of times it ran")
            return ir.ANY
        hint = ""
        if self.state is not None:
            out = _strip_optional(self.output_type(self.state))
            fields = self._fields(out)
            if e.name in fields:
                hint = f"did you mean 'output.{e.name}'?"
        hint = hint or did_you_mean(e.name, self._scope_names())
        s.used_inputs.add(closest(e.name, s.inputs) or "")
        if not hint and e.name in ("True", "False", "None", "null"):
            hint = "the literals are written true, false and none"
        where = "a guard" if self.state is not None else "a tool call's arguments"
        self.diags.report("SW2007", f"unknown name '{e.name}' in {where}", e.span, label="not in scope",
                          help=hint or "in scope: 'output', the machine's inputs, 'STATE.output', "
                                       "len() and visits()")
        return ir.ANY

    def _fields(self, t: TypeLike) -> dict[str, ir.Type]:
        if isinstance(t, ir.Named):
            return self.symbols.fields_of(t.name)
        if isinstance(t, Record):
            return dict(t.fields)
        return {}

    def _attribute(self, e: ast.Attribute) -> TypeLike:
        attr = e.attr.value
        base_expr = e.value
        if (isinstance(base_expr, ast.NameExpr) and base_expr.name in self.symbols.states
                and base_expr.name not in self.symbols.inputs):
            if attr == "output":
                return self.output_type(self.symbols.states[base_expr.name])
            self.diags.report("SW2006", f"state '{base_expr.name}' has no field '{attr}'", e.attr.span,
                              label="unknown field",
                              help=f"a state's value in a guard is '{base_expr.name}.output'")
            return ir.ANY
        base = self.infer(base_expr)
        if isinstance(base, TextOutput):
            self.diags.report("SW4002", f"state '{base.state}' has no typed output", e.attr.span,
                              label=f"its output is plain text, so it has no field '{attr}'",
                              help=f"declare 'output TYPE' in state '{base.state}' to give its output fields")
            return ir.ANY
        stripped = _strip_optional(base)
        if stripped == ir.ANY:
            return ir.ANY
        if isinstance(stripped, (ir.Named, Record)):
            fields = self._fields(stripped)
            if attr in fields:
                return fields[attr]
            self.diags.report("SW2006", f"{type_text(stripped)} has no field '{attr}'", e.attr.span,
                              label="unknown field",
                              help=did_you_mean(attr, fields) or "its fields are "
                                   + ", ".join(f"'{f}'" for f in fields))
            return ir.ANY
        self.diags.report("SW4012", f"'{base_expr.span.text}' is {type_text(stripped)} and has no fields",
                          e.attr.span, label=f"no field '{attr}' on {type_text(stripped)}",
                          help="only values of a declared type (and tool results) have fields")
        return ir.ANY

    def _index(self, e: ast.Index) -> TypeLike:
        base = _strip_optional(self.infer(e.value))
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
                          help="read a field with '.NAME'" if isinstance(base, (ir.Named, Record)) else "")
        return ir.ANY

    def _call(self, e: ast.Call) -> TypeLike:
        func = e.func.value
        if func == "visits":
            self._visits_args(e)
            return ir.INT
        arg_types = [self.infer(a) for a in e.args]
        if func == "len":
            if len(e.args) != 1:
                self.diags.report("SW4005", f"len() takes one argument, {len(e.args)} given", e.span,
                                  label="wrong number of arguments", help="write len(VALUE)")
            else:
                t = _norm(arg_types[0])
                if not (t == ir.ANY or t == ir.STR or isinstance(t, (ir.ListOf, ir.Enum))):
                    self.diags.report("SW4005", f"len() takes a str or a list, not {type_text(t)}",
                                      e.args[0].span, label=f"this is {type_text(t)}",
                                      help="a value that may be none must be compared with none first"
                                      if isinstance(t, ir.Optional_) else "")
            return ir.INT
        self.diags.report("SW2009", f"unknown function '{func}'", e.func.span, label="not a function",
                          help=did_you_mean(func, FUNCTIONS) or "guards may call len(x) and visits(STATE)")
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
                              help=did_you_mean(arg.name, self.symbols.states))
            return
        self.infer(arg)
        self.diags.report("SW4005", "visits() takes a state name", arg.span, label="not a state name",
                          help="write visits(STATE) with the name of a state")

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
        t = _strip_optional(t)
        if not (_numeric(t) or t == ir.ANY):
            self.diags.report("SW4001", f"cannot negate {type_text(t)}", e.operand.span,
                              label=f"this is {type_text(t)}", help="'-' applies to numbers")
            return ir.ANY
        return t

    def _require_bool(self, t: TypeLike, expr: ast.Expr, where: str) -> None:
        if not _is_bool(t):
            self.diags.report("SW4004", f"operand of {where} is {type_text(_norm(t))}, not a boolean",
                              expr.span,
                              label="not true/false", help="compare it with something: ==, !=, <, >, in")

    def _binary(self, e: ast.BinaryOp) -> TypeLike:  # type: ignore[override]
        left, right = self.infer(e.left), self.infer(e.right)
        op = e.op
        if op in ("and", "or"):
            self._require_bool(left, e.left, f"'{op}'")
            self._require_bool(right, e.right, f"'{op}'")
            return ir.BOOL
        if op in ("==", "!="):
            if not (self._enum_literal(e.left, left, e.right) and self._enum_literal(e.right, right, e.left)):
                return ir.BOOL
            if not _comparable(left, right):
                self._mismatch(e, left, right, f"cannot compare {type_text(_norm(left))} with "
                                                f"{type_text(_norm(right))}")
            return ir.BOOL
        if op in ("<", "<=", ">", ">="):
            a, b = _strip_optional(left), _strip_optional(right)
            ok = ir.ANY in (a, b) or (_numeric(a) and _numeric(b)) or (a == ir.STR and b == ir.STR)
            if not ok:
                self._mismatch(e, left, right, f"cannot order {type_text(a)} and {type_text(b)} with '{op}'")
            return ir.BOOL
        if op in ("in", "not in"):
            self._membership(e, left, right)
            return ir.BOOL
        return self._arithmetic(e, left, right)

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
        lt, rt = _strip_optional(left), _strip_optional(right)
        hint = ""
        if (_numeric(lt) and rt == ir.STR) or (lt == ir.STR and _numeric(rt)):
            hint = "numbers and strings never compare; write the number without quotes"
        elif isinstance(lt, (ir.Named, Record)) or isinstance(rt, (ir.Named, Record)):
            hint = "compare one of the object's fields: output.FIELD"
        self.diags.report("SW4001", message, e.span,
                          label=f"{type_text(_norm(left))} {e.op} {type_text(_norm(right))}", help=hint)


# ---- checks over the machine ---------------------------------------------------------------------


def _type_refs(machine: ast.Machine) -> Iterator[ast.TypeRef]:
    for item in machine.items:
        if isinstance(item, ast.InputDecl):
            yield item.type
        elif isinstance(item, ast.TypeDecl):
            yield from (f.type for f in item.fields)
        elif isinstance(item, ast.StateDecl):
            yield from (i.type for i in item.items if isinstance(i, ast.OutputDecl))


def _check_enums(machine: ast.Machine, diags: Diagnostics) -> None:
    for ref in _type_refs(machine):
        stack: list[ast.TypeRef] = [ref]
        while stack:
            node = stack.pop()
            if isinstance(node, ast.ListType):
                stack.append(node.item)
            elif isinstance(node, ast.OptionalType):
                stack.append(node.inner)
            elif isinstance(node, ast.EnumType):
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
    stack: list[ast.TypeRef] = [ref]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.ListType):
            stack.append(node.item)
        elif isinstance(node, ast.OptionalType):
            stack.append(node.inner)
        elif isinstance(node, ast.NamedType):
            yield node


def _check_recursive_types(symbols: Symbols, diags: Diagnostics) -> None:
    """Report each cycle of types containing themselves once, at the field that closes it."""
    edges: dict[str, list[tuple[str, ast.FieldDecl]]] = {}
    for name, decl in symbols.types.items():
        edges[name] = [(ref.name.value, f) for f in decl.fields for ref in _named_refs(f.type)
                       if ref.name.value in symbols.types]
    reported: set[frozenset[str]] = set()
    for start in symbols.types:
        # depth-first search for a path back to `start`
        stack: list[tuple[str, list[tuple[str, ast.FieldDecl]]]] = [(start, [])]
        visited: set[str] = set()
        while stack:
            node, path = stack.pop()
            for target, fld in edges[node]:
                step = path + [(node, fld)]
                if target == start:
                    members = frozenset(n for n, _ in step)
                    if members not in reported:
                        reported.add(members)
                        chain = " -> ".join(f"{n}.{f.name.value}" for n, f in step) + f" -> {start}"
                        first = step[0][1]
                        diags.report("SW4009", f"type '{start}' contains itself", first.type.span,
                                     label=f"{chain}",
                                     help="a structured output needs a finite schema; store references as "
                                          "str ids or flatten the nesting")
                    stack.clear()
                    break
                if target not in visited:
                    visited.add(target)
                    stack.append((target, step))


def _check_inputs(symbols: Symbols, diags: Diagnostics) -> None:
    for decl in symbols.inputs.values():
        if decl.default is None:
            continue
        want = symbols.resolve_type(decl.type)
        for p in value_problems(decl.default, want, symbols):
            diags.report("SW4006", f"the default of input '{decl.name.value}' does not fit its type "
                         f"{type_text(want)}", p.span, label=p.message, help=p.help)


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
                             label="second occurrence", help=f"keep one '{key}'")
                continue
            seen.add(key)
            if key not in allowed:
                diags.report("SW2011", f"'{name}' has no option '{key}'", opt.name.span,
                             label="unknown option",
                             help=did_you_mean(key, allowed) or (
                                 f"its options are {', '.join(sorted(allowed))}" if allowed else
                                 f"'{name}' takes no options"))
                continue
            want = parse_signature_type(allowed[key])
            for p in value_problems(opt.value, want, symbols):
                diags.report("SW4006", f"option '{key}' of '{name}' must be {type_text(want)}", p.span,
                             label=p.message, help=p.help)


def _check_guards_and_calls(symbols: Symbols, diags: Diagnostics) -> None:
    for view in symbols.states.values():
        if not view.decl.final:
            guards = ExprChecker(symbols, diags, view)
            for t in view.transitions:
                if t.kind == "guard" and t.guard is not None:
                    result = guards.infer(t.guard)
                    if not _is_bool(result):
                        diags.report("SW4004", f"the guard is {type_text(_norm(result))}, not a boolean",
                                     t.guard.span, label="not true/false",
                                     help=_boolean_hint(t.guard.span.text, _strip_optional(result)))
        if view.call is not None:
            _check_call(view.call, symbols, diags)


def _boolean_hint(text: str, t: TypeLike) -> str:
    if _numeric(t):
        return f"compare the number with something, e.g. {text} > 0"
    if _stringy(t):
        return f'compare the text with something, e.g. {text} == "..." or "..." in {text}'
    if isinstance(t, ir.ListOf):
        return f"test the list, e.g. len({text}) > 0"
    if isinstance(t, (ir.Named, Record)):
        return f"compare one of its fields, e.g. {text}.FIELD == ..."
    return "compare the value with something: ==, !=, <, >, in"


def _check_call(call: ast.ToolCall, symbols: Symbols, diags: Diagnostics) -> None:
    args = ExprChecker(symbols, diags, None)
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
                         help=hint or "its parameters are " + ", ".join(f"'{p}'" for p in params))
            continue
        want = parse_signature_type(params[key][0])
        if not _assignable(t, want):
            diags.report("SW4006", f"argument '{key}' of '{name}' must be {type_text(want)}, "
                         f"not {type_text(_norm(t))}", arg.value.span, label=f"this is {type_text(_norm(t))}")
    misspelled = len(unknown) == 1 and len(missing) == 1  # then reported above as a misspelling
    if missing and not misspelled:
        diags.report("SW4011", f"'{name}' needs the argument{'s' if len(missing) > 1 else ''} "
                     + ", ".join(f"'{m}'" for m in missing), call.tool.span,
                     label="missing " + ", ".join(missing),
                     help=f"write {name}(" + ", ".join(f"{m} = ..." for m in missing) + ")")


# ---- test blocks ---------------------------------------------------------------------------------


def _reply_type(view: StateView, checker: ExprChecker) -> TypeLike:
    t = checker.output_type(view)
    return ir.STR if isinstance(t, TextOutput) else t


def _check_test(test: TestView, symbols: Symbols, diags: Diagnostics) -> None:
    checker = ExprChecker(symbols, diags, None)
    _check_test_inputs(test, symbols, diags)
    for item in test.decl.items:
        if isinstance(item, ast.Reply):
            view = symbols.states.get(item.state.value)
            if view is None:
                continue
            if view.kind in ("final", "none"):
                why = "is final" if view.kind == "final" else "runs no agent and no tool"
                diags.report("SW6003", f"state '{view.name}' {why}, so it takes no reply", item.state.span,
                             label="nothing here reads a reply",
                             help="script the replies of agent states and action states only")
                continue
            want = _reply_type(view, checker)
            for p in value_problems(item.value, want, symbols):
                message = f"the reply for '{view.name}' does not fit its output type {type_text(want)}"
                help = p.help
                if view.kind == "agent" and view.output is None:
                    message = f"state '{view.name}' has no typed output, so its reply must be text"
                    help = help or "write the reply as a string, or declare 'output TYPE' in the state"
                diags.report("SW6002", message, p.span, label=p.message, help=help)
        elif isinstance(item, ast.Verdict):
            _check_verdict(item, symbols, diags)
    if test.expect_final is not None:
        view = symbols.states.get(test.expect_final.state.value)
        if view is not None and not view.decl.final:
            finals = [s for s, v in symbols.states.items() if v.decl.final]
            diags.report("SW6007", f"'{view.name}' is not a final state", test.expect_final.state.span,
                         label="a run ends only in a final state",
                         help=did_you_mean(view.name, finals) or (
                             "final states: " + ", ".join(finals) if finals else "")
                         or "use 'expect path [...]' to check the states a run passes through")
    if test.expect_failure is not None:
        kind = test.expect_failure.kind
        known = list(FAILURE_KINDS) + list(LIMIT_NAMES)
        if kind.value not in known:
            diags.report("SW6006", f"unknown failure kind '{kind.value}'", kind.span,
                         label="not a failure kind",
                         help=did_you_mean(kind.value, known) or "expect one of: " + ", ".join(known))
    if test.expect_failure is not None and test.expect_final is not None:
        diags.report("SW6006", "a test cannot expect both a final state and a failure",
                     test.expect_failure.span,
                     label="contradicts 'expect final'", help="a run either reaches a final state or fails")
    if not test.has_expectation:
        diags.report("SW7006", f"test \"{test.decl.name.value}\" has no expectation", test.decl.name.span,
                     label="checks only that the run does not crash",
                     help="add 'expect path [...]', 'expect final STATE', 'expect result ...' or "
                          "'expect failure KIND'")


def _check_test_inputs(test: TestView, symbols: Symbols, diags: Diagnostics) -> None:
    given: set[str] = set()
    if test.input is not None:
        for entry in object_entries(test.input.values):
            key = entry.key.value
            if key in given:
                diags.report("SW6004", f"input '{key}' is given twice", entry.key.span, label="second value",
                             help="give each input once")
                continue
            given.add(key)
            decl = symbols.inputs.get(key)
            if decl is None:
                diags.report("SW6004", f"the machine has no input '{key}'", entry.key.span,
                             label="unknown input", help=did_you_mean(key, symbols.inputs) or (
                                 "declared inputs: " + ", ".join(symbols.inputs) if symbols.inputs
                                 else "the machine declares no inputs"))
                continue
            want = symbols.resolve_type(decl.type)
            for p in value_problems(entry.value, want, symbols):
                diags.report("SW4006", f"test input '{key}' does not fit its type {type_text(want)}", p.span,
                             label=p.message, help=p.help)
    missing = [name for name, decl in symbols.inputs.items()
               if name not in given and decl.default is None and not isinstance(decl.type, ast.OptionalType)]
    if missing:
        span = test.input.span if test.input is not None else test.decl.name.span
        plural = "s" if len(missing) > 1 else ""
        diags.report("SW6004", f"test \"{test.decl.name.value}\" does not give the required input{plural} "
                     + ", ".join(f"'{m}'" for m in missing), span, label=f"missing {', '.join(missing)}",
                     help="inputs without a default must be given: input { "
                          + "  ".join(f"{m} ..." for m in missing) + " }")


def _check_verdict(item: ast.Verdict, symbols: Symbols, diags: Diagnostics) -> None:
    view = symbols.states.get(item.state.value)
    if view is None:
        return
    conditions = view.conditions
    if not conditions:
        diags.report("SW6005", f"state '{view.name}' has no natural-language conditions", item.state.span,
                     label="the verifier never judges this state",
                     help="a verdict answers a state's 'when \"...\"' conditions")
        return
    if item.condition is not None and item.condition.value not in conditions:
        diags.report("SW6005", f"state '{view.name}' has no condition \"{item.condition.value}\"",
                     item.condition.span, label="not one of the state's conditions",
                     help=did_you_mean(item.condition.value, conditions)
                     or "repeat a condition word for word, "
                          "or write 'verdict STATE none'",
                     notes=[f"the conditions of '{view.name}': " + "; ".join(f'"{c}"' for c in conditions)])


def check_types(machine: ast.Machine, symbols: Symbols, diagnostics: Diagnostics) -> None:
    """Type declarations, defaults, tool options, guards, tool-call arguments and test data."""
    _check_enums(machine, diagnostics)
    _check_recursive_types(symbols, diagnostics)
    _check_inputs(symbols, diagnostics)
    _check_tool_options(symbols, diagnostics)
    _check_guards_and_calls(symbols, diagnostics)
    for test in symbols.tests:
        _check_test(test, symbols, diagnostics)


def tool_result_type(name: str, symbols: Symbols) -> TypeLike:
    """What an action state calling `name` outputs (for tools outside the standard set: `any`)."""
    if name in STD_TOOLS and (name not in symbols.tools or symbols.tools[name].import_path is None):
        return std_tool_result(name)
    return ir.ANY

