"""The parse loop: one loop that reads a token, reduces and builds the syntax tree, over Lark's table.

Lark's own parser reads a token through a lexer thread, a post-lexer generator and a contextual lexer,
and feeds it to a parser state that calls each rule's callback; that is a dozen Python calls a token
before any work is done, and most of the time a large file takes to parse. This loop does the same work
in one function, over the same table and the same scanners, shaping each rule's children as Lark's tree
builder does: it reads every token Lark's contextual lexer would read and makes every reduction Lark's
parser would make, in the same order, and calls the builder's method for each rule it reduces.

It covers a file that parses. When it meets a token the parser cannot take, it stops (SyntaxStop), and
the caller runs Lark's own parser on the file to name the error: error messages are made from Lark's
exceptions and its interactive parser, and a file with an error is small work.

Each value on the stack has the place of its text beside it: a token's own, a reduced rule's from its
first child with a place to its last, tokens filtered out of its children included (what Lark's
propagated positions say). A `?rule: other` whose one child is its value keeps the child's place; a rule
that keeps one child of several (`?atom: "(" expr ")"`) gives that node its own place, the brackets
included, as Lark's "containers" do, while the node's own span stays its text. A builder method gets the
place of the rule it builds as its Meta. (Lark also writes a container's place into the meta of an empty
rule passed through so; this grammar has no such rule, and the differential test would show one.)
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from typing import Any

from lark import Lark, Token, Tree
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


PASS, BUILD, TREE = 0, 1, 2  # what a reduction makes: its one child, a builder method's node, a Tree to splice


class Rows(dict):  # type: ignore[type-arg]
    """The parse table's rows, each made on first use: a shift or a goto is the next state; a reduction
    is its plan, a tuple (what, size, rule name, method, kept children, spliced children, single, name)."""

    def __init__(self, tables: Tables) -> None:
        super().__init__()
        self.tables = tables

    def __missing__(self, state: Any) -> dict[str, Any]:
        row = self[state] = {
            symbol: self.tables.plan(arg) if action is not Shift else arg
            for symbol, (action, arg) in self.tables.states[state].items()
        }
        return row


class Tables:
    """What the loop reads, taken once from a built Lark parser.

    `methods` are the builder's methods by rule name; each rule's children are shaped as Lark's tree
    builder shapes them (anonymous tokens filtered out, `_inlined` rules spliced in, a `?rule` with one
    child passed through), and a rule with no method becomes a Tree its parent splices in. `keywords` are
    the keyword terminals that are read as a name where only a name can go (`_keyword_as_name`); a token
    of `names_before_colon` is a name when the next code after it is a ':' (the post-lexer,
    `_FieldNamesPostLex`). A parser built with options the loop does not reproduce is refused.
    """

    def __init__(self, parser: Lark, methods: dict[str, Callable[..., Any]], keywords: frozenset[str],
                 names_before_colon: frozenset[str], colon_follows: Callable[[str, int], bool]) -> None:
        if parser.options.maybe_placeholders:
            raise TypeError("the parse loop does not write Lark's placeholders (maybe_placeholders)")
        table = parser.parser.parser.parser.parse_table
        self.states: dict[Any, dict[str, tuple[Any, Any]]] = table.states
        self.rows = Rows(self)
        self.start_state = table.start_states["start"]
        self.end_state = table.end_states["start"]
        self.methods = methods
        self.keywords = keywords
        self.names_before_colon = names_before_colon
        self.colon_follows = colon_follows
        contextual = parser.parser.lexer.lexer  # behind the post-lexer
        self.state_lexers = contextual.lexers
        root = contextual.root_lexer
        self.patterns = [mre.match for mre in root.scanner._mres]
        self.ignored: frozenset[str] = root.ignore_types
        # the scanner with the whitespace before a token skipped in the same match (one match a token, not
        # two). Whitespace is ignored, and in this grammar no other terminal begins with it (checked here
        # for each whitespace character), so skipping it reads the same tokens; where the scanner then
        # finds nothing, it backs off into the whitespace and reads a WS token, which is skipped as any is.
        self.spaced = None
        space = next((t for t in root.terminals if t.name == "WS" and t.name in self.ignored), None)
        if space is not None and len(root.scanner._mres) == 1:
            mre = root.scanner._mres[0]
            alone = all((found := mre.match(c + "x")) is not None and found.lastgroup == "WS" for c in " \t\n\r\f")
            if alone:
                self.spaced = re.compile(f"(?:{space.pattern.to_regexp()})?(?:{mre.pattern})", mre.flags).match
        # a terminal whose pattern also matches the strings of other terminals (a name that spells a
        # keyword): the scanner reads the pattern, and its callback reads such a string as the other one
        self.spelled: dict[str, dict[str, str]] = {}
        for kind, callback in root.callback.items():
            terminals = getattr(getattr(callback, "scanner", None), "terminals", None)
            if terminals is None or any(t.pattern.type != "str" or t.pattern.flags for t in terminals):
                raise TypeError(f"the parse loop reads no lexer callback but Lark's own keywords ({kind})")
            self.spelled[kind] = {t.pattern.value: t.name for t in terminals}

    def plan(self, rule: Any) -> tuple[Any, ...]:
        """How a reduction by `rule` makes its value (ParseTreeBuilder's wrappers, without placeholders)."""
        options, expansion = rule.options, rule.expansion
        name = rule.alias or options.template_source or rule.origin.name
        include = [(i, not sym.is_term and sym.name.startswith("_")) for i, sym in enumerate(expansion)
                   if options.keep_all_tokens or not (sym.is_term and sym.filter_out)]
        single = bool(options.expand1 and not rule.alias)
        if single and len(expansion) == 1 and include == [(0, False)]:
            return (PASS, 1, rule.origin.name, None, None, None, True, name)
        keep = splice = None
        if any(spliced for _, spliced in include):
            splice = tuple(include)
        elif len(include) < len(expansion):
            kept = [i for i, _ in include]
            keep = operator.itemgetter(*kept) if len(kept) > 1 else _one(kept[0]) if kept else _none
        method = None if name.startswith("_") else self.methods.get(name)
        return (BUILD if method is not None else TREE, len(expansion), rule.origin.name, method, keep, splice,
                single, name)


def _one(i: int) -> Callable[[list[Any]], tuple[Any, ...]]:
    return lambda children: (children[i],)


def _none(children: list[Any]) -> tuple[Any, ...]:
    return ()


def drive(tables: Tables, text: str, builder: Any) -> tuple[Any, list[tuple[str, int, int]]]:
    """The value of the start rule for `text`, and the comments read (text, start, end).

    Raises SyntaxStop where the parser cannot take a token, and whatever the builder's methods raise.
    """
    rows = tables.rows
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
    spaced = tables.spaced
    while True:
        row = rows[state_stack[-1]]
        # ---- read the next token, as the contextual lexer reads it in this state
        m = None if spaced is None or pos >= n else spaced(text, pos)
        if m is not None:
            kind = m.lastgroup or ""
            value = m.group(kind)
            end = m.end()
            pos = end - len(value)
        elif pos >= n:
            kind, value, end = END, "", pos
        else:
            m = _root_match(patterns, text, pos)
            if m is None:
                kind, value, end = _state_read(tables, state_stack[-1], text, pos)
            else:
                kind, value, end = m.lastgroup, m.group(), m.end()  # type: ignore[assignment]
        if kind not in ignored:
            if kind in spelled:
                named = spelled[kind].get(value)
                if named is not None and named in row:
                    kind = named
            if kind not in row and kind != NAME and kind != END:  # the state's own scanner may read another
                kind, value, end = _state_read(tables, state_stack[-1], text, pos)
        if kind in ignored:
            if kind == "COMMENT":
                comments.append((value, pos, end))
            pos = end
            continue
        if kind in names_before_colon and colon_follows(text, end):
            kind = NAME
        tok = _new_str(Token, value)  # token(kind, value, pos, end), inline
        tok.type, tok.value, tok.start_pos, tok.end_pos = kind, value, pos, end
        tok.line = tok.column = tok.end_line = tok.end_column = None
        # ---- reduce as far as the token asks, then shift it
        while True:
            action = row.get(kind)
            if action is None:
                if kind in keywords and _accepts_name(tables, state_stack):
                    kind = NAME  # a keyword where only a name can go is the name (_keyword_as_name)
                    tok = token(kind, value, pos, end)
                    continue
                raise SyntaxStop(pos)
            if type(action) is not tuple:  # shift
                state_stack.append(action)
                values.append(tok)
                starts.append(pos)
                ends.append(end)
                break
            what, size, origin, method, keep, splice, single, name = action
            if what == PASS:  # the one child is the value, in the same place
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
                if keep is not None:
                    children = keep(children)  # an itemgetter: a tuple of the children kept
                elif splice is not None:
                    children = _spliced(children, splice)
                if single and len(children) == 1:
                    child = children[0]
                    values.append(child)
                    if isinstance(child, Token):  # a token passed through keeps its own place, as in Lark
                        start, stop = child.start_pos or 0, child.end_pos or 0
                elif method is not None:
                    values.append(method(builder, Meta(start, stop, start < 0), *children))
                else:
                    values.append(Tree(name, children if type(children) is list else list(children)))
                starts.append(start)
                ends.append(stop)
            state_stack.append(rows[state_stack[-1]][origin])
            if kind == END and state_stack[-1] == end_state:
                return values[-1], comments
            row = rows[state_stack[-1]]
        pos = end


def _spliced(children: list[Any], splice: tuple[tuple[int, bool], ...]) -> list[Any]:
    """The children kept, an `_inlined` rule's Tree replaced by its own children. As in Lark, a first
    spliced Tree lends its list, which grows in place: a left-recursive list stays linear to build."""
    shaped: list[Any] = []
    for i, spliced in splice:
        if not spliced:
            shaped.append(children[i])
        elif shaped:
            shaped += children[i].children
        else:
            shaped = children[i].children
    return shaped


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
        kind = str(callback(token(kind, value, pos, pos + len(value))).type)
    return kind, value, pos + len(value)


def _accepts_name(tables: Tables, state_stack: list[Any]) -> bool:
    """Whether a name fed here would be shifted, after the reductions it asks for (what Lark's
    InteractiveParser.accepts finds, without copying the values)."""
    rows = tables.rows
    stack = list(state_stack)
    while True:
        action = rows[stack[-1]].get(NAME)
        if action is None:
            return False
        if type(action) is not tuple:
            return True
        size, origin = action[1], action[2]
        del stack[len(stack) - size:]
        stack.append(rows[stack[-1]][origin])
