"""`sum`, `min` and `max` in guards and tool-call arguments: one value on every Python, clear errors.

Python 3.12's built-in sum() adds floats with compensation, so `sum([0.1] * 10)` is 1.0 there and
0.9999999999999999 on 3.11; a guard must decide the same on every Python a runner is run with, so the items
are added one by one, left to right, from 0. min() and max() keep Python's meaning (the first smallest or
largest item, compared with `<` and `>`) and name the language's mistake when the list is empty.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def guard_sum(values: Iterable[Any]) -> Any:
    """`sum(LIST)`: the items added left to right, starting from 0."""
    total: Any = 0
    for value in values:
        total = total + value
    return total


def guard_min(*values: Any) -> Any:
    """`min(LIST)` or `min(a, b, ...)`: the first item no other is smaller than."""
    best, rest = _first(values, "min")
    for value in rest:
        best = min(best, value)  # the builtin on two: `value` only when `value < best`
    return best


def guard_max(*values: Any) -> Any:
    """`max(LIST)` or `max(a, b, ...)`: the first item no other is larger than."""
    best, rest = _first(values, "max")
    for value in rest:
        best = max(best, value)  # the builtin on two: `value` only when `value > best`
    return best


def _first(values: tuple[Any, ...], func: str) -> tuple[Any, Any]:
    items = iter(values[0] if len(values) == 1 else values)
    for first in items:
        return first, items
    raise ValueError(f"{func}() of an empty list")
