"""The parser front: source text in, syntax tree (or positioned diagnostics) out.

Lark types never leave the grammar package. The syntax tree is built while the text is parsed, by the
parse loop in lalr.py over Lark's table and scanners: each rule's reduction calls the builder's method of
that name (build.py) with the rule's span and its children, so no intermediate parse tree is made and
walked again, and nothing recurses, however deeply the input nests. A text with syntax errors is read to
its end all the same, each error named (syntax_errors.py) and mended (recovery.py) as it is met, so one run
reports them all.
"""

from __future__ import annotations

import errno
import gc
import os
import re
import stat
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import field
from functools import lru_cache
from pathlib import Path
from typing import Any, BinaryIO

from lark import Lark, Token
from lark.exceptions import UnexpectedInput, UnexpectedToken

from ..cache_dir import cache_dir
from ..diagnostics import Diagnostic, Diagnostics, Severity, SourceFile
from . import ast
from .build import MAX_NUMBER_DIGITS, TreeBuilder
from .lalr import BuildFailure, Parsed, Repair, Slip, Tables, drive
from .nesting import MAX_NESTING, too_deep
from .node import Node
from .strings import ESCAPE_CHARS, ESCAPING_TERMINAL, decode_long_string, decode_string

__all__ = [  # what the rest of the package reads from here
    "ESCAPE_CHARS", "ESCAPING_TERMINAL", "MAX_FILE_BYTES", "MAX_FILE_CHARS", "MAX_NESTING", "MAX_NUMBER_DIGITS",
    "ParseResult", "build_parser", "decode_long_string", "decode_string", "file_too_large", "next_code",
    "parse_source", "parse_text", "paused_gc", "read_limited", "read_named_file", "read_source",
]

GRAMMAR_PATH = Path(__file__).with_name("statewright.lark")
# The largest file the compiler reads: 16 MiB. A file on disk is measured in bytes before it is read, a
# text given directly (the language server, the API) in characters; past it, SW1021 and nothing is parsed.
MAX_FILE_BYTES = 16 * 1024 * 1024
MAX_FILE_CHARS = MAX_FILE_BYTES


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

    The parse loop does what this does itself (lalr.read_token); the parser Lark builds with it is where
    the loop's table and scanners come from, and what the tests hold the loop to.
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
    """The text a Lark parser of this grammar reads, for its post-lexer (the tests' reference parsers)."""
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
    return Lark(GRAMMAR_PATH.read_text(encoding="utf-8"), **options)  # type: ignore[arg-type]


@lru_cache(maxsize=1)
def _grammar_digest() -> str:
    import hashlib

    import lark

    text = GRAMMAR_PATH.read_bytes() + lark.__version__.encode()
    return hashlib.sha256(text).hexdigest()[:16]


@lru_cache(maxsize=1)
def _parser() -> Lark:
    """The one Lark parser every parse reads the table and scanners of."""
    try:
        return build_parser()
    except OSError:  # an unwritable cache directory must not break parsing
        return build_parser(cache=False)


@lru_cache(maxsize=1)
def _tables() -> Tables:
    parser = _parser()
    rules = {rule.alias or rule.options.template_source or rule.origin.name for rule in parser.rules}
    methods = {name: f for name, f in vars(TreeBuilder).items() if name in rules and callable(f)}
    return Tables(parser, methods, _keyword_terminals(parser), CONSTRAINT_KEYWORDS, _colon_follows)


# ---- naming syntax errors ------------------------------------------------------------------------


def _name_slip(slip: Slip, text: str) -> Sequence[tuple[object, Sequence[Repair]]]:
    """What a slip in `text` may be called, and how each is usually mended (syntax_errors.py names them)."""
    from .syntax_errors import name_syntax_error  # here, not at import: only a file with an error needs it

    if slip.too_deep:
        return [(BuildFailure("SW1020", f"this is nested more than {MAX_NESTING} levels deep", slip.start,
                              slip.end, help="split it into simpler parts: a named type, a flatter value, several "
                              "guards"), ())]
    return name_syntax_error(slip, text, _tables(), _example_slip)


@lru_cache(maxsize=2048)
def _example_slip(example: str) -> Slip | None:
    """Where a malformed example first slips, as a file slips (each example is parsed once)."""
    found = drive(_tables(), example, TreeBuilder(SourceFile("<example>", example)))
    return found.slip


def _detached(err: BaseException) -> BaseException:
    """`err` without the frames it was raised through and the exceptions it was raised while handling.

    An exception kept after its `except` block refers, through its traceback's frames, to the locals
    that keep it: a reference cycle that only the cyclic garbage collector frees, and the compiler's
    stages run with the collector paused (paused_gc)."""
    err.__traceback__ = None
    err.__context__ = None
    err.__cause__ = None
    return err


# ---- keywords used as names ---------------------------------------------------------------------


def _keyword_as_name(parser: Lark):  # type: ignore[no-untyped-def]
    """For a Lark parser of this grammar (the tests' references): an LALR error handler that reads a
    keyword as a name where only a name can go, as the parse loop does.

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
        converted.append(_detached(err))  # type: ignore[arg-type]
        interactive.feed_token(Token.new_borrow_pos("NAME", str(err.token), err.token))
        return True

    on_error.converted = converted  # type: ignore[attr-defined]
    return on_error


@lru_cache(maxsize=1)
def _keyword_terminals_cached(names: tuple[tuple[str, str], ...]) -> frozenset[str]:
    word = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
    return frozenset(name for name, value in names if word.match(value))


def _keyword_terminals(parser: Lark) -> frozenset[str]:
    return _keyword_terminals_cached(tuple(
        (t.name, t.pattern.value) for t in parser.terminals if t.pattern.type == "str"
    ))


# ---- the garbage collector -----------------------------------------------------------------------


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


# ---- entry points -------------------------------------------------------------------------------


def file_too_large(path: str, size: int | None = None, unit: str = "bytes") -> Diagnostic:
    """SW1021 for a file (or text) over the size limit, which is not read (`size` when it is known: a pipe
    is read only up to the limit)."""
    source = SourceFile(path, "")
    has = f"has {size:,} {unit}" if size is not None else f"has more than {MAX_FILE_BYTES:,} {unit}"
    return Diagnostic("SW1021", f"the file {has}; the limit is {MAX_FILE_BYTES:,} ({MAX_FILE_BYTES // 2**20} MiB), "
                      "so it was not read", source.span(0, 0),
                      help="keep long texts such as prompts short, or split the machine into machines that "
                      "call each other", severity=Severity.ERROR)


def read_limited(stream: BinaryIO) -> bytes:
    """A file's bytes, read up to one past the size limit: what is longer is refused (read_source) without
    being read to its end."""
    return stream.read(MAX_FILE_BYTES + 1)


def read_named_file(location: str, limit: int = MAX_FILE_BYTES + 1) -> bytes:
    """The bytes of a regular file that a file names (a `use` line, a runner's source map) or an editor
    asks about, read no further than `limit` (read_source refuses what is past the size limit).

    Raises OSError, with a reason to show, for anything else: a FIFO or a device (which could block the
    read or never end), a folder (IsADirectoryError), and a name no file can have (a NUL character)."""
    if "\0" in location:
        raise OSError(errno.EINVAL, "a file name cannot hold the character NUL (U+0000)", location)
    # O_NONBLOCK: opening a FIFO must not wait for a writer (what was opened is checked before it is read)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    descriptor = os.open(location, flags)
    with os.fdopen(descriptor, "rb") as stream:
        mode = os.fstat(descriptor).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), location)
        if not stat.S_ISREG(mode):
            kind = ("a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
                    else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "of an unknown kind")
            raise OSError(errno.EINVAL, f"it is {kind}, not a regular file", location)
        return stream.read(limit)


def read_source(path: str, data: bytes, diagnostics: Diagnostics) -> SourceFile | None:
    """Decode a file's bytes as UTF-8; report SW1005 with the position of the first bad byte, and SW1021,
    without decoding, for bytes over the size limit."""
    if len(data) > MAX_FILE_BYTES:
        diagnostics.extend([file_too_large(path, len(data) if len(data) != MAX_FILE_BYTES + 1 else None)])
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        # the text before the bad byte, as the file reads (without its byte-order mark, as below: the
        # column of the byte is the column an editor shows)
        prefix = data[: e.start].decode("utf-8", errors="replace").removeprefix("\ufeff")
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


_LONE_CR = re.compile("\r(?!\n)")


def _lone_carriage_return(source: SourceFile, diagnostics: Diagnostics) -> bool:
    """SW1007 at the first carriage return that no line feed follows (with how many more there are): a line
    break to an editor and to the language server's client, none to the lexer, so what the file says and
    what it shows would differ from there on (a comment would take in the code after it)."""
    if "\r" not in source.text:
        return False
    found = _LONE_CR.search(source.text)
    if found is None:
        return False
    more = sum(1 for _ in _LONE_CR.finditer(source.text, found.end()))
    others = f" (and {more:,} more after it)" if more else ""
    diagnostics.report("SW1007", f"a carriage return without a line feed{others}",
                       source.span(found.start(), found.end()), label="a line break to an editor, not to statewright",
                       help="save the file with LF or CRLF line endings (or, inside a double-quoted string, "
                            "write the escape \\r)")
    return True


def parse_source(source: SourceFile) -> ParseResult:
    """Parse one source file. Never raises for bad input: problems come back as diagnostics."""
    result = ParseResult(source, None)
    if len(source.text) > MAX_FILE_CHARS:
        result.diagnostics.extend([file_too_large(source.path, len(source.text), "characters")])
        return result
    if _lone_carriage_return(source, result.diagnostics):
        return result
    try:
        with paused_gc():
            parsed = _parse(source)
    except Exception as err:  # noqa: BLE001 - a bug here must not take the other files of a check with it
        return _internal_error(result, source, err)
    for problem in parsed.problems:
        result.diagnostics.report(problem.code, problem.message, source.span(problem.start, problem.end),  # type: ignore[attr-defined]
                                  help=problem.help)  # type: ignore[attr-defined]
    if parsed.problems:
        return result
    machine: ast.Machine = parsed.value
    deep = too_deep(machine)
    if deep is not None:
        node, kind, help = deep
        result.diagnostics.report("SW1020", f"this {kind} is nested more than {MAX_NESTING} levels deep",
                                  node.span, help=help)
        return result
    result.machine = machine
    result.comments = [ast.Comment(text, source.span(start, end)) for text, start, end in parsed.comments]
    return result


def _parse(source: SourceFile) -> Parsed:
    text = source.text
    return drive(_tables(), text, TreeBuilder(source), lambda slip: _name_slip(slip, text), _recovery)


def _recovery(*args: Any) -> Any:
    """The loop's recovery after a slip, imported only when a file has one."""
    from .recovery import Recovery

    return Recovery(*args)


def parse_text(text: str, path: str = "<string>") -> ParseResult:
    return parse_source(SourceFile(path, text))


def _build(source: SourceFile) -> tuple[Any, list[tuple[str, int, int]]]:
    """The syntax tree of a text that parses, and its comments (what the benchmarks and tests time)."""
    parsed = drive(_tables(), source.text, TreeBuilder(source))
    return parsed.value, parsed.comments
