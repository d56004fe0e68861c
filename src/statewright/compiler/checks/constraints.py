"""Constraint checks: ranges, lengths and patterns on fields and inputs fit their types and one another.

A constraint becomes JSON Schema (`minimum`, `maxLength`, `pattern`, ...) for the model and pydantic's
validation of every reply and input, so it must mean the same to all of them: a range must hold a value,
a constraint must apply to its type, and a pattern must be read alike by Python's `re` (this check), Rust's
`regex` (pydantic's validator) and ECMA-262 (JSON Schema's `pattern`, which decoders such as llama.cpp's
grammar and OpenAI's structured outputs read). Values the spec itself writes — input defaults, test inputs,
scripted replies — are held to the constraints here too (`value_violations`), by the validator's own rules.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

from ...diagnostics import Diagnostics, Span
from ...grammar import ast
from .. import ir
from .resolve import Symbols
from .type_algebra import type_text

# Escapes that mean different characters to Python and Rust (Unicode) and to ECMA-262 (ASCII), and that
# llama.cpp's JSON-schema grammar cannot take: each with what to write instead.
_CLASS_ESCAPES = {"d": "[0-9]", "D": "[^0-9]", "w": "[A-Za-z0-9_]", "W": "[^A-Za-z0-9_]", "s": "[ \\t\\n\\r]",
                  "S": "[^ \\t\\n\\r]", "b": "an explicit class or anchor", "B": "an explicit class"}
# What follows `(?` and what it is, for the constructs that only some engines read, with the help to give.
_NO_RUST = ("Rust's regex, which validates every reply, has none: say it with character classes and "
            "alternatives, or test it in a guard")
_GROUP_FORMS = {
    "=": ("a lookahead", "error", _NO_RUST), "!": ("a negative lookahead", "error", _NO_RUST),
    "<=": ("a lookbehind", "error", _NO_RUST), "<!": ("a negative lookbehind", "error", _NO_RUST),
    ">": ("an atomic group", "error", _NO_RUST), "(": ("a conditional group", "error", _NO_RUST),
    "P<": ("a Python named group", "error",
           ("'(?P<name>' is Python's spelling, not ECMA-262's, and a pattern needs no names: write a plain "
            "group (...)")),
    "P=": ("a Python named backreference", "error", _NO_RUST),
    "<": ("a named group", "error", "a pattern needs no names: write a plain group (...)"),
    "#": ("a comment group", "error", "ECMA-262 has no comment groups: remove it"),
    ":": ("a non-capturing group", "warning",
          "llama.cpp's JSON-schema grammar rejects every '(?': write a plain group (...)"),
}
_FLAG_LETTERS = frozenset("aiLmsux-")


def lower_range(r: ast.Range | None) -> tuple[int | float | None, int | float | None]:
    if r is None:
        return None, None
    return (r.low.value if r.low is not None else None, r.high.value if r.high is not None else None)


def constraint_of(constraints: tuple[ast.Constraint, ...], kind: str) -> ast.Constraint | None:
    """The first constraint of a kind ("in", "len", "matches"); a repeat is reported and ignored."""
    return next((c for c in constraints if c.kind == kind), None)


def range_text(r: ast.Range) -> str:
    from ..views.source_text import range_source

    return range_source(r)


# ---- the checks ----------------------------------------------------------------------------------


def check_constraints(symbols: Symbols, diags: Diagnostics) -> None:
    """Every constraint of every field and input: known to apply, a range that holds a value, a portable
    pattern, written once each and in the canonical order."""
    for decl in symbols.types.values():
        for f in decl.fields:
            if f.constraints:
                _check(f.constraints, symbols.resolve_type(f.type), f"field '{f.name.value}'", diags)
    for item in symbols.inputs.values():
        if item.constraints:
            _check(item.constraints, symbols.resolve_type(item.type), f"input '{item.name.value}'", diags)


def _check(constraints: tuple[ast.Constraint, ...], t: ir.Type, owner: str, diags: Diagnostics) -> None:
    seen: set[str] = set()
    last = -1
    for c in constraints:
        if c.kind in seen:
            diags.report("SW2010", f"'{c.kind}' is given twice for {owner}", c.span, label="second occurrence",
                         help=f"keep one '{c.kind}'; the first one is used")
            continue
        seen.add(c.kind)
        position = ast.CONSTRAINT_ORDER.index(c.kind)
        if position < last:
            order = ", ".join(k for k in ast.CONSTRAINT_ORDER)
            diags.report("SW4025", f"'{c.kind}' comes after a constraint it goes before", c.span,
                         label="out of order",
                         help=f"write the constraints of {owner} in the order {order}: `len 1..80 matches "
                              '"..."`')
        last = max(last, position)
        if _applies(c, t, owner, diags):
            if c.range is not None:
                _check_range(c, t, owner, diags)
            elif c.pattern is not None:
                check_pattern(c.pattern, diags)


def _base(t: ir.Type) -> ir.Type:
    return t.inner if isinstance(t, ir.Optional_) else t



def _applies(c: ast.Constraint, t: ir.Type, owner: str, diags: Diagnostics) -> bool:
    base = _base(t)
    if base == ir.ANY:
        return False  # an unknown type, reported already
    numeric = base in (ir.INT, ir.FLOAT)
    sized = base == ir.STR or isinstance(base, ir.ListOf)
    if c.kind == "in" and numeric or c.kind == "len" and sized or c.kind == "matches" and base == ir.STR:
        return True
    what = {"in": "bounds a number (int or float)", "len": "bounds the length of a str or a list",
            "matches": "matches a str against a pattern"}[c.kind]
    if c.kind == "in" and sized:
        hint = f"to bound its length, write `len {range_text(c.range)}`" if c.range is not None else ""
    elif c.kind == "len" and numeric:
        hint = f"to bound the number itself, write `in {range_text(c.range)}`" if c.range is not None else ""
    elif isinstance(base, ir.Enum):
        hint = "an enum's values are listed already: list only the allowed ones"
    elif c.kind == "matches" and isinstance(base, ir.ListOf):
        hint = "a pattern applies to one str; declare a type with a str field for the items"
    else:
        hint = "remove it, or constrain a field of the type instead"
    diags.report("SW4022", f"'{c.kind}' does not apply to {owner}: it is {type_text(t)}", c.span,
                 label=f"'{c.kind}' {what}", help=hint)
    return False


def _check_range(c: ast.Constraint, t: ir.Type, owner: str, diags: Diagnostics) -> None:
    r = c.range
    assert r is not None
    ends = [e for e in (r.low, r.high) if e is not None]
    if not ends:
        diags.report("SW4023", f"the range of {owner} has no end", r.span, label="'..' alone bounds nothing",
                     help="give at least one end: 1.., ..80 or 1..80; or remove the constraint")
        return
    for end in ends:
        if isinstance(end.value, float) and not math.isfinite(end.value):
            diags.report("SW4023", f"a bound of {owner} is not a finite number", end.span,
                         label="too large to be a bound", help="leave the end open instead: `1..` or `..5`")
            return
    whole = c.kind == "len" or _base(t) == ir.INT
    for end in ends:
        if whole and isinstance(end.value, float) and not end.value.is_integer():
            what = "a length" if c.kind == "len" else "an int"
            diags.report("SW4023", f"{what} is a whole number; {end.span.text} is not", end.span,
                         label="not a whole number",
                         help=f"write a whole number: {math.floor(end.value) if end is r.high else math.ceil(end.value)}")
            return
        if c.kind == "len" and end.value < 0:
            diags.report("SW4023", f"a length cannot be negative: {end.span.text}", end.span,
                         label="below 0", help="lengths start at 0: write `len 0..` or a positive bound")
            return
    if r.low is not None and r.high is not None and r.low.value > r.high.value:
        diags.report("SW4023", f"the range of {owner} is empty: {range_text(r)}", r.span,
                     label=f"{r.low.span.text} is above {r.high.span.text}: no value fits",
                     help=f"write the lower end first: {range_text(ast.Range(r.high, r.low))}")


# ---- patterns ------------------------------------------------------------------------------------


def _pattern_start(pattern: ast.String) -> int | None:
    """The source offset of a pattern's first character, where the source shows its characters one for
    one (a string without escapes on one line); None otherwise. Found once per pattern: the comparison
    reads the whole literal, and a long pattern can have a feature to report every few characters."""
    span = pattern.span
    raw = span.text
    quote = 3 if pattern.triple else 1
    if len(raw) >= 2 * quote and raw[quote:-quote] == pattern.value:
        return span.start + quote
    return None


def _pattern_span(pattern: ast.String, first: int | None, start: int, length: int) -> Span:
    """The span of characters [start, start + length) of a pattern whose first character is at source
    offset `first` (from _pattern_start); the whole string when there is none."""
    if first is None:
        return pattern.span
    return pattern.span.source.span(first + start, first + start + max(length, 1))


def pattern_features(text: str) -> Iterator[tuple[int, int, str, str, str]]:
    """The constructs of a regex that not every engine reads alike: (offset, length, what, severity, help).

    A scan of the text, aware of escapes and character classes; Python's own parser has already accepted
    the pattern, so the text is well formed."""
    i, n = 0, len(text)
    in_class = False
    while i < n:
        ch = text[i]
        if ch == "\\" and i + 1 < n:
            esc = text[i + 1]
            if esc in _CLASS_ESCAPES and not (in_class and esc in "bB"):
                yield (i, 2, f"'\\{esc}'", "warning",
                       (f"'\\{esc}' means Unicode characters to Python and Rust but ASCII ones to ECMA-262, and "
                        f"llama.cpp's grammar cannot read it: write {_CLASS_ESCAPES[esc]}"))
            elif esc in "AZz":
                yield (i, 2, f"'\\{esc}'", "error",
                       f"'\\{esc}' is not in ECMA-262 (and Python has no '\\z'): anchor with '^' and '$'")
            elif esc.isdigit() and esc != "0" and not in_class:
                yield (i, 2, f"the backreference '\\{esc}'", "error", _NO_RUST)
            i += 2
            continue
        if in_class:
            if ch == "]":
                in_class = False
            i += 1
            continue
        if ch == "[":
            in_class = True
            i += 1
            if text.startswith("^", i):
                i += 1
            if text.startswith("]", i):  # a ']' first in a class is a literal
                i += 1
            continue
        if ch == "(" and text.startswith("?", i + 1):
            rest = text[i + 2:]
            form = next((k for k in sorted(_GROUP_FORMS, key=len, reverse=True) if rest.startswith(k)), None)
            if form is not None:
                what, severity, help = _GROUP_FORMS[form]
                yield (i, 2 + len(form), what, severity, help)
            elif rest[:1] in _FLAG_LETTERS:
                yield (i, 3, "an inline flag", "error",
                       "ECMA-262 has no inline flags such as (?i): spell the cases out, e.g. [Aa]")
        elif ch in "*+?}" and text.startswith("+", i + 1) and i > 0:
            yield (i + 1, 1, "a possessive quantifier", "error",
                   "Python reads 'x++' as possessive, ECMA-262 as an error: write 'x+'")
        elif ch in "*+?}" and text.startswith("?", i + 1) and i > 0 and ch != "?":
            yield (i + 1, 1, "a lazy quantifier", "warning",
                   ("llama.cpp's JSON-schema grammar has no lazy quantifiers, and a pattern that must match "
                    "somewhere needs none: write the greedy form"))
        elif (ch == "^" and i != 0) or (ch == "$" and i != n - 1):
            yield (i, 1, f"'{ch}' inside the pattern", "warning",
                   ("llama.cpp's JSON-schema grammar reads '^' and '$' only at the very ends: anchor the "
                    "whole pattern once, e.g. ^(a|b)$"))
        i += 1


def check_pattern(pattern: ast.String, diags: Diagnostics) -> bool:
    """Report a pattern that is not a regex every engine reads alike; whether the validator can use it."""
    text = pattern.value
    try:
        re.compile(text)
    except re.error as e:
        pos = e.pos if isinstance(e.pos, int) else 0
        diags.report("SW4024", "not a valid regular expression",
                     _pattern_span(pattern, _pattern_start(pattern), pos, 1),
                     label=str(e.msg), help="patterns are regular expressions such as \"^[A-Z]{3}-[0-9]+$\"; "
                     'write them in """triple quotes""" to keep backslashes as they are')
        return False
    usable = True
    first = _pattern_start(pattern)
    for offset, length, what, severity, help in pattern_features(text):
        code = "SW4024" if severity == "error" else "SW7021"
        message = (f"the pattern uses {what}" if severity == "error"
                   else f"the pattern uses {what}, which not every decoder reads alike")
        diags.report(code, message, _pattern_span(pattern, first, offset, length), label=what, help=help)
        usable = usable and severity != "error"
    if not usable:
        return False
    problem = _validator_error(text)
    if problem is not None:
        diags.report("SW4024", "the validator cannot use this pattern", pattern.span, label=problem,
                     help="pydantic checks every reply with Rust's regex crate: no lookarounds, no "
                          "backreferences; rewrite the pattern without them")
        return False
    if not (text.startswith("^") and text.endswith("$") and not text.endswith("\\$")):
        diags.report("SW7021", "the pattern is not anchored with '^' and '$'", pattern.span,
                     label="it may match anywhere in the text",
                     help="JSON Schema's `pattern` matches anywhere, and llama.cpp's grammar takes only patterns "
                          "written ^...$: anchor it, e.g. ^.*TEXT.*$ for a str that contains TEXT")
    return True


@lru_cache(maxsize=256)
def _validator(pattern: str) -> Any:
    """pydantic's validator for a str that must match `pattern` (pydantic_core only: `check` stays off
    pydantic itself, and only a machine with a pattern imports even this)."""
    from pydantic_core import SchemaValidator, core_schema

    return SchemaValidator(core_schema.str_schema(pattern=pattern))


def _validator_error(pattern: str) -> str | None:
    from pydantic_core import SchemaError

    try:
        _validator(pattern)
    except SchemaError as e:
        lines = [line.strip() for line in str(e).splitlines() if line.strip().startswith("error:")]
        return lines[-1].removeprefix("error:").strip() if lines else str(e).splitlines()[-1].strip()
    return None


def pattern_matches(pattern: str, text: str) -> bool | None:
    """Whether `text` matches `pattern` as the validator decides it; None when it cannot tell."""
    try:
        validator = _validator(pattern)
    except Exception:  # noqa: BLE001 - an unusable pattern is reported by check_pattern
        return None
    try:
        validator.validate_python(text)
    except Exception:  # noqa: BLE001 - pydantic_core's ValidationError
        return False
    return True


def pattern_usable(pattern: str) -> bool:
    try:
        re.compile(pattern)
    except re.error:
        return False
    if any(f[3] == "error" for f in pattern_features(pattern)):
        return False
    return _validator_error(pattern) is None


# ---- values the spec writes ----------------------------------------------------------------------


def value_violations(value: ast.Value, constraints: tuple[ast.Constraint, ...]) -> list[tuple[Span, str, str]]:
    """Where a value written in the spec breaks its constraints: (span, message, help) each.

    Only constraints that apply to the value's kind are tested (others are SW4022's); a pattern the
    validator cannot use is SW4024's. Lengths count characters (code points) and items, as JSON Schema and
    pydantic do."""
    out: list[tuple[Span, str, str]] = []
    seen: set[str] = set()
    for c in constraints:
        if c.kind in seen:
            continue
        seen.add(c.kind)
        if c.kind == "in" and value.kind in ("int", "float") and c.range is not None:
            number = value.value
            assert isinstance(number, (int, float))
            if not _within(number, c.range):
                out.append((value.span, f"{_show(value)} is outside {range_text(c.range)}",
                            f"give a number in {range_text(c.range)}"))
        elif c.kind == "len" and value.kind in ("str", "list") and c.range is not None:
            size = len(value.value)  # type: ignore[arg-type]
            if not _within(size, c.range):
                unit = "characters" if value.kind == "str" else "items"
                out.append((value.span, f"it has {size} {unit}; the length must be in {range_text(c.range)}",
                            f"give {range_text(c.range)} {unit}"))
        elif (c.kind == "matches" and value.kind == "str" and c.pattern is not None
              and pattern_usable(c.pattern.value) and pattern_matches(c.pattern.value, str(value.value)) is False):
            out.append((value.span, f"{_show(value)} does not match the pattern {c.pattern.span.text}",
                        "give text the pattern matches"))
    return out


def _within(number: float, r: ast.Range) -> bool:
    low, high = lower_range(r)
    return (low is None or number >= low) and (high is None or number <= high)


def _show(value: ast.Value) -> str:
    text = value.span.text if value.span is not None else str(value.value)
    return text if len(text) <= 40 else text[:37] + "..."
