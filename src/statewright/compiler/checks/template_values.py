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

from .. import ir
from .typecheck import MaybeAbsent, Record, TypeLike

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
