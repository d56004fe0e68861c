"""The operators of guard expressions: how tightly each binds and what each computes.

Every writer of an expression (the formatter, which writes the spec's own syntax, and code generation,
which writes Python) parenthesizes by the one ladder here, and the compiler's constant folding computes by
the one table here.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

# How tightly each form of expression binds, loosest first: the precedence chain of statewright.lark
# (`expr` -> `or_expr` -> ... -> `postfix` -> `atom`). Python's ladder is the same, so a guard is written
# as Python with the parentheses it is written with in the spec.
CONDITIONAL, OR, AND, NOT, COMPARE, SUM, PRODUCT, NEGATE, POSTFIX, ATOM = range(10)

BINARY_PRECEDENCE = {
    "or": OR, "and": AND,
    "==": COMPARE, "!=": COMPARE, "<": COMPARE, "<=": COMPARE, ">": COMPARE, ">=": COMPARE,
    "in": COMPARE, "not in": COMPARE,
    "+": SUM, "-": SUM, "*": PRODUCT, "/": PRODUCT, "%": PRODUCT,
}

# What each operator but `and` / `or` (which short-circuit) computes: the Python operator of the same name.
BINARY_OPERATORS: dict[str, Callable[[Any, Any], Any]] = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt,
    ">=": operator.ge, "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "%": operator.mod, "in": lambda item, container: item in container,
    "not in": lambda item, container: item not in container,
}
