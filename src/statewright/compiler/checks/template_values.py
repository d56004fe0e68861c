"""The kinds of value a template check follows besides the types of guards (typecheck.TypeLike).

A template's values have the types guards know — declared types, variants, lists, optionals, a state's
output that may not be there — and a few of Jinja's own: a state's name on its own, a `namespace()`,
`loop`, a macro. A value made from a typed one in a way the check does not follow is `Untracked`: reading
into it is refused (SW5010) rather than left to fail at run time.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from jinja2 import nodes

from .. import ir
from .template_narrowing import jinja_path
from .template_source import ParsedTemplate
from .type_algebra import MaybeAbsent, Record, TextOutput, TypeLike, type_text

Types = tuple[Any, ...]  # the types a value may have, each once, in the order they were found
DYNAMIC = object()  # a key computed at run time: `x[k]`
GROUP_LABEL = "a group made by the filter 'groupby'"  # the Record of a groupby item: grouper and list
ROUNDS = 6  # rounds of evaluating a template's bindings before a name whose types still grow is untracked


@dataclass(frozen=True)
class Untracked:
    """A value made from a typed one in a way the check does not follow: reading into it is SW5010."""

    why: str  # "it comes from the filter 'dictsort'"
    how: str  # how to write it instead


@dataclass(frozen=True)
class StateValue:
    """A state's name on its own (`draft`): a template reads its `.output` and its `.visits`."""

    state: str


@dataclass(frozen=True)
class NamespaceValue:
    """The object a `namespace(...)` call makes; `site` is the call's id. Its fields are what the call and
    every `{% set NS.field = ... %}` give them."""

    site: int


@dataclass(frozen=True)
class Opaque:
    """A value of Jinja's own the check types no further: `loop`, a macro, `range()`. Reading a field of it
    is the engine's business, as for text."""

    what: str


LOOP, MACRO = Opaque("loop"), Opaque("macro")
LOOP_FIELDS: dict[str, TypeLike] = {
    "index": ir.INT, "index0": ir.INT, "revindex": ir.INT, "revindex0": ir.INT, "length": ir.INT,
    "depth": ir.INT, "depth0": ir.INT, "first": ir.BOOL, "last": ir.BOOL,
}


def tracked(t: Any) -> bool:
    """Whether a value of type `t` has parts the check follows: fields, maybe none, a state's output."""
    if isinstance(t, ir.ListOf):
        return tracked(t.item)
    return isinstance(t, (ir.Named, ir.Variant, Record, ir.Optional_, MaybeAbsent, Untracked, StateValue,
                          NamespaceValue)) or t == ir.NONE


def union(*groups: Iterable[Any]) -> Types:
    """The types of all the groups, each once, in the order found."""
    return tuple(dict.fromkeys(t for group in groups for t in group))


def present_types(types: Types) -> Types:
    """The types of a value that is there (true): not none, a state's output that has run."""
    out = []
    for t in types:
        while isinstance(t, (MaybeAbsent, ir.Optional_)):
            t = t.inner
        if t != ir.NONE:
            out.append(t)
    return union(out) or (ir.ANY,)


# What a template may read from a value without fields: its Python methods (the sandbox allows no others).
METHODS = {
    "str": frozenset(n for n in dir(str) if not n.startswith("_")),
    "int": frozenset(n for n in dir(int) if not n.startswith("_")),
    "float": frozenset(n for n in dir(float) if not n.startswith("_")),
    "bool": frozenset(n for n in dir(bool) if not n.startswith("_")),
    "list": frozenset(n for n in dir(list) if not n.startswith("_")),
}
EXAMPLE_METHODS = {"str": "upper() and split()", "list": "index() and count()"}


def plain_kind(t: Any) -> str | None:
    """The Python kind of a value without fields (text, a number, a list), or None for any other."""
    if t == ir.STR or isinstance(t, (ir.Enum, TextOutput)):
        return "str"
    if isinstance(t, ir.ListOf):
        return "list"
    if isinstance(t, ir.Prim) and t.name in ("int", "float", "bool"):
        return t.name
    return None


def inner_type(t: Any) -> Any:
    while isinstance(t, (MaybeAbsent, ir.Optional_)):
        t = t.inner
    return t


def only_variants(t: Any, allowed: frozenset[str]) -> Any:
    """A variant type (inside any optional or maybe-absent) restricted to the variants `allowed`."""
    if isinstance(t, MaybeAbsent):
        return MaybeAbsent(only_variants(t.inner, allowed), t.state)
    if isinstance(t, ir.Optional_):
        return ir.Optional_(only_variants(t.inner, allowed))
    if isinstance(t, ir.Variant):
        options = tuple(o for o in t.options if o in allowed)
        if len(options) == 1:
            return ir.Named(options[0])
        return ir.Variant(options) if options else ir.ANY  # no variant left: the read never runs
    return t


def const_type(value: object) -> TypeLike:
    if value is None:
        return ir.NONE
    if isinstance(value, bool):
        return ir.BOOL
    if isinstance(value, int):
        return ir.INT
    if isinstance(value, float):
        return ir.FLOAT
    return ir.STR if isinstance(value, str) else ir.ANY


def quoted(shown: str) -> str:
    """A value's name quoted in a message: `'a.text'`, but `an item of 'xs'` as it reads."""
    return shown if shown.startswith(("an item", "the '")) else f"'{shown}'"


def shown_name(node: nodes.Node | None, parsed: ParsedTemplate) -> str:
    """How an expression is named in a message: its path, or its text when that fits on a line."""
    if node is None:
        return "the value"
    path = jinja_path(node)
    if path is not None:
        return path
    text = parsed.node_span(node).text
    return text if "\n" not in text and len(text) <= 60 else "the value"


def type_name(t: Any) -> str:
    if isinstance(t, StateValue):
        return f"the state '{t.state}'"
    if isinstance(t, NamespaceValue):
        return "a namespace"
    if isinstance(t, (Untracked, Opaque)):
        return "a value"
    return type_text(t)
