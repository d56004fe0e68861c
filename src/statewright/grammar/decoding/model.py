"""statewright.lark, read with Lark's own grammar loader, as rules and terminals a constraint is written from."""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from lark import Token, Tree
from lark.grammar import NonTerminal, RuleOptions, Terminal
from lark.lexer import PatternStr
from lark.load_grammar import _literal_to_pattern, load_grammar

from ..parser import ESCAPE_CHARS, ESCAPING_TERMINAL
from .keywords import MARK, keywords_taken
from .nodes import (
    EPSILON,
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
    repeat,
    seq,
)
from .terminals import Translated, UnsupportedPattern, build_dfa, regex_node

GRAMMAR_PATH = Path(__file__).parent.parent / "statewright.lark"


class GrammarExportError(ValueError):
    """statewright.lark uses something the constraint cannot express (a bug to fix here, not a user error)."""


@dataclass
class ConstraintGrammar:
    """The grammar, ready to be written as a constraint.

    `rules` hold token-level expressions (Text for keywords and punctuation, Term for named terminals,
    Name for the name terminal where some keywords cannot be names); `terminals` hold character-level,
    lookahead-free expressions.
    """

    start: str
    rules: dict[str, Node]
    terminals: dict[str, Node]
    ignore: tuple[str, ...]
    name_terminal: str
    keywords: frozenset[str]
    not_followed_by: dict[str, frozenset[str]] = field(default_factory=dict)

    def name_exclusions(self) -> list[frozenset[str]]:
        """Every distinct non-empty set of keywords some name occurrence excludes, in a fixed order."""
        found: set[frozenset[str]] = set()

        def walk(node: Node) -> None:
            if isinstance(node, Name) and node.excluded:
                found.add(node.excluded)
            for child in _children(node):
                walk(child)

        for body in self.rules.values():
            walk(body)
        return sorted(found, key=lambda s: (len(s), sorted(s)))

    def name_node(self, excluded: frozenset[str]) -> Node:
        """The name terminal without the words in `excluded`."""
        return names_except(self.terminals[self.name_terminal], excluded)


def name_variant(terminal: str, excluded: frozenset[str]) -> str:
    """The terminal name for `terminal` without the words in `excluded`, e.g. NAME_EXCEPT_LIST."""
    return "_".join([terminal, "EXCEPT", *(w.upper() for w in sorted(excluded))])


def _texts(node: Node) -> list[str]:
    if isinstance(node, Text):
        return [node.value]
    return [t for child in _children(node) for t in _texts(child)]


def _children(node: Node) -> tuple[Node, ...]:
    if isinstance(node, Seq):
        return node.items
    if isinstance(node, Choice):
        return node.options
    if isinstance(node, Repeat):
        return (node.item,)
    return ()


@lru_cache(maxsize=1)
def load_constraint_grammar(path: Path = GRAMMAR_PATH) -> ConstraintGrammar:
    grammar, _ = load_grammar(path.read_text(encoding="utf-8"), str(path), None, False)
    return _build(grammar.rule_defs, grammar.term_defs, list(grammar.ignore))


def _build(rule_defs: list[Any], term_defs: list[Any], ignore: list[str]) -> ConstraintGrammar:
    start = "start"
    if not any(str(d[0]) == start for d in rule_defs):
        raise GrammarExportError("the grammar has no 'start' rule")
    strings = {str(name): _string_terminal(tree) for name, (tree, _) in term_defs}
    string_terms = {k: v for k, v in strings.items() if v is not None}
    regex_terms = {str(name): tree for name, (tree, _) in term_defs if str(name) not in string_terms}
    name_terminal, name_regex = _name_terminal(regex_terms, [v for v in string_terms.values() if v])

    # wrap every occurrence of the name terminal in a rule of its own, then ask the LALR tables about it
    count = [0]

    def mark(tree: Any) -> Any:
        if isinstance(tree, Tree):
            if (tree.data == "value" and len(tree.children) == 1 and isinstance(tree.children[0], Terminal)
                    and tree.children[0].name == name_terminal):
                count[0] += 1
                return Tree("value", [NonTerminal(f"{MARK}{count[0] - 1}")])
            return Tree(tree.data, [mark(c) for c in tree.children])
        return tree

    marked = [(str(name), params, mark(tree), options) for name, params, tree, options in rule_defs]
    wrappers = [(f"{MARK}{k}", (), Tree("expansions", [Tree("expansion", [Tree("value", [Terminal(name_terminal)])])]),
                 RuleOptions()) for k in range(count[0])]
    excluded = keywords_taken(marked + wrappers, copy.deepcopy(term_defs), ignore, start, name_regex, count[0])

    rules: dict[str, Node] = {}
    used: set[str] = set()
    for name, params, tree, _ in marked:
        if params:
            raise GrammarExportError(f"rule {name} is a template")
        rules[name] = _rule_node(tree, string_terms, excluded, used)
    keywords = frozenset(t for body in rules.values() for t in _texts(body) if name_regex.fullmatch(t))
    used.add(name_terminal)
    terminals: dict[str, Node] = {}
    not_followed_by: dict[str, frozenset[str]] = {}
    for name, tree in regex_terms.items():
        if name in used or name in ignore:
            translated = _terminal(tree, regex_terms)
            terminals[name] = translated.node
            if translated.not_followed_by:
                not_followed_by[name] = translated.not_followed_by
    for name in ignore:
        if name not in terminals:
            raise GrammarExportError(f"ignored terminal {name} is not a regex terminal")
    if ESCAPING_TERMINAL in terminals:
        terminals[ESCAPING_TERMINAL] = _only_known_escapes(terminals[ESCAPING_TERMINAL])
    return ConstraintGrammar(start, rules, terminals, tuple(ignore), name_terminal, keywords, not_followed_by)


def _string_terminal(tree: Any) -> str | None:
    """The text of a terminal defined as one plain string, else None."""
    literal = _single_literal(tree)
    if literal is None:
        return None
    pattern = _literal_to_pattern(literal)
    return pattern.value if isinstance(pattern, PatternStr) and not pattern.flags else None


def _single_literal(tree: Any) -> Token | None:
    while isinstance(tree, Tree) and tree.data in ("expansions", "expansion", "value") and len(tree.children) == 1:
        tree = tree.children[0]
    if isinstance(tree, Tree) and tree.data == "literal" and isinstance(tree.children[0], Token):
        return tree.children[0]
    return None


def _name_terminal(regex_terms: dict[str, Any], words: list[str]) -> tuple[str, re.Pattern[str]]:
    """The terminal that keywords collide with: the regex terminal matching the most keyword-like strings."""
    best: tuple[int, str, re.Pattern[str]] | None = None
    for name, tree in regex_terms.items():
        literal = _single_literal(tree)
        if literal is None or literal.type != "REGEXP":
            continue
        pattern = _literal_to_pattern(literal)
        compiled = re.compile(pattern.value)
        hits = sum(1 for w in words if compiled.fullmatch(w))
        if hits and (best is None or hits > best[0]):
            best = (hits, name, compiled)
    if best is None:
        raise GrammarExportError("no terminal matches the keywords: cannot tell names from keywords")
    return best[1], best[2]


def _rule_node(tree: Any, string_terms: dict[str, str], excluded: dict[int, frozenset[str]],
               used: set[str]) -> Node:
    def node(t: Any) -> Node:
        if isinstance(t, Tree):
            if t.data == "expansions":
                return choice(*(node(c) for c in t.children))
            if t.data == "alias":
                return node(t.children[0])  # the alias names a tree node; the language is the expansion's
            if t.data == "expansion":
                return seq(*(node(c) for c in t.children)) if t.children else EPSILON
            if t.data == "value":
                return node(t.children[0])
            if t.data == "maybe":
                return repeat(node(t.children[0]), 0, 1)
            if t.data == "expr":
                return _operator(node(t.children[0]), t.children[1:])
            if t.data == "literal":
                pattern = _literal_to_pattern(t.children[0])
                if not isinstance(pattern, PatternStr) or pattern.flags:
                    raise GrammarExportError(f"anonymous regex or flagged string in a rule: {t.children[0]}")
                return Text(pattern.value)
            raise GrammarExportError(f"unsupported grammar construct {t.data}")
        if isinstance(t, NonTerminal):
            if t.name.startswith(MARK):
                return Name(excluded[int(t.name[len(MARK):])])
            return Ref(t.name)
        if isinstance(t, Terminal):
            if t.name in string_terms:
                return Text(string_terms[t.name])
            used.add(t.name)
            return Term(t.name)
        raise GrammarExportError(f"unexpected grammar element {t!r}")

    return node(tree)


def _operator(item: Node, op: list[Any]) -> Node:
    if len(op) == 1 and str(op[0]) in ("*", "+", "?"):
        low, high = {"*": (0, None), "+": (1, None), "?": (0, 1)}[str(op[0])]
        return repeat(item, low, high)
    if len(op) == 2:  # item ~ n  or  item ~ n..m
        return repeat(item, int(op[0]), int(op[1]))
    if len(op) == 1:
        count = int(str(op[0]))
        return repeat(item, count, count)
    raise GrammarExportError(f"unsupported operator {op}")


def _terminal(tree: Any, regex_terms: dict[str, Any]) -> Translated:
    """A terminal at character level: its literals and the terminals it names, lookaheads compiled away."""

    def node(t: Any) -> Node:
        if isinstance(t, Tree):
            if t.data == "expansions":
                return choice(*(node(c) for c in t.children))
            if t.data == "expansion":
                return seq(*(node(c) for c in t.children)) if t.children else EPSILON
            if t.data == "value":
                return node(t.children[0])
            if t.data == "maybe":
                return repeat(node(t.children[0]), 0, 1)
            if t.data == "expr":
                return _operator(node(t.children[0]), t.children[1:])
            if t.data == "literal":
                pattern = _literal_to_pattern(t.children[0])
                if pattern.flags:
                    raise GrammarExportError(f"regex flags in terminal: {t.children[0]}")
                if isinstance(pattern, PatternStr):
                    return Text(pattern.value)
                try:
                    return regex_node(pattern.value)
                except UnsupportedPattern as e:
                    raise GrammarExportError(f"terminal regex {pattern.value!r}: {e}") from None
            raise GrammarExportError(f"unsupported terminal construct {t.data}")
        if isinstance(t, Terminal):
            return node(regex_terms[t.name])
        raise GrammarExportError(f"unexpected terminal element {t!r}")

    expression = node(tree)
    if _has_lookahead(expression):
        dfa = build_dfa(expression)
        return Translated(dfa.to_node(), dfa.pending_first_chars())
    return Translated(expression)


def _has_lookahead(node: Node) -> bool:
    from .nodes import NotAhead

    if isinstance(node, NotAhead):
        return True
    return any(_has_lookahead(c) for c in _children(node))


_BACKSLASH = chars([(92, 92)])
_HEX = chars([(48, 57), (65, 70), (97, 102)])


def _escape_node() -> Node:
    """What the parser decodes after a backslash (parser.ESCAPE_CHARS, or \\u and four hex digits that are
    not a surrogate)."""
    not_d = _without(_HEX, ["D", "d"])
    surrogate_free = choice(seq(not_d, _HEX, _HEX, _HEX), seq(chars([(68, 68), (100, 100)]), chars([(48, 55)]),
                                                                _HEX, _HEX))
    return choice(chars([(ord(c), ord(c)) for c in ESCAPE_CHARS]), seq(Text("u"), surrogate_free))


def _only_known_escapes(node: Node) -> Node:
    """`node` with each `\\` + any-character replaced by the escapes the parser decodes: the terminal's
    regex takes any escape, the parser reports an unknown one as SW1006."""
    escape = _escape_node()
    found = [False]

    def walk(n: Node) -> Node:
        if isinstance(n, Seq):
            items = [walk(i) for i in n.items]
            out: list[Node] = []
            index = 0
            while index < len(items):
                item = items[index]
                if item in (_BACKSLASH, Text("\\")) and index + 1 < len(items):
                    follower = items[index + 1]
                    if not isinstance(follower, Chars) or any(c not in follower for c in [*ESCAPE_CHARS, "u"]):
                        raise GrammarExportError("the escape after a backslash is not of the form \\[...]")
                    out += [item, escape]
                    found[0] = True
                    index += 2
                else:
                    out.append(item)
                    index += 1
            return seq(*out)
        if isinstance(n, Choice):
            return choice(*(walk(o) for o in n.options))
        if isinstance(n, Repeat):
            return repeat(walk(n.item), n.min, n.max)
        return n

    result = walk(node)
    if not found[0]:
        raise GrammarExportError(f"{ESCAPING_TERMINAL} has no backslash escape to narrow")
    return result


def names_except(name: Node, words: frozenset[str]) -> Node:
    """`name` (a first-character set, then any number of a second set) without the given words.

    Written as a trie: at each prefix of an excluded word, the name either ends (unless that prefix is
    itself excluded), continues with a character no excluded word continues with, or follows the trie."""
    if not words:
        return name
    if not (isinstance(name, Seq) and len(name.items) == 2 and isinstance(name.items[0], Chars)
            and isinstance(name.items[1], Repeat) and isinstance(name.items[1].item, Chars)
            and (name.items[1].min, name.items[1].max) == (0, None)):
        raise GrammarExportError("the name terminal is not of the form [first][rest]*")
    first, rest = name.items[0], name.items[1].item
    tail = name.items[1]

    def branch(prefix: str, allowed: Chars) -> Node:
        continuing = sorted({w[len(prefix)] for w in words if len(w) > len(prefix) and w.startswith(prefix)})
        options: list[Node] = []
        others = _without(allowed, continuing)
        if others.ranges:
            options.append(seq(others, tail))
        for ch in continuing:
            if ch in allowed:
                options.append(seq(Text(ch), branch(prefix + ch, rest)))
        # the name may also end here, unless this prefix is itself an excluded word
        return repeat(choice(*options), 0, 1) if prefix and prefix not in words else choice(*options)

    return branch("", first)


def _without(charset: Chars, removed: list[str]) -> Chars:
    result = list(charset.ranges)
    for ch in removed:
        point = ord(ch)
        split: list[tuple[int, int]] = []
        for low, high in result:
            if low <= point <= high:
                if low < point:
                    split.append((low, point - 1))
                if point < high:
                    split.append((point + 1, high))
            else:
                split.append((low, high))
        result = split
    return chars(result)
