"""What a guard shows once it is true or false, for the narrowing of the expressions after it.

The paths a none test shows to be there, the variants an `is` test leaves, the outcome of comparing a
number with a range, and why a state's output may be absent.
"""

from __future__ import annotations

from ...grammar import ast
from .flow import Flow
from .resolve import (
    Symbols,
)

# ---- expressions ---------------------------------------------------------------------------------


def state_output_read(e: ast.Expr, symbols: Symbols) -> str | None:
    """The state whose output `e` is, for `e` written `STATE.output`; else None."""
    if (isinstance(e, ast.Attribute) and e.attr.value == "output" and isinstance(e.value, ast.NameExpr)
            and e.value.name in symbols.states and e.value.name not in symbols.inputs):
        return e.value.name
    return None


def expr_path(e: ast.Expr) -> str | None:
    """`e` as a path of names and fields (`tags`, `output.note`, `review.output`), or None."""
    fields: list[str] = []
    while isinstance(e, ast.Attribute):
        fields.append(e.attr.value)
        e = e.value
    if not isinstance(e, ast.NameExpr):
        return None
    return ".".join([e.name, *reversed(fields)])


def none_tests(e: ast.Expr, value: bool, symbols: Symbols) -> set[str]:
    """The paths (`expr_path`) surely not none when guard expression `e` has the truth value `value`.

    `P != none` true, or `P == none` false, shows P is there (for `STATE.output`: that STATE has run);
    `and`, `or` and `not` combine what their operands show. This is the narrowing rule for guards;
    templates follow the same rule (checks/templates.py), where a bare `P` also tests it.
    """
    if isinstance(e, ast.UnaryOp) and e.op == "not":
        return none_tests(e.operand, not value, symbols)
    if isinstance(e, ast.BinaryOp) and e.op in ("and", "or"):
        left, right = none_tests(e.left, value, symbols), none_tests(e.right, value, symbols)
        both = (e.op == "and") == value  # `a and b` true, or `a or b` false: both operands are known
        return left | right if both else left & right
    if isinstance(e, ast.BinaryOp) and e.op in ("==", "!="):
        for side, other in ((e.left, e.right), (e.right, e.left)):
            path = expr_path(side)
            if path is not None and isinstance(other, ast.Literal) and other.value is None:
                return {path} if (e.op == "!=") == value else set()
    if isinstance(e, ast.IsVariant) and value != e.negated:
        path = expr_path(e.value)  # none is no variant: `x is T` true shows x is there
        return {path} if path is not None else set()
    return set()


def merge_variant_tests(known: dict[str, frozenset[str]], shown: dict[str, frozenset[str]]
                        ) -> dict[str, frozenset[str]]:
    """What is known about which variants paths may be, once `shown` is known too (both hold)."""
    merged = dict(known)
    for path, options in shown.items():
        merged[path] = merged[path] & options if path in merged else options
    return merged


def number_literal(e: ast.Expr) -> int | float | None:
    """The number a literal (or a negated literal) writes; None for anything else."""
    negate = isinstance(e, ast.UnaryOp) and e.op == "-"
    inner = e.operand if isinstance(e, ast.UnaryOp) and negate else e
    if isinstance(inner, ast.Literal) and isinstance(inner.value, (int, float)) and not isinstance(inner.value, bool):
        return -inner.value if negate else inner.value
    return None


FLIPPED_COMPARISON = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "==": "==", "!=": "!="}


def comparison_outcome(op: str, low: float | None, high: float | None, n: float) -> bool | None:
    """The value of `X op n` for every X in the inclusive range low..high (None: an open end), or None
    when it depends on X."""
    below = low is not None and low > n  # every X is above n
    above = high is not None and high < n  # every X is below n
    if op == ">":
        return False if high is not None and high <= n else True if below else None
    if op == ">=":
        return False if above else True if low is not None and low >= n else None
    if op == "<":
        return False if low is not None and low >= n else True if above else None
    if op == "<=":
        return False if below else True if high is not None and high <= n else None
    exactly = low is not None and low == high == n
    if op == "==":
        return False if below or above else True if exactly else None
    if op == "!=":
        return True if below or above else False if exactly else None
    return None


def absent_output_notes(state: str, reader: str, flow: Flow | None) -> list[str]:
    """Notes on how a run reaches `reader` with no output from `state` yet."""
    if flow is None:
        return []
    path = flow.path_avoiding(state, reader)
    if path is None:
        return []
    if state == reader:
        return [f"the first time a run enters '{reader}', it has not run yet: "
                + " -> ".join(path)]
    return ["for example, a run can go " + " -> ".join(path) + f" without running '{state}'"]
