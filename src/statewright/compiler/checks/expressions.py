"""The expression checker: the type of every guard, tool argument, update and `for` list.

Narrowed by the tests on the way (SW2006, SW2007, SW4001-SW4014, SW4031, SW4032, ...).
"""

from __future__ import annotations

from ...diagnostics import Diagnostics, did_you_mean, quoted_list
from ...grammar import ast
from .. import ir
from .callees import UntypedResult
from .constraints import constraint_of, lower_range, range_text
from .expression_hints import boolean_hint, mismatch_hint, shorten_source, update_help
from .flow import EntryFacts, Flow
from .guard_facts import (
    FLIPPED_COMPARISON,
    absent_output_notes,
    comparison_outcome,
    expr_path,
    merge_variant_tests,
    none_tests,
    number_literal,
    state_output_read,
)
from .resolve import (
    GUARD_OUTPUT,
    FieldRead,
    InputRead,
    StateView,
    Symbols,
    closest,
    unknown_state_help,
)
from .type_algebra import (
    MaybeAbsent,
    Record,
    TextOutput,
    TypeLike,
    coalesces,
    comparable,
    fields_of,
    is_bool,
    is_numeric,
    is_stringy,
    join_types,
    normalized,
    output_type,
    type_text,
    unknown_field_help,
    without_optional,
)

FUNCTIONS = ("len", "visits", *ast.QUANTIFIERS, *ast.AGGREGATES)


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
            help = update_help(e, f"{t.state}.output", "test that it ran in the value")
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
            help = update_help(e, shown, "test it in the value")
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
        if self.state is not None and e.name in fields_of(without_optional(output_type(self.state, s)), s):
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
        stripped = without_optional(base)
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
        inner = normalized(t.inner) if isinstance(t, MaybeAbsent) else normalized(t)
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
        base = without_optional(items)
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
        if not is_bool(test):
            self.diags.report("SW4004", f"the test in {func}() is {type_text(normalized(test))}, not a boolean",
                              e.element.span, label="not true/false",
                              help=boolean_hint(e.element.span.text, without_optional(test)))
        return ir.INT if func == "count" else ir.BOOL

    def _index(self, e: ast.Index) -> TypeLike:
        base = without_optional(self.present(self.infer(e.value), e, e.value))
        idx = without_optional(self.infer(e.index))
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
                t = normalized(arg_types[0])
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
            listed = without_optional(self.present(arg_types[0], e.args[0]))
            if listed == ir.ANY:
                return ir.ANY
            if not isinstance(listed, ir.ListOf):
                self.diags.report("SW4005", f"{func}() takes a list, not {type_text(listed)}", e.args[0].span,
                                  label=f"this is {type_text(listed)}",
                                  help=f"{func}() goes over the items of a list"
                                       + ("" if func == "sum" else f"; compare two values with {func}(a, b)"))
                return ir.ANY
            return self._aggregated(func, [listed.item], [e.args[0]], True)
        values = [without_optional(self.present(t, a)) for t, a in zip(arg_types, e.args, strict=True)]
        return self._aggregated(func, values, list(e.args), False)

    def _aggregated(self, func: str, types: list[TypeLike], where: list[ast.Expr], items: bool) -> TypeLike:
        """The value of sum/min/max over values of `types` (`items`: the items of the one list at `where[0]`):
        numbers for sum, numbers or texts for min and max; `any` while some type is unknown."""
        normal = [normalized(t) for t in types]
        if all(is_numeric(t) for t in normal):
            return ir.INT if all(t == ir.INT for t in normal) else ir.FLOAT
        if func != "sum" and all(is_stringy(t) for t in normal):
            return normal[0] if len(set(normal)) == 1 else ir.STR
        numbers = [t for t in normal if is_numeric(t)]
        texts = [t for t in normal if is_stringy(t)]
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
        types = [normalized(self.infer(i)) for i in e.items]
        if not types:
            return ir.ListOf(ir.ANY)
        first = types[0]
        if all(t == first for t in types):
            return ir.ListOf(first)  # type: ignore[arg-type]
        if all(is_numeric(t) for t in types):
            return ir.ListOf(ir.FLOAT)
        if all(is_stringy(t) for t in types):
            return ir.ListOf(ir.STR)
        return ir.ListOf(ir.ANY)

    def _unary(self, e: ast.UnaryOp) -> TypeLike:
        t = self.infer(e.operand)
        if e.op == "not":
            self._require_bool(t, e.operand, "'not'")
            return ir.BOOL
        t = without_optional(self.present(t, e.operand))
        if not (is_numeric(t) or t == ir.ANY):
            self.diags.report("SW4001", f"cannot negate {type_text(t)}", e.operand.span,
                              label=f"this is {type_text(t)}", help="'-' applies to numbers")
            return ir.ANY
        return t

    def _require_bool(self, t: TypeLike, expr: ast.Expr, where: str) -> None:
        if not is_bool(t):
            self.diags.report("SW4004", f"operand of {where} is {type_text(normalized(t))}, not a boolean",
                              expr.span, label="not true/false",
                              help=boolean_hint(expr.span.text, without_optional(t)))

    def _binary(self, e: ast.BinaryOp) -> TypeLike:  # type: ignore[override]
        op = e.op
        if op in ("and", "or"):
            left = self.infer(e.left)
            # the right operand is evaluated only when the left one is true (`and`) or false (`or`)
            right = self.infer_where(e.left, op == "and", e.right)
            if op == "or" and coalesces(left, right):
                # `a or b` of values that are not booleans: `a` when it is there (and not empty or 0), else `b`
                return self._either(e, without_optional(left), right)
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
            if not comparable(left, right):
                self._mismatch(e, left, right, f"cannot compare {type_text(normalized(left))} with "
                                                f"{type_text(normalized(right))}")
            else:
                self._decided_by_constraint(e)
            return ir.BOOL
        if op in ("<", "<=", ">", ">="):
            left, right = self.present(left, e.left), self.present(right, e.right)
            a, b = without_optional(left), without_optional(right)
            ok = ir.ANY in (a, b) or (is_numeric(a) and is_numeric(b)) or (a == ir.STR and b == ir.STR)
            if not ok:
                self._mismatch(e, left, right, f"cannot order {type_text(a)} and {type_text(b)} with '{op}'")
            else:
                self._decided_by_constraint(e)
            return ir.BOOL
        if op in ("in", "not in"):
            right = self.present(right, e.right)
            if without_optional(right) == ir.STR:
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
        if not is_bool(test):
            self.diags.report("SW4004", f"the test of 'if ... else' is {type_text(normalized(test))}, not a boolean",
                              e.test.span, label="not true/false",
                              help=boolean_hint(e.test.span.text, without_optional(test)))
        then = self.infer_where(e.test, True, e.then)
        orelse = self.infer_where(e.test, False, e.orelse)
        return self._either(e, then, orelse)

    def _either(self, e: ast.Conditional | ast.BinaryOp, first: TypeLike, second: TypeLike) -> TypeLike:
        """The type of a value that is one of two (`x if c else y`, `a or b`): the type both have (ints and
        floats give float, texts and enums str, two declared types the variant of both); it may be none when
        either may be. Values of types that do not go together are SW4001."""
        one, other = without_optional(first), without_optional(second)
        joined = join_types(one, other)
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
        maybe_none = any(isinstance(normalized(t), ir.Optional_) or normalized(t) == ir.NONE for t in (first, second))
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
            number = number_literal(other)
            bounded = self._bounded(side) if number is not None else None
            if bounded is None or number is None:
                continue
            r, shown, decl = bounded
            low, high = lower_range(r)
            outcome = comparison_outcome(FLIPPED_COMPARISON[e.op] if flipped else e.op, low, high, number)
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
        enum = without_optional(t)
        if not isinstance(enum, ir.Enum):
            return True
        if isinstance(other, ast.Literal) and isinstance(other.value, str) and other.value not in enum.values:
            self.diags.report("SW4001", f"\"{other.value}\" is not a value of {type_text(enum)}", other.span,
                              label="never equal", help=did_you_mean(other.value, enum.values)
                              or f"'{expr.span.text}' is one of {type_text(enum)}")
            return False
        return True

    def _membership(self, e: ast.BinaryOp, left: TypeLike, right: TypeLike) -> None:
        container = without_optional(right)
        item = normalized(left)
        if container == ir.ANY:
            return
        if container == ir.STR or isinstance(container, ir.Enum):
            if not (without_optional(item) in (ir.STR, ir.ANY) or isinstance(without_optional(item), ir.Enum)):
                self._mismatch(e, left, right, f"'{e.op}' with a str on the right needs a str on the left, "
                                               f"not {type_text(item)}")
            return
        if isinstance(container, ir.ListOf):
            if isinstance(without_optional(item), ir.Enum) and isinstance(e.right, ast.ListExpr):
                for lit in e.right.items:
                    self._enum_literal(e.left, item, lit)
            if not comparable(item, container.item):
                self._mismatch(e, left, right, f"a {type_text(item)} is never in a {type_text(container)}")
            return
        self.diags.report("SW4001",
                          f"'{e.op}' needs a str or a list on the right, not {type_text(container)}",
                          e.right.span, label=f"this is {type_text(container)}",
                          help="test membership in a list (x in [\"a\", \"b\"]) or a substring of a str")

    def _arithmetic(self, e: ast.BinaryOp, left: TypeLike, right: TypeLike) -> TypeLike:
        a, b = without_optional(left), without_optional(right)
        if ir.ANY in (a, b):
            return ir.ANY
        if is_numeric(a) and is_numeric(b):
            return ir.INT if a == b == ir.INT and e.op != "/" else ir.FLOAT
        if e.op == "+" and is_stringy(a) and is_stringy(b):
            return ir.STR
        if e.op == "+" and isinstance(a, ir.ListOf) and isinstance(b, ir.ListOf):
            return a if a == b else ir.ListOf(ir.ANY)
        self._mismatch(e, left, right, f"cannot apply '{e.op}' to {type_text(a)} and {type_text(b)}")
        return ir.ANY

    def _mismatch(self, e: ast.BinaryOp, left: TypeLike, right: TypeLike, message: str) -> None:
        self.diags.report("SW4001", message, e.span,
                          label=f"{type_text(normalized(left))} {e.op} {type_text(normalized(right))}",
                          help=mismatch_hint(e, without_optional(left), without_optional(right)))



