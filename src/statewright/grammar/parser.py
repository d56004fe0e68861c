"""The parser front: source text in, syntax tree (or positioned diagnostics) out.

Lark types never leave the grammar package. The syntax tree is built while the text is parsed, by the
parse loop in lalr.py over Lark's table and scanners: each rule's reduction calls the builder's method of
that name with the rule's span and its children, so no intermediate parse tree is made and walked again,
and nothing recurses, however deeply the input nests. Lark's own parser runs only on a file that does not
parse, to name its error.
"""

from __future__ import annotations

import dataclasses
import gc
import re
import sys
import textwrap
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import field
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar

from lark import Lark, Token
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken
from lark.lexer import ContextualLexer

from ..cache_dir import cache_dir
from ..diagnostics import Diagnostics, SourceFile, Span
from . import ast
from .lalr import Meta, SyntaxStop, Tables, drive
from .node import Node, child_fields

GRAMMAR_PATH = Path(__file__).with_name("statewright.lark")
MAX_NESTING = 200
MAX_NUMBER_DIGITS = 100
_DURATION_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}  # `after 24h`: the units, in seconds
MAX_FILE_CHARS = 16 * 1024 * 1024


class ParseResult(Node, frozen=False):
    source: SourceFile
    machine: ast.Machine | None
    comments: list[ast.Comment] = field(default_factory=list)
    diagnostics: Diagnostics = field(default_factory=Diagnostics)


# The text being parsed in this thread (or task), for the post-lexer's one look ahead.
_PARSED_TEXT: ContextVar[str] = ContextVar("statewright_parsed_text", default="")
# Keywords that begin a constraint after a field's type (`in 1..5`, `len ..80`, `matches "..."`); the same
# word followed by ':' begins the next field instead, so that fields can still be called `len` or `in`.
CONSTRAINT_KEYWORDS = frozenset({"IN", "LEN", "MATCHES"})
_SPACE = " \t\r\n\f"


class _FieldNamesPostLex:
    """Reads a constraint keyword followed by ':' as the name of a field, and lets every state's lexer read
    a name, so that a keyword is only ever a whole word.

    After `a: str` the parser accepts a constraint (`len 1..80`) and the next field's name alike, so the
    contextual lexer reads `len` as the keyword; one look past the token, at the text, tells which it is.
    The grammar stays LALR(1) and readable: `field_decl: NAME ":" type_ref constraint* string?`.

    Lark's contextual lexer tries only the terminals the parser accepts where it is. After an expression
    that ends a statement (`for x in LIST max N`, `join first where GUARD`) it accepts the keywords a next
    statement begins with, and would read the `do` of a mistyped `done` as the keyword. With NAME always
    accepted, the lexer reads the whole word, and a name spelled as a keyword the parser accepts there
    still comes out as that keyword (Lark's rule for a string that its name pattern matches too).
    """

    always_accept: tuple[str, ...] = ("NAME",)

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        text = _PARSED_TEXT.get()
        for tok in stream:
            if tok.type in CONSTRAINT_KEYWORDS and _colon_follows(text, tok.end_pos or 0):
                tok = Token.new_borrow_pos("NAME", str(tok), tok)
            yield tok


def next_code(text: str, pos: int) -> int:
    """The offset of the first character of code at or after `pos`, past whitespace and comments."""
    while pos < len(text):
        if text[pos] in _SPACE:
            pos += 1
        elif text[pos] == "#":
            end = text.find("\n", pos)
            pos = len(text) if end < 0 else end
        else:
            break
    return pos


def _colon_follows(text: str, pos: int) -> bool:
    """Whether the next code after `pos` (past whitespace and comments) is a ':'."""
    return text.startswith(":", next_code(text, pos))


@contextmanager
def _parsing(text: str) -> Iterator[None]:
    token = _PARSED_TEXT.set(text)
    try:
        yield
    finally:
        _PARSED_TEXT.reset(token)


def build_parser(*, strict: bool = False, cache: bool = True) -> Lark:
    """The Lark parser for the grammar. Tests build it with strict=True so a grammar conflict fails CI."""
    options: dict[str, object] = {
        "parser": "lalr",
        "lexer": "contextual",
        "propagate_positions": False,  # the parse loop places every node (lalr.py)
        "maybe_placeholders": False,
        "postlex": _FieldNamesPostLex(),
        "strict": strict,
    }
    directory = cache_dir() if cache and not strict else None
    if directory is not None:  # a pickle: only ever loaded from this user's own directory (cache_dir.py)
        options["cache"] = str(directory / f".statewright-grammar-{_grammar_digest()}.lark")
    parser = Lark(GRAMMAR_PATH.read_text(encoding="utf-8"), **options)  # type: ignore[arg-type]
    parser.parser.parser.parser.callbacks = dict.fromkeys(parser.rules, _recognized)  # it only names errors
    contextual = getattr(parser.parser.lexer, "lexer", None)  # behind the post-lexer
    if isinstance(contextual, ContextualLexer):
        contextual.lex = _RootFirstLexer(contextual).lex  # type: ignore[method-assign]
    return parser


# A state's own scanner tries fewer terminals, so it reads faster once compiled: a state that has read
# this many tokens (a large file, or many files in one process) compiles it and reads with it from then on.
OWN_SCANNER_AFTER = 200


class _RootFirstLexer:
    """Lark's contextual lexer, reading each token with the one scanner of every terminal first.

    Lark's parser reads only a text that does not parse (to name its error) and the malformed examples
    of syntax_errors.py; the parse loop (lalr.py) reads every token the same way.
    The contextual lexer compiles a scanner for each set of terminals the parser accepts somewhere: some
    eighty regular expressions, compiled anew in every process the first time each is needed, which
    cost `check` more than the rest of its work on a typical file. The scanner of all terminals reads
    the same token whenever the terminal it finds is one the parser accepts there: a scanner tries its
    terminals in one order, and a state's scanner tries a subset of them in that order. So the token is
    read with it, and only a token the parser does not accept there (a keyword where a name goes, an
    error) is read again by the state's own scanner, exactly as Lark reads it. A state that reads many
    tokens compiles its own scanner after all (OWN_SCANNER_AFTER), which pays for itself there.
    """

    def __init__(self, contextual: ContextualLexer) -> None:
        self.contextual = contextual
        self.root = contextual.root_lexer
        self.accepted: dict[int, frozenset[str]] = {}
        self.reads: dict[int, int] = {}  # tokens read in each parser state, in this process

    def _accepts(self, state: int) -> frozenset[str]:
        found = self.accepted.get(state)
        if found is None:
            lexer = self.contextual.lexers[state]
            found = self.accepted[state] = frozenset(t.name for t in lexer.terminals)  # type: ignore[attr-defined]
        return found

    def lex(self, lexer_state: Any, parser_state: Any) -> Iterator[Token]:
        """ContextualLexer.lex, each token read by _next where it can be."""
        lexers = self.contextual.lexers
        reads = self.reads
        try:
            while True:
                state = parser_state.position
                token = None
                if reads.get(state, 0) < OWN_SCANNER_AFTER:
                    reads[state] = reads.get(state, 0) + 1
                    token = self._next(lexer_state, parser_state)
                if token is None:
                    token = lexers[state].next_token(lexer_state, parser_state)
                yield token
        except EOFError:
            pass
        except UnexpectedCharacters as e:
            # as Lark does: a terminal defined but not accepted here is an unexpected token, not characters
            try:
                last_token = lexer_state.last_token
                token = self.root.next_token(lexer_state, parser_state)
                raise UnexpectedToken(token, e.allowed, state=parser_state, token_history=[last_token],
                                      terminals_by_name=self.root.terminals_by_name) from None
            except UnexpectedCharacters:
                raise e from None

    def _next(self, lexer_state: Any, parser_state: Any) -> Token | None:
        """The next token read by the scanner of every terminal (BasicLexer.next_token's steps), or None,
        with nothing consumed, when it is not one the parser accepts here."""
        root: Any = self.root
        scanner = root.scanner
        callbacks = root.callback
        ignored, newlines = root.ignore_types, root.newline_types
        accepted = self._accepts(parser_state.position)
        line_ctr = lexer_state.line_ctr
        text = lexer_state.text
        while line_ctr.char_pos < text.end:
            found = scanner.match(text, line_ctr.char_pos)
            if found is None:
                return None
            value, kind = found
            if kind in ignored:  # whitespace and comments, accepted everywhere
                ignored_token = None
                if kind in callbacks:
                    ignored_token = Token(kind, value, line_ctr.char_pos, line_ctr.line, line_ctr.column)
                line_ctr.feed(value, kind in newlines)
                if ignored_token is not None:
                    ignored_token.end_line, ignored_token.end_column = line_ctr.line, line_ctr.column
                    ignored_token.end_pos = line_ctr.char_pos
                    callbacks[kind](ignored_token)
                continue
            token = Token(kind, value, line_ctr.char_pos, line_ctr.line, line_ctr.column)
            if kind in callbacks:
                token = callbacks[kind](token)  # a name that spells a keyword becomes the keyword
            if token.type not in accepted:
                return None
            line_ctr.feed(value, kind in newlines)
            token.end_line, token.end_column, token.end_pos = line_ctr.line, line_ctr.column, line_ctr.char_pos
            lexer_state.last_token = token
            return token
        raise EOFError(self)


@lru_cache(maxsize=1)
def _grammar_digest() -> str:
    import hashlib

    import lark

    text = GRAMMAR_PATH.read_bytes() + lark.__version__.encode()
    return hashlib.sha256(text).hexdigest()[:16]


@lru_cache(maxsize=1)
def _parser() -> Lark:
    """The one parser every call shares; Lark's parse keeps its state per call, so sharing it is safe."""
    try:
        return build_parser()
    except OSError:  # an unwritable cache directory must not break parsing
        return build_parser(cache=False)


# ---- strings -------------------------------------------------------------------------------------

_ESCAPES = {"\\": "\\", '"': '"', "n": "\n", "t": "\t", "r": "\r"}
_ESCAPE_RE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)", re.DOTALL)
# What decode_string accepts after a backslash: one of ESCAPE_CHARS, or 'u' and four hex digits (a lone
# surrogate is refused). Only ESCAPING_TERMINAL's tokens are decoded so; the decoding constraint
# (grammar/decoding) is built from these, so that a constrained draft cannot hold a bad escape.
ESCAPE_CHARS = frozenset(_ESCAPES)
ESCAPING_TERMINAL = "STRING"


class _BadEscape(Exception):
    def __init__(self, offset: int, text: str) -> None:
        self.offset = offset
        self.text = text


def decode_string(raw: str) -> str:
    """The value of a "double-quoted" string token (quotes included)."""
    body = raw[1:-1]

    def replace(m: re.Match[str]) -> str:
        esc = m.group(1)
        if esc in _ESCAPES:
            return _ESCAPES[esc]
        if esc.startswith("u") and len(esc) == 5:
            return chr(int(esc[1:], 16))
        raise _BadEscape(m.start() + 1, m.group(0))

    value = _ESCAPE_RE.sub(replace, body)
    if any("\ud800" <= ch <= "\udfff" for ch in value):
        value = _join_surrogates(raw, value)
    return value


def _join_surrogates(raw: str, value: str) -> str:
    """Join \\uD83D\\uDE00-style escape pairs into one character; a lone surrogate is an error."""
    joined = value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    if "\ufffd" in joined and "\ufffd" not in value:
        m = re.search(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}", raw)
        offset = m.start() if m else 1
        raise _BadEscape(offset, m.group(0) if m else "\\u")
    return joined


def decode_long_string(raw: str) -> str:
    """The value of a \"\"\"triple-quoted\"\"\" string: taken literally, common indentation removed.

    A line break right after the opening quotes and the whitespace before the closing quotes are dropped,
    so a block written indented inside a state reads back as the text the author meant.
    """
    body = raw[3:-3].replace("\r\n", "\n")
    body = body.removeprefix("\n")
    lines = body.split("\n")
    if len(lines) > 1 and lines[-1].strip() == "":
        lines[-1] = ""
    body = textwrap.dedent("\n".join(lines))
    return body.rstrip(" \t\n") if len(lines) > 1 else body


# ---- tree building -------------------------------------------------------------------------------


class _Failure(Exception):
    """A problem found while building the tree, reported as a diagnostic."""

    def __init__(self, code: str, message: str, start: int, end: int, help: str = "") -> None:
        self.code, self.message, self.start, self.end, self.help = code, message, start, end, help


_E = TypeVar("_E", bound=BaseException)


def _detached(err: _E) -> _E:
    """`err` without the frames it was raised through and the exceptions it was raised while handling.

    An exception kept after its `except` block refers, through its traceback's frames, to the locals
    that keep it: a reference cycle that only the cyclic garbage collector frees, and the compiler's
    stages run with the collector paused (paused_gc)."""
    err.__traceback__ = None
    err.__context__ = None
    err.__cause__ = None
    return err


def _recognized(children: list[Any]) -> None:
    """Lark's parser only recognises (to name a syntax error): its reductions build nothing."""


@lru_cache(maxsize=1)
def _tables() -> Tables:
    parser = _parser()
    methods = {name: f for name, f in vars(_BuildAst).items() if callable(f) and not name.startswith("_")}
    return Tables(parser, methods, _keyword_terminals(parser), CONSTRAINT_KEYWORDS, _colon_follows)


def _build(source: SourceFile) -> tuple[ast.Machine, list[tuple[str, int, int]]]:
    """The syntax tree of a file and its comments (text, start, end); raises SyntaxStop where the text
    does not parse, and _Failure for a problem found while building (a bad escape, a huge number)."""
    return drive(_tables(), source.text, _BuildAst(source))  # type: ignore[no-any-return]


class _BuildAst:
    """Builds the syntax tree of one source file; one builder per parse, so parses never share one."""

    def __init__(self, source: SourceFile) -> None:
        self.source = source

    def _span(self, meta: Meta) -> Span:
        if meta.empty:
            return self.source.span(0, 0)
        return self.source.span(meta.start_pos, meta.end_pos)

    def _tok_span(self, tok: Token) -> Span:
        return self.source.span(tok.start_pos or 0, tok.end_pos or 0)

    def _name(self, tok: Token) -> ast.Name:
        # A name is interned: every mention of a state, agent or type is then the same string, so the
        # compiler's lookups by name compare pointers and touch one string, not two (a large machine's
        # passes read far more names than fit in the processor's cache)
        return ast.Name(sys.intern(str(tok)), self._tok_span(tok))

    # tokens and literals
    def string(self, meta: Meta, tok: Token) -> ast.String:
        raw = str(tok)
        try:
            if tok.type == "LONG_STRING":
                return ast.String(decode_long_string(raw), True, self._tok_span(tok))
            return ast.String(decode_string(raw), False, self._tok_span(tok))
        except _BadEscape as e:
            start = (tok.start_pos or 0) + e.offset
            raise _Failure(
                "SW1006", f"invalid escape sequence '{e.text}'", start, start + len(e.text),
                help='use \\\\ for a backslash, or a """triple-quoted""" string, which takes backslashes literally',
            ) from None

    def number(self, meta: Meta | None, tok: Token) -> ast.Number:
        text = str(tok)
        if len(text) > MAX_NUMBER_DIGITS:
            start = tok.start_pos or 0
            raise _Failure("SW3015", f"a number with {len(text):,} digits is out of range", start,
                           start + len(text), help=f"numbers have at most {MAX_NUMBER_DIGITS} digits")
        value: int | float = int(text) if tok.type == "INT" else float(text)
        return ast.Number(value, self._tok_span(tok))

    # machine
    def start(self, meta: Meta, *parts: Any) -> ast.Machine:
        *uses, machine = parts
        return dataclasses.replace(machine, uses=tuple(uses)) if uses else machine  # type: ignore[no-any-return]

    # files that use files
    def use_decl(self, meta: Meta, path: ast.String, *rest: Any) -> ast.UseDecl:
        alias = next((self._name(r) for r in rest if isinstance(r, Token)), None)
        names = next((r for r in rest if isinstance(r, tuple)), None)
        return ast.UseDecl(path, alias, names, self._span(meta))

    def use_names(self, meta: Meta, *names: ast.ToolName | None) -> tuple[ast.ToolName, ...]:
        return tuple(n for n in names if n is not None)

    def returns_setting(self, meta: Meta, type_: ast.TypeRef) -> ast.ReturnsSetting:
        return ast.ReturnsSetting(type_, self._span(meta))

    def run_call(self, meta: Meta, machine: Token, *args: ast.CallArg | None) -> ast.RunCall:
        return ast.RunCall(self._name(machine), tuple(a for a in args if a is not None), self._span(meta))

    def machine(self, meta: Meta, name: Token, *items: object) -> ast.Machine:
        return ast.Machine(self._name(name), tuple(items), self._span(meta))  # type: ignore[arg-type]

    def description(self, meta: Meta, text: ast.String) -> ast.Description:
        return ast.Description(text, self._span(meta))

    def input_decl(self, meta: Meta, name: Token, type_: ast.TypeRef, *rest: object) -> ast.InputDecl:
        constraints = tuple(r for r in rest if isinstance(r, ast.Constraint))
        default = next((r for r in rest if isinstance(r, ast.Value)), None)
        return ast.InputDecl(self._name(name), type_, default, constraints, span=self._span(meta))

    def model_setting(self, meta: Meta, model: ast.String) -> ast.ModelSetting:
        return ast.ModelSetting(model, self._span(meta))

    def verifier_model_setting(self, meta: Meta, model: ast.String) -> ast.VerifierModelSetting:
        return ast.VerifierModelSetting(model, self._span(meta))

    def temperature_setting(self, meta: Meta, value: ast.Number) -> ast.TemperatureSetting:
        return ast.TemperatureSetting(value, self._span(meta))

    def limits(self, meta: Meta, *items: ast.Limit) -> ast.Limits:
        return ast.Limits(tuple(items), self._span(meta))

    def limit(self, meta: Meta, name: Token, value: ast.Number) -> ast.Limit:
        return ast.Limit(self._name(name), value, self._span(meta))

    # types
    def type_decl(self, meta: Meta, name: Token, *fields: ast.FieldDecl) -> ast.TypeDecl:
        return ast.TypeDecl(self._name(name), tuple(fields), self._span(meta))

    def field_decl(self, meta: Meta, name: Token, type_: ast.TypeRef, *rest: object) -> ast.FieldDecl:
        constraints = tuple(r for r in rest if isinstance(r, ast.Constraint))
        doc = next((r for r in rest if isinstance(r, ast.String)), None)
        return ast.FieldDecl(self._name(name), type_, doc, constraints, span=self._span(meta))

    def range_constraint(self, meta: Meta, range_: ast.Range) -> ast.Constraint:
        return ast.Constraint("in", range_, None, self._span(meta))

    def length_constraint(self, meta: Meta, range_: ast.Range) -> ast.Constraint:
        return ast.Constraint("len", range_, None, self._span(meta))

    def pattern_constraint(self, meta: Meta, pattern: ast.String) -> ast.Constraint:
        return ast.Constraint("matches", None, pattern, self._span(meta))

    def range(self, meta: Meta, *parts: object) -> ast.Range:
        # `parts` holds the ends that are written, and the '..' token between them
        dots = next(i for i, p in enumerate(parts) if isinstance(p, Token))
        low = parts[0] if dots == 1 else None
        high = parts[dots + 1] if dots + 1 < len(parts) else None
        return ast.Range(low, high, self._span(meta))  # type: ignore[arg-type]

    def range_end(self, meta: Meta, number: ast.Number) -> ast.RangeEnd:
        return ast.RangeEnd(number.value, self._span(meta))

    def negative_range_end(self, meta: Meta, number: ast.Number) -> ast.RangeEnd:
        return ast.RangeEnd(-number.value, self._span(meta))

    def named_type(self, meta: Meta, name: Token) -> ast.NamedType:
        return ast.NamedType(self._name(name), self._span(meta))

    def list_type(self, meta: Meta, item: ast.TypeRef) -> ast.ListType:
        return ast.ListType(item, self._span(meta))

    def optional_type(self, meta: Meta, inner: ast.TypeRef) -> ast.OptionalType:
        return ast.OptionalType(inner, self._span(meta))

    def enum_type(self, meta: Meta, *values: ast.String) -> ast.EnumType:
        return ast.EnumType(tuple(values), self._span(meta))

    # tools and agents
    def tool_decl(self, meta: Meta, name: ast.ToolName, *rest: object) -> ast.ToolDecl:
        path = next((r for r in rest if isinstance(r, ast.String)), None)
        items: tuple[object, ...] = next((r for r in rest if isinstance(r, tuple)), ())
        return ast.ToolDecl(
            name, path,
            options=tuple(i for i in items if isinstance(i, ast.ToolOption)),
            secrets=tuple(i for i in items if isinstance(i, ast.ToolSecrets)),
            headers=tuple(i for i in items if isinstance(i, ast.ToolHeaders)),
            query=tuple(i for i in items if isinstance(i, ast.ToolQuery)),
            span=self._span(meta),
        )

    def tool_name(self, meta: Meta, *parts: Token) -> ast.ToolName:
        return ast.ToolName(tuple(str(p) for p in parts), self._span(meta))

    def tool_options(self, meta: Meta, *options: ast.ToolOption) -> tuple[ast.ToolOption, ...]:
        return tuple(options)

    def tool_option(self, meta: Meta, name: Token, value: ast.Value) -> ast.ToolOption:
        return ast.ToolOption(self._name(name), value, self._span(meta))

    def tool_secrets(self, meta: Meta, *names: Token) -> ast.ToolSecrets:
        return ast.ToolSecrets(tuple(self._name(n) for n in names if n is not None), self._span(meta))

    def tool_headers(self, meta: Meta, *entries: ast.TextEntry) -> ast.ToolHeaders:
        return ast.ToolHeaders(tuple(entries), self._span(meta))

    def tool_query(self, meta: Meta, *entries: ast.TextEntry) -> ast.ToolQuery:
        return ast.ToolQuery(tuple(entries), self._span(meta))

    def text_entry(self, meta: Meta, name: Token | ast.String, value: ast.String) -> ast.TextEntry:
        key = name if isinstance(name, ast.String) else ast.String(str(name), False, self._tok_span(name))
        return ast.TextEntry(key, value, self._span(meta))

    def agent_decl(self, meta: Meta, name: Token, *items: ast.AgentItem) -> ast.AgentDecl:
        return ast.AgentDecl(self._name(name), tuple(items), self._span(meta))

    def prompt_setting(self, meta: Meta, text: ast.String) -> ast.PromptSetting:
        return ast.PromptSetting(text, self._span(meta))

    def tools_setting(self, meta: Meta, *tools: ast.ToolName) -> ast.ToolsSetting:
        return ast.ToolsSetting(tuple(t for t in tools if t is not None), self._span(meta))

    def memory_setting(self, meta: Meta, policy: Token, count: Token | None = None) -> ast.MemorySetting:
        number = self.number(None, count) if count is not None else None
        return ast.MemorySetting(self._name(policy), number, self._span(meta))

    def fallbacks_setting(self, meta: Meta, *models: ast.String) -> ast.FallbacksSetting:
        return ast.FallbacksSetting(tuple(m for m in models if m is not None), self._span(meta))

    # states
    def state_decl(self, meta: Meta, *parts: object) -> ast.StateDecl:
        modifiers = [p for p in parts if isinstance(p, Token) and p.type in ("START", "FINAL", "BRANCH")]
        name = next(p for p in parts if isinstance(p, Token) and p.type == "NAME")
        items = tuple(p for p in parts if not isinstance(p, Token))
        has_body = self.source.text[name.end_pos : meta.end_pos].strip() != ""  # type: ignore[attr-defined]
        return ast.StateDecl(
            self._name(name),
            start=any(m.type == "START" for m in modifiers),
            final=any(m.type == "FINAL" for m in modifiers),
            items=items,  # type: ignore[arg-type]
            has_body=has_body,
            span=self._span(meta),
            branch=any(m.type == "BRANCH" for m in modifiers),
        )

    def state_modifier(self, meta: Meta, tok: Token) -> Token:
        return tok

    def agent_ref(self, meta: Meta, name: Token) -> ast.AgentRef:
        return ast.AgentRef(self._name(name), self._span(meta))

    def instruction(self, meta: Meta, text: ast.String) -> ast.Instruction:
        return ast.Instruction(text, self._span(meta))

    def output_decl(self, meta: Meta, type_: ast.TypeRef | ast.VariantType) -> ast.OutputDecl:
        return ast.OutputDecl(type_, self._span(meta))

    def variant_type(self, meta: Meta, *names: Token) -> ast.VariantType:
        return ast.VariantType(tuple(self._name(n) for n in names), self._span(meta))

    def tell(self, meta: Meta, *names: Token) -> ast.Tell:
        return ast.Tell(tuple(self._name(n) for n in names if n is not None), self._span(meta))

    def visits(self, meta: Meta, count: Token) -> ast.Visits:
        return ast.Visits(self.number(None, count), self._span(meta))

    def retries(self, meta: Meta, count: Token) -> ast.Retries:
        return ast.Retries(self.number(None, count), self._span(meta))

    def call(self, meta: Meta, tool: ast.ToolName, *args: ast.CallArg) -> ast.ToolCall:
        return ast.ToolCall(tool, tuple(a for a in args if a is not None), self._span(meta))

    def call_arg(self, meta: Meta, name: Token, value: ast.Expr) -> ast.CallArg:
        return ast.CallArg(self._name(name), value, self._span(meta))

    def result(self, meta: Meta, text: ast.String) -> ast.Result:
        return ast.Result(text, self._span(meta))

    def ask(self, meta: Meta, text: ast.String) -> ast.Ask:
        return ast.Ask(text, self._span(meta))

    def fail(self, meta: Meta, text: ast.String) -> ast.Fail:
        return ast.Fail(text, self._span(meta))

    def parallel(self, meta: Meta, *names: Token) -> ast.Parallel:
        return ast.Parallel(tuple(self._name(n) for n in names if n is not None), self._span(meta))

    def join(self, meta: Meta, rule: Token, *rest: object) -> ast.Join:
        count = next((self.number(None, p) for p in rest if isinstance(p, Token)), None)
        guard = next((p for p in rest if p is not None and not isinstance(p, Token)), None)
        return ast.Join(self._name(rule), count, guard, self._span(meta))  # type: ignore[arg-type]

    def for_each(self, meta: Meta, *parts: object) -> ast.ForEach:
        names = [p for p in parts if isinstance(p, Token)]
        items = next(p for p in parts if p is not None and not isinstance(p, (Token, tuple)))
        options: dict[str, ast.Number] = dict(p for p in parts if isinstance(p, tuple))
        index, item = (names[0], names[1]) if len(names) == 2 else (None, names[0])
        return ast.ForEach(self._name(index) if index is not None else None, self._name(item), items,  # type: ignore[arg-type]
                           options.get("max"), options.get("concurrency"), self._span(meta))

    def each_max(self, meta: Meta, count: Token) -> tuple[str, ast.Number]:
        return "max", self.number(None, count)

    def each_concurrency(self, meta: Meta, count: Token) -> tuple[str, ast.Number]:
        return "concurrency", self.number(None, count)

    def bound(self, meta: Meta, count: Token, per_visit: Span | None = None) -> tuple[ast.Number, Span | None]:
        return self.number(None, count), per_visit

    def per_visit(self, meta: Meta) -> Span:
        return self._span(meta)

    def _edge(self, meta: Meta, kind: str, target: Token | None, guard: ast.Expr | None,
              condition: ast.String | None, bound: tuple[ast.Number, Span | None] | None) -> ast.Transition:
        limit, per_visit = bound if bound is not None else (None, None)
        return ast.Transition(kind, self._name(target) if target is not None else None, guard, condition, limit,
                              self._span(meta), per_visit=per_visit)

    def when_transition(self, meta: Meta, cond: ast.Expr, target: Token,
                        bound: tuple[ast.Number, Span | None] | None = None) -> ast.Transition:
        if isinstance(cond, ast.Literal) and isinstance(cond.value, str):
            return self._edge(meta, "condition", target, None, ast.String(cond.value, False, cond.span), bound)
        return self._edge(meta, "guard", target, cond, None, bound)

    def always_transition(self, meta: Meta, target: Token,
                          bound: tuple[ast.Number, Span | None] | None = None) -> ast.Transition:
        return self._edge(meta, "always", target, None, None, bound)

    def otherwise_transition(self, meta: Meta, target: Token,
                             bound: tuple[ast.Number, Span | None] | None = None) -> ast.Transition:
        return self._edge(meta, "otherwise", target, None, None, bound)

    def stay_transition(self, meta: Meta, bound: tuple[ast.Number, Span | None] | None = None) -> ast.Transition:
        return self._edge(meta, "stay", None, None, None, bound)

    def timeout_transition(self, meta: Meta, duration: Token, target: Token,
                           bound: tuple[ast.Number, Span | None] | None = None) -> ast.Transition:
        text = str(duration)
        if len(text) > MAX_NUMBER_DIGITS:
            start = duration.start_pos or 0
            raise _Failure("SW3015", f"a duration with {len(text):,} characters is out of range", start,
                           start + len(text), help=f"numbers have at most {MAX_NUMBER_DIGITS} digits")
        seconds = float(text[:-1]) * _DURATION_UNITS[text[-1]]
        edge = self._edge(meta, "timeout", target, None, None, bound)
        return dataclasses.replace(edge, after=ast.Duration(text, seconds, self._tok_span(duration)))

    # expressions
    def _binary(self, meta: Meta, op: str, left: ast.Expr, right: ast.Expr) -> ast.BinaryOp:
        return ast.BinaryOp(op, left, right, self._span(meta))

    def or_op(self, meta: Meta, left: ast.Expr, right: ast.Expr) -> ast.BinaryOp:
        return self._binary(meta, "or", left, right)

    def and_op(self, meta: Meta, left: ast.Expr, right: ast.Expr) -> ast.BinaryOp:
        return self._binary(meta, "and", left, right)

    def not_op(self, meta: Meta, operand: ast.Expr) -> ast.UnaryOp:
        return ast.UnaryOp("not", operand, self._span(meta))

    def compare(self, meta: Meta, left: ast.Expr, op: Token, right: ast.Expr) -> ast.BinaryOp:
        return self._binary(meta, str(op), left, right)

    def in_op(self, meta: Meta, left: ast.Expr, right: ast.Expr) -> ast.BinaryOp:
        return self._binary(meta, "in", left, right)

    def not_in_op(self, meta: Meta, left: ast.Expr, right: ast.Expr) -> ast.BinaryOp:
        return self._binary(meta, "not in", left, right)

    def arith(self, meta: Meta, left: ast.Expr, op: Token, right: ast.Expr) -> ast.BinaryOp:
        return self._binary(meta, str(op), left, right)

    def neg(self, meta: Meta, operand: ast.Expr) -> ast.UnaryOp:
        return ast.UnaryOp("-", operand, self._span(meta))

    def attribute(self, meta: Meta, value: ast.Expr, name: Token) -> ast.Attribute:
        return ast.Attribute(value, self._name(name), self._span(meta))

    def index(self, meta: Meta, value: ast.Expr, idx: ast.Expr) -> ast.Index:
        return ast.Index(value, idx, self._span(meta))

    def quantifier(self, meta: Meta, func: Token, element: ast.Expr, var: Token, items: ast.Expr) -> ast.Quantifier:
        return ast.Quantifier(self._name(func), element, self._name(var), items, self._span(meta))

    def is_op(self, meta: Meta, value: ast.Expr, type_: Token) -> ast.IsVariant:
        return ast.IsVariant(value, self._name(type_), False, self._span(meta))

    def is_not_op(self, meta: Meta, value: ast.Expr, type_: Token) -> ast.IsVariant:
        return ast.IsVariant(value, self._name(type_), True, self._span(meta))

    def call_expr(self, meta: Meta, func: Token, *args: ast.Expr) -> ast.Call:
        return ast.Call(self._name(func), tuple(a for a in args if a is not None), self._span(meta))

    def name(self, meta: Meta, tok: Token) -> ast.NameExpr:
        return ast.NameExpr(sys.intern(str(tok)), self._tok_span(tok))

    def literal(self, meta: Meta, lit: ast.String | ast.Number) -> ast.Literal:
        return ast.Literal(lit.value, lit.span)

    def true_lit(self, meta: Meta) -> ast.Literal:
        return ast.Literal(True, self._span(meta))

    def false_lit(self, meta: Meta) -> ast.Literal:
        return ast.Literal(False, self._span(meta))

    def none_lit(self, meta: Meta) -> ast.Literal:
        return ast.Literal(None, self._span(meta))

    def list_expr(self, meta: Meta, *items: ast.Expr) -> ast.ListExpr:
        return ast.ListExpr(tuple(i for i in items if i is not None), self._span(meta))

    # values
    def value_literal(self, meta: Meta, lit: ast.String | ast.Number) -> ast.Value:
        kind = "str" if isinstance(lit, ast.String) else ("int" if isinstance(lit.value, int) else "float")
        return ast.Value(kind, lit.value, self._span(meta))

    def value_negative(self, meta: Meta, lit: ast.Number) -> ast.Value:
        kind = "int" if isinstance(lit.value, int) else "float"
        return ast.Value(kind, -lit.value, self._span(meta))

    def value_true(self, meta: Meta) -> ast.Value:
        return ast.Value("bool", True, self._span(meta))

    def value_false(self, meta: Meta) -> ast.Value:
        return ast.Value("bool", False, self._span(meta))

    def value_none(self, meta: Meta) -> ast.Value:
        return ast.Value("none", None, self._span(meta))

    def value_list(self, meta: Meta, *items: ast.Value) -> ast.Value:
        return ast.Value("list", tuple(i for i in items if i is not None), self._span(meta))

    def object(self, meta: Meta, *entries: ast.ObjectEntry) -> ast.Value:
        return ast.Value("object", tuple(entries), self._span(meta))

    def object_entry(self, meta: Meta, key: Token, value: ast.Value) -> ast.ObjectEntry:
        return ast.ObjectEntry(self._name(key), value, self._span(meta))

    # tests
    def test_decl(self, meta: Meta, name: ast.String, *items: ast.TestItem) -> ast.TestDecl:
        return ast.TestDecl(name, tuple(items), self._span(meta))

    def test_input(self, meta: Meta, values: ast.Value) -> ast.TestInput:
        return ast.TestInput(values, self._span(meta))

    def reply(self, meta: Meta, state: Token, *rest: Token | ast.Value) -> ast.Reply:
        value = rest[-1]
        assert isinstance(value, ast.Value)
        variant = self._name(rest[0]) if len(rest) == 2 and isinstance(rest[0], Token) else None
        return ast.Reply(self._name(state), value, variant, self._span(meta))

    def reply_calls(self, meta: Meta, state: Token, *calls: ast.ScriptedCall) -> ast.ReplyCalls:
        return ast.ReplyCalls(self._name(state), tuple(calls), self._span(meta))

    def scripted_call(self, meta: Meta, tool: ast.ToolName, *args: ast.ScriptedArg | None) -> ast.ScriptedCall:
        return ast.ScriptedCall(tool, tuple(a for a in args if a is not None), self._span(meta))

    def scripted_arg(self, meta: Meta, name: Token, value: ast.Value) -> ast.ScriptedArg:
        return ast.ScriptedArg(self._name(name), value, self._span(meta))

    def verdict(self, meta: Meta, state: Token, cond: ast.String | Token) -> ast.Verdict:
        text = cond if isinstance(cond, ast.String) else None
        return ast.Verdict(self._name(state), text, self._span(meta))

    def test_timeout(self, meta: Meta, state: Token) -> ast.TestTimeout:
        return ast.TestTimeout(self._name(state), self._span(meta))

    def expect_path(self, meta: Meta, *states: Token) -> ast.ExpectPath:
        return ast.ExpectPath(tuple(self._name(s) for s in states if s is not None), self._span(meta))

    def expect_final(self, meta: Meta, state: Token) -> ast.ExpectFinal:
        return ast.ExpectFinal(self._name(state), self._span(meta))

    def expect_result(self, meta: Meta, value: ast.Value) -> ast.ExpectResult:
        return ast.ExpectResult(value, self._span(meta))

    def expect_failure(self, meta: Meta, kind: Token) -> ast.ExpectFailure:
        return ast.ExpectFailure(self._name(kind), self._span(meta))

    def visit(self, meta: Meta, count: Token) -> ast.Number:
        return self.number(None, count)

    def expect_output(self, meta: Meta, state: Token, *rest: Any) -> ast.ExpectOutput:
        visit = next((r for r in rest if isinstance(r, ast.Number)), None)
        contains = any(isinstance(r, Token) and r.type == "CONTAINS" for r in rest)
        last = rest[-1]
        if isinstance(last, ast.String):  # `contains "text"`
            value = ast.Value("str", last.value, last.span)
        else:
            assert isinstance(last, ast.Value)
            value = last
        return ast.ExpectOutput(self._name(state), visit, contains, value, self._span(meta))

    def expect_instruction(self, meta: Meta, state: Token, *rest: Any) -> ast.ExpectInstruction:
        visit = next((r for r in rest if isinstance(r, ast.Number)), None)
        contains = any(isinstance(r, Token) and r.type == "CONTAINS" for r in rest)
        text = rest[-1]
        assert isinstance(text, ast.String)
        return ast.ExpectInstruction(self._name(state), visit, contains, text, self._span(meta))

    def allow_unused(self, meta: Meta) -> ast.AllowUnused:
        return ast.AllowUnused(self._span(meta))


# ---- errors in words people know -----------------------------------------------------------------


def _syntax_failure(err: UnexpectedInput, source: SourceFile, parser: Lark) -> _Failure:
    """The parse error as a named problem (syntax_errors.py holds the names and their examples)."""
    from .syntax_errors import name_syntax_error  # here, not at import: only a file with an error needs it

    problem = name_syntax_error(err, source.text, parser, _example_error)
    return _Failure(problem.code, problem.message, problem.start, problem.end, problem.help)


def _first_error(parser: Lark, text: str) -> UnexpectedInput | None:
    """The error Lark's parser ends in on `text`, keywords read as names where only a name can go; None
    when the text parses."""
    on_error = _keyword_as_name(parser)
    try:
        with _parsing(text):
            parser.parse(text, on_error=on_error)
    except UnexpectedInput as err:
        return _original_error(_detached(err), on_error.converted)
    return None


@lru_cache(maxsize=2048)
def _example_error(example: str) -> UnexpectedInput | None:
    """The error a malformed example ends in, found as `parse_source` finds one (each is parsed once)."""
    return _first_error(_parser(), example)


def _stopped(source: SourceFile, parser: Lark) -> _Failure:
    """The named syntax error where the parse loop stopped, found by Lark's parser on the same text."""
    err = _first_error(parser, source.text)
    if err is None:  # the two parsers disagree: a bug, reported as one
        raise RuntimeError("the parse loop stopped on text that Lark's parser accepts")
    return _syntax_failure(err, source, parser)


# ---- keywords used as names ---------------------------------------------------------------------


def _keyword_as_name(parser: Lark):  # type: ignore[no-untyped-def]
    """An LALR error handler that reads a keyword as a name where only a name can go.

    The contextual lexer picks terminals by parser state, but LALR merges states that share a core, so
    after `a: str` in a type block the lexer still expects the machine-level keywords that may follow
    `input x: str`, and a field named `description` comes out as a keyword. When the parser then rejects
    that keyword and would accept a name, it is fed as the name it was meant to be.
    """
    keywords = _keyword_terminals(parser)
    converted: list[UnexpectedToken] = []

    def on_error(err: UnexpectedInput) -> bool:
        if not isinstance(err, UnexpectedToken) or err.token.type not in keywords:
            return False
        interactive = err.interactive_parser
        if "NAME" not in err.accepts:  # computed (and cached) before the parser state moves on
            return False
        converted.append(_detached(err))
        interactive.feed_token(Token.new_borrow_pos("NAME", str(err.token), err.token))
        return True

    on_error.converted = converted  # type: ignore[attr-defined]
    return on_error


def _original_error(err: UnexpectedInput, converted: list[UnexpectedToken]) -> UnexpectedInput:
    """If reading a keyword as a name led straight into an error on the same line, the keyword was the
    mistake (say, a missing '}' before `agent`): report that instead."""
    if converted and getattr(err, "line", None) == converted[-1].token.line:
        return converted[-1]
    return err


@lru_cache(maxsize=1)
def _keyword_terminals_cached(names: tuple[tuple[str, str], ...]) -> frozenset[str]:
    word = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
    return frozenset(name for name, value in names if word.match(value))


def _keyword_terminals(parser: Lark) -> frozenset[str]:
    return _keyword_terminals_cached(tuple(
        (t.name, t.pattern.value) for t in parser.terminals if t.pattern.type == "str"
    ))


# ---- nesting -------------------------------------------------------------------------------------


_DEEP_KINDS = (ast.BinaryOp, ast.UnaryOp, ast.Attribute, ast.Index, ast.Call, ast.ListExpr, ast.Value)


def _too_deep(machine: ast.Machine) -> ast.Expr | ast.Value | None:
    """The first node nested deeper than MAX_NESTING, found without recursion."""
    stack: list[tuple[Any, int]] = [(machine, 0)]
    pop, push = stack.pop, stack.append
    while stack:
        node, depth = pop()
        if depth > MAX_NESTING and isinstance(node, _DEEP_KINDS):
            return node  # type: ignore[no-any-return]
        depth += 1
        if isinstance(node, ast.Value):
            if node.kind in ("list", "object"):
                for item in node.value:  # type: ignore[attr-defined]
                    push((item, depth))
        elif isinstance(node, ast.ObjectEntry):
            push((node.value, depth))
        else:
            kind: type[Node] = type(node)
            for name in child_fields(kind):
                child = getattr(node, name)
                if isinstance(child, tuple):
                    for item in child:
                        if isinstance(item, Node):
                            push((item, depth))
                elif isinstance(child, Node):
                    push((child, depth))
    return None


# ---- entry points -------------------------------------------------------------------------------


_gc_pauses = 0
_gc_lock = threading.Lock()
_gc_was_enabled = False


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while a tree is built.

    Parsing allocates many small objects that live as long as the tree; every full collection would
    rescan all of them, which makes large files cost more than linear time. The collector is one per
    process, so pauses are counted: it is turned back on when the last pause in any thread ends, after
    the objects built meanwhile are moved where a young collection does not look (_promote_survivors).
    """
    global _gc_pauses, _gc_was_enabled
    with _gc_lock:
        if _gc_pauses == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pauses += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pauses -= 1
            if _gc_pauses == 0 and _gc_was_enabled:
                _promote_survivors()
                gc.enable()


def _promote_survivors() -> None:
    """Move every object the collector tracks to its oldest generation, without a collection, when a
    pause built many.

    What a pause built (a syntax tree, its checks' tables, an IR, a runner's source) is all in the
    youngest generation, and a large machine makes far more of those objects than the threshold: the
    first allocation after the pause would start a young collection that scans every one of them to find
    them alive (a quarter of a second at 10,000 states). Freezing and thawing moves them in constant
    time; they are then scanned by full collections only, as every long-lived object is. A small spec's
    objects are left to the young collections, which also free its reference cycles soonest (a language
    server checks one at every edit). A process that froze objects itself is left alone: thawing would
    release its objects too."""
    if gc.get_count()[0] >= _PROMOTED_FROM and gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()


_PROMOTED_FROM = 50_000  # objects: a young collection of that many takes about 15 ms


def read_source(path: str, data: bytes, diagnostics: Diagnostics) -> SourceFile | None:
    """Decode a file's bytes as UTF-8; report SW1005 with the position of the first bad byte."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        prefix = data[: e.start].decode("utf-8", errors="replace")
        source = SourceFile(path, prefix + "\ufffd")
        diagnostics.report("SW1005", f"the file is not valid UTF-8 (byte 0x{data[e.start]:02x})",
                           source.span(len(prefix), len(prefix) + 1),
                           help="save the file as UTF-8 text")
        return None
    text = text.removeprefix("\ufeff")  # a byte-order mark is not content
    return SourceFile(path, text)


def _internal_error(result: ParseResult, source: SourceFile, err: BaseException) -> ParseResult:
    result.diagnostics.report("SW9001", f"internal compiler error while parsing this file: {type(err).__name__}: "
                              f"{str(err)[:200]}", source.span(0, 0),
                              help="this is a bug in statewright; please report it with this file")
    return result


def parse_source(source: SourceFile) -> ParseResult:
    """Parse one source file. Never raises for bad input: problems come back as diagnostics."""
    result = ParseResult(source, None)
    if len(source.text) > MAX_FILE_CHARS:
        result.diagnostics.report("SW1021", f"the file has {len(source.text):,} characters; the limit is "
                                  f"{MAX_FILE_CHARS:,}", source.span(0, 0))
        return result
    parser = _parser()
    failures: list[_Failure] = []
    try:
        with paused_gc():
            machine, comments = _build(source)
    except SyntaxStop:
        try:
            failures.append(_stopped(source, parser))
        except Exception as err:  # noqa: BLE001 - as below
            return _internal_error(result, source, err)
    except _Failure as f:
        failures.append(_detached(f))
    except RecursionError:
        result.diagnostics.report("SW1020", f"the input is nested more than {MAX_NESTING} levels deep",
                                  source.span(0, 0))
        return result
    except Exception as err:  # noqa: BLE001 - a bug here must not take the other files of a check with it
        return _internal_error(result, source, err)
    if failures:
        try:
            failures += _later_failures(source, failures[0], parser)
        except Exception as err:  # noqa: BLE001 - as above: the first error is still reported
            for failure in failures:
                result.diagnostics.report(failure.code, failure.message,
                                          source.span(failure.start, failure.end), help=failure.help)
            return _internal_error(result, source, err)
        for failure in failures:
            result.diagnostics.report(failure.code, failure.message, source.span(failure.start, failure.end),
                                      help=failure.help)
        return result
    deep = _too_deep(machine)
    if deep is not None:
        result.diagnostics.report("SW1020", f"the input is nested more than {MAX_NESTING} levels deep",
                                  deep.span, help="split the expression into simpler parts")
        return result
    result.machine = machine
    result.comments = [ast.Comment(text, source.span(start, end)) for text, start, end in comments]
    return result


# ---- more than one syntax error ------------------------------------------------------------------

MAX_RECOVERY_CHARS = 400_000
MAX_SYNTAX_ERRORS = 20

# a comment ends at its newline, so each character before `machine` is read one way only: a looser
# `(?:\s|#[^\n]*)*` splits "###" or "# a b" in exponentially many ways before it gives up
_MACHINE_HEADER = re.compile(r"(?:\s|#[^\n]*\n)*machine\s+[A-Za-z_][A-Za-z0-9_]*\s*\{")
_DECLARATION = re.compile(
    r"[ \t]*(?:(?:start|final)\s+)*(?:state|agent|type|tool|test|input|model|verifier|temperature|limits"
    r"|description)\b"
)


def _later_failures(source: SourceFile, first: _Failure, parser: Lark) -> list[_Failure]:
    """One syntax error for each later top-level declaration that has one.

    The parser stops at the first error, so every declaration after the one holding it is parsed again on
    its own: the text is kept as it is up to the machine's opening brace and in the declaration, and
    everything else is blanked (newlines kept), so positions stay exact. A declaration is found by its
    keyword at the start of a line, at the indentation of the machine's first declaration.
    """
    text = source.text
    header = _MACHINE_HEADER.match(text)
    if header is None or len(text) > MAX_RECOVERY_CHARS:
        return []
    starts: list[int] = []
    indent: int | None = None
    offset = header.end()
    for line in text[header.end():].splitlines(keepends=True):
        if _DECLARATION.match(line):
            width = len(line) - len(line.lstrip(" \t"))
            indent = width if indent is None else indent
            if width == indent:
                starts.append(offset + width)
        offset += len(line)
    closing = text.rfind("}")
    closing = closing if closing > header.end() else len(text)
    found: list[_Failure] = []
    for start, end in zip(starts, [*starts[1:], closing]):
        if start <= first.start or end <= start:
            continue
        alone = (text[: header.end()] + _blank(text[header.end() : start]) + text[start:end] + _blank(text[end:])
                 + "\n}")
        failure = _failure_in(SourceFile(source.path, alone), parser)
        if failure is not None and start <= failure.start < end:
            found.append(failure)
            if len(found) >= MAX_SYNTAX_ERRORS - 1:
                break
    return found


def _blank(text: str) -> str:
    return re.sub(r"[^\n]", " ", text)


def _failure_in(source: SourceFile, parser: Lark) -> _Failure | None:
    try:
        _build(source)
    except SyntaxStop:
        return _stopped(source, parser)
    except _Failure as f:
        return _detached(f)
    return None


def parse_text(text: str, path: str = "<string>") -> ParseResult:
    return parse_source(SourceFile(path, text))
