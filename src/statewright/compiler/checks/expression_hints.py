"""What the expression checker says besides what is wrong: a shortened expression and the hints that fix it."""

from __future__ import annotations

from ...grammar import ast
from .. import ir
from .type_algebra import Record, TypeLike, is_numeric, is_stringy
from .values import is_number_text


def shorten_source(e: ast.Expr | None) -> str:
    from ..views.graph import shorten
    from ..views.source_text import expr_to_source  # here, not at import: only messages need the printer

    return shorten(expr_to_source(e), 60) if e is not None else "..."


def update_help(e: ast.Expr, maybe_none: str, first: str) -> str:
    """How an update's value reads `maybe_none` (an output whose state may not have run, an optional value)
    safely where `e` uses it: tested in a conditional, or coalesced when `e` is that value itself."""
    used = shorten_source(e)
    help = f"{first}: '{used} if {maybe_none} != none else ...'"
    if used == maybe_none:
        help += f", or give a value for when it is none: '{maybe_none} or ...'"
    return help


def mismatch_hint(e: ast.BinaryOp, lt: TypeLike, rt: TypeLike) -> str:
    """How to repair an operation on operands of the types `lt` and `rt` that do not go together."""
    if (is_numeric(lt) and is_stringy(rt)) or (is_stringy(lt) and is_numeric(rt)):
        number_side, text_side = (e.left, e.right) if is_numeric(lt) else (e.right, e.left)
        if (isinstance(text_side, ast.Literal) and isinstance(text_side.value, str)
                and is_number_text(text_side.value, ir.FLOAT)):
            return f"write the number without quotes: {text_side.value.strip()}"
        if e.op in ("+", "-", "*", "/", "%"):
            if e.op == "+":
                return "'+' adds two numbers or joins two strings"
            return f"'{e.op}' takes two numbers"
        return f"'{number_side.span.text}' is a number; compare it with a number, not a string"
    for side, t in ((e.left, lt), (e.right, rt)):
        if isinstance(t, (ir.Named, Record)):
            return f"use one of its fields: {side.span.text}.FIELD"
    if e.op in ("<", "<=", ">", ">="):
        return f"'{e.op}' orders two numbers or two strings"
    if e.op in ("==", "!="):
        return "values of these types are never equal"
    if e.op in ("in", "not in"):
        return "an item is looked for in a list of items of its type, or a str in a str"
    return "'+' adds numbers or joins two strings or two lists; '-', '*', '/' and '%' take numbers"


def boolean_hint(text: str, t: TypeLike) -> str:
    if is_numeric(t):
        return f"compare the number with something, e.g. {text} > 0"
    if is_stringy(t):
        return f'compare the text with something, e.g. {text} == "..." or "..." in {text}'
    if isinstance(t, ir.ListOf):
        return f"test the list, e.g. len({text}) > 0"
    if isinstance(t, (ir.Named, Record)):
        return f"compare one of its fields, e.g. {text}.FIELD == ..."
    if isinstance(t, ir.Variant):
        return f"test which variant it is, e.g. {text} is {t.options[0]}"
    return "compare the value with something: ==, !=, <, >, in"
