"""Syntax errors in words people know: common mistakes named from a table of examples, as Lark names its own.

A parse error is named by finding a malformed example that fails the same way: in the same parser state,
with the same tokens acceptable next — the rule of `UnexpectedInput.match_examples`, which Lark uses for
the mistakes in its own grammar files. (Lark 1.3 compares whole parser states there, stack depth
included, so an example would only match at its own nesting depth; here the state is the LALR state the
error happened in, and each example is parsed once.) Some mistakes are one token whatever the state (`else`, `=>`, `&&`); their
entries say which token, and their examples show it. A character the lexer cannot read at all is named by
the character (`'`, `;`, `!`). Anything else gets "unexpected ..." and the tokens the parser expected,
in words, never by Lark's internal terminal names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache

from lark import Lark, Token
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken


@dataclass(frozen=True)
class SyntaxProblem:
    """A named syntax error: its code, message and help, over [start, end) of the source text."""

    code: str
    message: str
    start: int
    end: int
    help: str = ""


@dataclass(frozen=True)
class Mistake:
    """One common mistake: what it is called, and malformed examples that fail the way it does.

    `message` and `help` may name the offending token as `{token}`. With `tokens`, only an error on one
    of those very tokens is this mistake; `before` and `after` are text that must surround it (the `-` of a
    `->` the lexer split, the `>` of `=>`), and the reported span takes them in. With `anywhere`, the
    token alone names the mistake, in whatever state the parser met it.
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

    def fits(self, tok: Token, text: str) -> bool:
        start, end = tok.start_pos or 0, tok.end_pos or 0
        if self.tokens and str(tok) not in self.tokens:
            return False
        if self.token_type is not None and tok.type != self.token_type:
            return False
        return (text[start - len(self.before) : start] == self.before
                and text[end : end + len(self.after)] == self.after)

    def problem(self, tok: Token) -> SyntaxProblem:
        start, end = (tok.start_pos or 0) - len(self.before), (tok.end_pos or 0) + len(self.after)
        value = str(tok)
        return SyntaxProblem(self.code, self.message.format(token=value), start, end,
                             self.help.format(token=value))


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
                    "none", *_lists("x", "y"), "-x", "not x", "x + y", "x * y", "x == y", "x in y",
                    "x not in y", "x and y", "x or y")
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

MISTAKES: tuple[Mistake, ...] = (
    Mistake("SW1014", "'=>' is not an arrow", "write '->'", (_state("when x => b"), _state("=> b")),
            tokens=("=",), after=">", anywhere=True),
    Mistake("SW1002", "unexpected '->'", "an expression is missing before '->'",
            (_state("when -> b"), _state("when x and -> b")), tokens=(">",), before="-", anywhere=True),
    Mistake("SW1011", "'else' is not a keyword", "write 'otherwise -> STATE' or 'otherwise stay'",
            (_state("else -> b"), _state("agent w", "else -> b")), tokens=("else",), anywhere=True),
    Mistake("SW1012", "'||' is not an operator here", "write 'or'", (_state("when x || y -> b"),),
            tokens=("|",), after="|", anywhere=True),  # '|' is a token (enums); '&' never is: see _CHARACTERS
    Mistake("SW1010", "'=' used as a comparison", "compare with '=='",
            _each((f"{end} = 1" for end in _EXPRESSION_ENDS), *_GUARDS), tokens=("=",)),
    Mistake("SW1013", "missing 'state' keyword", "write 'state {token}' after 'start' or 'final'",
            (_machine("final done"), _machine("start done"), _machine("start final done"),
             _machine("final start done")), token_type="NAME"),
    Mistake("SW1014", "missing '->' before the target state", "write '-> {token}'",
            _each((f"{end} b" for end in _EXPRESSION_ENDS), _state("when @")), token_type="NAME"),
    Mistake("SW1015", "':' cannot start a block", "use braces: NAME {{ ... }}",
            (_machine("state s:"), _machine("start state s:"), _machine("final state s:"), _machine("agent w:"),
             _machine("type T:"), _machine("limits:"), _machine('test "t":'), "machine m:",
             _machine('tool t = "a:b" :'), _machine("tool t:"), _machine('test "t" {', "input:")),
            tokens=(":",)),
    Mistake("SW1002", "a secret is named, not written: {token} is a string",
            "list the environment variable's name without quotes, e.g. secrets [SEARCH_API_KEY]; its value is "
            "read when the run starts",
            _each(('"K"', '"""K"""'), *(_machine(f"tool {tool} {{", f"secrets [{before}@]", "}")
                                        for tool in ("std.http_get", 't = "a:b"') for before in ("", "A, "))),
            token_type=None, tokens=()),
    # files that use files, and states that run machines
    Mistake("SW1002", "'use' lines come before 'machine'",
            "move this line above 'machine NAME {{': a file names the files it uses first",
            (_machine('use "x.fsm"'), _machine('state s { -> b }', 'use "x.fsm"'), _machine("input a: str",
                                                                                   'use "x.fsm" as y')),
            tokens=("use",)),
    Mistake("SW1002", "the path of a 'use' is a string", 'write it in quotes: use "{token}.fsm"',
            ("use x\nmachine m {}", "use teams\nmachine m {}"), token_type="NAME"),
    Mistake("SW1002", "'run' needs its arguments in parentheses", "write 'run NAME(input = ...)', or 'run NAME()'",
            (_state("run r -> b"), _state("run r"), _state("run r when x -> b"), _state("run r otherwise -> b")),
            tokens=("->", "}", "when", "otherwise")),
    Mistake("SW1002", "'returns' is a setting of the machine", "move 'returns TYPE' out of the state, to the machine's "
            "settings (beside its inputs)", (_state("returns T"), _state("agent w", "returns T")), tokens=("returns",)),
    Mistake("SW1002", "unexpected token '{token}'", "the block before this line may be missing its closing '}}'",
            tuple(block.replace("\n#\n", "\nstate x\n") for block in _OPEN_BLOCKS), tokens=_DECLARATION_KEYWORDS),
)

# Characters no token starts with, each with its usual cause.
_CHARACTERS = {
    "&&": ("SW1012", "'&&' is not an operator here", "write 'and'"),
    "||": ("SW1012", "'||' is not an operator here", "write 'or'"),
    "!": ("SW1012", "'!' is not an operator here", "write 'not' (or '!=' for 'not equal')"),
    "&": ("SW1012", "'&' is not an operator here", "write 'and'"),
    "'": ("SW1001", "unexpected character \"'\"",
          'strings use double quotes: "text" (or """text""" over several lines)'),
    ";": ("SW1001", "unexpected character ';'", "statements need no ';': each one starts with its keyword; remove it"),
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


# ---- naming an error -----------------------------------------------------------------------------

ExampleError = Callable[[str], "UnexpectedInput | None"]


def name_syntax_error(err: UnexpectedInput, text: str, parser: Lark, example_error: ExampleError
                      ) -> SyntaxProblem:
    """The named problem for a parse error in `text`; `example_error` parses an example the same way and
    returns its error (None if it parses)."""
    if isinstance(err, UnexpectedCharacters):
        return _unexpected_character(err, text, parser)
    if isinstance(err, UnexpectedEOF):
        end = len(text)
        return SyntaxProblem("SW1003", "unexpected end of file", end, end,
                             expected_text(parser, set(err.expected or ())) or "a '}' may be missing")
    assert isinstance(err, UnexpectedToken)
    tok = err.token
    accepts = set(err.accepts or err.expected or ())
    if tok.type == "$END":
        end = len(text)
        if not text.strip(" \t\r\n\ufeff"):
            return SyntaxProblem("SW1003", "the file is empty", 0, 0,
                                 "a statewright file holds one machine: machine NAME { ... }")
        return SyntaxProblem("SW1003", "unexpected end of file", end, end,
                             expected_text(parser, accepts) + "; a '}' may be missing")
    candidates = [m for m in MISTAKES if m.fits(tok, text)]
    for mistake in candidates:
        if mistake.anywhere:
            return mistake.problem(tok)
    where = _where(err)
    for mistake in candidates:
        if where in _example_states(mistake, example_error):
            return mistake.problem(tok)
    shown = str(tok) if len(str(tok)) <= 40 else str(tok)[:37] + "..."
    return SyntaxProblem("SW1002", f"unexpected {_token_kind(tok)} '{shown}'", tok.start_pos or 0,
                         tok.end_pos or 0, expected_text(parser, accepts))


def _where(err: UnexpectedInput) -> tuple[object, frozenset[str]]:
    """Where the parser was when it failed: its LALR state and the tokens it would have accepted."""
    state = getattr(err, "state", None)
    number = getattr(state, "position", state)  # a ParserState, or already a state number
    accepts = err.accepts if isinstance(err, UnexpectedToken) else getattr(err, "expected", ())
    return number, frozenset(accepts or ())


_STATES: dict[Mistake, frozenset[tuple[object, frozenset[str]]]] = {}


def _example_states(mistake: Mistake, example_error: ExampleError) -> frozenset[tuple[object, frozenset[str]]]:
    """Where the examples of `mistake` fail on it (worked out the first time the mistake is a candidate)."""
    found = _STATES.get(mistake)
    if found is None:
        places = set()
        for example in mistake.examples:
            e = example_error(example)
            # an example counts where it fails on the mistake itself, not on a token after it
            if e is not None and (not isinstance(e, UnexpectedToken) or mistake.fits(e.token, example)):
                places.add(_where(e))
        found = _STATES[mistake] = frozenset(places)
    return found


def _unexpected_character(err: UnexpectedCharacters, text: str, parser: Lark) -> SyntaxProblem:
    pos = err.pos_in_stream or 0
    ch = text[pos] if pos < len(text) else ""
    if ch == '"':
        line_end = text.find("\n", pos)
        end = len(text) if line_end < 0 or text.startswith('"""', pos) else line_end
        return SyntaxProblem("SW1004", "unterminated string", pos, end,
                             'close the string with a matching quote; use """triple quotes""" for text over '
                             "several lines")
    for chars in (text[pos : pos + 2], ch):
        if chars in _CHARACTERS:
            code, message, help = _CHARACTERS[chars]
            return SyntaxProblem(code, message, pos, pos + len(chars), help)
    shown = repr(ch) if ch.isprintable() and ch else f"U+{ord(ch):04X}" if ch else "end of file"
    return SyntaxProblem("SW1001", f"unexpected character {shown}", pos, pos + 1,
                         expected_text(parser, set(err.allowed or ())))


def _token_kind(tok: Token) -> str:
    return {"NAME": "name", "STRING": "string", "LONG_STRING": "string", "INT": "number",
            "FLOAT": "number"}.get(tok.type, "token")


def expected_text(parser: Lark, names: set[str]) -> str:
    """'expected one of: ...' for a set of terminal names, in words."""
    words = sorted({_terminal_word(parser, name) for name in names},
                   key=lambda w: (w.startswith("'"), w))  # names of things first, then punctuation and keywords
    if not words:
        return ""
    if len(words) == 1:
        return f"expected {words[0]}"
    if len(words) > 12:
        words = words[:12] + ["..."]
    return "expected one of: " + ", ".join(words)


def _terminal_word(parser: Lark, name: str) -> str:
    if name in _TERMINAL_WORDS:
        return _TERMINAL_WORDS[name]
    literal = _literals(parser).get(name)
    return f"'{literal}'" if literal is not None else name.lower()


@lru_cache(maxsize=4)
def _literals(parser: Lark) -> dict[str, str]:
    return {t.name: t.pattern.value for t in parser.terminals if t.pattern.type == "str"}
