"""Bounds that name an input: `max rounds`, `visits rounds`, `for x in xs max rounds`.

A bound may be a number or the name of an int input whose declared range has a largest value
(`input rounds: int in 1..10`): the run reads the bound from its inputs, validated against that range when
it starts, and the range's maximum is what makes the bound a bound — the cycle proof (graph.py) counts a
named bound as one because every named bound that passes this check has a largest value. A bound that
names no input (SW2070), an input that is not an int (SW4040), or an input whose range has no largest value
or lets the bound go below 0 (SW3040) is reported where the bound is written.
"""

from __future__ import annotations

from collections.abc import Iterator

from ...diagnostics import Diagnostics, did_you_mean
from ...grammar import ast
from .. import ir
from .constraints import constraint_of, lower_range, range_text
from .resolve import InputRead, Symbols, closest

EXAMPLE_RANGE = "in 1..10"


def named_bounds(symbols: Symbols) -> Iterator[tuple[str, ast.Name]]:
    """Every bound written as a name, with the word before it (`max`, `visits`), in source order."""
    for view in symbols.states.values():
        for item in view.decl.items:
            if isinstance(item, ast.Visits) and isinstance(item.count, ast.Name):
                yield "visits", item.count
            elif isinstance(item, (ast.ForEach, ast.Transition)) and isinstance(item.max, ast.Name):
                yield "max", item.max


def bound_range(decl: ast.InputDecl) -> tuple[float | None, float | None]:
    """The smallest and largest value an input's range allows (None: that end is open or there is none)."""
    c = constraint_of(decl.constraints, "in")
    return lower_range(c.range) if c is not None else (None, None)


def check_input_bounds(symbols: Symbols, diags: Diagnostics) -> None:
    """Each bound that names an input names an int input whose range has a largest value, and no value below 0."""
    for word, name in named_bounds(symbols):
        decl = symbols.inputs.get(name.value)
        if decl is None:
            _unknown_input(word, name, symbols, diags)
            continue
        symbols.used_inputs.add(name.value)
        symbols.input_reads.append(InputRead(name.value, name.span))
        t = symbols.resolve_type(decl.type)
        c = constraint_of(decl.constraints, "in")
        if t != ir.INT:
            declared = f"in {range_text(c.range)}" if c is not None and c.range is not None else EXAMPLE_RANGE
            diags.report("SW4040", f"'{word} {name.value}' reads input '{name.value}', which is "
                         f"{decl.type.span.text if decl.type.span is not None else t}, not int", name.span,
                         label="a bound counts in whole numbers",
                         help=f"declare it as an int with a range: 'input {name.value}: int {declared}'")
            continue
        low, high = bound_range(decl)
        written = f" (its range is {range_text(c.range)})" if c is not None and c.range is not None else ""
        if high is None:
            problem = "no largest value" if c is not None else "no range"
        elif low is None or low < 0:
            problem = "no smallest value of 0 or more" if low is None else f"values below 0{written}"
        else:
            continue
        default = f" = {decl.default.span.text}" if decl.default is not None and decl.default.span else ""
        diags.report("SW3040", f"'{word} {name.value}' is no bound: input '{name.value}' has {problem}", name.span,
                     label="the compiler cannot tell how large this bound may be",
                     help=f"give the input a range from 0 or more up to a number: "
                          f"'input {name.value}: int {_suggested_range(low, high)}{default}'",
                     notes=[f"a loop's bound is proved with the largest value of the input's range{written}"])


def _suggested_range(low: float | None, high: float | None) -> str:
    lo = int(low) if low is not None and low >= 0 else 1
    hi = int(high) if high is not None and high >= lo else max(lo, 10)
    return f"in {lo}..{hi}"


def _unknown_input(word: str, name: ast.Name, symbols: Symbols, diags: Diagnostics) -> None:
    ints = [n for n, d in symbols.inputs.items() if symbols.resolve_type(d.type) == ir.INT]
    symbols.used_inputs.add(closest(name.value, symbols.inputs) or "")  # a misspelling uses what it meant
    what = "a state" if name.value in symbols.states else "nothing"
    help = did_you_mean(name.value, ints) or (
        f"a bound is a number, or the name of an int input with a range: "
        f"'input {name.value}: int {EXAMPLE_RANGE}'")
    diags.report("SW2070", f"'{word} {name.value}' names no input", name.span,
                 label=f"'{name.value}' names {what} the bound could be read from", help=help)
