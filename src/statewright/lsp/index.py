"""Where each name is declared and used: states, agents, types, tools, inputs, run variables and fields.

The syntax tree gives the declarations and the plain references (transition targets, `agent w`, `tell`,
`output T`, test blocks); the checks' own records give the reads they resolved with exact spans — the
states templates read (`Symbols.state_reads`, as the IR keeps them), and the inputs and fields guards and
templates read. So a template is never parsed here a second time, and a name means here what it means to
the compiler.

A name can stand for a declaration of another file: an imported type, agent or tool, the machine a `run`
names, a called machine's state in a test path. Its key then carries that file (`Key.file`); the key of a
declaration of this file has none.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Iterable, Iterator
from functools import lru_cache

from ..compiler import ir
from ..compiler.checks.resolve import Symbols
from ..compiler.checks.testblocks import reply_variant
from ..diagnostics import Span
from ..grammar import ast
from .keys import Key, Occurrence
from .project_index import foreign_occurrences, imported_from


class SymbolIndex:
    """Every occurrence of every declared name in one checked (or partly checked) file."""

    def __init__(self, occurrences: Iterable[Occurrence]) -> None:
        # by place (two stable sorts: no tuple per occurrence), then one per key and place, a declaration
        # before a use of the same place
        found = list(occurrences)
        found.sort(key=_end)
        found.sort(key=_start)
        self.occurrences: list[Occurrence] = []
        place: list[Occurrence] = []  # the kept occurrences of the place in hand
        for o in found:
            if place and (o.start != place[0].start or o.end != place[0].end):
                place.clear()
            known = next((i for i, p in enumerate(place) if p.key == o.key), None)
            if known is None:
                place.append(o)
                self.occurrences.append(o)
            elif o.definition and not place[known].definition:
                self.occurrences[len(self.occurrences) - len(place) + known] = place[known] = o
        del found
        self._starts = array("q", [o.start for o in self.occurrences])
        self.by_key: dict[Key, list[Occurrence]] = {}
        for o in self.occurrences:
            self.by_key.setdefault(o.key, []).append(o)

    def at(self, offset: int) -> Occurrence | None:
        """The occurrence under a cursor at `offset` (its end counts: the cursor just after a name)."""
        i = bisect.bisect_right(self._starts, offset) - 1
        while i >= 0 and self.occurrences[i].start <= offset:
            if offset <= self.occurrences[i].end:
                return self.occurrences[i]
            i -= 1
        return None

    def definition(self, key: Key) -> Occurrence | None:
        return next((o for o in self.by_key.get(key, ()) if o.definition), None)

    def references(self, key: Key, *, include_definition: bool = True) -> list[Occurrence]:
        return [o for o in self.by_key.get(key, ()) if include_definition or not o.definition]


def _start(o: Occurrence) -> int:
    return o.start


def _end(o: Occurrence) -> int:
    return o.end


def build_index(machine: ast.Machine, symbols: Symbols | None) -> SymbolIndex:
    """The index of one parsed machine; `symbols` (from the checks) adds what templates and guards read.
    Only places in this file: a read the checks found in a declaration another file holds (the prompt of
    an imported agent) is that file's, at that file's offsets."""
    here = machine.span.source if machine.span is not None else None
    return SymbolIndex(o for o in _occurrences(machine, symbols) if here is None or o.span.source is here)


def _at(key: Key, span: Span | None, definition: bool = False) -> Iterator[Occurrence]:
    if span is not None:
        yield Occurrence(_one_key(key), span, definition)


@lru_cache(maxsize=65536)
def _one_key(key: Key) -> Key:
    """The one Key object for every occurrence of a name (a large file names a state thousands of times)."""
    return key


def _occurrences(machine: ast.Machine, symbols: Symbols | None) -> Iterator[Occurrence]:
    local = _local_occurrences(machine, symbols)
    if symbols is None or not machine.uses:
        yield from local
        return
    homes = imported_from(symbols)
    for o in local:
        home = homes.get((o.key.kind, o.key.name))
        yield Occurrence(Key(o.key.kind, o.key.name, home), o.span, o.definition) if home else o
    yield from foreign_occurrences(machine, symbols)


def _local_occurrences(machine: ast.Machine, symbols: Symbols | None) -> Iterator[Occurrence]:
    states = {s.name.value for s in machine.of(ast.StateDecl)}
    inputs = {i.name.value for i in machine.of(ast.InputDecl)}
    yield from _at(Key("machine", machine.name.value), machine.name.span, True)
    for item in machine.items:
        if isinstance(item, ast.InputDecl):
            yield from _at(Key("input", item.name.value), item.name.span, True)
            yield from _type_refs(item.type)
        elif isinstance(item, ast.VarDecl):
            yield from _at(Key("variable", item.name.value), item.name.span, True)
            yield from _type_refs(item.type)
        elif isinstance(item, ast.TypeDecl):
            yield from _at(Key("type", item.name.value), item.name.span, True)
            for f in item.fields:
                yield from _at(Key("field", f"{item.name.value}.{f.name.value}"), f.name.span, True)
                yield from _type_refs(f.type)
        elif isinstance(item, ast.ToolDecl):
            yield from _at(Key("tool", item.name.dotted), item.name.span, True)
        elif isinstance(item, ast.AgentDecl):
            yield from _at(Key("agent", item.name.value), item.name.span, True)
            for setting in item.items:
                if isinstance(setting, ast.ToolsSetting):
                    for tool in setting.tools:
                        yield from _at(Key("tool", tool.dotted), tool.span)
        elif isinstance(item, ast.StateDecl):
            yield from _state(item, states, inputs)
        elif isinstance(item, ast.TestDecl):
            yield from _test(item, symbols)
    if symbols is not None:
        for reads in symbols.state_reads.values():
            for read in reads:
                yield from _at(Key("state", read.state), read.origin)
        for name_read in symbols.input_reads:
            yield from _at(Key("input", name_read.name), name_read.origin)
        for name_read in symbols.variable_reads:
            yield from _at(Key("variable", name_read.name), name_read.origin)
        for field_read in symbols.field_reads:
            yield from _at(Key("field", f"{field_read.type}.{field_read.name}"), field_read.origin)


def _type_refs(ref: ast.TypeRef | ast.VariantType) -> Iterator[Occurrence]:
    if isinstance(ref, ast.VariantType):  # `output A | B`: each option names a declared type
        for name in ref.options:
            yield from _at(Key("type", name.value), name.span)
        return
    for node in ast.iter_type_ref(ref):
        if isinstance(node, ast.NamedType) and node.name.value not in ("str", "int", "float", "bool"):
            yield from _at(Key("type", node.name.value), node.name.span)


def _state(decl: ast.StateDecl, states: set[str], inputs: set[str]) -> Iterator[Occurrence]:
    yield from _at(Key("state", decl.name.value), decl.name.span, True)
    for item in decl.items:
        if isinstance(item, ast.AgentRef):
            yield from _at(Key("agent", item.name.value), item.name.span)
        elif isinstance(item, ast.OutputDecl):
            yield from _type_refs(item.type)
        elif isinstance(item, ast.Tell):
            for name in item.agents:
                yield from _at(Key("agent", name.value), name.span)
        elif isinstance(item, ast.ToolCall):
            yield from _at(Key("tool", item.tool.dotted), item.tool.span)
            for arg in item.args:
                yield from _expr(arg.value, states, inputs)
        elif isinstance(item, ast.Transition):
            if item.target is not None:
                yield from _at(Key("state", item.target.value), item.target.span)
            if item.guard is not None:
                yield from _expr(item.guard, states, inputs)
        elif isinstance(item, ast.Parallel):
            for name in item.branches:
                yield from _at(Key("state", name.value), name.span)
        elif isinstance(item, ast.Join) and item.guard is not None:
            yield from _expr(item.guard, states, inputs)
        elif isinstance(item, ast.ForEach):
            yield from _expr(item.items, states, inputs)
        elif isinstance(item, ast.Update):
            yield from _at(Key("variable", item.var.value), item.var.span)
            yield from _expr(item.value, states, inputs)
        elif isinstance(item, ast.AskBefore):
            for tool in item.tools:
                yield from _at(Key("tool", tool.dotted), tool.span)


def _expr(expr: ast.Expr, states: set[str], inputs: set[str]) -> Iterator[Occurrence]:
    """States named in a guard or a tool-call argument (`STATE.output`, `visits(STATE)`), and inputs."""
    for node in ast.iter_expr(expr):
        if isinstance(node, ast.NameExpr):
            if node.name in inputs:
                yield from _at(Key("input", node.name), node.span)
            elif node.name in states:
                yield from _at(Key("state", node.name), node.span)


def _test(decl: ast.TestDecl, symbols: Symbols | None) -> Iterator[Occurrence]:
    for item in decl.items:
        if isinstance(item, (ast.Reply, ast.ReplyCalls, ast.Verdict, ast.TestTimeout, ast.Approval)) and "/" in item.state.value:
            continue  # a path into a called machine (project_index.py)
        if isinstance(item, (ast.Reply, ast.ReplyCalls, ast.Verdict, ast.ExpectFinal, ast.TestTimeout,
                             ast.ExpectOutput, ast.ExpectInstruction, ast.Approval)):
            yield from _at(Key("state", item.state.value), item.state.span)
        elif isinstance(item, ast.ExpectVar):
            yield from _at(Key("variable", item.name.value), item.name.span)
        elif isinstance(item, ast.ExpectPath):
            for name in item.states:
                yield from _at(Key("state", name.value), name.span)
        elif isinstance(item, ast.TestInput):
            for entry in ast.object_entries(item.values):
                yield from _at(Key("input", entry.key.value), entry.key.span)
        if isinstance(item, ast.Reply) and symbols is not None:
            view = symbols.states.get(item.state.value)
            if view is not None and view.output is not None:
                t = symbols.resolve_output(view.output.type)
                if isinstance(t, ir.Variant):  # a reply names its variant, or fits one
                    chosen = item.variant.value if item.variant is not None else reply_variant(item.value, t, symbols)
                    t = ir.Named(chosen) if chosen in t.options else ir.ANY
                yield from _value_fields(item.value, t, symbols)


def _value_fields(value: ast.Value, t: ir.Type, symbols: Symbols) -> Iterator[Occurrence]:
    """The keys of a scripted reply that name fields of its declared type, at any depth."""
    stack: list[tuple[ast.Value, ir.Type]] = [(value, t)]
    while stack:
        value, t = stack.pop()
        while isinstance(t, ir.Optional_):
            t = t.inner
        if isinstance(t, ir.ListOf) and value.kind == "list":
            stack.extend((item, t.item) for item in ast.list_items(value))
        elif isinstance(t, ir.Named) and value.kind == "object":
            fields = symbols.fields_of(t.name)
            for entry in ast.object_entries(value):
                if entry.key.value in fields:
                    yield from _at(Key("field", f"{t.name}.{entry.key.value}"), entry.key.span)
                    stack.append((entry.value, fields[entry.key.value]))
