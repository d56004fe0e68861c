"""Values against types: what a literal must look like to fit a type, each problem with a hint.

Input defaults, tool options and test replies are checked here; shared by the type checks and the
test-block checks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...diagnostics import Span, did_you_mean, quoted_list
from ...grammar import ast
from .. import ir
from .constraints import value_violations
from .resolve import (
    Symbols,
)
from .type_algebra import Record, TypeLike, fields_of, normalized, type_text, unknown_field_help

# ---- values against types ------------------------------------------------------------------------


@dataclass(frozen=True)
class ValueProblem:
    span: Span
    message: str
    help: str = ""
    constraint: bool = False  # the value fits the type but breaks a constraint (`in`, `len`, `matches`)


_KIND_WORDS = {"str": "a string", "int": "a whole number", "float": "a number", "bool": "true or false",
               "none": "none", "list": "a list", "object": "an object"}


def value_problems(value: ast.Value, t: TypeLike, symbols: Symbols,
                   constraints: tuple[ast.Constraint, ...] = (), *, partial: bool = False) -> list[ValueProblem]:
    """Every place where `value` does not fit `t` (and, with them, `constraints`; the fields of declared
    types bring their own), innermost first within each branch. With `partial`, an object may leave fields
    out (a test's `expect output` names only the fields it checks)."""
    out: list[ValueProblem] = []
    stack: list[tuple[ast.Value, TypeLike, tuple[ast.Constraint, ...]]] = [(value, t, constraints)]
    while stack:
        v, want, limits = stack.pop()
        want = normalized(want)
        if limits and v.kind != "none":
            out.extend(ValueProblem(span, message, help, True) for span, message, help in value_violations(v, limits))
        got = _KIND_WORDS.get(v.kind, v.kind)
        if want == ir.ANY:
            continue
        if isinstance(want, ir.Optional_):
            if v.kind != "none":
                stack.append((v, want.inner, ()))
            continue
        if v.kind == "none":
            out.append(ValueProblem(v.span, f"none does not fit {type_text(want)}",
                                    f"make the type optional ({type_text(want)}?) or give a value"))
            continue
        if isinstance(want, ir.Prim):
            fits = (v.kind == want.name) or (want == ir.FLOAT and v.kind == "int")
            if not fits:
                out.append(ValueProblem(v.span, f"expected {type_text(want)}, found {got}",
                                        _scalar_hint(v, want)))
        elif isinstance(want, ir.Enum):
            if v.kind != "str":
                out.append(ValueProblem(v.span, f"expected one of {type_text(want)}, found {got}",
                                        "write one of the values, in quotes"))
            elif v.value not in want.values:
                out.append(ValueProblem(v.span, f"\"{v.value}\" is not one of {type_text(want)}",
                                        did_you_mean(str(v.value), want.values)))
        elif isinstance(want, ir.ListOf):
            if v.kind != "list":
                out.append(ValueProblem(v.span, f"expected {type_text(want)}, found {got}",
                                        "write a list in brackets: [ITEM, ...], or [] for none"))
            else:
                stack.extend((item, want.item, ()) for item in reversed(ast.list_items(v)))
        elif isinstance(want, ir.Variant):
            continue  # a reply for a variant output is checked against its variant (testblocks.py)
        elif isinstance(want, (ir.Named, Record)):
            stack.extend(reversed(_object_fields(v, want, got, symbols, partial, out)))
    return out


def _object_fields(v: ast.Value, want: ir.Named | Record, got: str, symbols: Symbols, partial: bool,
                   out: list[ValueProblem]) -> list[tuple[ast.Value, TypeLike, tuple[ast.Constraint, ...]]]:
    """An object against a declared type or a record: its problems of its own into `out` (not an object, a
    field given twice, an unknown field, a missing one), and its fields' values with what each must fit."""
    fields = fields_of(want, symbols)
    if v.kind != "object":
        out.append(ValueProblem(v.span, f"expected an object of type {type_text(want)}, found {got}",
                                "write { " + "  ".join(f"{k} ..." for k in fields) + " }"))
        return []
    seen: set[str] = set()
    pending: list[tuple[ast.Value, TypeLike, tuple[ast.Constraint, ...]]] = []
    for entry in ast.object_entries(v):
        key = entry.key.value
        if key in seen:
            out.append(ValueProblem(entry.key.span, f"field '{key}' is given twice"))
            continue
        seen.add(key)
        if key not in fields:
            out.append(ValueProblem(entry.key.span, f"{type_text(want)} has no field '{key}'",
                                    unknown_field_help(key, fields)))
            continue
        decl = symbols.field_decl(want.name, key) if isinstance(want, ir.Named) else None
        pending.append((entry.value, fields[key], decl.constraints if decl is not None else ()))
    missing = [k for k, ft in fields.items() if k not in seen and not isinstance(ft, ir.Optional_)]
    if missing and not partial:
        out.append(ValueProblem(v.span, f"missing field{'s' if len(missing) > 1 else ''} "
                                f"{quoted_list(missing, len(missing))} of {type_text(want)}",
                                "optional fields (T?) may be left out; the others are required"))
    return pending


_EXAMPLES = {"int": "a whole number, e.g. 3", "float": "a number, e.g. 0.5", "bool": "true or false",
             "str": 'text in quotes, e.g. "..."'}


def _scalar_hint(v: ast.Value, want: ir.Prim) -> str:
    """How to write a value of the wanted built-in type, from the value that was written instead."""
    text = str(v.value).strip() if v.kind == "str" else ""
    if text and want in (ir.INT, ir.FLOAT) and is_number_text(text, want):
        return f"write the number without quotes: {text}"
    if text.lower() in ("true", "false") and want == ir.BOOL:
        return f"write {text.lower()} without quotes"
    if want == ir.STR and v.kind in ("int", "float", "bool") and v.span is not None:
        return f'write it in quotes: "{v.span.text}"'
    return f"write {_EXAMPLES[want.name]}" if want.name in _EXAMPLES else ""


def is_number_text(text: str, want: ir.Prim) -> bool:
    """Whether `text` (a string's content) is a number of type `want` as the language writes numbers."""
    pattern = _INT_TEXT if want == ir.INT else _NUMBER_TEXT if want == ir.FLOAT else None
    return pattern is not None and pattern.fullmatch(text.strip()) is not None


_INT_TEXT = re.compile(r"-?[0-9]+")
_NUMBER_TEXT = re.compile(r"-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?")
