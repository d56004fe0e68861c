"""Run variables: their declarations, the states' updates of them, and the tests that expect their values.

A variable is declared with a type and the value every run starts with (`var past_steps: list[Step] = []`),
so it is never read before it has a value. A state updates it after its step with a reducer — `set`,
`append`, `extend`, `merge` — from an expression that sees what a guard of the state sees (its `output`, the
inputs, other states' outputs, the variables); in a map, what one element's step sees. Reads of variables
in guards, templates and tool arguments are typed by the expression and template checks, which record them
(`Symbols.used_variables`) for the unused-declaration warnings.
"""

from __future__ import annotations

from ...diagnostics import Diagnostics, did_you_mean, quoted_list
from ...grammar import ast
from .. import ir
from .expression_hints import shorten_source
from .expressions import ExprChecker
from .flow import EntryFacts, Flow
from .resolve import GUARD_OUTPUT, JINJA_NAMES, StateView, Symbols
from .type_algebra import MaybeAbsent, Record, TypeLike, fields_of, normalized, step_output_type, type_text
from .values import value_problems


def check_variables(symbols: Symbols, diags: Diagnostics, flow: Flow | None) -> None:
    """Every variable's name and initial value, every state's updates, and every `expect var`."""
    for decl in symbols.variables.values():
        _check_declaration(decl, symbols, diags)
    for view in symbols.states.values():
        if view.updates:
            _check_updates(view, symbols, diags, flow)
    _check_branch_sets(symbols, diags)
    for test in symbols.tests:
        for item in test.expect_vars:
            _check_expect_var(item, symbols, diags)


def _check_declaration(decl: ast.VarDecl, symbols: Symbols, diags: Diagnostics) -> None:
    name = decl.name.value
    clash = ("an input" if name in symbols.inputs else "a state" if name in symbols.states
             else "the current state's output in guards" if name == GUARD_OUTPUT
             else "one of Jinja's own names in templates" if name in JINJA_NAMES else None)
    if clash is not None:
        diags.report("SW2081", f"run variable '{name}' has the name of {clash}", decl.name.span,
                     label="guards and templates could not tell them apart",
                     help=f"choose another name for the variable, e.g. '{name}_so_far'")
    want = symbols.resolve_type(decl.type)
    for p in value_problems(decl.value, want, symbols):
        diags.report("SW4080", f"the initial value of '{name}' does not fit its type {type_text(want)}", p.span,
                     label=p.message, help=p.help or "every run starts the variable with this value")


def _check_updates(view: StateView, symbols: Symbols, diags: Diagnostics, flow: Flow | None) -> None:
    if view.kind in ("final", "none"):
        update = view.updates[0]
        diags.report("SW3082", f"state '{view.name}' does no work, so it has no output to update from",
                     update.span, label="nothing runs here before the update",
                     help="update the variable in the state before this one, or read it in this state's result")
        return
    facts = symbols.entry_facts.get(view.name, EntryFacts())
    branches = frozenset(s for s, entry in symbols.branch_of.items()
                         if any(entry == e for e, _ in symbols.branches.get(view.name, ())))
    after = facts.after_step(view.name, branches)
    if view.each is not None:  # each element's update: its own output and names, like its instruction
        checker = ExprChecker(symbols, diags, view, flow=flow, output=step_output_type(view, symbols),
                              local=symbols.each_names.get(view.name)).knowing(after)
    else:
        checker = ExprChecker(symbols, diags, view, flow=flow).knowing(after)
    checker.what = "an update"
    for update in view.updates:
        decl = symbols.variables.get(update.var.value)
        value = checker.infer(update.value)
        if decl is None:
            _unknown_variable(update, symbols, diags)
            continue
        _check_reducer(update, symbols.resolve_type(decl.type), value, symbols, diags)


def _unknown_variable(update: ast.Update, symbols: Symbols, diags: Diagnostics) -> None:
    name = update.var.value
    hint = did_you_mean(name, symbols.variables)
    if not hint and name in symbols.inputs:
        hint = f"'{name}' is an input, which a run cannot change; declare a variable: var {name}_now: ... = ..."
    diags.report("SW2080", f"unknown run variable '{name}'", update.var.span, label="no 'var' with this name",
                 help=hint or (f"the variables are {quoted_list(symbols.variables)}" if symbols.variables
                               else f"declare it in the machine: var {name}: TYPE = VALUE"))


def _check_reducer(update: ast.Update, want: ir.Type, value: TypeLike, symbols: Symbols,
                   diags: Diagnostics) -> None:
    """What the reducer takes of a variable of type `want`, and whether the value gives it."""
    reducer, name = update.reducer, update.var.value
    if reducer in ("append", "extend") and not isinstance(want, ir.ListOf):
        diags.report("SW4081", f"'{reducer}' adds to a list, and '{name}' is {type_text(want)}", update.span,
                     label=f"'{name}' is no list", help=_reducer_help(name, want))
        return
    if reducer == "merge" and not isinstance(want, ir.Named):
        diags.report("SW4081", f"'merge' writes fields into a value of a declared type, and '{name}' is "
                     f"{type_text(want)}", update.span, label=f"'{name}' has no fields",
                     help=_reducer_help(name, want))
        return
    if reducer == "set":
        _check_fits(update, value, want, f"'{name}' is {type_text(want)}", diags)
    elif reducer == "append":
        assert isinstance(want, ir.ListOf)
        _check_fits(update, value, want.item, f"the items of '{name}' are {type_text(want.item)}", diags)
    elif reducer == "extend":
        _check_fits(update, value, want, f"'{name}' is {type_text(want)}", diags)
    else:
        assert isinstance(want, ir.Named)
        _check_merge(update, value, want, symbols, diags)


def _reducer_help(name: str, want: ir.Type) -> str:
    if isinstance(want, ir.Optional_) and isinstance(want.inner, ir.ListOf):
        return f"a list that may be none has nothing to add to: declare it 'var {name}: {type_text(want.inner)} = []'"
    return f"replace its value with 'set {name} <- ...'"


def _check_fits(update: ast.Update, value: TypeLike, want: ir.Type, what: str, diags: Diagnostics) -> None:
    """SW4082 when a value of type `value` is no value of `want`. Unlike a tool's argument, a variable takes
    no value that may be none unless it is optional itself: it would hold none where its type says not."""
    got = normalized(value)
    if isinstance(got, ir.Optional_) and not isinstance(want, ir.Optional_) and want != ir.ANY:
        shown = shorten_source(update.value)
        if isinstance(update.value, ast.Conditional):  # `or` binds tighter than `if ... else`
            shown = f"({shown})"
        why = ("its state may not have run" if isinstance(value, MaybeAbsent) else "it is optional")
        diags.report("SW4082", f"the value of '{update.reducer} {update.var.value}' may be none", update.value.span,
                     label=f"{why}, and {what}",
                     help=f"give it a value for that case: {shown} or ... (a coalescing 'or'), or declare the "
                          "variable optional")
        return
    literals = _enum_literals(update.value, want)
    if literals:  # `set level <- "high" if ... else "low"`: each text is one of the enum's values, or not
        for literal, enum in literals:
            text = str(literal.value)
            if text not in enum.values:
                diags.report("SW4082", f"{literal.span.text if literal.span else repr(text)} is not one of "
                             f"{type_text(enum)}", literal.span, label=what,
                             help=did_you_mean(text, enum.values) or f"write one of {type_text(enum)}")
        return
    if not _fits(got, want):
        diags.report("SW4082", f"the value of '{update.reducer} {update.var.value}' is {type_text(got)}",
                     update.value.span, label=f"{what}", help=_fits_help(update, got, want))


def _enum_literals(e: ast.Expr, want: TypeLike) -> list[tuple[ast.Literal, ir.Enum]] | None:
    """The text literals of a value written only of literals, each with the enum it goes into, when `want`
    is an enum or a list of one: `"a"`, `"a" if c else "b"`, `["a", "b"]`, `none` for an optional. None for
    any other value (`x or "b"`, a state's output), which is typed as a whole."""
    want = normalized(want)
    inner = want.inner if isinstance(want, ir.Optional_) else want
    if isinstance(e, ast.Literal):
        if isinstance(e.value, str) and isinstance(inner, ir.Enum):
            return [(e, inner)]
        return [] if e.value is None and isinstance(want, ir.Optional_) else None
    if isinstance(e, ast.Conditional):
        then, orelse = _enum_literals(e.then, want), _enum_literals(e.orelse, want)
        return then + orelse if then is not None and orelse is not None else None
    if isinstance(e, ast.ListExpr) and isinstance(inner, ir.ListOf):
        found: list[tuple[ast.Literal, ir.Enum]] = []
        for item in e.items:
            of_item = _enum_literals(item, inner.item)
            if of_item is None:
                return None
            found += of_item
        return found
    return None


def _fits(src: TypeLike, dst: TypeLike) -> bool:
    """Whether every value of type `src` is a value of type `dst` (ints are floats, enums are texts)."""
    src, dst = normalized(src), normalized(dst)
    if ir.ANY in (src, dst):
        return True
    if isinstance(dst, ir.Optional_):
        return src == ir.NONE or _fits(src.inner if isinstance(src, ir.Optional_) else src, dst.inner)
    if isinstance(src, ir.Optional_):
        return False
    if dst == ir.FLOAT and src == ir.INT:
        return True
    if dst == ir.STR and isinstance(src, ir.Enum):
        return True
    if isinstance(dst, ir.Enum) and isinstance(src, ir.Enum):
        return set(src.values) <= set(dst.values)
    if isinstance(src, ir.ListOf) and isinstance(dst, ir.ListOf):
        return _fits(src.item, dst.item)
    if isinstance(src, Record) or isinstance(dst, Record):
        return False
    return src == dst


def _fits_help(update: ast.Update, got: TypeLike, want: ir.Type) -> str:
    if update.reducer == "append" and isinstance(got, ir.ListOf):
        return f"to add every item of a list, write 'extend {update.var.value} <- ...'"
    if update.reducer == "extend" and not isinstance(got, ir.ListOf):
        return f"to add one item, write 'append {update.var.value} <- ...'"
    if isinstance(want, ir.Enum) and got == ir.STR:
        return "a text may be any text; the variable takes only its values: set it from a value of the enum"
    return "give a value of the variable's type, or change the variable's type"


def _check_merge(update: ast.Update, value: TypeLike, want: ir.Named, symbols: Symbols,
                 diags: Diagnostics) -> None:
    """`merge V <- VALUE`: VALUE an object whose fields V's type has, each of its field's type (a field that
    is none leaves V's as it is, so an optional field merges into a required one)."""
    got = normalized(value)
    if isinstance(got, ir.Optional_):
        got = normalized(got.inner)  # none merges nothing
    if got == ir.ANY:
        return  # a user tool's result: checked when the run merges it
    if not isinstance(got, (ir.Named, Record)):
        diags.report("SW4082", f"'merge {update.var.value}' takes an object, not {type_text(got)}",
                     update.value.span, label=f"'{update.var.value}' is {type_text(want)}",
                     help=f"merge a value with fields of {want.name}, or replace the whole value with 'set'")
        return
    mine = symbols.fields_of(want.name)
    for field, field_type in fields_of(got, symbols).items():
        if field not in mine:
            diags.report("SW4082", f"'merge {update.var.value}' would write field '{field}', which "
                         f"{want.name} does not have", update.value.span,
                         label=f"{type_text(got)} has '{field}'",
                         help=f"the fields of {want.name} are {quoted_list(mine)}")
            return
        inner = field_type.inner if isinstance(field_type, ir.Optional_) else field_type
        if not _fits(inner, mine[field]):
            diags.report("SW4082", f"'merge {update.var.value}' would write {type_text(inner)} into field "
                         f"'{field}' of {want.name}", update.value.span,
                         label=f"'{field}' is {type_text(mine[field])} in {want.name}",
                         help="merge a value whose fields have the variable's field types")
            return


def _check_branch_sets(symbols: Symbols, diags: Diagnostics) -> None:
    """SW7122: two branches of one parallel state `set` the same variable (the later branch's value wins)."""
    for parallel, branches in symbols.branches.items():
        first: dict[str, str] = {}  # variable -> the entry of the first branch that sets it
        for entry, _ in branches:
            states = [s for s, e in symbols.branch_of.items() if e == entry]
            for state in states:
                for update in symbols.states[state].updates:
                    name = update.var.value
                    if update.reducer != "set" or name not in symbols.variables:
                        continue
                    earlier = first.setdefault(name, entry)
                    if earlier != entry:
                        diags.report("SW7122", f"branches '{earlier}' and '{entry}' of '{parallel}' both set "
                                     f"'{name}'", update.span, label="the later branch's value wins at the join",
                                     help=f"append to a list, merge fields, or set a variable of each branch's "
                                          f"own: the value branch '{earlier}' sets is lost")
                        first[name] = entry


def _check_expect_var(item: ast.ExpectVar, symbols: Symbols, diags: Diagnostics) -> None:
    name = item.name.value
    decl = symbols.variables.get(name)
    if decl is None:
        diags.report("SW6080", f"the machine has no run variable '{name}'", item.name.span,
                     label="no 'var' with this name",
                     help=did_you_mean(name, symbols.variables) or (
                         f"its variables are {quoted_list(symbols.variables)}" if symbols.variables
                         else "declare it in the machine: var NAME: TYPE = VALUE"))
        return
    symbols.used_variables.add(name)
    want = symbols.resolve_type(decl.type)
    for p in value_problems(item.value, want, symbols, partial=True):
        diags.report("SW6081", f"the expected value of '{name}' does not fit its type {type_text(want)}", p.span,
                     label=p.message, help=p.help)
