"""Templates parsed with exact source positions: every Jinja token and node mapped back to the `.fsm` text.

Jinja gives its nodes line numbers only. The check environment here hands the parser tokens whose "line
number" is their offset in the template instead, so each node knows the exact token it starts at; the
offset is then mapped through the string literal (escapes, triple-quote dedent, newline normalisation) to
a span of the source file. Diagnostics underline the very name, field or operator they are about, and the
passes and source edits know exactly where a template reads a state.

The environment is the runtime's (same filters, tests and globals, so `check` accepts what a run can
render) with constant folding switched off: the check evaluates constants itself, with the runtime's
bounded operators. Parsing is guarded against nesting that would exhaust Python's stack.
"""

from __future__ import annotations

import bisect
import itertools
import re
import sys
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

import jinja2
from jinja2 import nodes
from jinja2.lexer import TokenStream
from jinja2.parser import Parser

from ...diagnostics import Span
from ...grammar import ast
from ...grammar.strings import OffsetMap, literal_offsets
from ...runtime.rendering import MAX_INT_DIGITS, NOT_A_VARIABLE, TEMPLATE_NAME, template_environment_class

# Brackets, blocks and runs of unary operators nested deeper than this are refused before Jinja's
# recursive parser sees them; a parsed tree deeper than MAX_TREE_DEPTH before Jinja's recursive compiler does.
MAX_TEMPLATE_NESTING = 30
MAX_TREE_DEPTH = 100

_NEWLINE = re.compile(r"\r\n|\r|\n")
_OPENERS = {"(": ")", "[": "]", "{": "}"}
_BLOCKS_WITH_END = frozenset({"if", "for", "macro", "call", "filter", "block", "with", "autoescape", "trans"})


@dataclass(frozen=True, slots=True)
class Token:
    offset: int  # in the template text as Jinja reads it (newlines normalised)
    kind: str  # Jinja's token type: "name", "operator", "string", "block_begin", ...
    value: str

    @property
    def end(self) -> int:
        return self.offset + len(self.value)


class TemplateSourceError(Exception):
    """The template cannot be parsed: a Jinja syntax error or nesting too deep, at an offset."""

    def __init__(self, message: str, offset: int, *, kind: str = "syntax", length: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.offset = offset
        self.length = length
        self.kind = kind  # "syntax" | "nesting"
        self.tokens: list[Token] = []  # the template's tokens, when it could be tokenized


# ---- from template offsets to source spans -----------------------------------------------------------


def string_offsets(string: ast.String) -> OffsetMap | None:
    """The source offset of each character of a string literal's value, and one past the last; None when
    the value cannot be lined up with the source (then callers fall back to the whole literal). A run of
    characters that come one after another is one entry (grammar.strings.OffsetMap)."""
    span = string.span
    if span is None:
        return None
    quotes = 3 if string.triple else 1
    return literal_offsets(span.source.text, span.start + quotes, span.end - quotes, string.triple, string.value)


def _short_string_offsets(text: str, start: int, end: int, value: str) -> OffsetMap | None:
    found = literal_offsets(text, start, end, False, value)
    if found is not None:
        found.trim(1)
    return found


def escaped_string_offsets(text: str, start: int, end: int, value: str) -> list[int] | None:
    """_short_string_offsets read character by character, escapes decoded (the reference the tests hold the
    runs to)."""
    out: list[int] = []
    chars: list[str] = []
    i = start
    while i < end:
        c = text[i]
        if c == "\\" and i + 1 < end:
            if text[i + 1] == "u" and i + 6 <= end:
                chars.append(chr(int(text[i + 2 : i + 6], 16)))
                out.append(i)
                i += 6
                continue
            chars.append(text[i + 1])
            out.append(i)
            i += 2
            continue
        chars.append(c)
        out.append(i)
        i += 1
    # a surrogate pair written as two escapes is one character of the value
    joined: list[int] = []
    k = 0
    while k < len(chars):
        joined.append(out[k])
        if "\ud800" <= chars[k] <= "\udbff" and k + 1 < len(chars) and "\udc00" <= chars[k + 1] <= "\udfff":
            k += 2
        else:
            k += 1
    return joined if len(joined) == len(value) else None


def normalized_text(value: str) -> tuple[str, OffsetMap]:
    """The template text as Jinja's lexer reads it (every line break one LF, a final one dropped), and
    for each of its characters, and one past the end, the position in `value`."""
    if "\r" not in value:  # every line break is one LF already
        text = value.removesuffix("\n")
        positions = OffsetMap()
        positions.add(0, len(text))
        positions.add(len(value))
        return text, positions
    return normalized_text_by_lines(value)


def normalized_text_by_lines(value: str) -> tuple[str, OffsetMap]:
    """normalized_text read line break by line break (any text takes this way)."""
    out: list[str] = []
    positions = OffsetMap()
    pos = 0
    for m in _NEWLINE.finditer(value):
        out.append(value[pos : m.start()])
        positions.add(pos, m.start() - pos)
        out.append("\n")
        positions.add(m.start())
        pos = m.end()
    out.append(value[pos:])
    positions.add(pos, len(value) - pos)
    text = "".join(out)
    if text.endswith("\n"):
        text = text[:-1]
        positions.trim(1)
    positions.add(len(value))
    return text, positions


# ---- the check environment -------------------------------------------------------------------------


def _located(raw: Iterator[tuple[int, str, str]], text: str, line_starts: list[int],
             record: list[Token]) -> Iterator[tuple[int, str, str]]:
    """Jinja's raw tokens with each "line number" replaced by the token's offset + 1."""
    cursor = 0
    while True:
        try:
            _, kind, value = next(raw)
        except StopIteration:
            return
        except jinja2.TemplateSyntaxError as e:
            line = max(1, min(e.lineno or 1, len(line_starts)))
            e.lineno = line_starts[line - 1] + 1
            raise
        pos = cursor
        if not text.startswith(value, pos):
            # whitespace control (`{{-`) drops whitespace from the text before; skip over it
            while pos < len(text) and text[pos].isspace() and not text.startswith(value, pos):
                pos += 1
            if not text.startswith(value, pos):
                pos = cursor
        cursor = pos + len(value)
        if kind == "integer" and len(value.replace("_", "")) > MAX_INT_DIGITS:
            raise jinja2.TemplateSyntaxError(
                f"a number with {len(value):,} digits; templates take at most {MAX_INT_DIGITS:,}", pos + 1)
        record.append(Token(pos, kind, value))
        yield pos + 1, kind, value


def _never_folded(function: Any) -> Any:
    """`function` as a filter or test Jinja will not call while compiling (it folds constants by calling
    filters; the check must not do the work a run would do)."""
    @jinja2.pass_context
    def wrapper(context: Any, *args: Any, **kwargs: Any) -> Any:
        return function(*args, **kwargs)
    return wrapper


def _check_environment_class() -> Any:
    base = template_environment_class()

    class CheckEnvironment(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__()
            env: Any = self  # the base class is built at run time, so its attributes are not typed here
            env.filters = {name: _never_folded(f) for name, f in env.filters.items()}
            env.tests = {name: _never_folded(f) for name, f in env.tests.items()}
            self.record: list[Token] = []
            self.lexed: tuple[str, list[Token]] | None = None  # the last template tokenize() read

        def _tokenize(self, source: str, name: str | None, filename: str | None = None,
                      state: str | None = None) -> TokenStream:
            if state is None and self.lexed is not None and self.lexed[0] == source:
                located: Any = ((t.offset + 1, t.kind, t.value) for t in self.lexed[1])  # lexed already
            else:
                text, _ = normalized_text(source)
                starts = [0] + [m.end() for m in re.finditer("\n", text)]
                self.record = []
                located = _located(self.lexer.tokeniter(source, name, filename, state), text, starts,
                                   self.record)
            return TokenStream(self.lexer.wrap(located, name, filename), name, filename)

        def _parse(self, source: str, name: str | None, filename: str | None) -> Any:
            # Jinja's own parse: the runtime's rewriting of loops and `~` is for rendering, not checking
            return Parser(self, source, name, filename).parse()

    return CheckEnvironment


_ENV: Any = None


def check_environment() -> Any:
    """The environment templates are checked with (one per process)."""
    global _ENV
    if _ENV is None:
        _ENV = _check_environment_class()()
    return _ENV


# ---- a parsed template -----------------------------------------------------------------------------


class TreeIndex(NamedTuple):
    """A template's nodes in one walk: every check of it reads these instead of walking the tree again
    (Jinja's iter_child_nodes is slow, and a large machine has a template per state). A template read
    without Jinja comes with its index, made as its tree is."""

    order: list[nodes.Node]  # every node, each before the nodes inside it (the order find_all gives)
    parents: dict[int, nodes.Node]  # id of a node -> the node it is in
    depth: int  # of the deepest node; the template itself is at 0


def tree_index(root: nodes.Node) -> TreeIndex:
    order: list[nodes.Node] = []
    parents: dict[int, nodes.Node] = {}
    deepest = 0
    stack: list[tuple[nodes.Node, int]] = [(root, 0)]
    while stack:
        node, depth = stack.pop()
        order.append(node)
        deepest = max(deepest, depth)
        children = list(node.iter_child_nodes())
        for child in children:
            parents[id(child)] = node
        stack.extend((child, depth + 1) for child in reversed(children))
    return TreeIndex(order, parents, deepest)


class ParsedTemplate:
    """One template's tree and tokens, and the way from a template offset back to the source."""

    def __init__(self, string: ast.String, tree: nodes.Template | None, tokens: list[Token], *,
                 index: TreeIndex | None = None, normalized: tuple[str, OffsetMap] | None = None) -> None:
        self.string = string
        self.tree = tree
        self.tokens = tokens
        self.index = index  # made as the tree was, by _parse_simple
        # the tokens' offsets and ends, in order (both rise): a token is found by bisection, and a template
        # of a hundred thousand tokens keeps two arrays of numbers, not two dictionaries of objects
        self._starts = array("q", [t.offset for t in tokens])
        self._ends = array("q", [t.end for t in tokens])
        self._positions: OffsetMap
        self.text, self._positions = normalized or normalized_text(string.value)
        self._offsets = string_offsets(string)  # with _positions: where each character of `text` is

    @property
    def simple(self) -> bool:
        """Read without Jinja (_parse_simple): only text and `{{ dotted.names }}`."""
        return self.index is not None

    # -- spans

    def span(self, start: int, end: int) -> Span:
        """The source span of template text [start, end); the whole literal when it cannot be mapped."""
        whole = self.string.span
        offsets = self._offsets
        if offsets is None or not 0 <= start < end <= len(self.text):
            return whole
        first = offsets[self._positions[start]]
        if self.string.triple:
            last = offsets[self._positions[end - 1]] + 1  # taken literally: one source character per character
        else:
            last = offsets[self._positions[end]]  # up to the next character, so an escape counts in full
        return whole.source.span(first, max(last, first + 1))

    def line_span(self, offset: int) -> Span:
        """The template line holding `offset`, without its surrounding whitespace."""
        start = self.text.rfind("\n", 0, max(offset, 0)) + 1
        end = self.text.find("\n", start)
        end = len(self.text) if end < 0 else end
        chunk = self.text[start:end]
        lead = len(chunk) - len(chunk.lstrip())
        trail = len(chunk.rstrip())
        if trail <= lead:
            return self.string.span
        return self.span(start + lead, start + trail)

    def _at(self, offset: int) -> int | None:
        """The index of the (last) token that starts at `offset`."""
        i = bisect.bisect_right(self._starts, offset) - 1
        return i if i >= 0 and self._starts[i] == offset else None

    def _ending(self, end: int) -> int | None:
        """The index of the (last) token that ends at `end`."""
        i = bisect.bisect_right(self._ends, end) - 1
        return i if i >= 0 and self._ends[i] == end else None

    def token_at(self, offset: int) -> Token | None:
        index = self._at(offset)
        return self.tokens[index] if index is not None else None

    def token_after(self, offset: int, kind: str = "name", skip: tuple[str, ...] = ()) -> Token | None:
        """The next token after the one at `offset`, if it is of `kind` (names in `skip` passed over)."""
        index = self._at(offset)
        if index is None:
            return None
        for i in range(index + 1, len(self.tokens)):
            t = self.tokens[i]
            if t.kind == "whitespace" or (t.kind == "name" and t.value in skip):
                continue
            return t if t.kind == kind else None
        return None

    def token_span(self, token: Token | None, fallback_offset: int) -> Span:
        if token is None:
            return self.line_span(fallback_offset)
        return self.span(token.offset, token.end)

    @staticmethod
    def offset(node: nodes.Node) -> int:
        return max((node.lineno or 1) - 1, 0)

    def name_span(self, node: nodes.Node) -> Span:
        """Where a node's own word is: a variable's name, a field after `.`, a filter's or test's name."""
        offset = self.offset(node)
        if isinstance(node, nodes.Getattr):
            return self.token_span(self.token_after(offset), offset)
        if isinstance(node, nodes.Getitem):
            return self.token_span(self.token_after(offset, kind=_kind_of(node.arg)), offset)
        if isinstance(node, nodes.Test):
            return self.token_span(self.token_after(offset, skip=("not",)), offset)
        return self.token_span(self.token_at(offset), offset)

    def node_span(self, node: nodes.Node) -> Span:
        """From the first token of `node` to the last one inside it, closing brackets included."""
        starts: list[int] = []
        ends: list[int] = []
        for n in _walk(node):
            offset = self.offset(n)
            own = self.token_at(offset)
            starts.append(offset)
            ends.append(own.end if own is not None else offset)
            if isinstance(n, (nodes.Getattr, nodes.Test)):
                word = self.token_after(offset, skip=("not",) if isinstance(n, nodes.Test) else ())
                if word is not None:
                    ends.append(word.end)
        start, end = min(starts), max(ends)
        first, last = self._at(start), self._ending(end)
        if first is None or last is None:
            return self.line_span(start)
        depth = 0
        for t in self.tokens[first : last + 1]:
            if t.kind == "operator" and t.value in _OPENERS:
                depth += 1
            elif t.kind == "operator" and t.value in _OPENERS.values():
                depth -= 1
        for i in range(last + 1, len(self.tokens)):
            t = self.tokens[i]
            if depth <= 0:
                break
            if t.kind == "operator" and t.value in _OPENERS.values():
                depth -= 1
                end = t.end
            elif t.kind != "whitespace":
                break
        return self.span(start, end)


def _kind_of(node: nodes.Node) -> str:
    if isinstance(node, nodes.Const) and isinstance(node.value, str):
        return "string"
    if isinstance(node, nodes.Const) and isinstance(node.value, int):
        return "integer"
    return "name"


def _walk(root: nodes.Node) -> Iterator[nodes.Node]:
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(list(node.iter_child_nodes())))


# ---- parsing ---------------------------------------------------------------------------------------


def _nesting_problem(tokens: list[Token]) -> TemplateSourceError | None:
    """Brackets, blocks or unary operators nested past MAX_TEMPLATE_NESTING, at the first one too deep."""
    brackets: list[Token] = []
    blocks: list[Token] = []
    unary_run: list[Token] = []
    previous: Token | None = None
    in_block_tag: Token | None = None  # the tag name of the block statement being read
    assigns = False
    limit = MAX_TEMPLATE_NESTING
    for t in tokens:
        if t.kind == "whitespace":
            continue
        if t.kind == "operator" and t.value in _OPENERS:
            brackets.append(t)
            if len(brackets) > limit:
                return TemplateSourceError(f"brackets are nested more than {limit} levels deep", t.offset,
                                           kind="nesting", length=1)
        elif t.kind == "operator" and t.value in _OPENERS.values() and brackets:
            brackets.pop()
        unary = (t.kind == "name" and t.value == "not") or (
            t.kind == "operator" and t.value in ("+", "-") and _operand_expected(previous))
        if unary:
            unary_run.append(t)
            if len(unary_run) > limit:
                first = unary_run[0]
                return TemplateSourceError(f"more than {limit} 'not', '-' or '+' in a row", first.offset,
                                           kind="nesting", length=len(first.value))
        else:
            unary_run = []
        if previous is not None and previous.kind == "block_begin" and t.kind == "name":
            in_block_tag, assigns = t, False
        elif t.kind == "operator" and t.value == "=" and in_block_tag is not None:
            assigns = True
        elif t.kind == "block_end" and in_block_tag is not None:
            tag = in_block_tag.value
            if tag in _BLOCKS_WITH_END or (tag == "set" and not assigns):
                blocks.append(in_block_tag)
                if len(blocks) > limit:
                    return TemplateSourceError(f"blocks are nested more than {limit} levels deep",
                                               in_block_tag.offset, kind="nesting", length=len(tag))
            elif tag.startswith("end") and blocks:
                blocks.pop()
            in_block_tag = None
        previous = t
    return None


def _operand_expected(previous: Token | None) -> bool:
    """Whether a `+` or `-` after `previous` is a sign rather than an operator between two values."""
    if previous is None or previous.kind in ("variable_begin", "block_begin"):
        return True
    if previous.kind == "operator":
        return previous.value not in (")", "]", "}")
    return previous.kind == "name" and previous.value in ("not", "and", "or", "in", "is", "if", "else")


def _tree_depth_problem(tree: nodes.Template) -> TemplateSourceError | None:
    stack: list[tuple[nodes.Node, int]] = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_TREE_DEPTH:
            return TemplateSourceError(f"the template is nested more than {MAX_TREE_DEPTH} operations deep",
                                       ParsedTemplate.offset(node), kind="nesting")
        stack.extend((child, depth + 1) for child in node.iter_child_nodes())
    return None


def tokenize(text: str) -> list[Token]:
    """Every token of a template (whitespace tokens included), with its offset."""
    env = check_environment()
    normal, _ = normalized_text(text)
    record: list[Token] = []
    starts = [0] + [m.end() for m in re.finditer("\n", normal)]
    try:
        for _ in _located(env.lexer.tokeniter(text, None), normal, starts, record):
            pass
    except jinja2.TemplateSyntaxError as e:
        raise TemplateSourceError(e.message or str(e), max((e.lineno or 1) - 1, 0)) from None
    env.lexed = (text, record)
    return record


# The shape most templates have: text and `{{ name }}` or `{{ name.field.field }}`, nothing else. These
# are read here, to the same tokens and tree Jinja's lexer and parser give them (a property test holds the
# two to that); every other template is Jinja's to read.
_SIMPLE_OUTPUT = re.compile(rf"\{{\{{([ \t\n]*)({TEMPLATE_NAME}(?:\.{TEMPLATE_NAME}){{0,20}})([ \t\n]*)\}}\}}")
_TAG_OPENING = re.compile(r"\{[{%#]")


def _parse_simple(string: ast.String, text: str, normalized: tuple[str, OffsetMap] | None = None
                  ) -> ParsedTemplate | None:
    """The template read without Jinja when it has only text and dotted names; None when it has more."""
    built = _SimpleTemplate()
    pos = 0
    for m in _SIMPLE_OUTPUT.finditer(text):
        # Jinja's lexer opens a tag at the first '{{', '{%' or '{#': it must be this one
        if _TAG_OPENING.search(text, pos, m.start() + 1) is not None:
            return None
        # interned, as the syntax tree's names are: a large machine's templates read the same inputs, states
        # and fields thousands of times, and the parsed templates are kept
        path = [sys.intern(part) for part in m.group(2).split(".")]
        if path[0] in NOT_A_VARIABLE:  # (words Jinja reads otherwise: the runtime's list)
            return None
        if m.start() > pos:
            built.data(text[pos : m.start()], pos)
        built.output(m, path)
        pos = m.end()
    if _TAG_OPENING.search(text, pos) is not None:
        return None
    if pos < len(text):
        built.data(text[pos:], pos)
    return built.parsed(string, normalized)


class _SimpleTemplate:
    """The tokens and tree of a template of text and dotted names, as Jinja's lexer and parser give them,
    built piece by piece."""

    def __init__(self) -> None:
        self.tokens: list[Token] = []
        self.body: list[nodes.Node] = []
        self.order: list[nodes.Node] = []  # each body node before the nodes inside it (as tree_index)
        self.parents: dict[int, nodes.Node] = {}
        self.deepest = 0

    def data(self, text: str, at: int) -> None:
        """Text outside the tags, at offset `at`."""
        self.tokens.append(Token(at, "data", text))
        data = nodes.TemplateData(text, lineno=at + 1)
        self.body.append(data)
        self.order.append(data)

    def output(self, m: re.Match[str], path: list[str]) -> None:
        """`{{ a.b.c }}`, matched by _SIMPLE_OUTPUT, its name and fields being `path`."""
        tokens = self.tokens
        at = m.start()
        tokens.append(Token(at, "variable_begin", "{{"))
        at += 2
        if m.group(1):
            tokens.append(Token(at, "whitespace", m.group(1)))
            at += len(m.group(1))
        tokens.append(Token(at, "name", path[0]))
        node: nodes.Expr = nodes.Name(path[0], "load", lineno=at + 1)
        chain = [node]
        at += len(path[0])
        for attr in path[1:]:
            tokens.append(Token(at, "operator", "."))
            node = nodes.Getattr(node, attr, "load", lineno=at + 1)
            chain.append(node)
            tokens.append(Token(at + 1, "name", attr))
            at += 1 + len(attr)
        if m.group(3):
            tokens.append(Token(at, "whitespace", m.group(3)))
            at += len(m.group(3))
        tokens.append(Token(at, "variable_end", "}}"))
        self.body.append(node)
        for inner, outer in itertools.pairwise(chain):
            self.parents[id(inner)] = outer
        self.order.extend(reversed(chain))
        self.deepest = max(self.deepest, 1 + len(chain))

    def parsed(self, string: ast.String, normalized: tuple[str, OffsetMap] | None) -> ParsedTemplate:
        """The template: its body in one Output node, every node given the check's environment."""
        body, order, parents = self.body, self.order, self.parents
        tree = nodes.Template([], lineno=1)
        order[:0] = [tree]
        if body:
            self.deepest = max(self.deepest, 2)
            output = nodes.Output(body, lineno=body[0].lineno)
            tree.body.append(output)
            order.insert(1, output)
            parents[id(output)] = tree
            for child in body:
                parents[id(child)] = output
        environment = check_environment()
        for n in order:  # what tree.set_environment does, without walking the tree again
            n.environment = environment
        return ParsedTemplate(string, tree, self.tokens, index=TreeIndex(order, parents, self.deepest),
                              normalized=normalized)


def parse_template(string: ast.String) -> ParsedTemplate:
    """The template in a string literal, parsed; raises TemplateSourceError when it cannot be."""
    normalized = normalized_text(string.value)
    simple = _parse_simple(string, normalized[0], normalized)
    return simple if simple is not None else parse_with_jinja(string)


def parse_with_jinja(string: ast.String) -> ParsedTemplate:
    """parse_template through Jinja's lexer and parser, whatever the template (any template takes this way)."""
    text = string.value
    tokens = tokenize(text)
    problem = _nesting_problem(tokens)
    if problem is None:
        env = check_environment()
        try:
            tree = env.parse(text)
        except jinja2.TemplateSyntaxError as e:
            problem = TemplateSourceError(e.message or str(e), max((e.lineno or 1) - 1, 0))
        except RecursionError:
            problem = TemplateSourceError("the template is nested too deeply to parse", 0, kind="nesting")
        finally:  # the one environment keeps no template's tokens past its parse (a server runs for days)
            env.lexed, env.record = None, []
        if problem is None:
            problem = _tree_depth_problem(tree)
            if problem is None:
                return ParsedTemplate(string, tree, tokens)
    problem.tokens = tokens
    raise problem
