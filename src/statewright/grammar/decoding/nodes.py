"""The expressions a decoding constraint is built from: rules over tokens, terminals over characters."""

from __future__ import annotations

from dataclasses import dataclass

MAX_CODE_POINT = 0x10FFFF


@dataclass(frozen=True)
class Chars:
    """One character from a set, kept as sorted, disjoint, inclusive code-point ranges."""

    ranges: tuple[tuple[int, int], ...]

    def __contains__(self, char: str) -> bool:
        point = ord(char)
        return any(low <= point <= high for low, high in self.ranges)


@dataclass(frozen=True)
class Text:
    """A literal: a keyword or punctuation in a rule, a run of characters in a terminal."""

    value: str


@dataclass(frozen=True)
class Seq:
    items: tuple[Node, ...]


@dataclass(frozen=True)
class Choice:
    options: tuple[Node, ...]


@dataclass(frozen=True)
class Repeat:
    item: Node
    min: int = 0
    max: int | None = None  # None: no upper bound


@dataclass(frozen=True)
class NotAhead:
    """A negative lookahead of a literal; only in terminals, and gone once they are translated."""

    text: str


@dataclass(frozen=True)
class Ref:
    """A rule, by name."""

    rule: str


@dataclass(frozen=True)
class Term:
    """A named terminal, by name."""

    name: str


@dataclass(frozen=True)
class Name:
    """The name terminal at one place in a rule, without the keywords the parser would take there."""

    excluded: frozenset[str]


Node = Chars | Text | Seq | Choice | Repeat | NotAhead | Ref | Term | Name

EMPTY = Choice(())  # matches nothing
EPSILON = Seq(())  # matches the empty string


def chars(ranges: list[tuple[int, int]] | tuple[tuple[int, int], ...]) -> Chars:
    """A character set from any ranges: sorted and merged."""
    merged: list[tuple[int, int]] = []
    for low, high in sorted(ranges):
        if merged and low <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], high))
        else:
            merged.append((low, high))
    return Chars(tuple(merged))


def complement(charset: Chars) -> Chars:
    gaps: list[tuple[int, int]] = []
    start = 0
    for low, high in charset.ranges:
        if low > start:
            gaps.append((start, low - 1))
        start = high + 1
    if start <= MAX_CODE_POINT:
        gaps.append((start, MAX_CODE_POINT))
    return Chars(tuple(gaps))


def union(*sets: Chars) -> Chars:
    return chars([r for s in sets for r in s.ranges])


def intersect(a: Chars, b: Chars) -> Chars:
    return complement(union(complement(a), complement(b)))


def seq(*items: Node) -> Node:
    """A sequence, flattened; the empty string drops out and the empty language absorbs."""
    flat: list[Node] = []
    for item in items:
        if item == EMPTY:
            return EMPTY
        if isinstance(item, Seq):
            flat.extend(item.items)
        else:
            flat.append(item)
    return flat[0] if len(flat) == 1 else Seq(tuple(flat))


def choice(*options: Node) -> Node:
    """An alternative, flattened and without duplicates; the empty language drops out."""
    flat: list[Node] = []
    for option in options:
        for part in option.options if isinstance(option, Choice) else (option,):
            if part not in flat:
                flat.append(part)
    return flat[0] if len(flat) == 1 else Choice(tuple(flat))


def repeat(item: Node, low: int = 0, high: int | None = None) -> Node:
    if high == 0 or item == EPSILON:
        return EPSILON
    if item == EMPTY:
        return EPSILON if low == 0 else EMPTY
    if (low, high) == (1, 1):
        return item
    return Repeat(item, low, high)
