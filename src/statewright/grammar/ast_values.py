"""The leaves of the syntax tree: names, literals, values, and types with their fields and constraints.

ast.py holds the rest of the tree and names these too: every module reads them as `ast.Name`, `ast.Value`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import field
from typing import cast

from ..diagnostics import Span
from .node import Node


def _span() -> Span:
    return field(default=None, compare=False, repr=False)  # type: ignore[return-value]


# ---- names and literals --------------------------------------------------------------------------


class Name(Node):
    value: str
    span: Span = _span()


class String(Node):
    """A string literal after escapes are applied and triple-quoted text is dedented."""

    value: str
    triple: bool = field(default=False, compare=False)
    span: Span = _span()


class Number(Node):
    value: int | float
    span: Span = _span()


# ---- values (defaults, tool options, test data) --------------------------------------------------


class ObjectEntry(Node):
    key: Name
    value: Value
    span: Span = _span()


class Value(Node):
    """A literal value: str, int, float, bool, None, list of values or object (dict of values)."""

    kind: str  # "str" | "int" | "float" | "bool" | "none" | "list" | "object"
    value: object  # python value for scalars; tuple[Value, ...] for list; tuple[ObjectEntry, ...] for object
    span: Span = _span()

    def to_python(self) -> object:
        if self.kind == "list":
            return [v.to_python() for v in list_items(self)]
        if self.kind == "object":
            return {e.key.value: e.value.to_python() for e in object_entries(self)}
        return self.value


def list_items(value: Value) -> tuple[Value, ...]:
    """The items of a list value; () for a value of any other kind."""
    return cast("tuple[Value, ...]", value.value) if value.kind == "list" else ()


def object_entries(value: Value) -> tuple[ObjectEntry, ...]:
    """The entries of an object value, in source order; () for a value of any other kind."""
    return cast("tuple[ObjectEntry, ...]", value.value) if value.kind == "object" else ()


# ---- types --------------------------------------------------------------------------------------


class NamedType(Node):
    name: Name
    span: Span = _span()


class ListType(Node):
    item: TypeRef
    span: Span = _span()


class OptionalType(Node):
    inner: TypeRef
    span: Span = _span()


class EnumType(Node):
    values: tuple[String, ...]
    span: Span = _span()


TypeRef = NamedType | ListType | OptionalType | EnumType


def iter_type_ref(ref: TypeRef) -> Iterator[TypeRef]:
    """`ref` and the type references inside it, outermost first: `list[Critique?]` gives the list, the
    optional, then `Critique`. (A type reference is a chain: only lists and optionals hold another.)"""
    node = ref
    while True:
        yield node
        if isinstance(node, ListType):
            node = node.item
        elif isinstance(node, OptionalType):
            node = node.inner
        else:
            return


class RangeEnd(Node):
    """One end of a range: a number, written with its sign (`-5`, `0.5`)."""

    value: int | float
    span: Span = _span()


class Range(Node):
    """`LOW..HIGH`, either end left open (None): `1..5`, `1..`, `..80`. Both ends are inclusive."""

    low: RangeEnd | None
    high: RangeEnd | None
    span: Span = _span()


class Constraint(Node):
    """A constraint on a field's or an input's value, after its type.

    kind: "in" (a number's range: `in 1..5`), "len" (a str's or a list's length: `len ..80`) or "matches"
    (a str's pattern: `matches "^[A-Z]+$"`); `range` for the first two, `pattern` for the last.
    """

    kind: str
    range: Range | None = None
    pattern: String | None = None
    span: Span = _span()


# The order constraints are written in (after a type, before a field's documentation or an input's default).
CONSTRAINT_ORDER = ("in", "len", "matches")


class FieldDecl(Node):
    name: Name
    type: TypeRef
    doc: String | None = None
    constraints: tuple[Constraint, ...] = ()
    span: Span = _span()


class TypeDecl(Node):
    name: Name
    fields: tuple[FieldDecl, ...]
    span: Span = _span()
