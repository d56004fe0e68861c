"""Types of template expressions: every value a template reads, followed through every binding.

A template reads typed values — `STATE.output`, inputs, a map's element — and may copy them into names
(`set`, `with`, a `for` target, a macro's parameter, a `namespace()`'s fields) or derive values from them
(`x if c else y`, `a or b`, filters such as `first`, `map(attribute=...)`, `selectattr`, `groupby`). The
type of every expression is worked out here, the nodes inside an expression first, so that a field read
through a copied name is checked like a read of the value it was copied from (SW2006, SW4031, SW4014,
SW5002), and a value the check does not follow is refused where it is read into (SW5010), with a note on
how to write it instead.

A name the template binds has every type any of its bindings gives it, and the context's too where Jinja
may read it from there (a read before the first `set` of the name); the bindings' types are found by
evaluating them until they no longer change.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any

from jinja2 import nodes

from ...diagnostics import Diagnostics, Span, did_you_mean
from .. import ir
from .callees import UntypedResult
from .flow import Flow
from .guard_facts import absent_output_notes
from .resolve import FieldRead, Symbols
from .template_filters import FILTERS, FilterCall
from .template_narrowing import Narrowing, jinja_path
from .template_source import ParsedTemplate, TreeIndex
from .template_values import (
    DYNAMIC,
    EXAMPLE_METHODS,
    GROUP_LABEL,
    LOOP,
    LOOP_FIELDS,
    MACRO,
    METHODS,
    ROUNDS,
    NamespaceValue,
    Opaque,
    StateValue,
    Types,
    Untracked,
    const_type,
    inner_type,
    only_variants,
    plain_kind,
    present_types,
    quoted,
    shown_name,
    tracked,
    type_name,
    union,
)
from .type_algebra import (
    MaybeAbsent,
    Record,
    TextOutput,
    TypeLike,
    as_ir_type,
    fields_of,
    join_types,
    normalized,
    output_type,
    type_text,
    unknown_field_help,
)


@dataclass
class Reader:
    """What a template is read for: its state (None: an agent's prompt), which template of the state it is,
    and the names its state's map gives it."""

    state: str | None
    template: str
    local: dict[str, TypeLike]


class TemplateTypes:
    """The types of one template's expressions, and what cannot be read from them (reported once each)."""

    def __init__(self, symbols: Symbols, diags: Diagnostics, flow: Flow | None, parsed: ParsedTemplate,
                 index: TreeIndex, reads: set[int], reader: Reader, variant_names: frozenset[str],
                 globals_: Iterable[str]) -> None:
        self.symbols = symbols
        self.diags = diags
        self.flow = flow
        self.parsed = parsed
        self.index = index
        self.reads = reads  # ids of the Name nodes that may read the context
        self.reader = reader
        self.globals = frozenset(globals_)
        self.report = False
        self.reported: set[tuple[int, str]] = set()
        self.memo: dict[int, Types] = {}
        self.env: dict[str, Types] = {}  # a bound name -> its types
        self.fields: dict[tuple[int, str], Types] = {}  # (namespace site, field) -> its types
        self.sources: dict[str, list[Callable[[], Types]]] = {}
        self.bound_at: dict[str, list[nodes.Node]] = {}
        self.ns_sets: list[tuple[nodes.NSRef, nodes.Node]] = []
        self.ns_calls: list[nodes.Call] = []
        self.loops: dict[int, nodes.For] = {}  # id of a `loop` Name -> the loop it is in
        self._collect()
        facts = symbols.entry_facts.get(reader.state or "")
        if facts is not None and reader.template in ("result", "fail"):
            facts = facts.after_step(reader.state or "")  # rendered after the state's own step
        self.narrowing = Narrowing(index.parents, variant_names, self._options_of, bound_at=self.bound_at,
                                   entry_present=facts.present if facts else frozenset(),
                                   entry_variants=dict(facts.variants) if facts else None)

    # -- the whole template

    def run(self) -> None:
        """Work out the bound names' types, then every expression's, reporting what cannot be read."""
        try:
            if self.sources or self.ns_sets or self.ns_calls:
                self._settle()
            self.report = True
            self.memo = {}
            for node in reversed(self.index.order):  # every node after the nodes inside it
                if isinstance(node, nodes.Expr):
                    self.eval(node)
                elif isinstance(node, nodes.For):
                    self._iterate(node.iter, self.eval(node.iter), node)
        finally:
            # the bound names' sources and the narrowing call back into this checker: without these
            # cycles, a template's checker is freed when it is done (the CLI's `check` runs with the
            # cyclic collector off, and a machine has a template per state)
            self.sources = {}
            del self.narrowing

    def _settle(self) -> None:
        """Evaluate every binding until no name's types change (a name that keeps changing is untracked)."""
        for _ in range(ROUNDS):
            self.memo = {}
            env = {name: union(*(source() for source in sources)) for name, sources in self.sources.items()}
            fields = self._namespace_fields()
            if env == self.env and fields == self.fields:
                return
            changed = {n for n in env if env[n] != self.env.get(n)}
            self.env, self.fields = env, fields
        why = Untracked("its bindings refer to each other in a way the check does not follow",
                        "give each value a name of its own")
        for name in changed:
            self.env[name] = (why,)

    def _namespace_fields(self) -> dict[tuple[int, str], Types]:
        fields: dict[tuple[int, str], Types] = {}
        for call in self.ns_calls:
            for kw in call.kwargs:
                key = (id(call), kw.key)
                fields[key] = union(fields.get(key, ()), self.eval(kw.value))
        for target, value in self.ns_sets:
            for t in self._lookup(target.name, None):
                if isinstance(t, NamespaceValue):
                    key = (t.site, target.attr)
                    fields[key] = union(fields.get(key, ()), self.eval(value))
        return fields

    # -- bindings

    def _bind(self, name: str, at: nodes.Node, source: Callable[[], Types]) -> None:
        self.sources.setdefault(name, []).append(source)
        self.bound_at.setdefault(name, []).append(at)

    def _collect(self) -> None:
        """Every binding in the template, with a way to work out the types it gives its name."""
        macros: dict[str, list[nodes.Macro]] = {}
        for node in self.index.order:
            if type(node) not in _BINDERS:
                continue
            if isinstance(node, nodes.Assign):
                self._bind_target(node.target, node, partial(self.eval, node.node))
            elif isinstance(node, nodes.AssignBlock):
                self._bind_target(node.target, node, lambda: (ir.STR,))
            elif isinstance(node, nodes.For):
                self._bind_target(node.target, node, partial(self._items, node))
                for inner in node.body:
                    self._mark_loop(inner, node)
            elif isinstance(node, nodes.With):
                for target, value in zip(node.targets, node.values, strict=False):
                    self._bind_target(target, node, partial(self.eval, value))
            elif isinstance(node, nodes.Macro):
                macros.setdefault(node.name, []).append(node)
                self._bind(node.name, node, lambda: (MACRO,))
            elif isinstance(node, nodes.CallBlock):
                for arg in node.args:
                    self._bind(arg.name, node, lambda: (Untracked(
                        "it is what the macro passes to 'caller(...)'",
                        "read the field inside the macro, or pass the field itself to caller()"),))
            elif isinstance(node, nodes.Call) and isinstance(node.node, nodes.Name) and node.node.name == "namespace":
                self.ns_calls.append(node)
        for name, defs in macros.items():
            self._bind_parameters(name, defs)

    def _mark_loop(self, node: nodes.Node, loop: nodes.For) -> None:
        """Note the `for` each `loop` read in its body belongs to (not those of loops inside it)."""
        stack = [node]
        while stack:
            n = stack.pop()
            if isinstance(n, nodes.Name) and n.name == "loop":
                self.loops.setdefault(id(n), loop)
            if not isinstance(n, (nodes.For, nodes.Macro)):
                stack.extend(n.iter_child_nodes())

    def _bind_target(self, target: nodes.Node, at: nodes.Node, value: Callable[[], Types]) -> None:
        if isinstance(target, nodes.Name):
            self._bind(target.name, at, value)
        elif isinstance(target, nodes.Tuple):
            for k, item in enumerate(target.items):
                if isinstance(item, nodes.Name):
                    self._bind(item.name, at, partial(self._unpack_from, value, k, len(target.items)))
        elif isinstance(target, nodes.NSRef) and isinstance(at, nodes.Assign):
            self.ns_sets.append((target, at.node))
            self.bound_at.setdefault("." + target.attr, []).append(at)  # any namespace's field of that name

    def _bind_parameters(self, name: str, defs: list[nodes.Macro]) -> None:
        """A macro's parameters take the types of the arguments every call passes them (or its defaults)."""
        calls = [n for n in self.index.order if isinstance(n, nodes.Call) and isinstance(n.node, nodes.Name)
                 and n.node.name == name]
        called = {id(c.node) for c in calls}
        elsewhere = any(isinstance(n, nodes.Name) and n.name == name and n.ctx == "load" and id(n) not in called
                        for n in self.index.order)
        for macro in defs:
            params = [a.name for a in macro.args]
            defaults = dict(zip(params[len(params) - len(macro.defaults):], macro.defaults, strict=True))
            for k, param in enumerate(params):
                self._bind(param, macro, partial(self._parameter, macro, k, param, defaults, calls,
                                                 elsewhere or len(defs) > 1))

    def _parameter(self, macro: nodes.Macro, k: int, param: str, defaults: dict[str, nodes.Expr],
                   calls: list[nodes.Call], unseen: bool) -> Types:
        if unseen:
            return (Untracked(f"macro '{macro.name}' is used in a way the check cannot follow (passed on, or "
                              "defined twice)", f"call '{macro.name}' by its name, and define it once"),)
        found: list[Types] = []
        for call in calls:
            if call.dyn_args is not None or call.dyn_kwargs is not None:
                return (Untracked(f"a call of macro '{macro.name}' passes arguments with * or **",
                                  "pass each argument by name or position"),)
            given = next((kw.value for kw in call.kwargs if kw.key == param), None)
            if given is None and k < len(call.args):
                given = call.args[k]
            if given is None:
                given = defaults.get(param)
            if given is None:
                return (Untracked(f"a call of macro '{macro.name}' gives '{param}' no value",
                                  f"pass '{param}' at every call, or give it a default"),)
            found.append(self.eval(given))
        return union(*found)

    # -- expressions

    def eval(self, node: nodes.Node) -> Types:
        found = self.memo.get(id(node))
        if found is None:
            found = self.memo[id(node)] = self._narrowed(node, self._eval(node))
        return found

    def _narrowed(self, node: nodes.Node, types: Types) -> Types:
        """`types` of a path (`a`, `review.output.note`) as the tests around it narrow them: there when a
        test showed it is, of the variants a test showed it is (so a copy of it keeps what was shown)."""
        if type(node) not in _PATHS or (all(type(t) in _PLAIN for t in types) and ir.NONE not in types):
            return types
        maybe = any(isinstance(t, (MaybeAbsent, ir.Optional_)) or t == ir.NONE for t in types)
        variant = any(isinstance(inner_type(t), ir.Variant) for t in types)
        if not (maybe or variant):
            return types
        path = jinja_path(node)
        if path is None:
            return types
        if maybe and path in self.narrowing.present(node):
            types = present_types(types)
        allowed = self.narrowing.variants(node).get(path) if variant else None
        if allowed is not None:
            types = union(only_variants(t, allowed) for t in types)
        return types

    def _eval(self, node: nodes.Node) -> Types:
        kind = type(node)
        fixed = _FIXED.get(kind)
        if fixed is not None:
            return fixed
        if kind is nodes.Const:
            return (const_type(node.value),)  # type: ignore[attr-defined]
        if kind is nodes.Name:
            return self._name(node)  # type: ignore[arg-type]
        if kind is nodes.Getattr:
            return self._read(self.eval(node.node), str(node.attr), node.node, node)  # type: ignore[attr-defined]
        if kind is nodes.Getitem:
            return self._getitem(node)  # type: ignore[arg-type]
        if kind is nodes.Filter:
            return self._filter(node)  # type: ignore[arg-type]
        return self._compound(node)

    def _compound(self, node: nodes.Node) -> Types:
        """The types of the expressions made of others: conditionals, `and`/`or`, lists, calls, arithmetic."""
        if isinstance(node, nodes.CondExpr):
            other = self.eval(node.expr2) if node.expr2 is not None else (ir.ANY,)
            return union(self.eval(node.expr1), other)
        if isinstance(node, nodes.Or):
            return union(present_types(self.eval(node.left)), self.eval(node.right))
        if isinstance(node, nodes.And):
            return union(self.eval(node.left), self.eval(node.right))
        if isinstance(node, (nodes.List, nodes.Tuple)):
            return self._list([self.eval(i) for i in node.items])
        if isinstance(node, nodes.Call):
            return self._call(node)
        if isinstance(node, (nodes.Add, nodes.Mul, nodes.Sub, nodes.Div, nodes.FloorDiv, nodes.Mod, nodes.Pow)):
            return self._arithmetic(node)
        if isinstance(node, (nodes.Neg, nodes.Pos)):
            return self.eval(node.node)
        if isinstance(node, (nodes.MarkSafe, nodes.MarkSafeIfAutoescape)):
            return self.eval(node.expr)
        if isinstance(node, nodes.Dict):
            return self._untracked_if(self._children_types(node), "it is a mapping written in the template",
                                      "give the value a name of its own: {% set NAME = VALUE %}")
        return self._untracked_if(self._children_types(node), "it is computed in a way the check does not follow",
                                  "read the field first, then compute with it")

    def _children_types(self, node: nodes.Node) -> Types:
        """The types of the expressions directly inside `node`, through the helper nodes that hold them (a
        dict's pairs, a call's keywords)."""
        found: list[Types] = []
        stack = list(node.iter_child_nodes())
        while stack:
            child = stack.pop()
            if isinstance(child, nodes.Expr):
                found.append(self.eval(child))
            else:
                stack.extend(child.iter_child_nodes())
        return union(*found)

    @staticmethod
    def _untracked_if(inputs: Types, why: str, how: str) -> Types:
        """`any` for a value made from untyped ones; Untracked when a typed value went into it."""
        return (Untracked(why, how),) if any(tracked(t) for t in inputs) else (ir.ANY,)

    def _name(self, node: nodes.Name) -> Types:
        name = node.name
        if name == "loop" and id(node) in self.loops and name not in self.sources:
            return (LOOP,)
        return self._lookup(name, node)

    def _lookup(self, name: str, node: nodes.Name | None) -> Types:
        """The types of name `name` (read at `node`): its bindings', and the context's where it may read it."""
        found: Types = ()
        bound = name in self.sources
        if bound:
            found = self.env.get(name, ())
        if node is None or not bound or id(node) in self.reads:
            if node is not None and id(node) not in self.reads and not bound:
                return self._jinja_name(name)
            found = union(found, self._context(name))
        return found

    def _jinja_name(self, name: str) -> Types:
        if name in self.globals:
            return (Opaque(name),)
        if name in ("varargs", "kwargs"):
            return (Untracked(f"'{name}' holds a macro's extra arguments", "name each argument of the macro"),)
        if name == "caller":
            return (MACRO,)
        return (Untracked(f"'{name}' is bound in a way the check does not follow",
                          "bind it with set, with, for, or a macro's parameter"),)

    def _context(self, name: str) -> Types:
        s = self.symbols
        if name in self.reader.local:
            return (self.reader.local[name],)
        if name in s.inputs:
            return (s.resolve_type(s.inputs[name].type),)
        if name in s.variables and self.reader.state is not None:
            return (s.resolve_type(s.variables[name].type),)
        if name in s.states and self.reader.state is not None:
            return (StateValue(name),)
        return (ir.ANY,)  # an unknown name: reported where the name is (templates.py)

    def _getitem(self, node: nodes.Getitem) -> Types:
        owner = self.eval(node.node)
        arg = node.arg
        if isinstance(arg, nodes.Slice):
            return tuple(t if isinstance(t, ir.ListOf) or t == ir.STR else ir.ANY for t in present_types(owner))
        if isinstance(arg, nodes.Const) and isinstance(arg.value, (str, int)) and not isinstance(arg.value, bool):
            return self._read(owner, arg.value, node.node, node)
        self.eval(arg)
        return self._read(owner, DYNAMIC, node.node, node)

    def _list(self, items: list[Types]) -> Types:
        """A list whose items are of the types `items` hold: one list type, when they join (as guards join
        the two values of `x if c else y`), else a value the check does not follow."""
        joined: Any = None
        for types in items:
            for t in types:
                if isinstance(t, (Untracked, StateValue, NamespaceValue, Opaque)):
                    return self._untracked_if((t,), "it is a list holding a value the check does not follow",
                                              "build the list from fields, not from whole values")
                t = normalized(t)  # an output that may not be there, as an item: an optional one
                joined = t if joined is None else join_types(joined, t)
                if joined is None:
                    return self._untracked_if(union(*items), "it is a list of values of different types",
                                              "keep values of one type in a list")
        return (ir.ListOf(as_ir_type(joined) if joined is not None else ir.ANY),)

    def _call(self, node: nodes.Call) -> Types:
        for arg in (*node.args, *(kw.value for kw in node.kwargs)):
            self.eval(arg)
        callee = node.node
        if isinstance(callee, nodes.Name) and callee.name == "namespace" and callee.name not in self.sources:
            if node.args or node.dyn_args or node.dyn_kwargs:
                return self._untracked_if(self._children_types(node), "a namespace made from a mapping",
                                          "give namespace() its fields by name: namespace(field=...)")
            return (NamespaceValue(id(node)),)
        owner = self.eval(callee)
        if any(t == MACRO for t in owner):
            return (ir.STR,)
        if isinstance(callee, nodes.Getattr):  # a method: of text, a list, `loop.cycle(...)`
            base = self.eval(callee.node)
            if not any(tracked(t) for t in base):
                return (ir.ANY,)
        return self._untracked_if(union(owner, self._children_types(node)), "it is what a call returns",
                                  "read the field from the value itself, not from what a call returns")

    def _arithmetic(self, node: nodes.BinExpr) -> Types:
        left, right = self.eval(node.left), self.eval(node.right)
        if isinstance(node, nodes.Add):
            lists = [(a, b) for a in left for b in right if isinstance(a, ir.ListOf) and isinstance(b, ir.ListOf)]
            if lists and len(lists) == len(left) * len(right):
                joined = [join_types(a, b) for a, b in lists]
                if all(j is not None for j in joined):
                    return union(joined)
        if isinstance(node, nodes.Mul):
            repeated = [t for t in (*left, *right) if isinstance(t, ir.ListOf)]
            if repeated:
                return union(repeated)
        return self._untracked_if(union(left, right), "it is computed with an operator the check does not follow",
                                  "read the field first, then compute with it")

    # -- reading a field or an item

    def _read(self, owner: Types, key: Any, owner_node: nodes.Node | None, at: nodes.Node,
              place: Span | None = None, shown: str | None = None, via: str = "") -> Types:
        """The types of `owner.key` (`owner[key]`), reporting at `at` (or `place`) what cannot be read:
        `owner_node` is the expression read into (None inside a filter's `attribute=`, where no test
        narrows), `via` the filter that reads it."""
        span: Any = place if place is not None else _Where(self.parsed, at)  # made only to report
        shown = shown if shown is not None else shown_name(owner_node, self.parsed)
        out: list[Any] = []
        for t in owner:
            out.extend(self._read_one(t, key, owner_node, at, span, shown, via))
        return union(out)

    def _read_one(self, t: Any, key: Any, owner_node: nodes.Node | None, at: nodes.Node, span: Any, shown: str,
                  via: str) -> Types:
        if isinstance(t, MaybeAbsent):
            if not self._present(owner_node):
                self._absent(t.state, at, owner_node, span)
            return self._read_one(t.inner, key, owner_node, at, span, shown, via)
        if isinstance(t, ir.Optional_) or t == ir.NONE:
            if not self._present(owner_node):
                self._maybe_none(t, at, owner_node, span, shown, via)
            return self._read_one(t.inner, key, owner_node, at, span, shown, via) if isinstance(t, ir.Optional_) \
                else (ir.ANY,)
        if isinstance(t, Untracked):
            self._untracked(t, at, span, shown)
            return (ir.ANY,)
        if isinstance(t, StateValue):
            return self._state_field(t.state, key, at, span)
        if isinstance(t, Opaque):
            if t == LOOP and isinstance(key, str):
                if key in ("previtem", "nextitem"):
                    return (Untracked(f"'loop.{key}' is undefined at the {'first' if key == 'previtem' else 'last'} "
                                      "item", "keep the item you need in a namespace: {% set ns.last = item %}"),)
                return (LOOP_FIELDS.get(key, ir.ANY),)
            return (ir.ANY,)
        if isinstance(t, NamespaceValue):
            return self._namespace_field(t, key, at, span, shown)
        if isinstance(t, UntypedResult):
            if isinstance(key, str):
                self._once(at, "SW4105", f"the result of machine '{t.machine}' has no declared type", span,
                           label=f"'{shown}' has no field '{key}' to read",
                           help=f"declare 'returns TYPE' in the machine that '{t.machine}' runs, or use '{shown}' "
                                "as a whole")
            return (ir.ANY,)
        if isinstance(t, TextOutput) and isinstance(key, str):
            self._once(at, "SW5002", f"state '{t.state}' has no typed output", span,
                       label=f"'{shown}' is plain text, so it has no field '{key}'",
                       help=f"declare 'output TYPE' in state '{t.state}', or use '{shown}' as a whole")
            return (ir.ANY,)
        if isinstance(t, (ir.Named, ir.Variant, Record)):
            if key is DYNAMIC or isinstance(key, int):
                self._untracked(Untracked("which field it reads is decided at run time" if key is DYNAMIC
                                          else f"{type_text(t)} has fields, not numbered items",
                                          f"name the field: {shown}.FIELD"), at, span, shown)
                return (ir.ANY,)
            if isinstance(t, ir.Variant):
                return self._variant_field(t, key, owner_node, at, span, shown, via)
            return self._field(t, key, at, span)
        if isinstance(t, ir.ListOf) and (isinstance(key, int) or key is DYNAMIC):
            return (t.item,)
        plain = plain_kind(t)
        if plain is None or key is DYNAMIC:
            return (ir.ANY,)  # `any`: the template engine decides at run time
        if plain in ("str", "list") and isinstance(key, int):
            return (ir.STR,) if plain == "str" else (ir.ANY,)
        if not (isinstance(key, str) and key in METHODS[plain]):
            what = f"field '{key}'" if isinstance(key, str) else f"item [{key}]"
            self._once(at, "SW4012", f"{quoted(shown)} is {type_text(t)} and has no {what}", span,
                       label=f"no {what} on {type_text(t)}",
                       help="only values of a declared type (and tool results) have fields"
                            + (f"; {plain} has methods such as {EXAMPLE_METHODS[plain]}" if plain in EXAMPLE_METHODS
                               else ""))
        return (ir.ANY,)  # a method of text, a number or a list

    def _field(self, t: ir.Named | Record, key: str, at: nodes.Node, span: Any) -> Types:
        fields = fields_of(t, self.symbols)
        if key not in fields:
            self._once(at, "SW2006", f"{type_text(t)} has no field '{key}'", span, label="unknown field",
                       help=unknown_field_help(key, fields))
            return (ir.ANY,)
        if isinstance(t, ir.Named) and self.report:
            self.symbols.field_reads.append(FieldRead(t.name, key, _span_of(span)))
        return (fields[key],)

    def _variant_field(self, t: ir.Variant, key: str, owner_node: nodes.Node | None, at: nodes.Node, span: Any,
                       shown: str, via: str) -> Types:
        """Field `key` of a variant value, narrowed by the `is` tests around it (SW2006, SW4031)."""
        path = jinja_path(owner_node) if owner_node is not None else None
        allowed = self.narrowing.variants(owner_node).get(path) if path is not None and owner_node is not None \
            else None
        options = tuple(o for o in t.options if allowed is None or o in allowed)
        if not options:  # the tests around the read rule every variant out: it is never rendered
            return (ir.ANY,)
        fields = {o: self.symbols.fields_of(o) for o in options}
        having = [o for o in options if key in fields[o]]
        if not having:
            every = [f for o in options for f in fields[o]]
            self._once(at, "SW2006", f"no variant of {' | '.join(options)} has a field '{key}'", span,
                       label="unknown field",
                       help=did_you_mean(key, every) or f"the variants' fields are {', '.join(every)}")
            return (ir.ANY,)
        types = {type_text(fields[o][key]) for o in having}
        if len(having) == len(options) and len(types) == 1:
            return (fields[having[0]][key],)
        label = (f"only {' and '.join(having)} {'has' if len(having) == 1 else 'have'} it"
                 if len(having) < len(options) else "its type differs between the variants")
        if via:
            help = (f"the filter '{via}' reads '{key}' of every item: loop over the items and test each, "
                    f"'{{% for x in LIST %}}{{% if x is {having[0]} %}}...{{{{ x.{key} }}}}...{{% endif %}}"
                    "{% endfor %}'")
        else:
            help = f"test the variant first: '{{% if {shown} is {having[0]} %}}...{{% endif %}}'"
        self._once(at, "SW4031", f"'{key}' is not a field of every variant {quoted(shown)} may be", span, label=label,
                   help=help, notes=[f"{quoted(shown)} is {' | '.join(options)} here"])
        return (ir.ANY,)

    def _state_field(self, state: str, key: Any, at: nodes.Node, span: Any) -> Types:
        view = self.symbols.states[state]
        if key == "visits":
            return (ir.INT,)
        if key != "output":
            self._once(at, "SW2006", f"state '{state}' has no field '{key}'", span, label="unknown field",
                       help=f"a template reads a state's result as '{state}.output' and how many times it ran "
                            f"as '{state}.visits'")
            return (ir.ANY,)
        t = output_type(view, self.symbols)
        if self._has_run(state, at):
            return (t,)
        return (MaybeAbsent(t, state),)

    def _has_run(self, state: str, output: nodes.Node) -> bool:
        """Whether `state` has surely run when the template reads `state.output` at node `output`."""
        reader = self.reader.state
        if self.flow is None or reader is None or self.flow.runs_before(state, reader):
            return True
        if state == reader and self.reader.template in ("result", "fail") and self._does_work(reader):
            return True  # a final state's result and reason are rendered after its own step
        return f"{state}.output" in self.narrowing.present(output)

    def _does_work(self, state: str) -> bool:
        view = self.symbols.states.get(state)
        return view is not None and view.kind in ("agent", "action")

    def _namespace_field(self, t: NamespaceValue, key: Any, at: nodes.Node, span: Any, shown: str) -> Types:
        if not isinstance(key, str):
            return (ir.ANY,)
        found = self.fields.get((t.site, key))
        if found is None:
            names = [f for (site, f) in self.fields if site == t.site]
            self._once(at, "SW2006", f"the namespace '{shown}' has no field '{key}'", span, label="never set",
                       help=did_you_mean(key, names) or (f"its fields are {', '.join(names)}" if names else
                                                         "give it the field: namespace(FIELD=...)"))
            return (ir.ANY,)
        return found

    def _present(self, owner_node: nodes.Node | None) -> bool:
        if owner_node is None:
            return False
        path = jinja_path(owner_node)
        return path is not None and path in self.narrowing.present(owner_node)

    def _options_of(self, path: str) -> tuple[str, ...] | None:
        """The variants a path may be: of a state's output, or of a name bound to values of one variant."""
        name, _, rest = path.partition(".")
        if rest == "output" and name in self.symbols.states and name not in self.sources:
            t = output_type(self.symbols.states[name], self.symbols)
            return t.options if isinstance(t, ir.Variant) else None
        if rest or name not in self.sources:
            return None
        kinds = set()
        for t in self.env.get(name, ()):
            while isinstance(t, (MaybeAbsent, ir.Optional_)):
                t = t.inner
            kinds.add(t)
        only = kinds.pop() if len(kinds) == 1 else None
        return only.options if isinstance(only, ir.Variant) else None

    # -- loops and filters

    def _items(self, loop: nodes.For) -> Types:
        """What a `for` loop's target takes: the items of the list it goes over."""
        listed = self.eval(loop.iter)
        items = self._iterate(loop.iter, listed, None)
        if loop.recursive:
            items = union(items, (Untracked("a recursive loop's items come from every 'loop(...)' call",
                                            "write the nested levels as loops of their own"),))
        return items

    def _iterate(self, node: nodes.Node, listed: Types, loop: nodes.Node | None) -> Types:
        """The items of the values of types `listed`, going over `node` (`loop`: report what cannot be)."""
        out: list[Any] = []
        span = _Where(self.parsed, node, whole=True)
        shown = shown_name(node, self.parsed)
        for t in listed:
            out.extend(self._items_of(t, node, loop, span, shown))
        return union(out)

    def _items_of(self, t: Any, node: nodes.Node, loop: nodes.Node | None, span: Any, shown: str) -> Types:
        at = loop if loop is not None else node
        if isinstance(t, MaybeAbsent):
            if loop is not None and not self._present(node):
                self._absent(t.state, loop, node, span)
            return self._items_of(t.inner, node, loop, span, shown)
        if isinstance(t, ir.Optional_):
            if loop is not None and not self._present(node):
                self._maybe_none(t, loop, node, span, shown, "")
            return self._items_of(t.inner, node, loop, span, shown)
        if isinstance(t, ir.ListOf):
            return (t.item,)
        if t == ir.STR or isinstance(t, (ir.Enum, TextOutput)):
            return (ir.STR,)
        if isinstance(t, Untracked):
            if loop is not None:
                self._untracked(t, at, span, shown)
            return (ir.ANY,)
        if tracked(t):
            return (Untracked(f"'{shown}' is {type_name(t)}, not a list", "loop over a list field of it"),)
        return (ir.ANY,)

    def _unpack_from(self, value: Callable[[], Types], k: int, size: int) -> Types:
        return self._unpack(value(), k, size)

    def _unpack(self, value: Types, k: int, size: int) -> Types:
        """Part `k` of `size` when a value of types `value` is unpacked (`for key, group in ...`)."""
        out: list[Any] = []
        for t in value:
            if isinstance(t, Record) and t.label == GROUP_LABEL and size == 2:
                out.append(t.fields[k][1])
            elif isinstance(t, ir.ListOf):
                out.append(t.item)
            elif tracked(t):
                out.append(Untracked("it is a part of an unpacked value", "read the parts by name"))
            else:
                out.append(ir.ANY)
        return union(out)

    def _filter(self, node: nodes.Filter) -> Types:
        for arg in (*node.args, *(kw.value for kw in node.kwargs)):
            self.eval(arg)
        value = self.eval(node.node) if node.node is not None else (ir.STR,)  # a `{% filter %}` block: text
        rule = FILTERS.get(node.name)
        if rule is None:
            return self._untracked_if(value, f"it comes from the filter '{node.name}'",
                                      "read the field from the value before the filter")
        return rule(FilterCall(self, node, value))

    # -- reporting

    def _once(self, at: nodes.Node, code: str, message: str, span: Any, **details: Any) -> None:
        if not self.report or (id(at), code) in self.reported:
            return
        self.reported.add((id(at), code))
        self.diags.report(code, message, _span_of(span), **details)

    def _untracked(self, t: Untracked, at: nodes.Node, span: Any, shown: str) -> None:
        self._once(at, "SW5010", f"the check cannot follow {quoted(shown)} here: {t.why}", span,
                   label="a read of a value the check does not follow", help=t.how)

    def _maybe_none(self, t: Any, at: nodes.Node, owner_node: nodes.Node | None, span: Any, shown: str,
                    via: str) -> None:
        """SW4014 for a field or item read from a value that may be none, which no test around it shows."""
        whole = at
        call = self.index.parents.get(id(at))
        if isinstance(call, nodes.Call) and call.node is at:
            whole = call  # `x.f()`, not `x.f`
        direct = isinstance(at, (nodes.Getattr, nodes.Getitem))
        if direct and not via:
            span = self.parsed.node_span(at)  # the whole read: `tags[0]`, `read.output.owner.upper`
        written = self.parsed.node_span(whole).text if direct else ""
        inline = f", or '{{{{ {written} if {shown} }}}}'" if written and "\n" not in written else ""
        help = (f"the filter '{via}' reads into every item, and an item may be none: test each in a loop"
                if via else f"test it first: '{{% if {shown} %}}...{{% endif %}}'" + inline)
        self._once(at, "SW4014", f"{quoted(shown)} may be none here", span,
                   label=f"{quoted(shown)} is {type_text(t)}: it may be none", help=help)

    def _absent(self, state: str, at: nodes.Node, owner_node: nodes.Node | None, span: Any) -> None:
        """SW4014 for a field or item of `STATE.output`, or a loop over it, where STATE may not have run.

        A template is rendered when its state is entered, before that state's step: STATE must have run
        before its state (or be shown to have run by a test around the read)."""
        reader = self.reader.state or "?"
        loop = isinstance(at, nodes.For)
        shown = _span_of(span) if loop or owner_node is None else self.parsed.node_span(at)
        text = shown.text if shown is not None and "\n" not in shown.text else f"{state}.output..."
        template = self.reader.template
        when = "is rendered before its state runs" if state == reader else f"is rendered when '{reader}' starts"
        self._once(
            at, "SW4014", f"'{state}.output' may be none here: '{state}' may not have run before state '{reader}'",
            shown, label=f"the {template} {when}; '{state}' may not have run yet",
            notes=absent_output_notes(state, reader, self.flow),
            help=f"test that it ran first: '{{% if {state}.output %}}...{{% endif %}}'"
                 + (f", or '{{{{ {text} if {state}.output }}}}'" if not loop else ""))



_BINDERS = frozenset({nodes.Assign, nodes.AssignBlock, nodes.For, nodes.With, nodes.Macro, nodes.CallBlock,
                      nodes.Call})  # the nodes that bind a name, or may make a namespace
# Expressions whose type is known from their kind alone: text, tests and comparisons.
_FIXED: dict[type, Types] = {nodes.TemplateData: (ir.STR,), nodes.Concat: (ir.STR,), nodes.Test: (ir.BOOL,),
                             nodes.Not: (ir.BOOL,), nodes.Compare: (ir.BOOL,)}
_PATHS = frozenset({nodes.Name, nodes.Getattr, nodes.Getitem})  # the expressions a test can narrow
_PLAIN = frozenset({ir.Prim, ir.ListOf, ir.Enum, ir.Named, Record, TextOutput, StateValue, NamespaceValue, Opaque,
                    Untracked})  # kinds no test narrows (a list's items are not narrowed, its presence is)


class _Where:
    """Where a read is, as a span made only when something is reported there (most reads report nothing,
    and mapping a node back to the source costs more than checking it)."""

    __slots__ = ("node", "parsed", "whole")

    def __init__(self, parsed: ParsedTemplate, node: nodes.Node, whole: bool = False) -> None:
        self.parsed = parsed
        self.node = node
        self.whole = whole  # the whole expression, not its own word


def _span_of(where: Span | _Where) -> Span:
    if not isinstance(where, _Where):
        return where
    return where.parsed.node_span(where.node) if where.whole else where.parsed.name_span(where.node)
