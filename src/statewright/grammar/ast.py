"""The syntax tree: one dataclass per grammar rule, spans kept out of equality.

Two trees that differ only in layout (whitespace, comments, positions) compare equal, which is what the
formatter's round-trip property relies on.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, cast

from ..diagnostics import Span


def _span() -> Span:
    return field(default=None, compare=False, repr=False)  # type: ignore[return-value]


# ---- names and literals --------------------------------------------------------------------------


@dataclass(frozen=True)
class Name:
    value: str
    span: Span = _span()


@dataclass(frozen=True)
class String:
    """A string literal after escapes are applied and triple-quoted text is dedented."""

    value: str
    triple: bool = field(default=False, compare=False)
    span: Span = _span()


@dataclass(frozen=True)
class Number:
    value: int | float
    span: Span = _span()


# ---- values (defaults, tool options, test data) --------------------------------------------------


@dataclass(frozen=True)
class ObjectEntry:
    key: Name
    value: Value
    span: Span = _span()


@dataclass(frozen=True)
class Value:
    """A literal value: str, int, float, bool, None, list of values or object (dict of values)."""

    kind: str  # "str" | "int" | "float" | "bool" | "none" | "list" | "object"
    value: object  # python value for scalars; tuple[Value, ...] for list; tuple[ObjectEntry, ...] for object
    span: Span = _span()

    def to_python(self) -> object:
        if self.kind == "list":
            return [v.to_python() for v in list_items(self)]
        if self.kind == "object":
            return {e.key.value: e.value.to_python() for e in object_entries(self)}
        return self.value


def list_items(value: Value) -> tuple[Value, ...]:
    """The items of a list value; () for a value of any other kind."""
    return cast("tuple[Value, ...]", value.value) if value.kind == "list" else ()


def object_entries(value: Value) -> tuple[ObjectEntry, ...]:
    """The entries of an object value, in source order; () for a value of any other kind."""
    return cast("tuple[ObjectEntry, ...]", value.value) if value.kind == "object" else ()


# ---- types --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NamedType:
    name: Name
    span: Span = _span()


@dataclass(frozen=True)
class ListType:
    item: TypeRef
    span: Span = _span()


@dataclass(frozen=True)
class OptionalType:
    inner: TypeRef
    span: Span = _span()


@dataclass(frozen=True)
class EnumType:
    values: tuple[String, ...]
    span: Span = _span()


TypeRef = NamedType | ListType | OptionalType | EnumType


def iter_type_ref(ref: TypeRef) -> Iterator[TypeRef]:
    """`ref` and the type references inside it, outermost first: `list[Critique?]` gives the list, the
    optional, then `Critique`. (A type reference is a chain: only lists and optionals hold another.)"""
    node = ref
    while True:
        yield node
        if isinstance(node, ListType):
            node = node.item
        elif isinstance(node, OptionalType):
            node = node.inner
        else:
            return


@dataclass(frozen=True)
class FieldDecl:
    name: Name
    type: TypeRef
    doc: String | None = None
    span: Span = _span()


@dataclass(frozen=True)
class TypeDecl:
    name: Name
    fields: tuple[FieldDecl, ...]
    span: Span = _span()


# ---- guard expressions --------------------------------------------------------------------------


@dataclass(frozen=True)
class NameExpr:
    name: str
    span: Span = _span()


@dataclass(frozen=True, eq=False)
class Literal:
    """A literal in an expression. Two literals are equal when their values have the same type and are
    equal: `1`, `1.0` and `true` are three different literals (Python alone would call them equal), so
    passes that compare expressions never confuse them."""

    value: str | int | float | bool | None
    span: Span = _span()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Literal):
            return NotImplemented
        return type(self.value) is type(other.value) and self.value == other.value

    def __hash__(self) -> int:
        return hash((type(self.value).__name__, self.value))


@dataclass(frozen=True)
class ListExpr:
    items: tuple[Expr, ...]
    span: Span = _span()


@dataclass(frozen=True)
class Attribute:
    value: Expr
    attr: Name
    span: Span = _span()


@dataclass(frozen=True)
class Index:
    value: Expr
    index: Expr
    span: Span = _span()


@dataclass(frozen=True)
class Call:
    func: Name
    args: tuple[Expr, ...]
    span: Span = _span()


@dataclass(frozen=True)
class UnaryOp:
    op: str  # "not" | "-"
    operand: Expr
    span: Span = _span()


@dataclass(frozen=True)
class BinaryOp:
    op: str  # "and" "or" "==" "!=" "<" "<=" ">" ">=" "in" "not in" "+" "-" "*" "/" "%"
    left: Expr
    right: Expr
    span: Span = _span()


# What each operator but `and` / `or` (which short-circuit) computes: the Python operator of the same name.
BINARY_OPERATORS: dict[str, Callable[[Any, Any], Any]] = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt,
    ">=": operator.ge, "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "%": operator.mod, "in": lambda item, container: item in container,
    "not in": lambda item, container: item not in container,
}


Expr = NameExpr | Literal | ListExpr | Attribute | Index | Call | UnaryOp | BinaryOp


def expr_children(expr: Expr) -> tuple[Expr, ...]:
    """The sub-expressions directly inside `expr`, in source order (names and literals have none)."""
    if isinstance(expr, BinaryOp):
        return (expr.left, expr.right)
    if isinstance(expr, UnaryOp):
        return (expr.operand,)
    if isinstance(expr, Attribute):
        return (expr.value,)
    if isinstance(expr, Index):
        return (expr.value, expr.index)
    if isinstance(expr, Call):
        return expr.args
    if isinstance(expr, ListExpr):
        return expr.items
    return ()


def iter_expr(expr: Expr) -> Iterator[Expr]:
    """`expr` and every expression inside it, each before its sub-expressions, in source order.

    The walk keeps its own stack, so an expression nested as deep as the parser allows costs no recursion.
    Reversed, the order puts every expression after all of its sub-expressions, which is what a bottom-up
    computation (a value, a printed form) needs: `for e in reversed(list(iter_expr(root)))`.
    """
    stack: list[Expr] = [expr]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(expr_children(node)))


# ---- machine settings, tools, agents ------------------------------------------------------------


@dataclass(frozen=True)
class Description:
    text: String
    span: Span = _span()


@dataclass(frozen=True)
class InputDecl:
    name: Name
    type: TypeRef
    default: Value | None = None
    span: Span = _span()


@dataclass(frozen=True)
class ModelSetting:
    model: String
    span: Span = _span()


@dataclass(frozen=True)
class VerifierModelSetting:
    model: String
    span: Span = _span()


@dataclass(frozen=True)
class TemperatureSetting:
    value: Number
    span: Span = _span()


@dataclass(frozen=True)
class Limit:
    name: Name
    value: Number
    span: Span = _span()


@dataclass(frozen=True)
class Limits:
    items: tuple[Limit, ...]
    span: Span = _span()


@dataclass(frozen=True)
class ToolName:
    """A dotted tool name: `std.python`, `lookup`."""

    parts: tuple[str, ...]
    span: Span = _span()

    @property
    def dotted(self) -> str:
        return ".".join(self.parts)


@dataclass(frozen=True)
class ToolOption:
    name: Name
    value: Value
    span: Span = _span()


@dataclass(frozen=True)
class ToolDecl:
    name: ToolName
    import_path: String | None = None  # "pkg.mod:func" for user tools
    options: tuple[ToolOption, ...] = ()
    span: Span = _span()


@dataclass(frozen=True)
class PromptSetting:
    text: String
    span: Span = _span()


@dataclass(frozen=True)
class ToolsSetting:
    tools: tuple[ToolName, ...]
    span: Span = _span()


@dataclass(frozen=True)
class MemorySetting:
    policy: Name  # all | none | last
    count: Number | None = None
    span: Span = _span()


@dataclass(frozen=True)
class FallbacksSetting:
    models: tuple[String, ...]
    span: Span = _span()


AgentItem = (
    ModelSetting | TemperatureSetting | PromptSetting | ToolsSetting | MemorySetting | FallbacksSetting
)


@dataclass(frozen=True)
class AgentDecl:
    name: Name
    items: tuple[AgentItem, ...]
    span: Span = _span()


# ---- states and transitions ---------------------------------------------------------------------


@dataclass(frozen=True)
class AgentRef:
    name: Name
    span: Span = _span()


@dataclass(frozen=True)
class Instruction:
    text: String
    span: Span = _span()


@dataclass(frozen=True)
class OutputDecl:
    type: TypeRef
    span: Span = _span()


@dataclass(frozen=True)
class Tell:
    agents: tuple[Name, ...]
    span: Span = _span()


@dataclass(frozen=True)
class Visits:
    count: Number
    span: Span = _span()


@dataclass(frozen=True)
class Retries:
    count: Number
    span: Span = _span()


@dataclass(frozen=True)
class CallArg:
    name: Name
    value: Expr
    span: Span = _span()


@dataclass(frozen=True)
class ToolCall:
    tool: ToolName
    args: tuple[CallArg, ...]
    span: Span = _span()


@dataclass(frozen=True)
class Result:
    text: String
    span: Span = _span()


@dataclass(frozen=True)
class Transition:
    """One outgoing edge, in source order.

    kind: "guard" (`when EXPR`), "condition" (`when "text"`, judged by the verifier), "always" (`-> s`),
    "otherwise" (`otherwise -> s`) or "stay" (`otherwise stay`).
    """

    kind: str
    target: Name | None
    guard: Expr | None = None
    condition: String | None = None
    max: Number | None = None
    span: Span = _span()


StateItem = AgentRef | Instruction | OutputDecl | Tell | Visits | Retries | ToolCall | Result | Transition


@dataclass(frozen=True)
class StateDecl:
    name: Name
    start: bool
    final: bool
    items: tuple[StateItem, ...]
    has_body: bool = field(default=True, compare=False)
    span: Span = _span()

    @property
    def transitions(self) -> tuple[Transition, ...]:
        return tuple(i for i in self.items if isinstance(i, Transition))


# ---- tests --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TestInput:
    values: Value  # kind "object"
    span: Span = _span()


@dataclass(frozen=True)
class Reply:
    state: Name
    value: Value
    span: Span = _span()


@dataclass(frozen=True)
class Verdict:
    state: Name
    condition: String | None  # None means `verdict STATE none`
    span: Span = _span()


@dataclass(frozen=True)
class ExpectPath:
    states: tuple[Name, ...]
    span: Span = _span()


@dataclass(frozen=True)
class ExpectFinal:
    state: Name
    span: Span = _span()


@dataclass(frozen=True)
class ExpectResult:
    value: Value
    span: Span = _span()


@dataclass(frozen=True)
class ExpectFailure:
    kind: Name
    span: Span = _span()


TestItem = TestInput | Reply | Verdict | ExpectPath | ExpectFinal | ExpectResult | ExpectFailure


@dataclass(frozen=True)
class TestDecl:
    __test__ = False  # not a pytest test class

    name: String
    items: tuple[TestItem, ...]
    span: Span = _span()


# ---- the machine --------------------------------------------------------------------------------

MachineItem = (
    Description | InputDecl | ModelSetting | VerifierModelSetting | TemperatureSetting | Limits | TypeDecl
    | ToolDecl | AgentDecl | StateDecl | TestDecl
)


@dataclass(frozen=True)
class Machine:
    name: Name
    items: tuple[MachineItem, ...]
    span: Span = _span()

    def of(self, kind: type) -> list:  # type: ignore[type-arg]
        """The machine's items of one kind, in source order."""
        return [i for i in self.items if isinstance(i, kind)]


@dataclass(frozen=True)
class Comment:
    """A `#` comment, collected by the lexer for the formatter (the grammar ignores comments)."""

    text: str
    span: Span = _span()
