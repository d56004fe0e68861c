"""The parse loop: reads a token, reduces and builds the syntax tree, over Lark's LALR table and scanners.

Lark's own parser reads a token through a lexer thread, a post-lexer generator and a contextual lexer,
and feeds it to a parser state that calls each rule's callback; building the same tree that way takes
about twice as long (bench/parse_loop.py measures both on a 10,000-state machine). This loop does the
same work over the same table and the same scanners, in the shape of Lark's: `read_token` is the
contextual lexer (it reads every token Lark's would read in that parser state), `feed_token` is Lark's
`ParserState.feed_token` (reduce as far as the token asks, then shift it) and `reduce` is one reduction,
shaping the rule's children as Lark's tree builder does and calling the builder's method for the rule.

Where the parser cannot take a token, the loop does not stop: it names the slip (the caller's `on_slip`
says what it is, and how it is usually mended), recovers (recovery.py), and reads on without building,
so that one run finds every syntax error of a file.

Each value on the stack has the place of its text beside it: a token's own, a reduced rule's from its
first child with a place to its last, tokens filtered out of its children included (what Lark's
propagated positions say). A `?rule: other` whose one child is its value keeps the child's place; a rule
that keeps one child of several (`?atom: "(" expr ")"`) gives that node its own place, the brackets
included, as Lark's "containers" do, while the node's own span stays its text. A builder method gets the
place of the rule it builds as its Meta.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from lark import Lark, Token, Tree
from lark.lexer import TextSlice
from lark.parsers.lalr_analysis import Shift

END = "$END"
NAME = "NAME"
_new_str = str.__new__
# The parser's stack grows by one or two states a level of nesting (a bracket, a `not`, a field's
# `list[`), and never deeper than this in a file the compiler accepts (parser.MAX_NESTING is 200): past
# it the parse stops, whatever the text, so that no input costs memory out of proportion to its nesting.
MAX_STACK = 1000


class BuildFailure(Exception):
    """A problem a builder method finds in what it builds (a bad escape, a number too long): reported as a
    diagnostic, after which the loop reads on without building."""

    def __init__(self, code: str, message: str, start: int, end: int, help: str = "") -> None:
        super().__init__(message)
        self.code, self.message, self.start, self.end, self.help = code, message, start, end, help


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
        self.rules = parser.rules
        self.keywords = keywords
        self.names_before_colon = names_before_colon
        self.colon_follows = colon_follows
        # each terminal written as a literal in the grammar, by its text: `{`, `->`, `state`
        self.literal_kinds = {t.pattern.value: t.name for t in parser.terminals if t.pattern.type == "str"}
        contextual = parser.parser.lexer.lexer  # behind the post-lexer
        self.state_lexers = contextual.lexers
        root = contextual.root_lexer
        self.patterns = [mre.match for mre in root.scanner._mres]
        self.ignored: frozenset[str] = root.ignore_types
        self.spaced = _spaced_scanner(root)
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

    def accepts(self, states: Sequence[Any]) -> frozenset[str]:
        """The terminals the parser would shift after the reductions each asks for, from this stack (what
        Lark's InteractiveParser.accepts finds, without copying values)."""
        return frozenset(kind for kind in self.rows[states[-1]] if kind.isupper() and shifts(self, states, kind))


def _spaced_scanner(root: Any) -> Callable[[str, int], Any] | None:
    """The scanner with the whitespace before a token skipped in the same match (one match a token, not
    two). Whitespace is ignored, and in this grammar no other terminal begins with it (checked here for each
    whitespace character), so skipping it reads the same tokens; where the scanner then finds nothing, it
    backs off into the whitespace and reads a WS token, which is skipped as any is."""
    space = next((t for t in root.terminals if t.name == "WS" and t.name in root.ignore_types), None)
    if space is None or len(root.scanner._mres) != 1:
        return None
    mre = root.scanner._mres[0]
    if not all((found := mre.match(c + "x")) is not None and found.lastgroup == "WS" for c in " \t\n\r\f"):
        return None
    return re.compile(f"(?:{space.pattern.to_regexp()})?(?:{mre.pattern})", mre.flags).match


def _one(i: int) -> Callable[[list[Any]], tuple[Any, ...]]:
    return lambda children: (children[i],)


def _none(children: list[Any]) -> tuple[Any, ...]:
    return ()


# ---- reading tokens ------------------------------------------------------------------------------


class Unreadable(Exception):
    """No terminal's scanner reads the text at `pos`."""

    def __init__(self, pos: int) -> None:
        super().__init__(pos)
        self.pos = pos


def read_token(tables: Tables, text: str, pos: int, state: Any,
               comments: list[tuple[str, int, int]] | None) -> tuple[str, str, int, int]:
    """The next token at or after `pos` as the contextual lexer reads it in parser `state`: its terminal,
    text, start and end (END, "" at the end of the text). Whitespace is skipped and comments are
    appended to `comments` (when it is given). Raises Unreadable where no scanner reads the text.

    The scanner of every terminal reads first: a state's scanner tries a subset of the same terminals in
    the same order, so it reads the same token whenever the terminal found is one the state takes; only
    a token the state does not take is read again by the state's own scanner, as Lark reads it there."""
    row = tables.rows[state]
    spaced = tables.spaced
    n = len(text)
    while True:
        m = None if spaced is None or pos >= n else spaced(text, pos)
        if m is not None:
            kind = m.lastgroup or ""
            value = m.group(kind)
            end = m.end()
            pos = end - len(value)
        elif pos >= n:
            return END, "", pos, pos
        else:
            m = _root_match(tables.patterns, text, pos)
            if m is None:
                kind, value, end = _state_read(tables, state, text, pos)
            else:
                kind, value, end = m.lastgroup, m.group(), m.end()  # type: ignore[assignment]
        if kind not in tables.ignored:
            if kind in tables.spelled:
                named = tables.spelled[kind].get(value)
                if named is not None and named in row:
                    kind = named
            if kind not in row and kind != NAME and kind != END:  # the state's own scanner may read another
                kind, value, end = _state_read(tables, state, text, pos)
        if kind in tables.ignored:
            if kind == "COMMENT" and comments is not None:
                comments.append((value, pos, end))
            pos = end
            continue
        if kind in tables.names_before_colon and tables.colon_follows(text, end):
            kind = NAME
        return kind, value, pos, end


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
        m = _root_match(tables.patterns, text, pos)
        if m is None:
            raise Unreadable(pos)
        kind, value = m.lastgroup, m.group()  # a token this state does not take: the parser says so
        return tables.spelled.get(kind, {}).get(value, kind), value, m.end()
    value, kind = found
    callback = lexer.callback.get(kind)
    if callback is not None:
        kind = str(callback(token(kind, value, pos, pos + len(value))).type)
    return kind, value, pos + len(value)


# ---- the stack, shift and reduce ----------------------------------------------------------------


class Stuck(Exception):
    """The parser cannot take the token fed to it (its stack is left where it stopped)."""


class TooDeep(Exception):
    """The stack grew past MAX_STACK."""


class ParseStack:
    """The stacks of one parse: parser states, values, and the place of each value (-1: none); and the
    last keyword read as a name (_keyword_as_name), with the states it was met in."""

    __slots__ = ("conversion", "ends", "failures", "starts", "states", "values")

    def __init__(self, states: list[Any]) -> None:
        self.states = states
        self.values: list[Any] = []
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.conversion: tuple[str, str, int, int, tuple[Any, ...]] | None = None  # the last one
        self.failures: list[BuildFailure] = []  # once there is one, nothing more is built


def feed_token(tables: Tables, stack: ParseStack, builder: Any, kind: str, value: str, start: int,
               end: int) -> bool:
    """Reduce as far as the token asks, then shift it, building as the rules reduce; True when it is the
    end of the text and the text is complete. Raises Stuck where the parser cannot take it."""
    rows = tables.rows
    states = stack.states
    while True:
        action = rows[states[-1]].get(kind)
        if action is None:
            if kind in tables.keywords and shifts(tables, states, NAME):
                # a keyword where only a name can go is the name (_keyword_as_name)
                stack.conversion = (kind, value, start, end, tuple(states))
                kind = NAME
                continue
            raise Stuck(kind)
        if type(action) is not tuple:  # shift
            tok = _new_str(Token, value)  # token(kind, value, start, end), inline: once a token
            tok.type, tok.value, tok.start_pos, tok.end_pos = kind, value, start, end
            tok.line = tok.column = tok.end_line = tok.end_column = None
            states.append(action)
            stack.values.append(tok)
            stack.starts.append(start)
            stack.ends.append(end)
            if len(states) > MAX_STACK:
                raise TooDeep()
            return False
        if action[0] == PASS:  # the one child is the value, in the same place
            del states[-1]
        else:
            reduce(stack, builder, action)
        states.append(rows[states[-1]][action[2]])
        if kind == END and states[-1] == tables.end_state:
            return True


def reduce(stack: ParseStack, builder: Any, plan: tuple[Any, ...]) -> None:
    """One reduction: the rule's children off the stack, its value and its place onto it (its new parser
    state is the caller's to push)."""
    _, size, _, method, keep, splice, single, name = plan
    values, starts, ends = stack.values, stack.starts, stack.ends
    start = stop = -1
    if size:
        children = values[-size:]
        for s in starts[-size:]:
            if s >= 0:
                start = s
                break
        if start >= 0:
            for e in reversed(ends[-size:]):
                if e >= 0:
                    stop = e
                    break
        del stack.states[-size:], values[-size:], starts[-size:], ends[-size:]
    else:
        children = []
    if keep is not None:
        children = keep(children)  # an itemgetter: a tuple of the children kept
    elif splice is not None:
        children = _spliced(children, splice)
    if single and len(children) == 1:
        child = children[0]
        values.append(child)
        if isinstance(child, Token):  # a token passed through keeps its own place, as in Lark
            start, stop = child.start_pos or 0, child.end_pos or 0
    elif method is not None and not stack.failures:
        try:
            values.append(method(builder, Meta(start, stop, start < 0), *children))
        except BuildFailure as failure:
            stack.failures.append(failure)
            values.append(None)
    elif method is not None:
        values.append(None)
    else:
        values.append(Tree(name, children if type(children) is list else list(children)))
    starts.append(start)
    ends.append(stop)


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


SHIFTED, ACCEPTED, REFUSED = 0, 1, 2


def step(tables: Tables, states: list[Any], kind: str, converted: list[tuple[Any, ...]] | None = None) -> int:
    """feed_token without building, on a stack of parser states alone (what the loop runs once it has met
    a syntax error, and what recovery tries): SHIFTED, ACCEPTED (the end of a complete text) or REFUSED,
    the stack then left where the parser stopped. A keyword read as a name appends the stack it was met
    with to `converted`."""
    rows = tables.rows
    while True:
        action = rows[states[-1]].get(kind)
        if action is None:
            if kind in tables.keywords and shifts(tables, states, NAME):
                if converted is not None:
                    converted.append(tuple(states))
                kind = NAME
                continue
            return REFUSED
        if type(action) is not tuple:
            states.append(action)
            return SHIFTED
        del states[len(states) - action[1]:]
        states.append(rows[states[-1]][action[2]])
        if kind == END and states[-1] == tables.end_state:
            return ACCEPTED


def shifts(tables: Tables, states: Sequence[Any], kind: str) -> bool:
    """Whether a token of `kind` fed here would be shifted, after the reductions it asks for."""
    rows = tables.rows
    stack = list(states)
    while True:
        action = rows[stack[-1]].get(kind)
        if action is None:
            return False
        if type(action) is not tuple:
            return True
        del stack[len(stack) - action[1]:]
        stack.append(rows[stack[-1]][action[2]])
        if kind == END and stack[-1] == tables.end_state:
            return True


# ---- the loop -------------------------------------------------------------------------------------


class Slip(NamedTuple):
    """Where the parser could not go on: the token it could not take (`kind` END at the end of the text;
    "" for a character no terminal reads, `value` then that character), and its stack of states there."""

    kind: str
    value: str
    start: int
    end: int
    states: tuple[Any, ...]
    accepts: frozenset[str]
    too_deep: bool = False

    @property
    def state(self) -> Any:
        return self.states[-1]


class Repair(NamedTuple):
    """A way to mend the text at a slip: read on from `resume` (past what the repair drops) after feeding
    the parser the terminals in `inserts` (which the text lacks); from the parser states `states` when
    given, instead of the slip's (a block the text closed too early, opened again). A `resume` below 0
    says that nothing after the slip can be read in step."""

    resume: int
    inserts: tuple[str, ...] = ()
    states: tuple[Any, ...] | None = None


# What `on_slip` says of a slip: what it may be, most likely first, each a problem to report (anything:
# the loop only collects it) and the repairs that mend its usual cause, tried before any other.
SlipNamer = Callable[[Slip], "Sequence[tuple[object, Sequence[Repair]]]"]


class Parsed(NamedTuple):
    """What a parse found: the start rule's value (None when the text has problems), the comments read,
    and the problems in the order they were met (BuildFailures and what `on_slip` named); with no
    `on_slip`, the parse stops at the first slip, given as `slip`."""

    value: Any
    comments: list[tuple[str, int, int]]
    problems: list[object]
    slip: Slip | None = None


def drive(tables: Tables, text: str, builder: Any, on_slip: SlipNamer | None = None,
          recovery: Callable[..., Any] | None = None) -> Parsed:
    """Parse `text`, building its tree with `builder`'s methods; every problem is collected, none raised
    (but what a builder method raises other than BuildFailure). With `on_slip`, the loop reads on after a
    slip through `recovery` (recovery.Recovery, given by the caller: recovery.py drives this module's
    tables, so this module does not import it)."""
    stack = ParseStack([tables.start_state])
    comments: list[tuple[str, int, int]] = []
    pos = 0
    try:
        while True:  # the hot loop: a token read, then fed (reduced as far as it asks, then shifted)
            kind, value, start, end = read_token(tables, text, pos, stack.states[-1], comments)
            if feed_token(tables, stack, builder, kind, value, start, end):
                return Parsed(None if stack.failures else stack.values[-1], comments, list(stack.failures))
            pos = end
            if stack.failures:
                break
    except Unreadable as e:
        slip = _slip(tables, stack.states, "", text[e.pos : e.pos + 1], e.pos, e.pos + 1)
    except Stuck:
        slip = _stuck_slip(tables, stack, text, kind, value, start, end)
    except TooDeep:
        slip = _slip(tables, stack.states, kind, value, start, end, too_deep=True)
    else:  # a builder method failed: the rest is read without building
        problems: list[object] = [*stack.failures, *_unbuilt_failures(stack, builder)]
        if on_slip is None:
            return Parsed(None, comments, problems)
        assert recovery is not None, "naming slips needs a recovery to read on with"
        return Parsed(None, comments, problems + recovery(tables, text, builder, on_slip).resume(stack.states, pos))
    problems = list(stack.failures)
    if on_slip is None:
        return Parsed(None, comments, problems, slip)
    assert recovery is not None, "naming slips needs a recovery to read on with"
    return Parsed(None, comments, problems + recovery(tables, text, builder, on_slip).run(slip))


def _unbuilt_failures(stack: ParseStack, builder: Any) -> list[BuildFailure]:
    """The failures of the tokens shifted but not yet built when building stopped (each token the loop
    reads from then on is checked as it is read)."""
    found = []
    for value in stack.values:
        if isinstance(value, Token):
            failure = builder.token_failure(value.type, str(value), value.start_pos)
            if failure is not None:
                found.append(failure)
    return found


def _slip(tables: Tables, states: Sequence[Any], kind: str, value: str, start: int, end: int,
          too_deep: bool = False) -> Slip:
    return Slip(kind, value, start, end, tuple(states), tables.accepts(states), too_deep)


def _stuck_slip(tables: Tables, stack: ParseStack, text: str, kind: str, value: str, start: int,
                end: int) -> Slip:
    """The slip where the parser stopped; if a keyword read as a name led straight into it on the same
    line, the keyword was the mistake (say, a missing '}' before `agent`): the slip is at the keyword."""
    if stack.conversion is not None:
        k_kind, k_value, k_start, k_end, k_states = stack.conversion
        if "\n" not in text[k_start:start]:
            return _slip(tables, k_states, k_kind, k_value, k_start, k_end)
    return _slip(tables, stack.states, kind, value, start, end)
