"""Syntax errors in words people know: common mistakes named from a table of examples, as Lark names its own.

A slip (where the parser could not take a token) is named by finding a malformed example that slips the
same way: in the same parser state, with the same tokens acceptable next — the rule of Lark's
`UnexpectedInput.match_examples`, which Lark uses for the mistakes in its own grammar files (here the
state is the LALR state the slip happened in, and each example is parsed once, by the same loop). Some
mistakes are one token whatever the state (`else`, `=>`, `&&`); their entries say which token, and
their examples show it. A keyword met in a block it does not belong in is named from the grammar itself
(which block's items begin with it). A character the lexer cannot read at all is named by the character
(`'`, `;`, `!`). Anything else gets "unexpected ..." and the tokens the parser expected, in words, never
by Lark's internal terminal names.

Each named mistake also says how it is usually mended (`fix`): the tokens that take its place, or that
go before it. Recovery (recovery.py) tries that repair first, so the parser reads on in step with what
the author meant and the next error it reports is a mistake of its own, not a consequence of this one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from . import ast
from .lalr import END, NAME, SHIFTED, Repair, Slip, Tables, step


@dataclass(frozen=True)
class SyntaxProblem:
    """A named syntax error: its code, message and help, over [start, end) of the source text."""

    code: str
    message: str
    start: int
    end: int
    help: str = ""


WORD = "a word"  # a Mistake's token_type for a name or a keyword written where a name goes
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Mistake:
    """One common mistake: what it is called, and malformed examples that fail the way it does.

    `message` and `help` may name the offending token as `{token}`. With `tokens`, only a slip on one
    of those very tokens is this mistake; `before` and `after` are text that must surround it (the `-` of a
    `->` the lexer split, the `>` of `=>`), and the reported span takes them in. With `anywhere`, the
    token alone names the mistake, in whatever state the parser met it. `fix` is the usual mend: the
    terminals (written as their literal text, or by name) that replace the token and `after`, or, with
    `keep`, that go before the token.
    """

    code: str
    message: str
    help: str
    examples: tuple[str, ...]
    tokens: tuple[str, ...] = ()
    token_type: str | None = None
    before: str = ""
    after: str = ""
    anywhere: bool = False
    fix: tuple[str, ...] | None = None
    keep: bool = False
    skip_block: bool = False  # the mend: read on after the block the token opens ('{' ... its '}')
    takes: str = ""  # a token the parser must take where the slip is (with `anywhere`: what places it)
    mid_statement: bool = False  # the slip is inside a statement: a '}' could not close a block there

    def fits(self, slip: Slip, text: str, tables: Tables | None = None) -> bool:
        if self.tokens and slip.value not in self.tokens:
            return False
        if self.takes and (tables is None or tables.literal_kinds.get(self.takes) not in slip.accepts):
            return False
        if self.mid_statement and (tables is None or tables.literal_kinds.get("}") in slip.accepts):
            return False
        if self.token_type == WORD:  # a name, or a keyword the author used as one (a state called `model`)
            if not _IDENTIFIER.fullmatch(slip.value):
                return False
        elif self.token_type is not None and slip.kind != self.token_type:
            return False
        return (text[slip.start - len(self.before) : slip.start] == self.before
                and text[slip.end : slip.end + len(self.after)] == self.after)

    def problem(self, slip: Slip, text: str) -> SyntaxProblem:
        """The problem, `{token}` in its words the token, `{word}` the word before it (a ':''s keyword)."""
        start, end = slip.start - len(self.before), slip.end + len(self.after)
        words = {"token": slip.value, "word": _word_before(text, slip.start)}
        return SyntaxProblem(self.code, self.message.format(**words), start, end, self.help.format(**words))

    def repairs(self, slip: Slip, tables: Tables, text: str) -> tuple[Repair, ...]:
        if self.skip_block:
            return (Repair(block_end(text, slip.start)),)
        if self.fix is None:
            return ()
        inserts = tuple(tables.literal_kinds.get(t, t) for t in self.fix)
        return (Repair(slip.start if self.keep else slip.end + len(self.after), inserts),)


# ---- the examples --------------------------------------------------------------------------------
#
# LALR states tell apart what a block's last item ended with — a name, a string, the `]` of a list of
# one or of two — so the examples are built from small lists of forms, every form in every context.


def _machine(*items: str) -> str:
    return "machine m {\n" + "\n".join(items) + "\n}\n"


def _state(*items: str) -> str:
    return _machine("start state s {", *items, "}", "final state b")


def _each(forms: Iterable[str], *contexts: str) -> tuple[str, ...]:
    """Every context (a text with `@` where the form goes) with every form in it."""
    shown = tuple(forms)
    return tuple(context.replace("@", form) for context in contexts for form in shown)


def _lists(item: str, other: str) -> tuple[str, ...]:
    """A bracketed list in each form the grammar tells apart: empty, one or two items, a trailing comma."""
    return ("[]", f"[{item}]", f"[{item}, {other}]", f"[{item},]", f"[{item}, {other},]")


# What an expression can end with: the parser meets the mistake right after one of these.
_EXPRESSION_ENDS = ("x", "x.f", "x[0]", "f(x)", "f()", "f(x, y)", "(x)", '"s"', "1", "1.5", "true", "false",
                    "none", *_lists("x", "y"), "-x", "not x", "x + y", "x * y", "x in y",
                    "x not in y", "x and y", "x or y", "x is T", "x is not T", "all(x for x in y)",
                    "f(x.f for x in y.f)", "x == f(y for y in z)",
                    *(f"x == {end}" for end in ("y", '"s"', "1", "1.5", "true", "none", "y.f", "f(y)", "[]", "-1")))
# Where a guard expression stands: a `when`, and the places inside one an expression can nest.
_GUARDS = (_state("when @ -> b"), _state("when f(@ -> b"), _state("when f(y, @ -> b"),
           _state("when [@ -> b"), _state("when [y, @ -> b"), _state("when y[@ -> b"),
           _state("when (@ -> b"), _state("call t(a = @)"), _state("call t(z = 1, a = @)"))
# What a value (a default, a tool option, test data) can end with.
_VALUES = ('"x"', '"""x"""', "1", "1.5", "-1", "true", "false", "none", *_lists("1", "2"), "{}", "{ a 1 }",
           "{ a: 1 }", "{ a 1, b 2 }", "{ a 1, }")
# What each kind of block can hold last, before the next declaration (`#` here) is met where its '}'
# should be.
_STATE_ITEMS = ("agent w", 'do "x"', 'do """x"""', "output T", "output list[T]", "output T?",
                'output "a" | "b"', "output A | B", "output A | B | C", *(f"tell {v}" for v in _lists("w", "v")), "visits 2", "retries 2",
                "call t()", "call t(a = 1)", "call t(a = 1, b = 2)", "call t(a = 1,)", "call std.python()",
                'result "x"', "-> b", "-> b max 2", "when x -> b", "when x -> b max 2", "otherwise -> b",
                "otherwise -> b max 1", "otherwise stay", "otherwise stay max 1")
_AGENT_ITEMS = ('prompt "x"', 'model "x"', "temperature 0.5", "temperature 1", "memory all",
                "memory last 2", *(f"tools {v}" for v in _lists("t", "std.python")),
                *(f"fallbacks {v}" for v in _lists('"x"', '"y"')))
_FIELDS = ("a: str", 'a: str "doc"', "a: list[str]", "a: str?", 'a: "x" | "y"', "a: T", "a: int in 1..5",
           "a: int in 1..", "a: float in -0.5..0.5", "a: str len ..80", 'a: str matches "x"',
           'a: str len 1..2 matches "x" "doc"')
_TEST_ITEMS = (*(f"input {v}" for v in _VALUES if v.startswith("{")), *(f"reply s {v}" for v in _VALUES),
               "reply s T { a 1 }", "reply s T {}",
               'verdict s "c"', "verdict s none", *(f"expect path {v}" for v in _lists("s", "b")),
               "expect final s", *(f"expect result {v}" for v in _VALUES), "expect failure steps",
               *(f"{item} {v}" for item in ("reply s", "expect result", "input")  # an object left open
                 for v in ("{ a 1", "{ a: 1", "{ a 1, b 2", "{ a { b 1 }")))
_OPEN_BLOCKS = (
    *_each(("", *_STATE_ITEMS), _machine("start state s {", "@", "#")),
    *_each(("", *_AGENT_ITEMS), _machine("agent w {", "@", "#")),
    # (right after the '{' of a type, limits or tool options, or inside an object, a keyword is read as the
    # name of a field, a limit, an option or a key: no example there)
    *_each(_FIELDS, _machine("type T {", "@", "#")),
    *_each(("steps 3", "cost_usd 0.5"), _machine("limits {", "@", "#")),
    *_each((f"x {v}" for v in _VALUES), _machine('tool t = "a:b" {', "@", "#")),
    *_each(("", *_TEST_ITEMS), _machine('test "t" {', "@", "#")),
)
# Keywords that begin a machine-level declaration: met where a block's items or its '}' are due, they
# most often mean that block was not closed.
_DECLARATION_KEYWORDS = ("start", "final", "state", "agent", "type", "tool", "test", "input", "limits",
                         "description", "verifier", "machine")
# Keywords followed by ':' as if they named a field (`output: Draft`): the value follows the keyword.
_KEYWORD_COLONS = (
    *_each(("agent: w", 'do: "x"', 'ask: "x"', "output: T", "tell: [w]", "visits: 2", "retries: 2",
            'result: "x"', 'fail: "x"', 'model: "x"', "parallel: [w]", "join: all"), _state("@")),
    *_each(('prompt: "x"', 'model: "x"', "temperature: 0.5", "memory: all", "tools: [t]", 'fallbacks: ["x"]'),
           _machine("agent w {", "@", "}")),
    *_each(('description: "x"', 'model: "x"', "temperature: 0.5"), _machine("@")),
)

MISTAKES: tuple[Mistake, ...] = (
    Mistake("SW1014", "'=>' is not an arrow", "write '->'", (_state("when x => b"), _state("=> b")),
            tokens=("=",), after=">", anywhere=True, fix=("->",)),
    Mistake("SW1002", "unexpected '->'", "an expression is missing before '->'",
            (_state("when -> b"), _state("when x and -> b")), tokens=(">",), before="-", anywhere=True,
            fix=(NAME, "->")),
    Mistake("SW1011", "'else' is not a keyword", "write 'otherwise -> STATE' or 'otherwise stay'",
            (_state("else -> b"), _state("agent w", "else -> b")), tokens=("else",), anywhere=True, fix=("otherwise",)),
    Mistake("SW1012", "'||' is not an operator here", "write 'or'", (_state("when x || y -> b"),),
            tokens=("|",), after="|", anywhere=True, fix=("or",)),  # '|' is a token (enums); '&' never is
    Mistake("SW1010", "'=' used as a comparison", "compare with '=='",
            _each((f"{end} = 1" for end in _EXPRESSION_ENDS), *_GUARDS), tokens=("=",), fix=("COMPARE",)),
    Mistake("SW1013", "missing 'state' keyword", "write 'state {token}' after 'start' or 'final'",
            (_machine("final done"), _machine("start done"), _machine("start final done"),
             _machine("final start done")), token_type=WORD, fix=("state",), keep=True),
    Mistake("SW1014", "missing '->' before the target state", "write '-> {token}'",
            _each((f"{end} b" for end in _EXPRESSION_ENDS), _state("when @")), token_type=WORD,
            fix=("->",), keep=True, anywhere=True, takes="->", mid_statement=True),
    Mistake("SW1015", "':' cannot start a block", "use braces: NAME {{ ... }}",
            (_machine("state s:"), _machine("start state s:"), _machine("final state s:"), _machine("agent w:"),
             _machine("type T:"), _machine("limits:"), _machine('test "t":'), "machine m:",
             _machine('tool t = "a:b" :'), _machine("tool t:"), _machine('test "t" {', "input:")),
            tokens=(":",), fix=("{",)),
    Mistake("SW1002", "a secret is named, not written: {token} is a string",
            "list the environment variable's name without quotes, e.g. secrets [SEARCH_API_KEY]; its value is "
            "read when the run starts",
            _each(('"K"', '"""K"""'), *(_machine(f"tool {tool} {{", f"secrets [{before}@]", "}")
                                        for tool in ("std.http_get", 't = "a:b"') for before in ("", "A, "))),
            token_type=None, tokens=(), fix=(NAME,)),
    # files that use files, and states that run machines
    Mistake("SW1002", "'use' lines come before 'machine'",
            "move this line above 'machine NAME {{': a file names the files it uses first",
            (_machine('use "x.fsm"'), _machine('state s { -> b }', 'use "x.fsm"'), _machine("input a: str",
                                                                                   'use "x.fsm" as y')),
            tokens=("use",)),
    Mistake("SW1002", "the path of a 'use' is a string", 'write it in quotes: use "{token}.fsm"',
            ("use x\nmachine m {}", "use teams\nmachine m {}"), token_type="NAME", fix=("STRING",)),
    Mistake("SW1002", "'run' needs its arguments in parentheses", "write 'run NAME(input = ...)', or 'run NAME()'",
            (_state("run r -> b"), _state("run r"), _state("run r when x -> b"), _state("run r otherwise -> b")),
            tokens=("->", "}", "when", "otherwise"), fix=("(", ")"), keep=True),
    Mistake("SW1002", "'returns' is a setting of the machine", "move 'returns TYPE' out of the state, to the machine's "
            "settings (beside its inputs)", (_state("returns T"), _state("agent w", "returns T")), tokens=("returns",)),
    Mistake("SW1002", "unexpected token '{token}'", "the block before this line may be missing its closing '}}'",
            tuple(block.replace("\n#\n", "\nstate x\n") for block in _OPEN_BLOCKS), tokens=_DECLARATION_KEYWORDS,
            fix=("}",), keep=True),
    Mistake("SW1031", "an agent is declared in the machine's block, not in a state",
            "declare 'agent {word} {{ ... }}' beside the states, and name it in the state: 'agent {word}'",
            (_state("agent w {", "}"), _state('do "x"', "agent w {", "}")), tokens=("{",), skip_block=True),
    Mistake("SW1030", "'{word}' takes no ':'", "drop the colon: the value follows '{word}' directly",
            _KEYWORD_COLONS, tokens=(":",), fix=()),
)

# Characters no token starts with, each with its usual cause and mend (the terminals that replace it).
_CHARACTERS = {
    "&&": ("SW1012", "'&&' is not an operator here", "write 'and'", ("and",)),
    "||": ("SW1012", "'||' is not an operator here", "write 'or'", ("or",)),
    "!": ("SW1012", "'!' is not an operator here", "write 'not' (or '!=' for 'not equal')", ("not",)),
    "&": ("SW1012", "'&' is not an operator here", "write 'and'", ("and",)),
    "'": ("SW1001", "unexpected character \"'\"",
          'strings use double quotes: "text" (or """text""" over several lines)', ("STRING",)),
    ";": ("SW1001", "unexpected character ';'", "statements need no ';': each one starts with its keyword; remove it",
          ()),
}

# Terminals in words; a terminal written as a literal in the grammar is shown as that literal.
_TERMINAL_WORDS = {
    "NAME": "a name",
    "STRING": "a string",
    "LONG_STRING": "a string",
    "INT": "a whole number",
    "FLOAT": "a number",
    "COMPARE": "a comparison ('==', '<', ...)",
    "ADD_OP": "'+' or '-'",
    "MUL_OP": "'*', '/' or '%'",
    "START": "'start'",
    "FINAL": "'final'",
    "NONE": "'none'",
    "$END": "the end of the file",
}


# ---- naming a slip -------------------------------------------------------------------------------

ExampleSlip = Callable[[str], "Slip | None"]


Naming = tuple[SyntaxProblem, Sequence[Repair]]


def name_syntax_error(slip: Slip, text: str, tables: Tables, example_slip: ExampleSlip) -> list[Naming]:
    """What a slip in `text` may be, most likely first: each a named problem and the repairs that mend its
    usual cause (recovery reports the first whose repair reads on, or one with none); `example_slip`
    parses an example the same way and returns its first slip (None if it parses)."""
    if slip.kind == "":
        return [_unexpected_character(slip, text, tables)]
    if slip.kind == END:
        return [_unexpected_end(slip, text, tables)]
    if slip.accepts == {END}:
        return [_after_the_machine(slip, text, tables)]
    if _quote_inside_string(slip, text):
        return [(SyntaxProblem("SW1033", "a '\"' inside the string ends it", slip.start - 1, slip.start,
                               'write \\" for a quote inside a string, or use """triple quotes"""'),
                 (Repair(_line_end(text, slip.start)),))]
    dangling = _arrow_without_target(slip, text)
    if dangling is not None:
        return [dangling]
    candidates = [m for m in MISTAKES if m.fits(slip, text, tables)]
    named = [_named(m, slip, text, tables) for m in candidates if m.anywhere]
    named += [_named(m, slip, text, tables) for m in candidates
              if not m.anywhere and (slip.state, slip.accepts) in _example_states(m, example_slip, tables)]
    misplaced = _misplaced_keyword(slip, tables)
    if misplaced is not None:
        named.append((misplaced, ()))
    if named:
        return named
    # a '{' that opens no block here: one too many (`{{`), else what it holds is read past, so that its
    # statements are no errors of their own
    skip = (Repair(slip.end), Repair(block_end(text, slip.start))) if slip.value == "{" else ()
    return [(SyntaxProblem("SW1002", f"unexpected {_token_kind(slip.kind)} '{_shown(slip.value)}'", slip.start,
                           slip.end, expected_text(tables, slip.accepts)), skip)]


_BARE_ARROW = re.compile(r'->[ \t]*(?:#[^\n"]*)?$')


def _arrow_without_target(slip: Slip, text: str) -> Naming | None:
    """`when x ->` at the end of a line: the parser reads the first word of the next line (`when`,
    `otherwise`, ...) as the target and slips later on that line, or slips on the next line's first token
    (a `}`); the mistake is the arrow's."""
    line_start = text.rfind("\n", 0, slip.start) + 1
    lead = text[line_start:slip.start]
    word = re.match(r"[ \t]*([A-Za-z_]+)", lead)
    repairs: tuple[Repair, ...] = ()
    if word is not None and word.group(1) in ast.STATE_ITEM_KEYWORDS:
        first = word.group(1)
    elif not lead.strip() and NAME in slip.accepts:
        first = _shown(slip.value)
        repairs = (Repair(slip.start, (NAME,)),)  # a target, and the token reads on
    else:
        return None
    end = line_start - 1  # the line before, blank lines passed over
    while end > 0 and not text[text.rfind("\n", 0, end) + 1 : end].strip():
        end = text.rfind("\n", 0, end)
    before = _BARE_ARROW.search(text, text.rfind("\n", 0, max(end, 0)) + 1, max(end, 0))
    if before is None:
        return None
    return (SyntaxProblem("SW1002", "'->' has no target state", before.start(), before.start() + 2,
                          f"write the state this transition goes to after '->', on the same line ('{first}' on "
                          "the next line is not one)"), repairs)


def _unexpected_end(slip: Slip, text: str, tables: Tables) -> Naming:
    end = len(text)
    if not text.strip(" \t\r\n\ufeff"):
        return SyntaxProblem("SW1003", "the file is empty", 0, 0,
                             "a statewright file holds one machine: machine NAME { ... }"), ()
    if tables.literal_kinds.get("}") in slip.accepts:
        return SyntaxProblem("SW1003", "unexpected end of file", end, end,
                             "the file ends inside a block: a '}' is missing"), ()
    return SyntaxProblem("SW1003", "unexpected end of file", end, end,
                         _joined(expected_text(tables, slip.accepts), "a '}' may be missing")), ()


# strings (even one left open) and comments, whose braces are text; and braces. Loops unrolled, as the
# grammar's strings are, so that a long string costs the scanner no memory.
_SKIPPED = re.compile(r'"""[^"]*(?:"(?!"")[^"]*)*(?:"""|\Z)|"[^"\\\n]*(?:\\.[^"\\\n]*)*"?|#[^\n]*|[{}]')


def block_end(text: str, start: int) -> int:
    """Where the block opened by the '{' at `start` ends: past its matching '}' (braces in strings and
    comments not counted), or the end of the text."""
    depth = 0
    for m in _SKIPPED.finditer(text, start):
        if m.group() == "{":
            depth += 1
        elif m.group() == "}":
            depth -= 1
            if depth == 0:
                return m.end()
    return len(text)


def _after_the_machine(slip: Slip, text: str, tables: Tables) -> Naming:
    """Text after the machine's closing brace: reported at that brace, which is most often one too many
    (a block above closed twice); the parser reads on as if the machine's block were still open."""
    if slip.value == "}":
        return SyntaxProblem("SW1032", "one '}' too many: the machine's block has ended", slip.start, slip.end,
                             "remove this '}': a block above is already closed"), (Repair(slip.end),)
    brace = text.rfind("}", 0, slip.start)
    reopened = _machine_opened(tables)
    repairs = (Repair(slip.start, (), reopened),) if reopened is not None else (Repair(-1),)
    if brace >= 0 and not _code_between(text, brace + 1, slip.start):
        return SyntaxProblem("SW1032", "the machine's block ends here, but the file goes on", brace, brace + 1,
                             "this '}' may be one too many (a block above closed twice): the machine ends at "
                             "its last '}'"), repairs
    return SyntaxProblem("SW1032", f"'{_shown(slip.value)}' after the end of the machine", slip.start, slip.end,
                         "the machine's block ends at its last '}': a '}' above may be one too many, or this "
                         "belongs inside the machine"), repairs


@lru_cache(maxsize=4)
def _machine_opened(tables: Tables) -> tuple[Any, ...] | None:
    """The parser's states right after `machine NAME {`: where the machine's items are read."""
    states = [tables.start_state]
    for kind in (tables.literal_kinds.get("machine", ""), NAME, tables.literal_kinds.get("{", "")):
        if step(tables, states, kind) != SHIFTED:
            return None
    return tuple(states)


_CODE_GAP = re.compile(r"(?:\s|#[^\n]*)*")


def _code_between(text: str, start: int, end: int) -> bool:
    """Whether there is code (not whitespace or comments) in text[start:end]."""
    return _CODE_GAP.match(text, start, end).end() < end  # type: ignore[union-attr]


def _quote_inside_string(slip: Slip, text: str) -> bool:
    """Whether the slip is right after a double-quoted string, on its line, where the author most likely
    meant the quote that ended the string to be part of it (`do "say "hi" now"`)."""
    if slip.start == 0 or text[slip.start - 1] != '"' or text.startswith('"""', max(0, slip.start - 3)):
        return False
    return slip.kind not in ("STRING", "LONG_STRING") and '"' in text[slip.start:_line_end(text, slip.start)]


def _line_end(text: str, pos: int) -> int:
    end = text.find("\n", pos)
    return len(text) if end < 0 else end


def _named(mistake: Mistake, slip: Slip, text: str, tables: Tables) -> Naming:
    return mistake.problem(slip, text), mistake.repairs(slip, tables, text)


def _word_before(text: str, pos: int) -> str:
    """The word (a name or keyword) that ends right before `pos`, spaces between left out."""
    end = len(text[:pos].rstrip())
    start = end
    while start > 0 and (text[start - 1].isalnum() or text[start - 1] == "_"):
        start -= 1
    return text[start:end]


def _shown(value: str) -> str:
    return value if len(value) <= 40 else value[:37] + "..."


def _joined(first: str, second: str) -> str:
    return f"{first}; {second}" if first else second


_STATES: dict[Mistake, frozenset[tuple[object, frozenset[str]]]] = {}


def _example_states(mistake: Mistake, example_slip: ExampleSlip, tables: Tables
                    ) -> frozenset[tuple[object, frozenset[str]]]:
    """Where the examples of `mistake` slip on it (worked out the first time the mistake is a candidate)."""
    found = _STATES.get(mistake)
    if found is None:
        places = set()
        for example in mistake.examples:
            slip = example_slip(example)
            # an example counts where it slips on the mistake itself, not on a token after it
            if slip is not None and slip.kind not in ("", END) and mistake.fits(slip, example, tables):
                places.add((slip.state, slip.accepts))
        found = _STATES[mistake] = frozenset(places)
    return found


def _unexpected_character(slip: Slip, text: str, tables: Tables) -> Naming:
    pos = slip.start
    ch = text[pos] if pos < len(text) else ""
    if ch == '"':
        if text.startswith('"""', pos):  # it runs to the end of the file: nothing after it can be read
            return SyntaxProblem("SW1004", "unterminated string", pos, len(text),
                                 'close the string with """'), (Repair(-1),)
        line_end = text.find("\n", pos)
        end = len(text) if line_end < 0 else line_end
        return SyntaxProblem("SW1004", "unterminated string", pos, end,
                             'close the string with a matching quote; use """triple quotes""" for text over '
                             "several lines"), (Repair(end, ("STRING",)),)
    for chars in (text[pos : pos + 2], ch):
        if chars in _CHARACTERS:
            code, message, help, fix = _CHARACTERS[chars]
            end = pos + len(chars)
            if chars == "'":  # a single-quoted string: up to its closing quote on the same line
                close = text.find("'", pos + 1, max(pos + 1, text.find("\n", pos) % (len(text) + 1)))
                end = close + 1 if close > 0 else end
            inserts = tuple(tables.literal_kinds.get(t, t) for t in fix)
            return SyntaxProblem(code, message, pos, pos + len(chars), help), (Repair(end, inserts),)
    shown = repr(ch) if ch.isprintable() and ch else f"U+{ord(ch):04X}" if ch else "end of file"
    return SyntaxProblem("SW1001", f"unexpected character {shown}", pos, pos + 1,
                         expected_text(tables, slip.accepts)), ()


# ---- keywords in the wrong block -----------------------------------------------------------------

# The blocks whose items begin with a keyword, as the grammar has them, and how a message calls each.
_BLOCKS = {"_machine_item": "the machine's block", "_state_item": "a state", "_agent_item": "an agent",
           "_test_item": "a test", "_tool_item": "a tool's options"}


def _misplaced_keyword(slip: Slip, tables: Tables) -> SyntaxProblem | None:
    """A keyword that begins an item of another kind of block than the one the parser is in (`prompt` in
    a state, `do` in an agent), named from the grammar: the block it is in is the one whose every item's
    first keyword the parser would take here."""
    kind = tables.literal_kinds.get(slip.value)
    if kind is None:
        return None
    firsts = _block_firsts(tables)
    here = [block for block, first in firsts.items() if first <= slip.accepts]
    there = [block for block, first in firsts.items() if kind in first and block not in here]
    if not here or not there:
        return None
    current = max(here, key=lambda block: len(firsts[block]))
    places = " or ".join(_BLOCKS[block] for block in there)
    return SyntaxProblem("SW1031", f"'{slip.value}' does not belong in {_BLOCKS[current]}", slip.start, slip.end,
                         f"'{slip.value}' is written in {places}: move it there")


@lru_cache(maxsize=4)
def _block_firsts(tables: Tables) -> dict[str, frozenset[str]]:
    """For each block of _BLOCKS, the terminals its items can begin with (FIRST sets over the rules)."""
    rules: dict[str, list[tuple[Any, ...]]] = {}
    for rule in tables.rules:
        rules.setdefault(rule.origin.name, []).append(tuple(rule.expansion))
    nullable = {name for name, expansions in rules.items() if () in expansions}
    first: dict[str, set[str]] = {name: set() for name in rules}
    changed = True
    while changed:  # to a fixed point: the grammar is small
        changed = False
        for name, expansions in rules.items():
            for expansion in expansions:
                for sym in expansion:
                    found = {sym.name} if sym.is_term else first.get(sym.name, set())
                    if not found <= first[name]:
                        first[name] |= found
                        changed = True
                    if sym.is_term or sym.name not in nullable:
                        break
                else:
                    if name not in nullable:
                        nullable.add(name)
                        changed = True
    return {block: frozenset(first[block]) for block in _BLOCKS if block in first}


def _token_kind(kind: str) -> str:
    return {"NAME": "name", "STRING": "string", "LONG_STRING": "string", "INT": "number",
            "FLOAT": "number"}.get(kind, "token")


def expected_text(tables: Tables, names: Iterable[str]) -> str:
    """'expected one of: ...' for a set of terminal names, in words."""
    literals = {kind: text for text, kind in tables.literal_kinds.items()}
    words = sorted({_terminal_word(literals, name) for name in names},
                   key=lambda w: (w.startswith("'"), w))  # names of things first, then punctuation and keywords
    if not words:
        return ""
    if len(words) == 1:
        return f"expected {words[0]}"
    if len(words) > 12:
        words = words[:12] + ["..."]
    return "expected one of: " + ", ".join(words)


def _terminal_word(literals: dict[str, str], name: str) -> str:
    if name in _TERMINAL_WORDS:
        return _TERMINAL_WORDS[name]
    literal = literals.get(name)
    return f"'{literal}'" if literal is not None else name.lower()
