"""Random texts from a GBNF grammar (the subset `statewright grammar --format gbnf` writes).

Used to check the exported constraint is sound: every text it allows must parse. Sampling is seeded and
depth-bounded: past `max_depth` each choice takes its shortest alternative and loops stop.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass

_POOL = [chr(c) for c in range(32, 127)] + ["\n", "\t", "é", "—", "\u4e2d"]


@dataclass
class Lit:
    text: str


@dataclass
class Cls:
    negated: bool
    ranges: list[tuple[int, int]]

    def allows(self, ch: str) -> bool:
        inside = any(low <= ord(ch) <= high for low, high in self.ranges)
        return inside != self.negated


@dataclass
class Sym:
    name: str


@dataclass
class Alt:
    options: list[list[Item]]


@dataclass
class Rep:
    item: Item
    low: int
    high: int | None


Item = Lit | Cls | Sym | Alt | Rep


def _escape(text: str, i: int) -> tuple[str, int]:
    ch = text[i + 1]
    simple = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "[": "[", "]": "]"}
    if ch in simple:
        return simple[ch], i + 2
    width = {"x": 2, "u": 4, "U": 8}[ch]
    return chr(int(text[i + 2 : i + 2 + width], 16)), i + 2 + width


class _Reader:
    def __init__(self, text: str) -> None:
        self.text, self.i = text, 0

    def space(self) -> None:
        while self.i < len(self.text) and self.text[self.i] == " ":
            self.i += 1

    def alternatives(self) -> Alt:
        options = [self.sequence()]
        while self.i < len(self.text) and self.text[self.i] == "|":
            self.i += 1
            options.append(self.sequence())
        return Alt(options)

    def sequence(self) -> list[Item]:
        items: list[Item] = []
        while True:
            self.space()
            if self.i >= len(self.text) or self.text[self.i] in "|)":
                return items
            items.append(self.postfix(self.atom()))

    def atom(self) -> Item:
        ch = self.text[self.i]
        if ch == '"':
            out, self.i = "", self.i + 1
            while self.text[self.i] != '"':
                if self.text[self.i] == "\\":
                    part, self.i = _escape(self.text, self.i)
                    out += part
                else:
                    out += self.text[self.i]
                    self.i += 1
            self.i += 1
            return Lit(out)
        if ch == "[":
            self.i += 1
            negated = self.text[self.i] == "^"
            self.i += negated
            ranges = []
            while self.text[self.i] != "]":
                low = self.char()
                if self.text[self.i] == "-" and self.text[self.i + 1] != "]":
                    self.i += 1
                    ranges.append((ord(low), ord(self.char())))
                else:
                    ranges.append((ord(low), ord(low)))
            self.i += 1
            return Cls(negated, ranges)
        if ch == "(":
            self.i += 1
            inner = self.alternatives()
            self.space()
            assert self.text[self.i] == ")", self.text[self.i:]
            self.i += 1
            return inner
        match = re.compile(r"[A-Za-z0-9-]+").match(self.text, self.i)
        assert match, self.text[self.i:]
        self.i = match.end()
        return Sym(match.group())

    def char(self) -> str:
        if self.text[self.i] == "\\":
            ch, self.i = _escape(self.text, self.i)
            return ch
        self.i += 1
        return self.text[self.i - 1]

    def postfix(self, item: Item) -> Item:
        if self.i < len(self.text) and self.text[self.i] in "*+?":
            op = self.text[self.i]
            self.i += 1
            return Rep(item, 1 if op == "+" else 0, 1 if op == "?" else None)
        if self.i < len(self.text) and self.text[self.i] == "{":
            end = self.text.index("}", self.i)
            inner = self.text[self.i + 1 : end]
            self.i = end + 1
            if "," not in inner:
                return Rep(item, int(inner), int(inner))
            low, high = inner.split(",")
            return Rep(item, int(low), int(high) if high else None)
        return item


def parse_gbnf(text: str) -> dict[str, Alt]:
    rules: dict[str, Alt] = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, _, body = line.partition(" ::= ")
        rules[name.strip()] = _Reader(body).alternatives()
    return rules


class Sampler:
    """`choose(rule_name, rng)` may return a text for a rule instead of sampling it (None: sample)."""

    def __init__(self, rules: dict[str, Alt], choose: Callable[[str, random.Random], str | None] | None = None,
                 max_depth: int = 14) -> None:
        self.rules, self.choose, self.max_depth = rules, choose, max_depth
        self.size: dict[str, float] = {name: float("inf") for name in rules}
        changed = True
        while changed:
            changed = False
            for name, alt in rules.items():
                size = self._min(alt)
                if size < self.size[name]:
                    self.size[name], changed = size, True

    def _min(self, item: Item | list[Item]) -> float:
        if isinstance(item, list):
            return sum(self._min(i) for i in item)
        if isinstance(item, Lit):
            return len(item.text)
        if isinstance(item, Cls):
            return 1
        if isinstance(item, Sym):
            return self.size[item.name]
        if isinstance(item, Alt):
            return min(self._min(o) for o in item.options)
        return item.low * self._min(item.item)

    def sample(self, rng: random.Random, start: str = "root") -> str:
        out: list[str] = []
        self._emit(Sym(start), rng, 0, out)
        return "".join(out)

    def _emit(self, item: Item | list[Item], rng: random.Random, depth: int, out: list[str]) -> None:
        if isinstance(item, list):
            for part in item:
                self._emit(part, rng, depth, out)
        elif isinstance(item, Lit):
            out.append(item.text)
        elif isinstance(item, Cls):
            out.append(rng.choice([c for c in _POOL if item.allows(c)]))
        elif isinstance(item, Sym):
            chosen = self.choose(item.name, rng) if self.choose else None
            if chosen is not None:
                out.append(chosen)
            else:
                self._emit(self.rules[item.name], rng, depth + 1, out)
        elif isinstance(item, Alt):
            if depth > self.max_depth:
                option = min(item.options, key=self._min)
            else:
                option = rng.choice(item.options)
            self._emit(option, rng, depth, out)
        else:
            count = item.low
            if depth <= self.max_depth:
                high = item.high if item.high is not None else item.low + 3
                count = rng.randint(item.low, high)
            for _ in range(count):
                self._emit(item.item, rng, depth + 1, out)
