"""The constraint in GBNF, the grammar format of llama.cpp (`grammar` field of its server's requests).

GBNF works on characters, with no lexer, so three things the parser gets from Lark's lexer are written out:

- **Separators.** Between two tokens any whitespace and `#` comments may stand (a comment runs to the end
  of its line). Where two neighbours could run together — a word character on both sides (`state` then a
  name; a number then a name), or a quote on both sides (an empty string then a string would read as a triple quote) —
  at least one whitespace character or comment is required. Whether neighbours could run together is
  decided from the tokens each side can end and begin with; where one side varies (the item before a
  `*`-loop, an expression that ends in a name or a bracket), a separator is required if any pair needs one.
- **Left recursion**, which llama.cpp rejects: `a: a x | y` is written `a ::= y (x)*`.
- **Lookaheads and keywords** arrive already compiled away (see `terminals` and `keywords`).
"""

from __future__ import annotations

from dataclasses import dataclass

from .model import ConstraintGrammar, GrammarExportError, name_variant
from .nodes import (
    EPSILON,
    MAX_CODE_POINT,
    Chars,
    Choice,
    Name,
    Node,
    Ref,
    Repeat,
    Seq,
    Term,
    Text,
    chars,
    choice,
    complement,
    intersect,
    seq,
)
from .nodes import repeat as repeat_node

HEADER = """\
# The statewright grammar as a decoding constraint, in GBNF (llama.cpp).
# Generated from statewright.lark by `statewright grammar --format gbnf`: do not edit.
"""

DRAFT_NOTE = """\
# The draft layout: the machine first, no comments, one space or a newline and indentation between tokens.
"""

WORD, QUOTE, OTHER = "word", "quote", "other"
_WORD_CHARS = Chars(((48, 57), (65, 90), (95, 95), (97, 122)))
_QUOTE = '"'
OPTIONAL_SEPARATOR, REQUIRED_SEPARATOR = "ws", "sp"


def boundary_classes(charset: Chars) -> frozenset[str]:
    """What kind of characters a token can begin (or end) with, as far as running together goes."""
    found = set()
    for low, high in charset.ranges:
        for w_low, w_high in _WORD_CHARS.ranges:
            if low <= w_high and w_low <= high:
                found.add(WORD)
        if low <= ord(_QUOTE) <= high:
            found.add(QUOTE)
    covered = sum(min(high, w_high) - max(low, w_low) + 1 for low, high in charset.ranges
                  for w_low, w_high in (*_WORD_CHARS.ranges, (34, 34)) if low <= w_high and w_low <= high)
    if covered < sum(high - low + 1 for low, high in charset.ranges):
        found.add(OTHER)
    return frozenset(found)


def run_together(left: frozenset[str], right: frozenset[str]) -> bool:
    return bool({WORD, QUOTE} & left & right)


@dataclass
class _Edges:
    """The first and last characters a node's tokens can have, as boundary classes."""

    first: frozenset[str]
    last: frozenset[str]


# The draft layout: what a model writing a machine needs, and nothing it could spend a token budget on.
DRAFT_INDENT = 32  # spaces after a newline: eight levels of blocks
DRAFT_START = "machine"  # a draft is one file's machine


def _reachable(rules: dict[str, Node], start: str) -> set[str]:
    """The rules `start` uses, directly or through others."""
    seen = {start}
    todo = [rules[start]]
    while todo:
        node = todo.pop()
        if isinstance(node, Ref):
            if node.rule not in seen:
                seen.add(node.rule)
                todo.append(rules[node.rule])
        elif isinstance(node, (Seq, Choice)):
            todo.extend(node.items if isinstance(node, Seq) else node.options)
        elif isinstance(node, Repeat):
            todo.append(node.item)
    return seen


def render_gbnf(grammar: ConstraintGrammar, draft: bool = False) -> str:
    """The GBNF constraint. With `draft`, for a model to write into: the file begins with its machine, has
    no comments, and a separator is one space, or a newline (one blank line at most) and an indentation."""
    return _Writer(grammar).render(draft)


class _Writer:
    def __init__(self, grammar: ConstraintGrammar) -> None:
        self.grammar = grammar
        self.rules = {name: _left_factored(_without_left_recursion(name, body))
                      for name, body in grammar.rules.items()}
        self.names = {name: _gbnf_name(name, upper=False) for name in self.rules}
        self.names.update({name: _gbnf_name(name, upper=True) for name in grammar.terminals})
        for excluded in grammar.name_exclusions():
            variant = name_variant(grammar.name_terminal, excluded)
            self.names[variant] = _gbnf_name(variant, upper=True)
        taken = list(self.names.values()) + ["root", OPTIONAL_SEPARATOR, REQUIRED_SEPARATOR]
        if len(set(taken)) != len(taken):
            raise GrammarExportError("two grammar names map to one GBNF name")
        self.terminal_edges = {name: _Edges(*_char_edges(node)) for name, node in grammar.terminals.items()}
        self.edges: dict[str, _Edges] = {}
        self._rule_edges()
        self._check_lookahead_rests()

    # -- boundaries ----------------------------------------------------------------------------------

    def _rule_edges(self) -> None:
        for name in self.rules:
            self.edges[name] = _Edges(frozenset(), frozenset())
        changed = True
        while changed:
            changed = False
            for name, body in self.rules.items():
                found = _Edges(self.first(body), self.last(body))
                if found != self.edges[name]:
                    self.edges[name] = found
                    changed = True
        for name, body in self.rules.items():
            if self.nullable(body):
                raise GrammarExportError(f"rule {name} can be empty; separators around it are not supported")

    def _check_lookahead_rests(self) -> None:
        # a terminal whose lookahead reaches past its end (STRING: `""` not followed by `"`) must be kept
        # apart from every token that could begin with what the lookahead forbids
        for name, forbidden in self.grammar.not_followed_by.items():
            ends = self.terminal_edges[name].last
            for ch in forbidden:
                if not run_together(ends, boundary_classes(Chars(((ord(ch), ord(ch)),)))):
                    raise GrammarExportError(f"{name} may not be followed by {ch!r}, which no separator rule covers")

    def nullable(self, node: Node) -> bool:
        if isinstance(node, Seq):
            return all(self.nullable(i) for i in node.items)
        if isinstance(node, Choice):
            return any(self.nullable(o) for o in node.options)
        if isinstance(node, Repeat):
            return node.min == 0 or self.nullable(node.item)
        return False  # rules are checked not to be nullable

    def first(self, node: Node) -> frozenset[str]:
        if isinstance(node, Seq):
            found: frozenset[str] = frozenset()
            for item in node.items:
                found |= self.first(item)
                if not self.nullable(item):
                    break
            return found
        if isinstance(node, Choice):
            return frozenset().union(*(self.first(o) for o in node.options))
        if isinstance(node, Repeat):
            return self.first(node.item)
        return self._token_edges(node).first

    def last(self, node: Node) -> frozenset[str]:
        if isinstance(node, Seq):
            found: frozenset[str] = frozenset()
            for item in reversed(node.items):
                found |= self.last(item)
                if not self.nullable(item):
                    break
            return found
        if isinstance(node, Choice):
            return frozenset().union(*(self.last(o) for o in node.options))
        if isinstance(node, Repeat):
            return self.last(node.item)
        return self._token_edges(node).last

    def _token_edges(self, node: Node) -> _Edges:
        if isinstance(node, Text):
            return _Edges(boundary_classes(_one(node.value[0])), boundary_classes(_one(node.value[-1])))
        if isinstance(node, Term):
            return self.terminal_edges[node.name]
        if isinstance(node, Name):
            return self.terminal_edges[self.grammar.name_terminal]
        if isinstance(node, Ref):
            return self.edges[node.rule]
        raise TypeError(node)

    def separator(self, before: frozenset[str], after: frozenset[str]) -> str:
        return REQUIRED_SEPARATOR if run_together(before, after) else OPTIONAL_SEPARATOR

    # -- rules ----------------------------------------------------------------------------------------

    def render(self, draft: bool = False) -> str:
        g = self.grammar
        if draft:  # one machine, as the designer drafts it: no `use` of other files before it
            start = DRAFT_START if DRAFT_START in self.rules else g.start
            lines = [HEADER + DRAFT_NOTE, f'root ::= {self.names[start]} "\\n"?', ""]
            kept = _reachable(self.rules, start)
        else:
            lines = [HEADER, f"root ::= {OPTIONAL_SEPARATOR} {self.names[g.start]} {OPTIONAL_SEPARATOR}"
                     + "".join(f" {t}?" for t in self._open_ended_ignored()), ""]
            kept = set(self.rules)
        for name, body in self.rules.items():
            if name in kept:
                lines.append(f"{self.names[name]} ::= {self.rule(body)}")
        lines.append("")
        for name, node in g.terminals.items():
            if name in g.ignore and (draft or _single_run(node)):
                continue  # written into the separators as a character class, or not allowed in a draft
            lines.append(f"{self.names[name]} ::= {_chars_rule(node)}")
        for excluded in g.name_exclusions():
            variant = name_variant(g.name_terminal, excluded)
            lines.append(f"{self.names[variant]} ::= {_chars_rule(g.name_node(excluded))}")
        lines.append("")
        if draft:
            lines.append(f"{OPTIONAL_SEPARATOR} ::= {REQUIRED_SEPARATOR}?")
            lines.append(f'{REQUIRED_SEPARATOR} ::= " " | "\\n" "\\n"? " "{{0,{DRAFT_INDENT}}}')
        else:
            gap = self._gap()
            lines.append(f"{OPTIONAL_SEPARATOR} ::= ({gap})*")
            lines.append(f"{REQUIRED_SEPARATOR} ::= ({gap})+")
        return "\n".join(lines) + "\n"

    def _open_ended_ignored(self) -> list[str]:
        """Ignored terminals that run to a terminator (a comment to its newline): allowed unterminated only
        at the very end of the file."""
        return [self.names[name] for name in self.grammar.ignore if _continuation(self.grammar.terminals[name])]

    def _gap(self) -> str:
        """One piece of a separator: an ignorable character, or an ignorable run with its terminator."""
        singles: list[Chars] = []
        runs: list[tuple[str, Chars]] = []
        for name in self.grammar.ignore:
            node = self.grammar.terminals[name]
            if isinstance(node, Repeat) and isinstance(node.item, Chars) and _single_run(node):
                singles.append(node.item)
            else:
                runs.append((name, _continuation(node) or Chars(())))
        single = chars([r for s in singles for r in s.ranges])
        parts = [_class(single)] if singles else []
        for name, continues in runs:
            if not continues.ranges:
                parts.append(self.names[name])
                continue
            stop = intersect(complement(continues), single)
            if not stop.ranges:
                raise GrammarExportError(f"nothing ignorable can end the ignored terminal {name}")
            parts.append(f"{self.names[name]} {_class(stop)}")
        return " | ".join(parts)

    def rule(self, body: Node) -> str:
        if isinstance(body, Choice):
            return " | ".join(self.expression(o) for o in body.options)
        return self.expression(body)

    def expression(self, node: Node) -> str:
        """A node whose own first item gets no separator before it (that is the enclosing sequence's job)."""
        if isinstance(node, Seq):
            return self.sequence(node.items)
        if isinstance(node, Choice):
            return "(" + " | ".join(self.expression(o) for o in node.options) + ")"
        if isinstance(node, Repeat):
            if node.min == 0:
                return self.sequence((node,))
            return self._repeated(node, leading=None)
        if isinstance(node, Text):
            return _literal(node.value)
        if isinstance(node, Ref):
            return self.names[node.rule]
        if isinstance(node, Term):
            return self.names[node.name]
        if isinstance(node, Name):
            if not node.excluded:
                return self.names[self.grammar.name_terminal]
            return self.names[name_variant(self.grammar.name_terminal, node.excluded)]
        raise TypeError(node)

    def sequence(self, items: tuple[Node, ...]) -> str:
        parts: list[str] = []
        before: frozenset[str] | None = None  # None: nothing of this sequence written yet
        for index, item in enumerate(items):
            if not self.nullable(item):
                if before is not None and isinstance(item, Choice):
                    parts.append(self._choice_after(item, before))
                else:
                    if before is not None:
                        parts.append(self.separator(before, self.first(item)))
                    parts.append(self._atom(item))
                before = self.last(item)
                continue
            if not isinstance(item, Repeat) or item.min != 0 or self.nullable(item.item):
                raise GrammarExportError(f"unsupported optional item {item}")
            if before is None:
                # an optional item that may come first: its separator goes after it, before what follows
                after = self.first(seq(*items[index + 1:]))
                if not after:
                    raise GrammarExportError("a sequence of optional items only")
                parts.append(self._optional(item, leading=None, trailing=after))
            else:
                parts.append(self._optional(item, leading=before, trailing=None))
                before = before | self.last(item)
        return " ".join(parts)

    def _atom(self, node: Node) -> str:
        return self.expression(node)  # a sequence needs no brackets inside another; a choice brings its own

    def _repeated(self, node: Repeat, leading: frozenset[str] | None) -> str:
        """`node.item` at least `node.min` (>= 1) times, separators between the copies."""
        item = node.item
        one = self._atom(item)
        between = self.separator(self.last(item), self.first(item))
        head = (f"{self.separator(leading, self.first(item))} " if leading is not None else "") + one
        copies = [head] + [f"{between} {one}"] * (node.min - 1)
        if node.max is None:
            copies.append(f"({between} {one})*")
        else:
            copies.extend([f"({between} {one})?"] * (node.max - node.min))
        return " ".join(copies)

    def _choice_after(self, node: Choice, before: frozenset[str]) -> str:
        """Alternatives after something: each with the separator its own first token needs."""
        return "(" + " | ".join(f"{self.separator(before, self.first(o))} {self._atom(o)}"
                                for o in node.options) + ")"

    def _optional(self, node: Repeat, leading: frozenset[str] | None, trailing: frozenset[str] | None) -> str:
        if leading is not None and trailing is None and node.max == 1 and isinstance(node.item, Choice):
            return self._choice_after(node.item, leading) + "?"
        if leading is not None and trailing is None and node.max is None:
            first = self.separator(leading, self.first(node.item))
            if first == self.separator(self.last(node.item), self.first(node.item)):
                return f"({first} {self._atom(node.item)})*"  # every copy needs the same separator
        present = self._repeated(Repeat(node.item, 1, node.max), leading)
        if trailing is not None:
            present += " " + self.separator(self.last(node.item), trailing)
        return f"({present})?"


def _without_left_recursion(name: str, body: Node) -> Node:
    """`a: a x | a y | z` as `a: z (x | y)*`; a rule that refers to itself first in some other way is refused."""
    options = body.options if isinstance(body, Choice) else (body,)
    bases: list[Node] = []
    tails: list[Node] = []
    for option in options:
        items = option.items if isinstance(option, Seq) else (option,)
        if items and items[0] == Ref(name):
            tails.append(seq(*items[1:]))
        else:
            bases.append(option)
    if not tails:
        return body
    if not bases:
        raise GrammarExportError(f"rule {name} only refers to itself")
    return seq(choice(*bases), repeat_node(choice(*tails), 0, None))


def _left_factored(node: Node) -> Node:
    """Alternatives that begin alike share their beginning: `a | a b | a c` is `a (b | c)?`. llama.cpp
    follows every alternative at once, so this keeps it from following the same prefix several times."""
    if isinstance(node, Seq):
        return seq(*(_left_factored(i) for i in node.items))
    if isinstance(node, Repeat):
        return repeat_node(_left_factored(node.item), node.min, node.max)
    if not isinstance(node, Choice):
        return node
    groups: dict[Node, list[Node]] = {}
    for option in node.options:
        items = option.items if isinstance(option, Seq) else (option,)
        groups.setdefault(items[0], []).append(seq(*items[1:]) if len(items) > 1 else EPSILON)
    options: list[Node] = []
    for head, tails in groups.items():
        if len(tails) == 1:
            options.append(_left_factored(seq(head, tails[0])))
            continue
        rests = [t for t in tails if t != EPSILON]
        rest = _left_factored(choice(*rests)) if rests else EPSILON
        options.append(seq(head, repeat_node(rest, 0, 1) if len(rests) < len(tails) else rest))
    return choice(*options)


def _char_edges(node: Node) -> tuple[frozenset[str], frozenset[str]]:
    return boundary_classes(_edge_chars(node, first=True)), boundary_classes(_edge_chars(node, first=False))


def _edge_chars(node: Node, first: bool) -> Chars:
    if isinstance(node, Chars):
        return node
    if isinstance(node, Text):
        return _one(node.value[0] if first else node.value[-1])
    if isinstance(node, Choice):
        return chars([r for o in node.options for r in _edge_chars(o, first).ranges])
    if isinstance(node, Repeat):
        return _edge_chars(node.item, first)
    if isinstance(node, Seq):
        items = node.items if first else tuple(reversed(node.items))
        ranges: list[tuple[int, int]] = []
        for item in items:
            ranges.extend(_edge_chars(item, first).ranges)
            if not _char_nullable(item):
                break
        return chars(ranges)
    raise TypeError(node)


def _char_nullable(node: Node) -> bool:
    if isinstance(node, Seq):
        return all(_char_nullable(i) for i in node.items)
    if isinstance(node, Choice):
        return any(_char_nullable(o) for o in node.options)
    if isinstance(node, Repeat):
        return node.min == 0 or _char_nullable(node.item)
    if isinstance(node, Text):
        return node.value == ""
    return False


def _single_run(node: Node) -> bool:
    return isinstance(node, Repeat) and isinstance(node.item, Chars) and node.min == 1 and node.max is None


def _continuation(node: Node) -> Chars | None:
    """For a terminal ending in `[c]*`: the characters it could go on with (a comment: all but newline)."""
    last = node.items[-1] if isinstance(node, Seq) and node.items else node
    if isinstance(last, Repeat) and isinstance(last.item, Chars) and last.max is None and node is not last:
        return last.item
    return None


def _one(ch: str) -> Chars:
    return Chars(((ord(ch), ord(ch)),))


def _gbnf_name(name: str, upper: bool) -> str:
    text = name.strip("_").replace("_", "-")
    return text.upper() if upper else text.lower()


# ---- characters ------------------------------------------------------------------------------------


def _chars_rule(node: Node) -> str:
    if isinstance(node, Choice):
        return " | ".join(_chars(o) for o in node.options)
    return _chars(node)


def _chars(node: Node) -> str:
    if isinstance(node, Chars):
        if len(node.ranges) == 1 and node.ranges[0][0] == node.ranges[0][1]:
            return _literal(chr(node.ranges[0][0]))
        return _class(node)
    if isinstance(node, Text):
        return _literal(node.value)
    if isinstance(node, Seq):
        return " ".join(_chars(i) for i in node.items)
    if isinstance(node, Choice):
        return "(" + " | ".join(_chars(o) for o in node.options) + ")"
    if isinstance(node, Repeat):
        inner = _chars(node.item)
        atom = inner if isinstance(node.item, (Chars, Choice)) or (
            isinstance(node.item, Text) and len(node.item.value) == 1) else f"({inner})"
        if (node.min, node.max) == (0, None):
            return atom + "*"
        if (node.min, node.max) == (1, None):
            return atom + "+"
        if (node.min, node.max) == (0, 1):
            return atom + "?"
        if node.min == node.max:
            return atom + f"{{{node.min}}}"
        return atom + (f"{{{node.min},{node.max}}}" if node.max is not None else f"{{{node.min},}}")
    raise TypeError(node)


_LITERAL_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"}
_CLASS_ESCAPES = {"]": "\\]", "[": "\\[", "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _literal(value: str) -> str:
    return '"' + "".join(_LITERAL_ESCAPES.get(ch) or (ch if ch.isprintable() else _hex(ord(ch))) for ch in value) + '"'


def _class(charset: Chars) -> str:
    negated = bool(charset.ranges) and charset.ranges[-1][1] == MAX_CODE_POINT
    shown = complement(charset) if negated else charset
    parts = []
    for low, high in shown.ranges:
        parts.append(_class_char(low) if low == high else f"{_class_char(low)}-{_class_char(high)}")
    return ("[^" if negated else "[") + "".join(parts) + "]"


def _class_char(point: int) -> str:
    ch = chr(point)
    if ch in _CLASS_ESCAPES:
        return _CLASS_ESCAPES[ch]
    # '-' and '^' are special inside a class, and llama.cpp knows no escape for them but hex
    if ch in "-^" or not ch.isprintable():
        return _hex(point)
    return ch


def _hex(point: int) -> str:
    if point < 0x100:
        return f"\\x{point:02X}"
    if point < 0x10000:
        return f"\\u{point:04X}"
    return f"\\U{point:08X}"
