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

from ..compiler import ir
from ..compiler.checks.resolve import Symbols
from ..compiler.checks.testblocks import reply_variant
from ..diagnostics import SourceFile, Span
from ..diagnostics.source import END_SHIFT, START_MASK
from ..grammar import ast
from .keys import Key, Occurrence
from .project_index import foreign_occurrences, imported_from


class SymbolIndex:
    """Every occurrence of every declared name in one checked (or partly checked) file.

    Kept as numbers, not as an Occurrence each (a large file has hundreds of thousands): each kept
    occurrence's packed span offsets, the number of its key and whether it is the declaration, in arrays
    by place, and the places of each key's occurrences in one array (by key, then by place). The
    Occurrence objects the features read are made when asked for."""

    def __init__(self, occurrences: Iterable[Occurrence]) -> None:
        numbers: dict[Key, int] = {}
        self._keys: list[Key] = []  # by number
        # the files of the spans: one, but for an index made by hand (127 at most: their number is in a byte)
        self._sources: list[SourceFile] = []
        found_offsets, found_keys, found_flags = array("q"), array("i"), bytearray()
        for o in occurrences:
            number = numbers.get(o.key)
            if number is None:
                number = numbers[o.key] = len(self._keys)
                self._keys.append(o.key)
            source = o._span_source  # type: ignore[attr-defined]  # the span as the node keeps it: no Span made
            which = next((i for i, known in enumerate(self._sources) if known is source), None)
            if which is None:
                which = len(self._sources)
                self._sources.append(source)
            found_offsets.append(o._span_offsets)  # type: ignore[attr-defined]
            found_keys.append(number)
            found_flags.append(o.definition | which << 1)
        # by place (the arrays put in that order where they are), then one per key and place, a
        # declaration before a use of the same place: compacted where they are, never copied
        _permute(_by_place(found_offsets), found_offsets, found_keys, found_flags)
        kept = 0
        place_offsets = -1
        place: list[int] = []  # the kept occurrences (their positions) of the place in hand
        for i in range(len(found_offsets)):
            offsets, number, flags = found_offsets[i], found_keys[i], found_flags[i]
            if offsets != place_offsets:
                place_offsets = offsets
                place.clear()
            known = next((k for k in place if found_keys[k] == number), None)
            if known is None:
                place.append(kept)
                found_offsets[kept], found_keys[kept], found_flags[kept] = offsets, number, flags
                kept += 1
            elif flags & 1 and not found_flags[known] & 1:
                found_flags[known] = flags
        del found_offsets[kept:], found_keys[kept:], found_flags[kept:]
        self._offsets, self._key_numbers, self._flags = found_offsets, found_keys, found_flags
        self._numbers = numbers
        # each key's occurrences: by key number, then by place (counted into place, no sort)
        self._first_of_key = array("i", bytes(4 * (len(self._keys) + 1)))
        for number in self._key_numbers:
            self._first_of_key[number + 1] += 1
        for k in range(len(self._keys)):
            self._first_of_key[k + 1] += self._first_of_key[k]
        self._by_key = array("i", bytes(4 * len(self._offsets)))
        filled = array("i", self._first_of_key)
        for i, number in enumerate(self._key_numbers):
            self._by_key[filled[number]] = i
            filled[number] += 1

    def _occurrence(self, i: int) -> Occurrence:
        flags = self._flags[i]
        return Occurrence(self._keys[self._key_numbers[i]], Span.packed(self._sources[flags >> 1], self._offsets[i]),
                          bool(flags & 1))

    @property
    def occurrences(self) -> list[Occurrence]:
        """Every kept occurrence, by place."""
        return [self._occurrence(i) for i in range(len(self._offsets))]

    def at(self, offset: int) -> Occurrence | None:
        """The occurrence under a cursor at `offset` (its end counts: the cursor just after a name)."""
        i = bisect.bisect_right(self._offsets, offset, key=_start_of) - 1
        while i >= 0 and self._offsets[i] & START_MASK <= offset:
            if offset <= self._offsets[i] >> END_SHIFT:
                return self._occurrence(i)
            i -= 1
        return None

    def _of(self, key: Key) -> Iterator[int]:
        """The positions of `key`'s occurrences, by place."""
        number = self._numbers.get(key)
        if number is None:
            return
        for k in range(self._first_of_key[number], self._first_of_key[number + 1]):
            yield self._by_key[k]

    def definition(self, key: Key) -> Occurrence | None:
        return next((self._occurrence(i) for i in self._of(key) if self._flags[i] & 1), None)

    def references(self, key: Key, *, include_definition: bool = True) -> list[Occurrence]:
        """The occurrences of `key`, by place."""
        return [self._occurrence(i) for i in self._of(key) if include_definition or not self._flags[i] & 1]


def _start_of(offsets: int) -> int:
    return offsets & START_MASK


def build_index(machine: ast.Machine, symbols: Symbols | None) -> SymbolIndex:
    """The index of one parsed machine; `symbols` (from the checks) adds what templates and guards read.
    Only places in this file: a read the checks found in a declaration another file holds (the prompt of
    an imported agent) is that file's, at that file's offsets."""
    here = machine.span.source if machine.span is not None else None
    return SymbolIndex(o for o in _occurrences(machine, symbols) if here is None or o.span.source is here)


def _at(key: Key, span: Span | None, definition: bool = False) -> Iterator[Occurrence]:
    if span is not None:
        yield Occurrence(key, span, definition)  # the index keeps one Key object for each key


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


_BUCKETS_BITS = 16  # at most 65,536 buckets of starts


def _by_place(offsets: array[int]) -> array[int]:
    """The positions of packed span `offsets` by place: by start, then end (a shorter span first), the
    order found kept at one place. Counted into buckets of nearby starts, then each bucket sorted: the
    order is kept as an array of positions (4 bytes an occurrence), not as a list of sort keys (40 bytes
    each, which for a file of many states was the language server's peak)."""
    count = len(offsets)
    order = array("i", bytes(4 * count))
    if not count:
        return order
    last = max(o & START_MASK for o in offsets)
    shift = max(0, last.bit_length() - _BUCKETS_BITS)
    buckets = (last >> shift) + 1
    first = array("i", bytes(4 * (buckets + 1)))  # first[b]: where bucket b starts in `order`
    for o in offsets:
        first[((o & START_MASK) >> shift) + 1] += 1
    for b in range(buckets):
        first[b + 1] += first[b]
    filled = array("i", first)
    for i, o in enumerate(offsets):
        b = (o & START_MASK) >> shift
        order[filled[b]] = i
        filled[b] += 1
    del filled
    for b in range(buckets):
        low, high = first[b], first[b + 1]
        if high - low > 1:  # (a stable sort: the order found stays at one place)
            order[low:high] = array("i", sorted(order[low:high], key=lambda i: (offsets[i] & START_MASK,
                                                                                offsets[i] >> END_SHIFT)))
    return order


def _permute(order: array[int], *columns: array[int] | bytearray) -> None:
    """Put each column in `order` where it is (column[j] becomes what column[order[j]] was), following
    the permutation's cycles; `order` is spent (each position marked -1 once placed)."""
    for start in range(len(order)):
        if order[start] < 0:
            continue
        held = [column[start] for column in columns]
        j = start
        while True:
            k = order[j]
            order[j] = -1
            if k == start:
                for column, value in zip(columns, held, strict=True):
                    column[j] = value
                break
            for column in columns:
                column[j] = column[k]
            j = k
