"""The syntax tree: one node class per grammar rule, spans kept out of equality.

Two trees that differ only in layout (whitespace, comments, positions) compare equal, which is what the
formatter's round-trip property relies on.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import field

from ..diagnostics import Span
from .ast_values import (  # the leaves, named here too: modules read them as ast.Name, ast.Value
    CONSTRAINT_ORDER,
    Constraint,
    EnumType,
    FieldDecl,
    ListType,
    Name,
    NamedType,
    Number,
    ObjectEntry,
    OptionalType,
    Range,
    RangeEnd,
    String,
    TypeDecl,
    TypeRef,
    Value,
    iter_type_ref,
    list_items,
    object_entries,
)
from .node import Node


def _span() -> Span:
    return field(default=None, compare=False, repr=False)  # type: ignore[return-value]


# ---- guard expressions --------------------------------------------------------------------------


class NameExpr(Node):
    name: str
    span: Span = _span()


class Literal(Node):
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


class ListExpr(Node):
    items: tuple[Expr, ...]
    span: Span = _span()


class Attribute(Node):
    value: Expr
    attr: Name
    span: Span = _span()


class Index(Node):
    value: Expr
    index: Expr
    span: Span = _span()


class Call(Node):
    func: Name
    args: tuple[Expr, ...]
    span: Span = _span()


class Quantifier(Node):
    """`all(ELEMENT for VAR in ITEMS)`, `any(...)`, `count(...)`: a test over every item of a list; `sum`,
    `min`, `max` (AGGREGATES) of a value computed for every item.

    `var` is bound to each item in turn, in `element` only; `all` and `any` are true or false, `count` is
    how many items make `element` true, `sum` adds the elements, `min` and `max` pick one. Bounded by the
    list: no recursion, no loops of their own.
    """

    func: Name  # QUANTIFIERS or AGGREGATES (anything else is reported)
    element: Expr
    var: Name
    items: Expr
    span: Span = _span()


class IsVariant(Node):
    """`VALUE is TYPE` (or `VALUE is not TYPE`): which of a variant output's types a value is."""

    value: Expr
    type: Name
    negated: bool = False
    span: Span = _span()


class Conditional(Node):
    """`THEN if TEST else OTHERWISE`: THEN when TEST is true, else OTHERWISE; only the one chosen is evaluated."""

    then: Expr
    test: Expr
    orelse: Expr
    span: Span = _span()


class UnaryOp(Node):
    op: str  # "not" | "-"
    operand: Expr
    span: Span = _span()


class BinaryOp(Node):
    op: str  # "and" "or" "==" "!=" "<" "<=" ">" ">=" "in" "not in" "+" "-" "*" "/" "%"
    left: Expr
    right: Expr
    span: Span = _span()


Expr = (NameExpr | Literal | ListExpr | Attribute | Index | Call | Quantifier | IsVariant | Conditional | UnaryOp
        | BinaryOp)

QUANTIFIERS = ("all", "any", "count")
# Functions over a list's items that also take `for`: `sum(LIST)`, `sum(f.cost for f in LIST)`; `min` and
# `max` take a list, or two or more values (`min(rounds, 3)`).
AGGREGATES = ("sum", "min", "max")


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
    if isinstance(expr, Quantifier):
        return (expr.element, expr.items)
    if isinstance(expr, IsVariant):
        return (expr.value,)
    if isinstance(expr, Conditional):
        return (expr.then, expr.test, expr.orelse)
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


class Description(Node):
    text: String
    span: Span = _span()


class InputDecl(Node):
    name: Name
    type: TypeRef
    default: Value | None = None
    constraints: tuple[Constraint, ...] = ()
    span: Span = _span()


class VarDecl(Node):
    """`var NAME: TYPE = VALUE`: a run variable, its type and the value every run starts it with."""

    name: Name
    type: TypeRef
    value: Value
    span: Span = _span()


class ModelSetting(Node):
    model: String
    span: Span = _span()


class VerifierModelSetting(Node):
    model: String
    span: Span = _span()


class TemperatureSetting(Node):
    value: Number
    span: Span = _span()


class Limit(Node):
    name: Name
    value: Number
    span: Span = _span()


class Limits(Node):
    items: tuple[Limit, ...]
    span: Span = _span()


class ReturnsSetting(Node):
    """`returns TYPE`: the type of the machine's result (what a machine that runs this one reads)."""

    type: TypeRef
    span: Span = _span()


class ToolName(Node):
    """A dotted tool name: `std.python`, `lookup`."""

    parts: tuple[str, ...]
    span: Span = _span()

    @property
    def dotted(self) -> str:
        return ".".join(self.parts)


class ToolOption(Node):
    name: Name
    value: Value
    span: Span = _span()


class ToolSecrets(Node):
    """`secrets [SEARCH_API_KEY]`: environment variables the tool reads when a run starts, by name only."""

    names: tuple[Name, ...]
    span: Span = _span()


class TextEntry(Node):
    """One `NAME "text"` line of `headers { }` or `query { }`; the name may be written as a string."""

    name: String
    value: String
    span: Span = _span()


class ToolHeaders(Node):
    entries: tuple[TextEntry, ...]
    span: Span = _span()


class ToolQuery(Node):
    entries: tuple[TextEntry, ...]
    span: Span = _span()


class ToolDecl(Node):
    """A `tool` declaration. Its options, `secrets`, `headers` and `query` may come in any order; each
    kind is kept apart here, and their spans give the source order back (the formatter prints by it)."""

    name: ToolName
    import_path: String | None = None  # "pkg.mod:func" for user tools
    options: tuple[ToolOption, ...] = ()
    secrets: tuple[ToolSecrets, ...] = ()  # more than one is an error, reported by the checks
    headers: tuple[ToolHeaders, ...] = ()
    query: tuple[ToolQuery, ...] = ()
    span: Span = _span()

    @property
    def secret_names(self) -> tuple[str, ...]:
        """The secrets the tool declares, in order, each once."""
        return tuple(dict.fromkeys(n.value for s in self.secrets for n in s.names))


class PromptSetting(Node):
    text: String
    span: Span = _span()


class ToolsSetting(Node):
    tools: tuple[ToolName, ...]
    span: Span = _span()


class MemorySetting(Node):
    policy: Name  # all | none | last
    count: Number | None = None
    span: Span = _span()


class FallbacksSetting(Node):
    models: tuple[String, ...]
    span: Span = _span()


AgentItem = (
    ModelSetting | TemperatureSetting | PromptSetting | ToolsSetting | MemorySetting | FallbacksSetting
)


class AgentDecl(Node):
    name: Name
    items: tuple[AgentItem, ...]
    span: Span = _span()


# ---- states and transitions ---------------------------------------------------------------------


class AgentRef(Node):
    name: Name
    span: Span = _span()


class Instruction(Node):
    text: String
    span: Span = _span()


class Ask(Node):
    """`ask "question"`: a person answers this state's step."""

    text: String
    span: Span = _span()


class Duration(Node):
    """`24h` in `after 24h -> s`: as written, and in seconds (what the duration means)."""

    text: str = field(compare=False)
    seconds: float = 0.0
    span: Span = _span()


class VariantType(Node):
    """`A | B | ...` after `output`: the output is exactly one of these declared types."""

    options: tuple[Name, ...]
    span: Span = _span()


class OutputDecl(Node):
    type: TypeRef | VariantType
    span: Span = _span()


class Tell(Node):
    agents: tuple[Name, ...]
    span: Span = _span()


class Visits(Node):
    count: Number | Name  # a Name: an int input whose range bounds it (`visits rounds`)
    span: Span = _span()


class Retries(Node):
    count: Number
    span: Span = _span()


class CallArg(Node):
    name: Name
    value: Expr
    span: Span = _span()


class ToolCall(Node):
    tool: ToolName
    args: tuple[CallArg, ...]
    span: Span = _span()


class RunCall(Node):
    """`run NAME(arg = EXPR, ...)`: the state runs the machine a `use` line makes callable as NAME, with
    these inputs; its output is the call's outcome."""

    machine: Name
    args: tuple[CallArg, ...]
    span: Span = _span()


class Result(Node):
    text: String
    span: Span = _span()


class Fail(Node):
    """`fail "reason"` in a final state: reaching it ends the run as failed, with this reason."""

    text: String
    span: Span = _span()


class Parallel(Node):
    """`parallel [style, facts]`: the branches the state starts at once, named by their entry states."""

    branches: tuple[Name, ...]
    span: Span = _span()


class Join(Node):
    """`join all`, `join first N`, `join first where GUARD` or `join first N where GUARD`: which of a parallel
    state's branches it waits for. `rule` is the word as written (the checks hold it to `all` or `first`);
    the guard reads one branch's output as `output`."""

    rule: Name
    count: Number | None = None
    guard: Expr | None = None
    span: Span = _span()


class ForEach(Node):
    """`for i, item in EXPR max N concurrency C`: the state runs once per element of a list, `i` its
    position and `item` the element (the index name is optional)."""

    index: Name | None
    item: Name
    items: Expr
    max: Number | Name | None = None  # a Name: an int input whose range bounds it
    concurrency: Number | None = None
    span: Span = _span()


class Update(Node):
    """`set NAME <- EXPR` (or `append`, `extend`, `merge`): after the state's step, run variable NAME takes a
    value computed from EXPR by the reducer (REDUCERS)."""

    reducer: str
    var: Name
    value: Expr
    span: Span = _span()


# How an update combines a run variable's value with the value it is given.
REDUCERS = ("set", "append", "extend", "merge")


class AskBefore(Node):
    """`ask before [std.shell, ...]`: the agent's calls of these tools wait for a person's approval."""

    tools: tuple[ToolName, ...]
    span: Span = _span()


class ToolRounds(Node):
    """`tool_rounds N`: the agent may make at most N rounds of tool calls in one step."""

    count: Number
    span: Span = _span()


# Keywords that begin an item of a state. One that ends up a transition's target was on the line after a
# bare '->' (the parser reads a keyword as a name where a name is due).
STATE_ITEM_KEYWORDS = frozenset({"when", "otherwise", "agent", "do", "ask", "output", "tell", "visits",
                                 "retries", "call", "result", "fail", "parallel", "join", "run", "for",
                                 "set", "append", "extend", "merge", "tool_rounds"})


class Transition(Node):
    """One outgoing edge, in source order.

    kind: "guard" (`when EXPR`), "condition" (`when "text"`, judged by the verifier), "always" (`-> s`),
    "otherwise" (`otherwise -> s`), "stay" (`otherwise stay`) or "timeout" (`after 24h -> s`: no answer
    from a person in time).
    """

    kind: str
    target: Name | None
    guard: Expr | None = None
    condition: String | None = None
    max: Number | Name | None = None  # a Name: an int input whose range bounds it (`max rounds`)
    span: Span = _span()
    per_visit: Span | None = field(default=None, compare=False)  # where `per visit` follows `max N`
    after: Duration | None = None  # for kind "timeout" (`after 24h -> s`): how long a person may take

    @property
    def is_per_visit(self) -> bool:
        return self.per_visit is not None


StateItem = (AgentRef | ModelSetting | Instruction | Ask | OutputDecl | Tell | Visits | Retries | ToolCall | RunCall
             | Result | Fail | Parallel | Join | ForEach | Update | AskBefore | ToolRounds | Transition)


class StateDecl(Node):
    """A state; `branch` marks one that runs inside the branch of a parallel state."""

    name: Name
    start: bool
    final: bool
    items: tuple[StateItem, ...]
    has_body: bool = field(default=True, compare=False)
    span: Span = _span()
    branch: bool = False

    @property
    def transitions(self) -> tuple[Transition, ...]:
        return tuple(i for i in self.items if isinstance(i, Transition))

    @property
    def updates(self) -> tuple[Update, ...]:
        return tuple(i for i in self.items if isinstance(i, Update))


# ---- tests --------------------------------------------------------------------------------------


# A scripted step's state (`reply STATE ...`, `verdict`, `timeout`) may be a path into the machines the
# machine runs: `investigate/draft`, `investigate[2]/draft`, `a/b/c`. Its Name's value is the path as
# written; `state_path` reads it.


class PathStep(Node):
    """One step of a state path: a state, and which call of a map of calls (`investigate[2]`), 1-based."""

    state: str
    element: int | None = None


def state_path(name: Name) -> tuple[PathStep, ...] | None:
    """The steps of a test step's state written as a path (`a[2]/b`); None for a plain state name."""
    if "/" not in name.value:
        return None
    steps = []
    for part in name.value.split("/"):
        state, _, index = part.partition("[")
        steps.append(PathStep(state, int(index[:-1]) if index else None))
    return tuple(steps)


class TestInput(Node):
    values: Value  # kind "object"
    span: Span = _span()


class Reply(Node):
    state: Name
    value: Value
    variant: Name | None = None  # `reply STATE TYPE VALUE`: which of a variant output's types the reply is
    span: Span = _span()


class ScriptedArg(Node):
    name: Name
    value: Value
    span: Span = _span()


class ScriptedCall(Node):
    """One tool call in `reply STATE call TOOL(NAME = VALUE, ...)`."""

    tool: ToolName
    args: tuple[ScriptedArg, ...]
    span: Span = _span()


class ReplyCalls(Node):
    """`reply STATE call TOOL(...), ...`: the agent's next reply asks for these tool calls, which run."""

    state: Name
    calls: tuple[ScriptedCall, ...]
    span: Span = _span()


class Verdict(Node):
    state: Name
    condition: String | None  # None means `verdict STATE none`
    span: Span = _span()


class TestTimeout(Node):
    """`timeout STATE`: the person STATE asks does not answer before its `after` deadline."""

    state: Name
    span: Span = _span()


class ExpectPath(Node):
    states: tuple[Name, ...]
    span: Span = _span()


class ExpectFinal(Node):
    state: Name
    span: Span = _span()


class ExpectResult(Node):
    value: Value
    span: Span = _span()


class ExpectFailure(Node):
    kind: Name
    span: Span = _span()


class ExpectOutput(Node):
    """`expect output STATE [visit N] VALUE` (or `contains "text"`): STATE's output at its Nth visit."""

    state: Name
    visit: Number | None  # None: the first visit
    contains: bool  # the value is a string the output must contain
    value: Value
    span: Span = _span()


class ExpectInstruction(Node):
    """`expect instruction STATE [visit N] [contains] "text"`: the rendered `do` STATE's agent was sent."""

    state: Name
    visit: Number | None
    contains: bool
    text: String
    span: Span = _span()


class ExpectVar(Node):
    """`expect var NAME VALUE`: run variable NAME's value when the run ended (or paused)."""

    name: Name
    value: Value
    span: Span = _span()


class Approval(Node):
    """`approve STATE [TOOL]`, `reject STATE [TOOL] ["reason"]`, `edit STATE [TOOL] { ARGS }`: the person's
    next answer to a tool call of STATE's agent that waits for approval (`ask before`)."""

    decision: str  # "approve" | "reject" | "edit"
    state: Name
    tool: ToolName | None = None
    reason: String | None = None
    arguments: Value | None = None  # kind "object", for "edit"
    span: Span = _span()


DECISIONS = ("approve", "reject", "edit")


class AllowUnused(Node):
    """`allow unused replies`: replies and verdicts the run never asks for do not fail the test."""

    span: Span = _span()


TestItem = (
    TestInput | Reply | ReplyCalls | Verdict | TestTimeout | ExpectPath | ExpectFinal | ExpectResult | ExpectFailure | ExpectOutput
    | ExpectInstruction | ExpectVar | Approval | AllowUnused
)


class TestDecl(Node):
    __test__ = False  # not a pytest test class

    name: String
    items: tuple[TestItem, ...]
    span: Span = _span()


# ---- the machine --------------------------------------------------------------------------------

MachineItem = (
    Description | InputDecl | ModelSetting | VerifierModelSetting | TemperatureSetting | Limits | VarDecl
    | ReturnsSetting | TypeDecl | ToolDecl | AgentDecl | StateDecl | TestDecl
)


class UseDecl(Node):
    """`use "PATH" [as NAME] [{ names }]`, before the machine: the machine of the file at PATH (relative to
    this file) is callable as NAME (its own name by default); `names` (None without braces) are declarations
    of that machine imported into this one — types, agents and tools, a tool by its dotted name."""

    path: String
    alias: Name | None = None
    names: tuple[ToolName, ...] | None = None
    span: Span = _span()


class Machine(Node):
    name: Name
    items: tuple[MachineItem, ...]
    span: Span = _span()
    uses: tuple[UseDecl, ...] = ()  # the `use` lines before the machine, in source order

    def of(self, kind: type) -> list:  # type: ignore[type-arg]
        """The machine's items of one kind, in source order."""
        return [i for i in self.items if isinstance(i, kind)]


class Comment(Node):
    """A `#` comment, collected by the lexer for the formatter (the grammar ignores comments)."""

    text: str
    span: Span = _span()
