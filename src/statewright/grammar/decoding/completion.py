"""Finishing a draft that stopped early: the shortest text the grammar allows after it.

A grammar-constrained draft is always the beginning of some machine, but a token limit can cut it off
anywhere: inside a string, between a guard and its arrow, four blocks deep. The draft is read by the
parser itself (the same LALR tables, the same keyword-as-name rule); an unfinished last token is closed
(a string) or dropped (half a keyword), and the shortest completion is read off the parser's stack: for
the items of each state, the cheapest way to finish the rule, then the rule around it. Placeholders are
plain (`x` for a name, `0`, `""`), so the compiler reports them honestly (an unknown state `x`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from lark import Lark, Token
from lark.exceptions import UnexpectedCharacters, UnexpectedToken
from lark.lexer import PatternStr

from ..parser import CONSTRAINT_KEYWORDS, _colon_follows
from .nodes import Chars, Choice, Node, NotAhead, Repeat, Seq, Text
from .terminals import regex_node

MAX_DEPTH = 400


@dataclass(frozen=True)
class Completion:
    text: str  # the finished source
    added: str  # what was appended
    dropped: str  # the unfinished end that was removed first ("" if none)


def complete_draft(text: str) -> Completion | None:
    """The draft finished, or None when it needs no finishing or is not the beginning of a machine."""
    from .. import parse_text

    if not any(d.code.startswith("SW10") for d in parse_text(text).diagnostics):
        return None
    finisher = _Finisher.get()
    original = text
    for _ in range(4):  # each round fixes the end once: a string closed, a half token dropped
        stack, stop = finisher.read(text)
        if stop is None:
            break
        _, position, fixed = stop
        if position < 0:
            return None  # a token the parser refuses before the end: not a cut-off draft
        text = text[:position] + fixed
    else:
        return None
    tokens = finisher.shortest_completion(stack)
    if tokens is None:
        return None
    # a newline first: it ends a comment the draft may stop in, and can separate any two tokens
    finished = text + "\n" + " ".join(tokens) + "\n"
    if any(d.code.startswith("SW1") for d in parse_text(finished).diagnostics):
        return None
    kept = len(os.path.commonprefix([original, finished]))
    return Completion(finished, finished[kept:], original[kept:])


class _Finisher:
    """The parser with its LALR states kept as item sets (Lark's debug tables), and the cheapest yields."""

    _instance: _Finisher | None = None

    @classmethod
    def get(cls) -> _Finisher:
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance

    def __init__(self) -> None:
        from ..parser import GRAMMAR_PATH

        self.parser = Lark(GRAMMAR_PATH.read_text(encoding="utf-8"), parser="lalr", lexer="contextual",
                           maybe_placeholders=False, debug=True)
        word = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
        self.keywords = {t.name for t in self.parser.terminals
                         if isinstance(t.pattern, PatternStr) and word.match(t.pattern.value)}
        self.placeholders = {t.name: _placeholder(t) for t in self.parser.terminals}
        table = self.parser.parser.parser.parser.parse_table  # the LALR table, states keyed by item set
        self.states: dict[Any, dict[str, tuple[Any, Any]]] = table.states
        self.rules = self.parser.rules
        self.cheapest = self._cheapest_yields()

    def read(self, text: str) -> tuple[list[Any], tuple[str, int, str] | None]:
        """Feed `text` to the parser. Returns the state stack, and where reading stopped early, as (kind,
        position, replacement): the text from `position` on is replaced. An unfinished string is closed; a
        last token the parser refuses (half a keyword, `-` of `->`) is dropped; a refused token before the
        end gives position -1."""
        interactive = self.parser.parse_interactive(text)
        tokens = interactive.lexer_thread.lex(interactive.parser_state)
        while True:
            try:
                token = next(tokens)
            except StopIteration:
                return list(interactive.parser_state.state_stack), None
            except UnexpectedCharacters as e:
                position = e.pos_in_stream or 0
                return [], ("chars", position, _closed(text[position:]))
            except UnexpectedToken as e:  # the lexer matched a terminal this parser state does not take
                if not self._as_name(interactive, e.token):
                    return [], self._refused(e.token, text)
                tokens = interactive.lexer_thread.lex(interactive.parser_state)  # resumes after the token
                continue
            if token.type in CONSTRAINT_KEYWORDS and _colon_follows(text, token.end_pos or 0):
                token = Token.new_borrow_pos("NAME", str(token), token)  # `len: int` names a field, as parsed
            try:
                interactive.feed_token(token)
            except UnexpectedToken:
                if not self._as_name(interactive, token):
                    return [], self._refused(token, text)

    def _as_name(self, interactive: Any, token: Token) -> bool:
        """As the parser does (parser._keyword_as_name): a refused keyword is fed as a name, if one fits."""
        if token.type not in self.keywords or "NAME" not in interactive.accepts():
            return False
        interactive.feed_token(Token.new_borrow_pos("NAME", str(token), token))
        return True

    @staticmethod
    def _refused(token: Token, text: str) -> tuple[str, int, str]:
        # the last token may be unfinished (half a keyword): drop it; one before the end is a real error
        last = not text[token.end_pos or 0 :].strip()  # nothing but the newline a draft ends with after it
        return ("token", token.start_pos or 0, "") if last else ("token", -1, "")

    # -- the shortest way to the end ----------------------------------------------------------------

    def _cheapest_yields(self) -> dict[str, tuple[int, list[str]]]:
        """For each nonterminal, its shortest derivation: (cost, terminal names)."""
        best: dict[str, tuple[int, list[str]]] = {}
        changed = True
        while changed:
            changed = False
            for rule in self.rules:
                found = self._cost(rule.expansion, best)
                if found is None:
                    continue
                name = rule.origin.name
                if name not in best or found[0] < best[name][0]:
                    best[name] = found
                    changed = True
        return best

    def _cost(self, symbols: Any, best: dict[str, tuple[int, list[str]]]) -> tuple[int, list[str]] | None:
        total, tokens = 0, []
        for symbol in symbols:
            if symbol.is_term:
                total += len(self.placeholders[symbol.name]) + 1
                tokens.append(symbol.name)
            elif symbol.name in best:
                total += best[symbol.name][0]
                tokens.extend(best[symbol.name][1])
            else:
                return None
        return total, tokens

    def shortest_completion(self, stack: list[Any]) -> list[str] | None:
        """The texts of the cheapest tokens that take the parser from `stack` to the end of the input."""
        memo: dict[tuple[int, ...], tuple[int, list[str]] | None] = {}
        ids: dict[Any, int] = {}

        def key(states: list[Any]) -> tuple[int, ...]:
            return tuple(ids.setdefault(id(s), len(ids)) for s in states)

        def finish(states: list[Any], depth: int) -> tuple[int, list[str]] | None:
            if depth > MAX_DEPTH:
                return None
            k = key(states)
            if k in memo:
                return memo[k]
            memo[k] = None  # a cycle back to this stack is no way out
            best: tuple[int, list[str]] | None = None
            for item in states[-1]:
                root = item.rule.origin.name.startswith("$root")
                if item.index == 0 and not root:
                    continue  # closure items: covered by the kernel item that predicts them
                rest = self._cost(item.rule.expansion[item.index:], self.cheapest)
                if rest is None:
                    continue
                if root:
                    found: tuple[int, list[str]] | None = rest
                else:
                    below = states[: len(states) - item.index]
                    action = self.states[below[-1]].get(item.rule.origin.name)
                    if action is None:
                        continue
                    after = finish([*below, action[1]], depth + 1)
                    found = None if after is None else (rest[0] + after[0], rest[1] + after[1])
                if found is not None and (best is None or found[0] < best[0]):
                    best = found
            memo[k] = best
            return best

        result = finish(stack, 0) if stack else None
        return None if result is None else [self.placeholders[t] for t in result[1]]


def _closed(tail: str) -> str:
    """An unfinished token at the end, finished: an open string closed; anything else dropped."""
    if tail.startswith('"""'):
        return tail + (' """' if tail.endswith('"') else '"""')
    if tail.startswith('"') and "\n" not in tail:
        tail = re.sub(r"\\u[0-9A-Fa-f]{0,3}\Z", "", tail)  # half a \uXXXX escape
        if (len(tail) - len(tail.rstrip("\\"))) % 2:
            tail = tail[:-1]  # half an escape
        return tail + '"'
    return ""


_PREFERRED = "x0"


def _placeholder(terminal: Any) -> str:
    """The shortest text of a terminal, preferring `x` and `0` where they fit."""
    if isinstance(terminal.pattern, PatternStr):
        return str(terminal.pattern.value)
    return _shortest(regex_node(terminal.pattern.value))


def _shortest(node: Node) -> str:
    if isinstance(node, Text):
        return node.value
    if isinstance(node, Chars):
        for ch in _PREFERRED:
            if ch in node:
                return ch
        point = node.ranges[0][0]
        return chr(max(point, 32)) if any(low <= max(point, 32) <= high for low, high in node.ranges) else chr(point)
    if isinstance(node, Seq):
        return "".join(_shortest(i) for i in node.items)
    if isinstance(node, Choice):
        return min((_shortest(o) for o in node.options), key=len)
    if isinstance(node, Repeat):
        return _shortest(node.item) * node.min
    if isinstance(node, NotAhead):
        return ""
    raise TypeError(node)
