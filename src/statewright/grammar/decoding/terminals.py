"""Terminal regexes as character-level expressions, with their lookaheads compiled away.

Decoders take neither Python's regex dialect nor lookarounds, so each terminal of statewright.lark is read
with Python's own regex parser into the expressions of `nodes`. A terminal with a negative lookahead
(STRING and LONG_STRING have one) goes through a small automaton: its DFA is built by derivatives, with
each lookahead carried as a pending condition on what comes next, and read back as an expression by state
elimination. A lookahead that reaches past the end of the token cannot be kept inside it; it is reported
(`Translated.not_followed_by`), and the constraint keeps such tokens apart from what could complete it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from .nodes import (
    EMPTY,
    EPSILON,
    MAX_CODE_POINT,
    Chars,
    Choice,
    Node,
    NotAhead,
    Repeat,
    Seq,
    Text,
    chars,
    choice,
    complement,
    repeat,
    seq,
)

try:  # Python 3.11+
    import re._constants as _sre
    import re._parser as _sre_parse
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as _sre  # type: ignore[no-redef]
    import sre_parse as _sre_parse  # type: ignore[no-redef]


class UnsupportedPattern(ValueError):
    """A terminal uses a regex feature the constraint cannot express."""


@dataclass(frozen=True)
class Translated:
    """A terminal as a lookahead-free expression, and what may not follow it (first characters)."""

    node: Node
    not_followed_by: frozenset[str] = field(default_factory=frozenset)


def translate_regex(pattern: str) -> Translated:
    node = regex_node(pattern)
    if not _has_lookahead(node):
        return Translated(node)
    dfa = build_dfa(node)
    return Translated(dfa.to_node(), dfa.pending_first_chars())


# ---- Python regex -> expression ------------------------------------------------------------------

_ANY = complement(chars([(10, 10)]))  # '.' without DOTALL


def regex_node(pattern: str) -> Node:
    return _sub_pattern(_sre_parse.parse(pattern, 0))


def _sub_pattern(items: Iterable[tuple[object, Any]]) -> Node:
    return seq(*(_item(op, arg) for op, arg in items))


def _item(op: object, arg: Any) -> Node:
    if op is _sre.LITERAL:
        return Text(chr(arg))
    if op is _sre.NOT_LITERAL:
        return complement(chars([(arg, arg)]))
    if op is _sre.ANY:
        return _ANY
    if op is _sre.IN:
        return _char_class(arg)
    if op is _sre.BRANCH:
        _, branches = arg
        return choice(*(_sub_pattern(b) for b in branches))
    if op is _sre.SUBPATTERN:
        _, add_flags, del_flags, body = arg
        if add_flags or del_flags:
            raise UnsupportedPattern("inline regex flags")
        return _sub_pattern(body)
    if op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT):
        low, high, body = arg
        return repeat(_sub_pattern(body), low, None if high is _sre.MAXREPEAT else high)
    if op is _sre.ASSERT_NOT:
        direction, body = arg
        text = _literal_text(body)
        if direction != 1 or text is None:
            raise UnsupportedPattern("only negative lookaheads of literal text are supported")
        return NotAhead(text)
    raise UnsupportedPattern(f"regex construct {op}")


def _char_class(items: list[tuple[object, Any]]) -> Chars:
    ranges: list[tuple[int, int]] = []
    negate = False
    for op, arg in items:
        if op is _sre.NEGATE:
            negate = True
        elif op is _sre.LITERAL:
            ranges.append((arg, arg))
        elif op is _sre.RANGE:
            ranges.append(arg)
        else:
            raise UnsupportedPattern(f"character class item {op}")
    result = chars(ranges)
    return complement(result) if negate else result


def _literal_text(body: Iterable[tuple[object, Any]]) -> str | None:
    text = []
    for op, arg in body:
        if op is not _sre.LITERAL:
            return None
        text.append(chr(arg))
    return "".join(text) or None


def _has_lookahead(node: Node) -> bool:
    if isinstance(node, NotAhead):
        return True
    if isinstance(node, Seq):
        return any(_has_lookahead(i) for i in node.items)
    if isinstance(node, Choice):
        return any(_has_lookahead(o) for o in node.options)
    if isinstance(node, Repeat):
        return _has_lookahead(node.item)
    return False


# ---- derivatives -----------------------------------------------------------------------------------


def nullable(node: Node) -> bool:
    if isinstance(node, Chars):
        return False
    if isinstance(node, Text):
        return node.value == ""
    if isinstance(node, Seq):
        return all(nullable(i) for i in node.items)
    if isinstance(node, Choice):
        return any(nullable(o) for o in node.options)
    if isinstance(node, Repeat):
        return node.min == 0 or nullable(node.item)
    if isinstance(node, NotAhead):
        return True
    raise TypeError(node)


def pending(node: Node) -> frozenset[str]:
    """For a nullable node: the texts that may not come next for it to match the empty string here.

    Where alternatives differ the union is taken, which only ever forbids more."""
    if isinstance(node, NotAhead):
        return frozenset([node.text])
    if isinstance(node, Seq):
        return frozenset().union(*(pending(i) for i in node.items))
    if isinstance(node, Choice):
        found = [pending(o) for o in node.options if nullable(o)]
        return frozenset() if any(not p for p in found) else frozenset().union(*found)
    if isinstance(node, Repeat):
        return frozenset() if node.min == 0 else pending(node.item)
    return frozenset()


def derive(node: Node, char: str) -> Node:
    """What is left of `node` to match after it has read `char`."""
    if isinstance(node, Chars):
        return EPSILON if char in node else EMPTY
    if isinstance(node, Text):
        return (Text(node.value[1:]) if len(node.value) > 1 else EPSILON) if node.value[:1] == char else EMPTY
    if isinstance(node, Choice):
        return choice(*(derive(o, char) for o in node.options))
    if isinstance(node, Repeat):
        rest = repeat(node.item, max(node.min - 1, 0), None if node.max is None else node.max - 1)
        return seq(derive(node.item, char), rest)
    if isinstance(node, NotAhead):
        return EMPTY  # zero width: alone, it has nothing to read
    if isinstance(node, Seq):
        if not node.items:
            return EMPTY
        first, rest = node.items[0], seq(*node.items[1:])
        if isinstance(first, NotAhead):
            if first.text[0] != char:
                return derive(rest, char)  # the lookahead can no longer match: it is satisfied
            if len(first.text) == 1:
                return EMPTY
            return seq(NotAhead(first.text[1:]), derive(rest, char))
        result = seq(derive(first, char), rest)
        if nullable(first):
            skipped = seq(*(NotAhead(t) for t in sorted(pending(first))), rest)
            result = choice(result, derive(skipped, char))
        return result
    raise TypeError(node)


def _canonical(node: Node) -> Node:
    """Alternatives in a fixed order, so equal languages built in different orders meet as one state."""
    if isinstance(node, Choice):
        return choice(*sorted((_canonical(o) for o in node.options), key=repr))
    if isinstance(node, Seq):
        return seq(*(_canonical(i) for i in node.items))
    if isinstance(node, Repeat):
        return repeat(_canonical(node.item), node.min, node.max)
    return node


# ---- the alphabet: classes of characters no terminal tells apart --------------------------------


def _char_sets(node: Node) -> Iterable[Chars]:
    if isinstance(node, Chars):
        yield node
    elif isinstance(node, (Text, NotAhead)):
        value = node.value if isinstance(node, Text) else node.text
        for ch in value:
            yield chars([(ord(ch), ord(ch))])
    elif isinstance(node, Seq):
        for item in node.items:
            yield from _char_sets(item)
    elif isinstance(node, Choice):
        for option in node.options:
            yield from _char_sets(option)
    elif isinstance(node, Repeat):
        yield from _char_sets(node.item)


def alphabet(node: Node) -> list[Chars]:
    """The coarsest partition of all characters that every character set of `node` respects."""
    sets = list(dict.fromkeys(_char_sets(node)))
    cuts = {0, MAX_CODE_POINT + 1}
    for charset in sets:
        for low, high in charset.ranges:
            cuts.update((low, high + 1))
    bounds = sorted(cuts)
    by_signature: dict[tuple[bool, ...], list[tuple[int, int]]] = {}
    for low, next_low in pairwise(bounds):
        signature = tuple(chr(low) in s for s in sets)
        by_signature.setdefault(signature, []).append((low, next_low - 1))
    return [chars(ranges) for ranges in by_signature.values()]


# ---- DFA -------------------------------------------------------------------------------------------


@dataclass
class Dfa:
    start: int
    transitions: list[dict[int, Chars]]  # state -> {next state: the characters that lead there}
    accepting: dict[int, frozenset[str]]  # state -> texts that may not follow a match ending there

    def pending_first_chars(self) -> frozenset[str]:
        return frozenset(text[0] for texts in self.accepting.values() for text in texts)

    def to_node(self) -> Node:
        """The language as an expression, by state elimination."""
        start, final = -1, -2
        edges: dict[tuple[int, int], Node] = {(start, self.start): EPSILON}
        for state, targets in enumerate(self.transitions):
            for target, on in targets.items():
                edges[(state, target)] = on
        for state in self.accepting:
            edges[(state, final)] = EPSILON
        remaining = set(range(len(self.transitions)))
        while remaining:
            def cost(k: int) -> tuple[int, bool, int]:
                # fewest new edges first; a state that loops on itself last, so its loop stays outermost
                ins = sum(1 for (p, q) in edges if q == k and p != k)
                outs = sum(1 for (p, q) in edges if p == k and q != k)
                return ins * outs, (k, k) in edges, k
            k = min(remaining, key=cost)
            remaining.discard(k)
            loop = edges.pop((k, k), None)
            middle = repeat(loop) if loop is not None else EPSILON
            incoming = [(p, n) for (p, q), n in edges.items() if q == k]
            outgoing = [(q, n) for (p, q), n in edges.items() if p == k]
            for p, _ in incoming:
                del edges[(p, k)]
            for q, _ in outgoing:
                del edges[(k, q)]
            for p, into in incoming:
                for q, out in outgoing:
                    path = seq(into, middle, out)
                    edges[(p, q)] = choice(edges[(p, q)], path) if (p, q) in edges else path
        return _factor(edges.get((start, final), EMPTY))


def build_dfa(node: Node) -> Dfa:
    classes = alphabet(node)
    start = _canonical(node)
    index: dict[Node, int] = {start: 0}
    states: list[Node] = [start]
    moves: list[dict[int, int]] = []
    for current in states:  # grows while it is walked
        row: dict[int, int] = {}
        for number, charset in enumerate(classes):
            following = _canonical(derive(current, chr(charset.ranges[0][0])))
            if following == EMPTY:
                continue
            if following not in index:
                index[following] = len(states)
                states.append(following)
            row[number] = index[following]
        moves.append(row)
    accepting = {i: pending(s) for i, s in enumerate(states) if nullable(s)}
    live = _live_states(moves, accepting)
    groups = _minimal_groups(moves, accepting, live)
    transitions: list[dict[int, Chars]] = [{} for _ in range(max(groups.values()) + 1)]
    for state, row in enumerate(moves):
        if state not in live:
            continue
        for number, target in row.items():
            if target in live:
                here, there = groups[state], groups[target]
                old = transitions[here].get(there)
                on = classes[number]
                transitions[here][there] = on if old is None else chars(old.ranges + on.ranges)
    accept = {groups[s]: p for s, p in accepting.items() if s in live}
    return Dfa(groups[0], transitions, accept)


def _live_states(moves: list[dict[int, int]], accepting: dict[int, frozenset[str]]) -> set[int]:
    live = set(accepting)
    changed = True
    while changed:
        changed = False
        for state, row in enumerate(moves):
            if state not in live and any(t in live for t in row.values()):
                live.add(state)
                changed = True
    return live


def _minimal_groups(moves: list[dict[int, int]], accepting: dict[int, frozenset[str]],
                    live: set[int]) -> dict[int, int]:
    """Moore's partition refinement: states no input tells apart share a group (numbered from 0)."""
    group: dict[int, object] = {s: (s in accepting, accepting.get(s, frozenset())) for s in sorted(live)}
    while True:
        keys: dict[object, int] = {}
        refined: dict[int, int] = {}
        for state in sorted(live):
            signature = (group[state], tuple(sorted((n, group[t]) for n, t in moves[state].items() if t in live)))
            refined[state] = keys.setdefault(signature, len(keys))
        if len(set(refined.values())) == len(set(group.values())):
            return refined
        group = dict(refined)


def _factor(node: Node) -> Node:
    """Shorter, more readable alternatives: common leading items are taken out once, `x x*` is `x+`, and
    `a | x+ a` is `x* a`."""
    if isinstance(node, Seq):
        items: list[Node] = []
        for item in (_factor(i) for i in node.items):
            if (items and isinstance(item, Repeat) and (item.min, item.max) == (0, None)
                    and items[-1] == item.item):
                items[-1] = repeat(item.item, 1, None)
            else:
                items.append(item)
        return seq(*items)
    if isinstance(node, Repeat):
        return repeat(_factor(node.item), node.min, node.max)
    if not isinstance(node, Choice):
        return node
    options = [_factor(o) for o in node.options]
    grouped: dict[Node, list[Node]] = {}
    for option in options:
        parts = option.items if isinstance(option, Seq) else (option,)
        head = parts[0] if parts else EPSILON
        grouped.setdefault(head, []).append(seq(*parts[1:]) if parts else EPSILON)
    result = []
    for head, tails in grouped.items():
        if len(tails) == 1:
            result.append(seq(head, tails[0]))
        else:
            result.append(seq(head, _factor(choice(*tails))))
    if len(result) == 2:
        for short, long in (result, result[::-1]):
            parts = long.items if isinstance(long, Seq) else ()
            if (len(parts) >= 2 and isinstance(parts[0], Repeat) and (parts[0].min, parts[0].max) == (1, None)
                    and seq(*parts[1:]) == short):
                return seq(repeat(parts[0].item), short)
    return choice(*result)
