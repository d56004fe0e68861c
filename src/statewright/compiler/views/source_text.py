"""How .fsm source writes a value: an expression, a string, a number, a range, a duration.

An expression gets only the parentheses it needs; a string the escapes it needs. display_width says how
wide a line is on a terminal, for the formatter's line width.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Callable

from ...grammar import ast
from ...grammar.operators import ATOM, BINARY_PRECEDENCE, COMPARE, CONDITIONAL, NEGATE, NOT, OR, POSTFIX, SUM
from ...grammar.parser import decode_long_string

INDENT = "    "
_LONG_STRING = re.compile(r'"""[^"]*(?:"(?!"")[^"]*)*"""')  # unrolled: no regex state per character
_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def expr_to_source(expr: ast.Expr, string: Callable[[ast.Literal], str] | None = None) -> str:
    """A guard expression as source text that parses back to the same tree.

    Parentheses appear only where precedence or associativity needs them: `(a + b) * c`, `a - (b - c)`,
    `not (a and b)`, but `a and b or c`. String literals are written double-quoted with escapes unless
    `string` writes them (the formatter keeps a triple-quoted literal triple-quoted). The walk is bottom-up
    over `ast.iter_expr`, so no nesting depth can exhaust the stack.
    """
    written: dict[int, tuple[int, str]] = {}  # id of a sub-expression -> how tightly it binds, its text

    def operand(e: ast.Expr, need: int) -> str:
        level, text = written[id(e)]
        return f"({text})" if level < need else text

    for e in reversed(list(ast.iter_expr(expr))):
        if isinstance(e, ast.BinaryOp):
            level = BINARY_PRECEDENCE[e.op]
            # left-associative chains keep their left operand bare; comparisons do not chain at all
            left_need = level + 1 if level == COMPARE else level
            written[id(e)] = level, f"{operand(e.left, left_need)} {e.op} {operand(e.right, level + 1)}"
        elif isinstance(e, ast.UnaryOp):
            level = NOT if e.op == "not" else NEGATE
            written[id(e)] = level, ("not " if e.op == "not" else "-") + operand(e.operand, level)
        elif isinstance(e, ast.Conditional):
            # `a if b else c if d else e` nests to the right, as in Python; its first two parts are tighter
            written[id(e)] = CONDITIONAL, (f"{operand(e.then, OR)} if {operand(e.test, OR)} else "
                                            f"{operand(e.orelse, CONDITIONAL)}")
        elif isinstance(e, ast.Attribute):
            written[id(e)] = POSTFIX, f"{operand(e.value, POSTFIX)}.{e.attr.value}"
        elif isinstance(e, ast.Index):
            written[id(e)] = POSTFIX, f"{operand(e.value, POSTFIX)}[{operand(e.index, CONDITIONAL)}]"
        elif isinstance(e, ast.Call):
            written[id(e)] = POSTFIX, (f"{e.func.value}(" + ", ".join(operand(a, CONDITIONAL) for a in e.args)
                                        + ")")
        elif isinstance(e, ast.Quantifier):
            # a conditional list is parenthesized: Python would read `in a if b` as a filter
            written[id(e)] = POSTFIX, (f"{e.func.value}({operand(e.element, CONDITIONAL)} for {e.var.value} in "
                                        f"{operand(e.items, OR)})")
        elif isinstance(e, ast.IsVariant):
            # a comparison: its operand binds tighter, as comparisons do not chain
            written[id(e)] = COMPARE, (f"{operand(e.value, SUM)} is {'not ' if e.negated else ''}"
                                        f"{e.type.value}")
        elif isinstance(e, ast.ListExpr):
            written[id(e)] = ATOM, "[" + ", ".join(operand(i, CONDITIONAL) for i in e.items) + "]"
        elif isinstance(e, ast.NameExpr):
            written[id(e)] = ATOM, e.name
        elif isinstance(e, ast.Literal):
            written[id(e)] = _literal_source(e, string)
        else:
            raise TypeError(f"not a guard expression: {type(e).__name__}")
    return written[id(expr)][1]


def _literal_source(literal: ast.Literal, string: Callable[[ast.Literal], str] | None) -> tuple[int, str]:
    value = literal.value
    if value is None:
        return ATOM, "none"
    if isinstance(value, bool):
        return ATOM, "true" if value else "false"
    if isinstance(value, str):
        return ATOM, string(literal) if string is not None else double_quoted(value)
    text = signed_number(value)
    # a negative number is written (and parsed) as unary minus applied to a literal
    return (NEGATE if text.startswith("-") else ATOM), text


def display_width(line: str) -> int:
    """Columns a terminal gives `line`: wide characters two, combining marks none."""
    width = 0
    for ch in line:
        if unicodedata.combining(ch):
            continue
        width += 2 if unicodedata.east_asian_width(ch) in "WF" else 1
    return width


def _is_control(ch: str) -> bool:
    # A lone surrogate is not escaped: the parser rejects `\uD800`-style escapes that do not pair up, so
    # one can only have been written raw (a str handed to format_text) and is kept that way.
    return unicodedata.category(ch) in ("Cc", "Zl", "Zp")


def double_quoted(value: str) -> str:
    """A "double-quoted" string literal that the parser reads back as exactly `value`."""
    out = ['"']
    for ch in value:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif _is_control(ch):
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def fits_triple_quotes(value: str) -> bool:
    """Whether `value` can be written raw between triple quotes: it holds no control character but tabs and
    line feeds (any other would be invisible in the file, or a line break of its own to an editor: a
    carriage return, a line or paragraph separator)."""
    return not any(_is_control(ch) and ch not in "\t\n" for ch in value)


def triple_quoted(value: str, depth: int, as_block: bool) -> str | None:
    """`value` as a \"\"\"triple-quoted\"\"\" string, or None when that would not read back as `value`.

    The block form puts the text one level deeper than the line that holds it and the closing quotes at
    that line's own indentation, which is exactly what the parser's dedenting undoes.
    """
    if not fits_triple_quotes(value):
        return None
    if as_block:
        inner = INDENT * (depth + 1)
        body = "\n".join(inner + line if line else "" for line in value.split("\n"))
        text = f'"""\n{body}\n{INDENT * depth}"""'
    else:
        text = f'"""{value}"""'
    if not _LONG_STRING.fullmatch(text) or decode_long_string(text) != value:
        return None
    return text


def range_source(r: ast.Range) -> str:
    """A range as source text: `1..5`, `1..`, `..80`, `-0.5..0.5`."""
    low = signed_number(r.low.value) if r.low is not None else ""
    high = signed_number(r.high.value) if r.high is not None else ""
    return f"{low}..{high}"


def written_number(value: float) -> str:
    if isinstance(value, int):
        return str(value)
    if math.isinf(value):
        return "1e999"  # the literal that overflowed to infinity reads back as infinity
    return repr(value)


def signed_number(value: float) -> str:
    if value < 0 or (isinstance(value, float) and math.copysign(1.0, value) < 0):
        return "-" + written_number(-value)
    return written_number(value)


def written_duration(d: ast.Duration) -> str:
    """`after 24h` as written, the number without leading zeros or trailing ones: `024h` is `24h`."""
    number, unit = d.text[:-1], d.text[-1]
    if "." in number:
        whole, fraction = number.split(".", 1)
        whole, fraction = whole.lstrip("0") or "0", fraction.rstrip("0")
        return f"{whole}.{fraction}{unit}" if fraction else f"{whole}{unit}"
    return f"{number.lstrip('0') or '0'}{unit}"
