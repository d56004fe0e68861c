"""The IR: a checked machine with references bound, defaults filled and origins kept as spans.

It holds everything code generation and the interpreter need; nothing downstream looks at the AST.
Spans stay out of equality (`compare=False`), so passes and tests can compare machines structurally.
"""

from __future__ import annotations

from dataclasses import field

from ..diagnostics import Span
from ..grammar import ast
from ..grammar.node import Node

DEFAULT_MODEL = "openai/gpt-4o-mini"
DEFAULT_RETRIES = 2
MAX_RETRIES = 10  # every retry resends the conversation so far, so the cost of a step grows quadratically
DEFAULT_STEP_LIMIT = 100
DEFAULT_MEMORY = "all"
DEFAULT_CONCURRENCY = 4  # elements of a map that run at once when the state does not say

# The guard expression tree is the AST's own: it is small, immutable and already exact.
Expr = ast.Expr


def _origin() -> Span | None:
    return field(default=None, compare=False, repr=False)  # type: ignore[return-value]


# ---- types ---------------------------------------------------------------------------------------


class Prim(Node):
    """str, int, float, bool, none, or any (the result of a user tool: not checked)."""

    name: str


class ListOf(Node):
    item: Type


class Optional_(Node):
    inner: Type


class Enum(Node):
    values: tuple[str, ...]


class Named(Node):
    """A reference to a declared `type`; its fields are in Machine.types."""

    name: str


class Variant(Node):
    """A state's output that is exactly one of several declared types (`output Answer | Escalation`).

    Only a state's output has this type; the value a guard or a template sees is the variant itself."""

    options: tuple[str, ...]  # declared type names, in source order, each once


Type = Prim | ListOf | Optional_ | Enum | Named | Variant

STR, INT, FLOAT, BOOL, NONE, ANY = (Prim(n) for n in ("str", "int", "float", "bool", "none", "any"))


class Constraints(Node):
    """What a field's or an input's value must satisfy beyond its type; None where nothing is required.

    `minimum`/`maximum` bound a number (`in LOW..HIGH`); `min_length`/`max_length` the characters of a str
    or the items of a list (`len LOW..HIGH`); `pattern` is a regex a str must match somewhere
    (`matches "..."`, JSON Schema's rule). Every bound is inclusive."""

    minimum: int | float | None = None
    maximum: int | float | None = None
    min_length: int | None = None
    max_length: int | None = None
    pattern: str | None = None

    @property
    def empty(self) -> bool:
        return all(v is None for v in (self.minimum, self.maximum, self.min_length, self.max_length,
                                       self.pattern))


class Field(Node):
    name: str
    type: Type
    doc: str = ""
    constraints: Constraints = field(default_factory=lambda: Constraints())
    origin: Span | None = _origin()


class TypeDef(Node):
    name: str
    fields: tuple[Field, ...]
    origin: Span | None = _origin()


# ---- machine parts -------------------------------------------------------------------------------


class Input(Node):
    name: str
    type: Type
    default: object = None
    has_default: bool = False
    constraints: Constraints = field(default_factory=lambda: Constraints())
    origin: Span | None = _origin()


class Variable(Node):
    """A run variable: its type and the value every run starts it with (a plain value that fits it)."""

    name: str
    type: Type
    initial: object = None
    origin: Span | None = _origin()


class Update(Node):
    """After a state's step, run variable `var` takes the value `reducer` makes of the expression's:
    "set" (the value), "append" (the list and one more item), "extend" (the list and the items of a list),
    "merge" (the declared type's value with the fields of an object that are not none written into it)."""

    reducer: str
    var: str
    value: Expr
    origin: Span | None = _origin()


class Limits(Node):
    steps: int = DEFAULT_STEP_LIMIT
    cost_usd: float | None = None
    tokens: int | None = None
    seconds: float | None = None


class Tool(Node):
    """A tool the machine may use: a standard one (`std.python`) or a user tool by import path."""

    name: str  # as written in the spec: "std.python", "lookup"
    import_path: str | None  # "pkg.mod:func" for user tools; None for std.*
    options: tuple[tuple[str, object], ...] = ()  # sorted by key
    secrets: tuple[str, ...] = ()  # names of environment variables, in source order; never values
    headers: tuple[tuple[str, str], ...] = ()  # std.http_get: (name, text with `${SECRET}`), in source order
    query: tuple[tuple[str, str], ...] = ()  # std.http_get: query parameters, the same way
    origin: Span | None = _origin()

    @property
    def is_std(self) -> bool:
        return self.import_path is None


class Agent(Node):
    name: str
    prompt: str
    model: str
    temperature: float | None
    tools: tuple[str, ...]
    memory: str = DEFAULT_MEMORY  # "all" | "none" | "last"
    memory_count: int | None = None  # for "last"
    fallbacks: tuple[str, ...] = ()
    origin: Span | None = _origin()


class Transition(Node):
    """One outgoing edge, in source order (order carries priority).

    kind: "guard" | "condition" | "always" | "otherwise" | "stay" | "timeout". For "stay", target is the
    state itself; "timeout" (`after 24h -> s`) fires when a person does not answer within `seconds`.
    """

    kind: str
    target: str
    guard: Expr | None = None
    condition: str | None = None
    max: int | str | None = None  # a str: the int input the run reads the bound from (`max rounds`)
    origin: Span | None = _origin()
    per_visit: bool = False  # `max N per visit` (only on `stay`): counted afresh each time the run arrives
    seconds: float | None = None  # kind "timeout" (`after 24h -> s`): how long a person may take to answer


class ToolCallArg(Node):
    name: str
    value: Expr
    origin: Span | None = _origin()


class ToolCall(Node):
    tool: str
    args: tuple[ToolCallArg, ...]
    origin: Span | None = _origin()


class Run(Node):
    """A state that runs another machine: `machine` is the name this machine runs it by (a key of
    `Machine.machines`), `args` build its inputs (guard expressions, as a tool call's arguments)."""

    machine: str
    args: tuple[ToolCallArg, ...]
    origin: Span | None = _origin()


class Join(Node):
    """Which branches a parallel state waits for: "all", or "first" `count` (default 1) — of those whose
    output makes `guard` true, when there is one (the guard reads one branch's output as `output`)."""

    rule: str
    count: int | None = None
    guard: Expr | None = None
    origin: Span | None = _origin()


class Parallel(Node):
    """The branches a parallel state starts at once, by their entry states, and its join."""

    branches: tuple[str, ...]
    join: Join
    origin: Span | None = _origin()


class Each(Node):
    """A state that runs once per element of the list `items`: `item` names the element and `index` (when
    given) its position, for the state's instruction and tool call; at most `max` elements, `concurrency`
    at a time."""

    item: str
    items: Expr
    max: int | str  # a str: the int input the run reads the bound from
    index: str | None = None
    concurrency: int = DEFAULT_CONCURRENCY
    origin: Span | None = _origin()


class StateRead(Node):
    """A template of a state reads state `state` by name (`{{ draft.output }}`, `{{ draft.visits }}`).

    Recorded by the template check from its Jinja parse; `origin` is the name's exact place in the source.
    """

    state: str
    template: str  # "instruction" | "result" | "fail"
    origin: Span | None = _origin()


class State(Node):
    """kind: who does the step — "agent" (an agent), "action" (a tool call, no model), "call" (it runs
    another machine, `run`; its output is the call's outcome), "human" (a person answers the question in
    `instruction`), "parallel" (its branches, `parallel`) or "final" (a final state that does no work). `final` says that the run ends after the state; a final state may do work.
    `model` overrides the agent's model for this state; `fail` is the reason template of a failing final.
    `each` makes an agent or action state run once per element of a list; `branch` names the entry state of
    the branch a branch state runs in. For a map or a parallel state, `output` is the type of one element
    of its output (the list of the elements' or branches' outputs)."""

    name: str
    kind: str
    agent: str | None = None
    model: str | None = None
    instruction: str | None = None
    output: Type | None = None  # None: the output is plain text (agent) or the tool's result (action)
    tell: tuple[str, ...] = ()
    visits: int | str | None = None  # a str: the int input the run reads the bound from
    retries: int = DEFAULT_RETRIES
    call: ToolCall | None = None
    result: str | None = None
    fail: str | None = None
    transitions: tuple[Transition, ...] = ()
    template_reads: tuple[StateRead, ...] = ()  # the states its instruction or result reads, in source order
    origin: Span | None = _origin()
    # set by the merge pass: the equivalent state whose work (guards, tool-call arguments) this one shares;
    # the state keeps its own name, position, transitions and counters
    shares: str | None = None
    final: bool = False
    parallel: Parallel | None = None
    each: Each | None = None
    branch: str | None = None
    # run variables the state updates after its step (a map's: after each element's), in order
    updates: tuple[Update, ...] = ()
    ask_before: tuple[str, ...] = ()  # tools whose calls by the state's agent wait for a person's approval
    tool_rounds: int | None = None  # the most rounds of tool calls its agent makes in one step (None: 8)
    run: Run | None = None


# ---- tests ---------------------------------------------------------------------------------------


class Reply(Node):
    state: str
    value: object  # str for untyped agent states; dict/list/scalar for typed ones and tools
    variant: str | None = None  # for a variant output: the declared type the reply is (always filled in)
    origin: Span | None = _origin()


class ToolCalls(Node):
    """`reply STATE call TOOL(...), ...` in a test: the agent's next reply asks for these tool calls."""

    state: str
    calls: tuple[tuple[str, tuple[tuple[str, object], ...]], ...]  # (tool, ((argument, value), ...)), in order
    origin: Span | None = _origin()


class Verdict(Node):
    state: str
    condition: str | None  # None: the verifier answers "none"
    origin: Span | None = _origin()


class Timeout(Node):
    """`timeout STATE` in a test: the person STATE asks does not answer in time."""

    state: str
    origin: Span | None = _origin()


class Approval(Node):
    """`approve STATE`, `reject STATE "reason"`, `edit STATE { ... }` in a test: the person's next answer to
    a tool call of STATE's agent that waits for approval; `tool`, when named, is the call's tool."""

    state: str
    decision: str  # "approve" | "reject" | "edit"
    tool: str | None = None
    reason: str | None = None
    arguments: tuple[tuple[str, object], ...] | None = None  # for "edit", in source order
    origin: Span | None = _origin()


class VarExpectation(Node):
    """`expect var NAME VALUE`: run variable NAME's value when the run ends, compared as a typed value (an
    object checks the fields it names)."""

    name: str
    value: object = None
    origin: Span | None = _origin()


class Expectation(Node):
    """`expect output` (kind "output": the state's output, compared as a typed value; an object checks the
    fields it names) or `expect instruction` (kind "instruction": the rendered `do` the agent was sent), at
    the state's `visit` (1-based). With `contains`, `value` is text the output or instruction contains."""

    kind: str
    state: str
    visit: int = 1
    contains: bool = False
    value: object = None
    origin: Span | None = _origin()


class Test(Node):
    name: str
    inputs: tuple[tuple[str, object], ...]
    steps: tuple[Reply | ToolCalls | Verdict | Timeout | Approval, ...]  # in source order
    expect_path: tuple[str, ...] | None = None
    expect_final: str | None = None
    expect_result: object = None
    has_expect_result: bool = False
    expect_failure: str | None = None
    expectations: tuple[Expectation, ...] = ()  # in source order
    allow_unused: bool = False  # `allow unused replies`: scripted answers the run never asks for pass
    origin: Span | None = _origin()
    expect_vars: tuple[VarExpectation, ...] = ()  # in source order


class Machine(Node):
    """A machine; `machines` are the machines its states run, by the names they run them by (each its own
    IR, lowered from its own file, with the machines it runs in turn); `returns` its declared result type."""

    name: str
    description: str
    inputs: tuple[Input, ...]
    model: str
    verifier_model: str
    temperature: float | None
    limits: Limits
    types: tuple[TypeDef, ...]
    tools: tuple[Tool, ...]
    agents: tuple[Agent, ...]
    states: tuple[State, ...]  # source order; states[0] need not be the start
    start: str
    tests: tuple[Test, ...] = ()
    origin: Span | None = _origin()
    variables: tuple[Variable, ...] = ()  # run variables, in source order
    machines: tuple[tuple[str, Machine], ...] = ()
    returns: Type | None = None

    def state(self, name: str) -> State:
        for s in self.states:
            if s.name == name:
                return s
        raise KeyError(name)

    def agent(self, name: str) -> Agent:
        for a in self.agents:
            if a.name == name:
                return a
        raise KeyError(name)

    def type(self, name: str) -> TypeDef:
        for t in self.types:
            if t.name == name:
                return t
        raise KeyError(name)

    def tool(self, name: str) -> Tool:
        for t in self.tools:
            if t.name == name:
                return t
        raise KeyError(name)

    def machine(self, name: str) -> Machine:
        for called, m in self.machines:
            if called == name:
                return m
        raise KeyError(name)


def iter_machines(machine: Machine) -> list[Machine]:
    """`machine` and every machine it runs, directly or through others, each once (by identity), every
    machine after the machines it runs."""
    order: list[Machine] = []
    seen: set[int] = set()
    stack: list[tuple[Machine, bool]] = [(machine, False)]
    while stack:
        m, done = stack.pop()
        if done:
            order.append(m)
            continue
        if id(m) in seen:
            continue
        seen.add(id(m))
        stack.append((m, True))
        stack.extend((callee, False) for _, callee in reversed(m.machines) if id(callee) not in seen)
    return order


def duration_text(seconds: float) -> str:
    """A duration as `after` writes it: the largest unit that divides it (`24h`, `90m`, `1.5s`)."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s" if float(seconds).is_integer() else f"{seconds:g}s"
