"""The parse loop: one loop that reads a token, reduces and builds the syntax tree, over Lark's table.

Lark's own parser reads a token through a lexer thread, a post-lexer generator and a contextual lexer,
and feeds it to a parser state that calls each rule's callback; that is a dozen Python calls a token
before any work is done, and most of the time a large file takes to parse. This loop does the same work
in one function: the same table, the same scanners and the same rule callbacks, so it reads every token
Lark's contextual lexer would read and makes every reduction Lark's parser would make, in the same order.

It covers a file that parses. When it meets a token the parser cannot take, it stops (SyntaxStop), and
the caller runs Lark's own parser on the file to name the error: error messages are made from Lark's
exceptions and its interactive parser, and a file with an error is small work.

Each value on the stack has the place of its text beside it: a token's own, a reduced rule's from its
first child with a place to its last (what Lark's propagated positions say), a rule that passes its one
child through keeps the child's. The builder gets the place of the rule being reduced as `builder.meta`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lark import Lark, Token
from lark.lexer import TextSlice
from lark.parsers.lalr_analysis import Shift

END = "$END"
NAME = "NAME"
_new_str = str.__new__


class SyntaxStop(Exception):
    """The text does not parse here; Lark's parser will say why."""


class Meta:
    """Where the text of one reduced rule is: from its first token to its last, `empty` when it has none
    (what Lark's propagated positions would say, without building a parse tree to carry them)."""

    __slots__ = ("empty", "end_pos", "start_pos")

    def __init__(self, start_pos: int, end_pos: int, empty: bool) -> None:
        self.start_pos, self.end_pos, self.empty = start_pos, end_pos, empty


def token(kind: str, value: str, start: int, end: int) -> Token:
    """A Lark token with its offsets (lines and columns are not used past the lexer)."""
    tok = _new_str(Token, value)
    tok.type, tok.value, tok.start_pos, tok.end_pos = kind, value, start, end
    tok.line = tok.column = tok.end_line = tok.end_column = None
    return tok


class Tables:
    """What the loop reads, taken once from a built Lark parser.

    `reductions` maps each grammar rule to the callback that builds its value from its children (None for
    a rule that passes its one child through); `keywords` are the terminals a name may be read as where
    only a name can go (`_keyword_as_name`); a token of `names_before_colon` is a name when the next code
    after it is a ':' (the post-lexer's one look ahead, `_FieldNamesPostLex`).
    """

    def __init__(self, parser: Lark, reductions: dict[Any, Any], keywords: frozenset[str],
                 names_before_colon: frozenset[str], colon_follows: Callable[[str, int], bool]) -> None:
        table = parser.parser.parser.parser.parse_table
        self.states: dict[Any, dict[str, tuple[Any, Any]]] = table.states
        self.start_state = table.start_states["start"]
        self.end_state = table.end_states["start"]
        self.reductions = reductions
        self.rules: dict[Any, tuple[int, str, Any]] = {}  # keyed by the table's own rule objects
        self.keywords = keywords
        self.names_before_colon = names_before_colon
        self.colon_follows = colon_follows
        contextual = parser.parser.lexer.lexer  # behind the post-lexer
        self.state_lexers = contextual.lexers
        root = contextual.root_lexer
        self.patterns = [mre.match for mre in root.scanner._mres]
        self.ignored: frozenset[str] = root.ignore_types
        # a terminal whose pattern also matches the strings of other terminals (a name that spells a
        # keyword): the scanner reads the pattern, and its callback reads such a string as the other one
        self.spelled: dict[str, dict[str, str]] = {}
        for kind, callback in root.callback.items():
            terminals = getattr(getattr(callback, "scanner", None), "terminals", None)
            if terminals is None or any(t.pattern.type != "str" or t.pattern.flags for t in terminals):
                raise TypeError(f"the parse loop reads no lexer callback but Lark's own keywords ({kind})")
            self.spelled[kind] = {t.pattern.value: t.name for t in terminals}

    def rule(self, rule: Any) -> tuple[int, str, Any]:
        info = self.rules[rule] = (len(rule.expansion), rule.origin.name, self.reductions[rule])
        return info


def drive(tables: Tables, text: str, builder: Any) -> tuple[Any, list[tuple[str, int, int]]]:
    """The value of the start rule for `text`, and the comments read (text, start, end).

    Raises SyntaxStop where the parser cannot take a token, and whatever the rule callbacks raise.
    """
    states = tables.states
    rules = tables.rules
    ignored = tables.ignored
    spelled = tables.spelled
    keywords = tables.keywords
    names_before_colon = tables.names_before_colon
    colon_follows = tables.colon_follows
    end_state = tables.end_state
    state_stack: list[Any] = [tables.start_state]
    values: list[Any] = []
    starts: list[int] = []  # the place of each value: -1 when it has none
    ends: list[int] = []
    comments: list[tuple[str, int, int]] = []
    n = len(text)
    pos = 0
    patterns = tables.patterns
    single = patterns[0] if len(patterns) == 1 else None
    while True:
        row = states[state_stack[-1]]
        # ---- read the next token, as the contextual lexer reads it in this state
        if pos >= n:
            kind, value, end = END, "", pos
        else:
            m = single(text, pos) if single is not None else _root_match(patterns, text, pos)
            if m is None:
                kind, value, end = _state_read(tables, state_stack[-1], text, pos)
            else:
                kind, value, end = m.lastgroup, m.group(), m.end()  # type: ignore[assignment]
            if kind in ignored:
                if kind == "COMMENT":
                    comments.append((value, pos, end))
                pos = end
                continue
            if kind in spelled:
                named = spelled[kind].get(value)
                if named is not None and named in row:
                    kind = named
            if kind not in row and kind != NAME:  # the state's own scanner may read another terminal here
                kind, value, end = _state_read(tables, state_stack[-1], text, pos)
                if kind in ignored:
                    if kind == "COMMENT":
                        comments.append((value, pos, end))
                    pos = end
                    continue
            if kind in names_before_colon and colon_follows(text, end):
                kind = NAME
        tok = token(kind, value, pos, end)
        # ---- reduce as far as the token asks, then shift it
        while True:
            action = row.get(kind)
            if action is None:
                if kind in keywords and _accepts_name(tables, state_stack):
                    kind = NAME  # a keyword where only a name can go is the name (_keyword_as_name)
                    tok = token(kind, value, pos, end)
                    continue
                raise SyntaxStop(pos)
            act, arg = action
            if act is Shift:
                state_stack.append(arg)
                values.append(tok)
                starts.append(pos)
                ends.append(end)
                break
            info = rules.get(arg)
            if info is None:
                info = tables.rule(arg)
            size, origin, build = info
            if build is None:  # passes its one child through, in the same place
                del state_stack[-1]
            else:
                if size:
                    children = values[-size:]
                    start = stop = -1
                    for s in starts[-size:]:
                        if s >= 0:
                            start = s
                            break
                    if start >= 0:
                        for e in reversed(ends[-size:]):
                            if e >= 0:
                                stop = e
                                break
                    del state_stack[-size:], values[-size:], starts[-size:], ends[-size:]
                else:
                    children = []
                    start = stop = -1
                builder.meta = Meta(start, stop, start < 0)
                values.append(build(children))
                starts.append(start)
                ends.append(stop)
            state_stack.append(states[state_stack[-1]][origin][1])
            if kind == END and state_stack[-1] == end_state:
                return values[-1], comments
            row = states[state_stack[-1]]
        pos = end


def _root_match(patterns: list[Any], text: str, pos: int) -> Any:
    for match in patterns:
        m = match(text, pos)
        if m is not None:
            return m
    return None


def _state_read(tables: Tables, state: Any, text: str, pos: int) -> tuple[str, str, int]:
    """The token at `pos` read by the scanner of this parser state's terminals, as the contextual lexer
    reads it there: a token the scanner of every terminal reads as one the parser does not take here."""
    lexer = tables.state_lexers[state]
    found = lexer.match(TextSlice(text, 0, len(text)), pos)
    if found is None:
        raise SyntaxStop(pos)
    value, kind = found
    callback = lexer.callback.get(kind)
    if callback is not None:
        kind = callback(token(kind, value, pos, pos + len(value))).type
    return kind, value, pos + len(value)


def _accepts_name(tables: Tables, state_stack: list[Any]) -> bool:
    """Whether a name fed here would be shifted, after the reductions it asks for (what Lark's
    InteractiveParser.accepts finds, without copying the values)."""
    states = tables.states
    stack = list(state_stack)
    while True:
        action = states[stack[-1]].get(NAME)
        if action is None:
            return False
        act, arg = action
        if act is Shift:
            return True
        size, origin, _ = tables.rules.get(arg) or tables.rule(arg)
        if size:
            del stack[-size:]
        stack.append(states[stack[-1]][origin][1])
