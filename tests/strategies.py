"""Hypothesis strategies that write random, syntactically valid statewright machines as source text.

Every construct of the grammar can appear, in any order the grammar allows, laid out at random: spacing,
line breaks, tabs, optional colons and trailing commas, redundant parentheses, and comments wherever the
grammar allows whitespace. Strings carry hostile content (quotes, backslashes, `{{ }}`, triple quotes,
control characters, unicode) in every spelling the grammar accepts. The machines are syntactically valid
only: names need not resolve and types need not match, so semantic checks will report problems.

    from strategies import machines  # tests/ is on sys.path under pytest
    @given(machines())
    def test_something(source: str) -> None: ...
"""

from __future__ import annotations

import random
import unicodedata
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

# Words the grammar spells as keywords somewhere; a NAME drawn from this module avoids them all so that
# it lexes as a name in every context.
KEYWORDS = frozenset(
    ["machine", "description", "input", "model", "verifier", "temperature", "limits", "type", "list", "tool", "agent", "prompt", "tools", "memory", "fallbacks", "start", "final", "state", "do", "output", "tell", "visits", "retries", "call", "result", "fail", "ask", "after", "per", "timeout", "when", "otherwise", "stay", "max", "not", "and", "or", "in", "true", "false", "none", "test", "reply", "verdict", "expect", "path", "failure", "secrets", "headers", "query", "instruction", "visit", "contains", "allow", "unused", "replies", "is", "for", "len", "matches", "branch",
     "parallel", "join", "where", "concurrency", "if", "else"]
)

_WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_COMPARE_OPS = ["==", "!=", "<", "<=", ">", ">="]
_ARITH_OPS = ["+", "-", "*", "/", "%"]

Draw = Callable[[st.SearchStrategy[Any]], Any]

# A piece of source: a token, and whether it starts a statement (statements get line-like gaps).
Piece = tuple[str, bool]

# ---- leaves --------------------------------------------------------------------------------------

_FAMILIAR_NAMES = ["draft", "review", "writer", "critic", "score", "x", "y", "_", "std", "a1", "Critique", "str",
                   "int", "float", "bool", "len", "steps", "lookup", "all", "last"]

names: st.SearchStrategy[str] = st.one_of(
    st.sampled_from(_FAMILIAR_NAMES),
    st.builds(
        lambda head, tail: head + tail,
        st.sampled_from("abcxyzABZ_"),
        st.text(alphabet="abcdefghijklmnopqrstuvwxyzQ_0123456789", max_size=6),
    ).filter(lambda s: s not in KEYWORDS),
)

# Characters chosen to break naive escaping, dedenting and template handling.
_HOSTILE_PIECES = [
    '"', '\\', "{{", "}}", "{%", "#", "\n", "\t", "\r", '"""', '""', "'", "`", " ", "  ", "é", "€", "😀",
    "\u2028", "\u2029", "\x85", "\x00", "\x1b", "\x7f", "\ufeff", "\u200d", "\\n", "\\u0041", "\U0001F600",
]

string_values: st.SearchStrategy[str] = st.lists(
    st.one_of(
        st.sampled_from(_HOSTILE_PIECES),
        st.characters(codec="utf-8"),
        st.text(alphabet="abc XYZ.,:;-", min_size=1, max_size=8),
    ),
    max_size=12,
).map("".join)


def _needs_unicode_escape(ch: str) -> bool:
    return unicodedata.category(ch) in ("Cc", "Zl", "Zp")


def double_quoted(value: str, *, escape_all: bool = False) -> str:
    """`value` spelled as a double-quoted string token; `escape_all` writes non-ASCII as \\uXXXX."""
    out = ['"']
    for ch in value:
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "\n":
            out.append("\\u000a" if escape_all else "\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t" if escape_all else "\t")  # a raw tab is allowed inside a string
        elif _needs_unicode_escape(ch) or (escape_all and 0x7F < ord(ch) <= 0xFFFF):
            out.append(f"\\u{ord(ch):04X}")
        elif escape_all and ord(ch) > 0xFFFF:  # as a UTF-16 surrogate pair: \uD83D\uDE00
            high, low = divmod(ord(ch) - 0x10000, 0x400)
            out.append(f"\\u{0xD800 + high:04X}\\u{0xDC00 + low:04X}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _triple_safe(text: str) -> str:
    """Text that may sit inside triple quotes: no closing quotes, no carriage returns."""
    text = text.replace("\r", "")
    while '"""' in text:
        text = text.replace('"""', '""')
    return text


@st.composite
def string_tokens(draw: Draw) -> str:
    """One string token: double-quoted with escapes, inline triple-quoted, or a triple-quoted block."""
    kind = draw(st.sampled_from(["double", "double", "double", "inline", "block"]))
    if kind == "double":
        return double_quoted(draw(string_values), escape_all=draw(st.booleans()))
    if kind == "inline":
        text = _triple_safe(draw(string_values)).replace("\n", " ")
        if text.endswith('"'):
            text += "."  # a quote right before the closing quotes would close the string early
        return f'"""{text}"""'
    lines = [_triple_safe(line) for line in draw(st.lists(string_values, min_size=1, max_size=4))]
    lines = [line for chunk in lines for line in chunk.split("\n")]
    base = draw(st.sampled_from(["", "  ", "    ", "\t", "        "]))
    body = "\n".join(base + draw(st.sampled_from(["", "", "  ", "\t"])) + line for line in lines)
    first = draw(st.sampled_from(["\n", "\n", "", "  \n"]))  # text may start on the opening line
    closing = draw(st.sampled_from(["\n" + base, "\n", "\n  \t"]))
    return f'"""{first}{body}{closing}"""'


def _float_spelling(value: float) -> str:
    text = repr(value)
    return text if "inf" not in text and "nan" not in text else "1e999"


numbers: st.SearchStrategy[str] = st.one_of(
    st.integers(min_value=0, max_value=10**15).map(str),
    st.integers(min_value=0, max_value=999).map(lambda n: f"00{n}"),  # leading zeros read as decimal
    st.floats(min_value=0, max_value=1e300, allow_nan=False, allow_infinity=False).map(_float_spelling),
    st.sampled_from(["0.50", "1.0", "2E3", "1e-7", "3.25e+2", "1e999", "0.0", "123456789.987654321"]),
)
ints: st.SearchStrategy[str] = st.integers(min_value=0, max_value=10**6).map(str)
comment_texts: st.SearchStrategy[str] = st.one_of(
    st.sampled_from(["", "#", " note", " TODO: split", ' "quoted" {{ x }}', " -> not code", ' """']),
    st.text(st.characters(codec="utf-8", exclude_characters="\n\r"), max_size=20),
).map(lambda t: "#" + t)


# ---- expressions and values, as token lists ------------------------------------------------------


def _paren(tokens: list[str]) -> list[str]:
    """Operands are parenthesised unless they are one token, so the generated tree is never in doubt."""
    return tokens if len(tokens) == 1 else ["(", *tokens, ")"]


_expr_leaves: st.SearchStrategy[list[str]] = st.one_of(
    names.map(lambda n: [n]),
    numbers.map(lambda n: [n]),
    string_tokens().map(lambda s: [s]),
    st.sampled_from([["true"], ["false"], ["none"]]),
)


def _joined(items: list[list[str]], trailing_comma: bool) -> list[str]:
    out: list[str] = []
    for i, item in enumerate(items):
        if i:
            out.append(",")
        out.extend(item)
    if trailing_comma and items:
        out.append(",")
    return out


def _expr_forms(children: st.SearchStrategy[list[str]]) -> st.SearchStrategy[list[str]]:
    binary_ops = st.sampled_from(["or", "and", *_COMPARE_OPS, "in", "not in", *_ARITH_OPS])
    return st.one_of(
        st.builds(lambda a, op, b: [*_paren(a), *op.split(), *_paren(b)], children, binary_ops, children),
        children.map(lambda a: ["not", *_paren(a)]),
        children.map(lambda a: ["-", *_paren(a)]),
        st.builds(lambda a, n: [*_paren(a), ".", n], children, names),
        st.builds(lambda a, i: [*_paren(a), "[", *i, "]"], children, children),
        st.builds(lambda f, args: [f, "(", *_joined(args, False), ")"], names, st.lists(children, max_size=3)),
        st.builds(lambda f, element, var, items: [f, "(", *element, "for", var, "in", *items, ")"],
                  st.one_of(st.sampled_from(["all", "any", "count"]), names), children, names, children),
        st.builds(lambda a, negated, t: [*_paren(a), "is", *(["not"] if negated else []), t], children,
                  st.booleans(), names),
        st.builds(lambda items, comma: ["[", *_joined(items, comma), "]"], st.lists(children, max_size=3),
                  st.booleans()),
        children.map(lambda a: ["(", *a, ")"]),  # a redundant pair of parentheses
        st.builds(lambda a, c, b: [*_paren(a), "if", *_paren(c), "else", *_paren(b)], children, children, children),
    )


expressions: st.SearchStrategy[list[str]] = st.recursive(_expr_leaves, _expr_forms, max_leaves=10)


def _object(entries: list[tuple[str, bool, list[str], bool]]) -> list[str]:
    out = ["{"]
    for i, (key, colon, value, comma) in enumerate(entries):
        if key in KEYWORDS and i and out[-1] != ",":
            out.append(",")  # right after a value, a keyword-named key only reads as a name after a comma
        out += [key, *([":"] if colon else []), *value, *([","] if comma else [])]
    out.append("}")
    return out


# Object keys may be words the grammar uses as keywords: test data mirrors user types, and a field called
# `model` or `state` is ordinary.
_object_keys = st.one_of(names, st.sampled_from(sorted(KEYWORDS)))


def _value_forms(children: st.SearchStrategy[list[str]]) -> st.SearchStrategy[list[str]]:
    entry = st.tuples(_object_keys, st.booleans(), children, st.booleans())
    return st.one_of(
        st.builds(lambda items, comma: ["[", *_joined(items, comma), "]"], st.lists(children, max_size=4),
                  st.booleans()),
        st.lists(entry, max_size=4).map(_object),
    )


_value_leaves: st.SearchStrategy[list[str]] = st.one_of(
    string_tokens().map(lambda s: [s]),
    numbers.map(lambda n: [n]),
    numbers.map(lambda n: ["-", n]),
    st.sampled_from([["true"], ["false"], ["none"]]),
)
values: st.SearchStrategy[list[str]] = st.recursive(_value_leaves, _value_forms, max_leaves=8)
objects: st.SearchStrategy[list[str]] = _value_forms(values).filter(lambda toks: toks[0] == "{")


def _type_forms(children: st.SearchStrategy[list[str]]) -> st.SearchStrategy[list[str]]:
    return children.map(lambda t: ["list", "[", *t, "]"])


_base_types: st.SearchStrategy[list[str]] = st.recursive(
    st.one_of(
        names.map(lambda n: [n]),
        st.lists(string_tokens(), min_size=1, max_size=3).map(lambda vs: _joined([[v] for v in vs], False)),
    ).map(lambda toks: [t if t != "," else "|" for t in toks]),
    lambda children: st.builds(
        lambda t, optional: ["list", "[", *t, *(["?"] if optional else []), "]"], children, st.booleans()
    ),
    max_leaves=3,
)
type_refs: st.SearchStrategy[list[str]] = st.builds(
    lambda t, optional: [*t, *(["?"] if optional else [])], _base_types, st.booleans()
)
_range_ends = st.one_of(st.just([]), numbers.map(lambda n: [n]), numbers.map(lambda n: ["-", n]))
_constraint = st.one_of(
    st.builds(lambda kind, low, high: [kind, *low, "..", *high], st.sampled_from(["in", "len"]), _range_ends,
              _range_ends),
    string_tokens().map(lambda s: ["matches", s]),
)
# Constraints after a type: usually in the canonical order (in, len, matches), sometimes not, sometimes
# repeated — all of which parse (the checks report an order or a repeat).
constraints: st.SearchStrategy[list[str]] = st.lists(_constraint, max_size=3).map(
    lambda cs: [t for c in cs for t in c])
tool_names: st.SearchStrategy[list[str]] = st.lists(names, min_size=1, max_size=3).map(
    lambda parts: [t for i, p in enumerate(parts) for t in ([".", p] if i else [p])]
)


# ---- statements ----------------------------------------------------------------------------------


def _statement(*tokens: str | list[str]) -> list[Piece]:
    flat: list[str] = []
    for t in tokens:
        flat.extend([t] if isinstance(t, str) else t)
    return [(tok, i == 0) for i, tok in enumerate(flat)]


def _block(head: list[Piece], body: list[list[Piece]]) -> list[Piece]:
    pieces = [*head, ("{", False)]
    for statement in body:
        pieces.extend(statement)
    pieces.append(("}", True))
    return pieces


def _optional(draw: Draw, strategy: st.SearchStrategy[Any]) -> Any:
    return draw(strategy) if draw(st.booleans()) else None


@st.composite
def _settings(draw: Draw) -> list[Piece]:
    kind = draw(st.sampled_from(["description", "input", "model", "verifier", "temperature", "limits"]))
    if kind == "description":
        return _statement("description", draw(string_tokens()))
    if kind == "input":
        default = _optional(draw, values)
        return _statement("input", draw(names), ":", draw(type_refs), draw(constraints),
                          *((["="] + default) if default else []))
    if kind == "model":
        return _statement("model", draw(string_tokens()))
    if kind == "verifier":
        return _statement("verifier", "model", draw(string_tokens()))
    if kind == "temperature":
        return _statement("temperature", draw(numbers))
    limits = draw(st.lists(st.tuples(names, numbers), max_size=4))
    return _block(_statement("limits"), [_statement(n, v) for n, v in limits])


@st.composite
def _type_decl(draw: Draw) -> list[Piece]:
    fields = []
    for _ in range(draw(st.integers(0, 4))):
        doc = _optional(draw, string_tokens())
        fields.append(_statement(draw(names), ":", draw(type_refs), draw(constraints), *([doc] if doc else [])))
    return _block(_statement("type", draw(names)), fields)


@st.composite
def _tool_decl(draw: Draw) -> list[Piece]:
    path = _optional(draw, string_tokens())
    head = _statement("tool", draw(tool_names), *(["=", path] if path else []))
    if draw(st.booleans()):
        return head
    items = draw(st.lists(st.one_of(
        st.tuples(names, values).map(lambda option: _statement(*option)),
        _tool_secrets(), _tool_text_entries(),
    ), max_size=4))
    return _block(head, items)


@st.composite
def _tool_secrets(draw: Draw) -> list[Piece]:
    secrets = [[n] for n in draw(st.lists(names, max_size=3))]
    return _statement("secrets", "[", _joined(secrets, draw(st.booleans()) and bool(secrets)), "]")


@st.composite
def _tool_text_entries(draw: Draw) -> list[Piece]:
    """`headers { ... }` or `query { ... }`: names bare or quoted, values with `${...}` among the hostile text."""
    value = st.one_of(string_tokens(), st.sampled_from(['"Bearer ${KEY}"', '"$${KEY} ${A}${B}"', '"${"']))
    entries = []
    for _ in range(draw(st.integers(0, 3))):
        name = draw(st.one_of(names, string_tokens(), st.just('"X-Api-Key"')))
        colon, comma = draw(st.booleans()), draw(st.booleans())
        entries.append(_statement(name, *([":"] if colon else []), draw(value), *([","] if comma else [])))
    return _block(_statement(draw(st.sampled_from(["headers", "query"]))), entries)


@st.composite
def _agent_item(draw: Draw) -> list[Piece]:
    kind = draw(st.sampled_from(["prompt", "model", "temperature", "tools", "memory", "fallbacks"]))
    if kind in ("prompt", "model"):
        return _statement(kind, draw(string_tokens()))
    if kind == "temperature":
        return _statement(kind, draw(numbers))
    if kind == "tools":
        tools = draw(st.lists(tool_names, max_size=3))
        return _statement("tools", "[", _joined(tools, draw(st.booleans()) and bool(tools)), "]")
    if kind == "memory":
        policy = draw(st.one_of(st.sampled_from(["all", "none", "last"]), names))
        count = _optional(draw, ints)
        return _statement("memory", policy, *([count] if count else []))
    models = [[m] for m in draw(st.lists(string_tokens(), max_size=3))]
    return _statement("fallbacks", "[", _joined(models, draw(st.booleans()) and bool(models)), "]")


@st.composite
def _agent_decl(draw: Draw) -> list[Piece]:
    items = draw(st.lists(_agent_item(), max_size=5))
    return _block(_statement("agent", draw(names)), items)


# a bound is a number or the name of the input it is read from (`max rounds`)
_bound_counts: st.SearchStrategy[str] = st.one_of(ints, ints, names)


@st.composite
def _transition(draw: Draw) -> list[Piece]:
    kind = draw(st.sampled_from(["guard", "condition", "always", "otherwise", "stay", "stay", "timeout"]))
    bound = ["max", draw(_bound_counts)] if draw(st.booleans()) else []
    if bound and kind == "stay" and draw(st.booleans()):
        bound += ["per", "visit"]
    if kind == "guard":
        return _statement("when", draw(expressions), "->", draw(names), bound)
    if kind == "condition":
        return _statement("when", draw(string_tokens()), "->", draw(names), bound)
    if kind == "always":
        return _statement("->", draw(names), bound)
    if kind == "otherwise":
        return _statement("otherwise", "->", draw(names), bound)
    if kind == "timeout":
        number = draw(st.sampled_from(["1", "90", "024", "1.5", "2.50", "0.25"]))
        return _statement("after", number + draw(st.sampled_from("smhd")), "->", draw(names), bound)
    return _statement("otherwise", "stay", bound)


@st.composite
def _state_item(draw: Draw) -> list[Piece]:
    kind = draw(st.sampled_from(["agent", "do", "output", "tell", "visits", "retries", "call", "result",
                                 "fail", "ask", "model", "parallel", "join", "for", "transition", "transition",
                                 "transition"]))
    if kind == "agent":
        return _statement("agent", draw(names))
    if kind in ("do", "result", "fail", "ask", "model"):
        return _statement(kind, draw(string_tokens()))
    if kind == "output":
        if draw(st.integers(0, 3)) == 0:  # a variant output: one of several declared types
            options = draw(st.lists(names, min_size=2, max_size=3))
            return _statement("output", [t for i, n in enumerate(options) for t in (["|", n] if i else [n])])
        return _statement("output", draw(type_refs))
    if kind == "tell":
        agents = [[n] for n in draw(st.lists(names, max_size=3))]
        return _statement("tell", "[", _joined(agents, draw(st.booleans()) and bool(agents)), "]")
    if kind == "visits":
        return _statement(kind, draw(_bound_counts))
    if kind == "retries":
        return _statement(kind, draw(ints))
    if kind == "parallel":
        branches = [[n] for n in draw(st.lists(names, max_size=4))]
        return _statement("parallel", "[", _joined(branches, draw(st.booleans()) and bool(branches)), "]")
    if kind == "join":
        rule = draw(st.sampled_from(["all", "first", "first", "any"]))
        count = [draw(ints)] if draw(st.booleans()) else []
        guard = ["where", *draw(expressions)] if draw(st.booleans()) else []
        return _statement("join", rule, count, guard)
    if kind == "for":
        item_names = [draw(names)] if draw(st.booleans()) else [draw(names), ",", draw(names)]
        limit = ["max", draw(_bound_counts)] if draw(st.booleans()) else []
        concurrency = ["concurrency", draw(ints)] if draw(st.booleans()) else []
        return _statement("for", item_names, "in", draw(expressions), limit, concurrency)
    if kind == "call":
        args = [[n, "=", *e] for n, e in draw(st.lists(st.tuples(names, expressions), max_size=3))]
        return _statement("call", draw(tool_names), "(", _joined(args, draw(st.booleans()) and bool(args)), ")")
    return draw(_transition())


@st.composite
def _state_decl(draw: Draw) -> list[Piece]:
    modifiers = draw(st.lists(st.sampled_from(["start", "final", "branch"]), max_size=2))
    head = _statement(*modifiers, "state", draw(names))
    if draw(st.integers(0, 4)) == 0:
        return head
    return _block(head, draw(st.lists(_state_item(), max_size=6)))


@st.composite
def _test_item(draw: Draw) -> list[Piece]:
    kind = draw(st.sampled_from(["input", "reply", "reply", "verdict", "timeout", "path", "final", "result",
                                 "failure", "output", "instruction", "unused"]))
    if kind == "timeout":
        return _statement("timeout", draw(names))
    if kind == "input":
        return _statement("input", draw(objects))
    if kind == "reply":
        variant = [draw(names)] if draw(st.integers(0, 3)) == 0 else []
        return _statement("reply", draw(names), variant, draw(values))
    if kind == "verdict":
        answer = draw(st.one_of(string_tokens(), st.just("none")))
        return _statement("verdict", draw(names), answer)
    if kind == "path":
        path = [[n] for n in draw(st.lists(names, max_size=4))]
        return _statement("expect", "path", "[", _joined(path, draw(st.booleans()) and bool(path)), "]")
    if kind == "final":
        return _statement("expect", "final", draw(names))
    if kind == "result":
        return _statement("expect", "result", draw(values))
    if kind in ("output", "instruction"):
        visit = ["visit", draw(ints)] if draw(st.booleans()) else []
        contains = ["contains"] if kind == "instruction" or draw(st.booleans()) else []
        expected = [draw(string_tokens())] if contains or kind == "instruction" else draw(values)
        if kind == "instruction" and draw(st.booleans()):
            contains = []
        return _statement("expect", kind, draw(names), visit, contains, expected)
    if kind == "unused":
        return _statement("allow", "unused", "replies")
    return _statement("expect", "failure", draw(names))


@st.composite
def _test_decl(draw: Draw) -> list[Piece]:
    return _block(_statement("test", draw(string_tokens())), draw(st.lists(_test_item(), max_size=5)))


machine_items: st.SearchStrategy[list[Piece]] = st.one_of(
    _settings(), _type_decl(), _tool_decl(), _agent_decl(), _state_decl(), _state_decl(), _test_decl()
)


# ---- layout --------------------------------------------------------------------------------------


_INDENTS = ["", "    ", "        ", "\t"]
_COMMENT_LEADS = [" ", "  ", "\t", "\n{indent}", "\n\n{indent}", "\n{indent}"]
_COMMENT_ENDS = ["", "", " ", "\t"]
_ODD_INLINE_GAPS = ["\t", "  ", " \t ", "\n\n"]


class _Layout:
    """Chooses the whitespace and comments between tokens.

    The choices come from a seeded generator rather than one draw each: a machine has hundreds of gaps,
    and drawing them one by one would make generation several times slower. The seed and the comment
    texts are drawn, so every layout is still reproducible from a failing example.
    """

    def __init__(self, seed: int, comments: list[str], with_comments: bool) -> None:
        self.random = random.Random(seed)
        self.comments = comments
        self.with_comments = with_comments

    def comment_gap(self, indent: str) -> str:
        """Whitespace holding one to three comments, each ending its line."""
        out = []
        for _ in range(self.random.randint(1, 3)):
            lead = self.random.choice(_COMMENT_LEADS).format(indent=indent)
            out.append(lead + self.random.choice(self.comments) + self.random.choice(_COMMENT_ENDS) + "\n")
        out.append(indent)
        return "".join(out)

    def gap(self, previous: str, token: str, starts_statement: bool) -> str:
        indent = self.random.choice(_INDENTS)
        roll = self.random.randrange(100)
        if self.with_comments and roll < 8:
            return self.comment_gap(indent)
        if starts_statement:
            if roll < 70:
                return "\n" + indent
            if roll < 82:
                return "\n\n" + indent
            if roll < 88:
                return "\n\n\n" + indent
            return " "
        # no gap only where the two tokens cannot run together: not two words, not two strings (`""""`)
        if roll < 10 and not (previous[-1] in _WORD and token[0] in _WORD) and not (
            previous[-1] == '"' and token[0] == '"'
        ):
            return ""
        if roll < 80:
            return " "
        if roll < 90:
            return "\n" + indent
        return self.random.choice(_ODD_INLINE_GAPS)


@st.composite
def machines(draw: Draw, *, with_comments: bool = True, max_items: int = 8) -> str:
    """The source text of one random machine."""
    items = draw(st.lists(machine_items, max_size=max_items))
    pieces: list[Piece] = [("machine", True), (draw(names), False), ("{", False)]
    for item in items:
        pieces.extend(item)
    pieces.append(("}", True))
    layout = _Layout(draw(st.integers(0, 2**32)), draw(st.lists(comment_texts, min_size=1, max_size=6)),
                     with_comments)
    out = []
    if with_comments and layout.random.randrange(4) == 0:
        out.append(layout.comment_gap("").lstrip(" \t\n"))
    previous = ""
    for token, starts_statement in pieces:
        if previous:
            out.append(layout.gap(previous, token, starts_statement))
        out.append(token)
        previous = token
    if with_comments and layout.random.randrange(4) == 0:
        out.append(layout.comment_gap(""))
    out.append(layout.random.choice(["\n", "", "\n\n", "  \n"]))
    return "".join(out)
