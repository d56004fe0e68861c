"""Bounds a run counts against: a number written in the spec, or the value of the int input a bound names.

`max rounds`, `visits rounds` and `for x in xs max rounds` read `rounds` from the run's inputs, which are
validated against the input's declared range when the run starts (the compiler proves loops bounded with
that range's maximum).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def bound_value(bound: int | str | None, inputs: Mapping[str, Any]) -> int | None:
    """The number a bound allows in this run: the number written, or the named input's value."""
    if bound is None or isinstance(bound, int):
        return bound
    return int(inputs[bound])


def bound_text(word: str, bound: int | str | None, inputs: Mapping[str, Any]) -> str:
    """A bound as messages and traces show it: `max 3`, or `max rounds (3)` for an input's value."""
    if not isinstance(bound, str):
        return f"{word} {bound}"
    return f"{word} {bound} ({bound_value(bound, inputs)})"
