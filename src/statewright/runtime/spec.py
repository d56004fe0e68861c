"""The machine as the engine runs it: plain, frozen data plus the callables code generation emits.

Both faces build this same structure: `statewright run` from the IR (guards evaluated by an interpreter),
a generated runner from literal Python (guards as small generated functions). The engine sees no
difference, which is what keeps the two faces from drifting.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class Scope:
    """What a guard or a tool-call argument can see while a state's transitions are evaluated."""

    output: Any
    inputs: Mapping[str, Any]
    outputs: Mapping[str, Any]  # state name -> its latest output (absent if the state has not run)
    visits: Mapping[str, int]  # state name -> completed visits
    each: Mapping[str, Any] = field(default_factory=dict)  # a map's element and position, by their names
    vars: Mapping[str, Any] = field(default_factory=dict)  # the run variables' values, by name


Guard = Callable[[Scope], Any]


@dataclass(frozen=True, slots=True)
class TransitionSpec:
    """kind: "guard" | "condition" | "always" | "otherwise" | "stay" (target is then the state itself) |
    "timeout" (`after 24h -> s`: no answer from a person within `seconds`)."""

    kind: str
    target: str
    guard: Guard | None = None
    text: str = ""  # the guard as written, or the natural-language condition
    max: int | str | None = None  # a str: the int input the run reads the bound from (runtime/bounds.py)
    per_visit: bool = False  # `max N per visit`: the count starts afresh each time the run arrives
    seconds: float | None = None  # kind "timeout": how long a person may take to answer
    origin: str = ""  # "path/to/spec.fsm:LINE:COL"


@dataclass(frozen=True, slots=True)
class ToolCallSpec:
    tool: str
    args: Callable[[Scope], dict[str, Any]]  # builds the call's arguments from the scope
    origin: str = ""


@dataclass(frozen=True, slots=True)
class CallSpec:
    """`run NAME(arg = ..., ...)`: the state runs machine NAME (a key of its machine's `machines`), with the
    inputs `args` builds from the scope."""

    machine: str
    args: Callable[[Scope], dict[str, Any]]
    origin: str = ""


@dataclass(frozen=True, slots=True)
class JoinSpec:
    """Which branches a parallel state waits for: "all", or the "first" `count` to finish — of those whose
    output makes `guard` true, when it has one (the guard sees one branch's output as `output`)."""

    rule: str = "all"
    count: int | None = None
    guard: Guard | None = None
    text: str = ""  # the guard as written
    origin: str = ""


@dataclass(frozen=True, slots=True)
class ParallelSpec:
    """The branches a parallel state starts at once, by their entry states, in the order written."""

    branches: tuple[str, ...]
    join: JoinSpec = field(default_factory=JoinSpec)
    origin: str = ""


@dataclass(frozen=True, slots=True)
class EachSpec:
    """A state that runs once per element of the list `items` builds: `item` (and `index`, when named) are
    what its instruction and tool call see; at most `max` elements, `concurrency` at a time."""

    item: str
    items: Callable[[Scope], Any]
    max: int | str  # a str: the int input the run reads the bound from
    index: str | None = None
    concurrency: int = 4
    text: str = ""  # the list expression as written
    origin: str = ""


@dataclass(frozen=True, slots=True)
class UpdateSpec:
    """`set VAR <- EXPR` (reducer "set", "append", "extend" or "merge"): after the state's step, run variable
    `var` takes what the reducer makes of its value and the one `value` computes from the scope."""

    reducer: str
    var: str
    value: Callable[[Scope], Any]
    text: str = ""  # the expression as written
    origin: str = ""


@dataclass(frozen=True, slots=True)
class VariableSpec:
    """A run variable: `annotation` is its type for pydantic's TypeAdapter, `initial` the value (JSON) every
    run starts it with."""

    name: str
    annotation: Any
    initial: Any = None
    origin: str = ""


@dataclass(frozen=True, slots=True)
class StateSpec:
    """kind: who does the step, "agent" | "action" | "human" (a person answers the question in
    `instruction`) | "parallel" (its branches, `parallel`) | "call" (it runs another machine, `run`; its
    output is the call's outcome, calls.CallOutcome) | "final" (a final state that does no work).

    `final`: the run ends after this state (which may do work first); `fail`: the reason template of a
    final state that ends the run as failed; `model`: overrides the agent's model for this state. `each`:
    the state runs once per element of a list, and its output is the list of the elements' outputs;
    `branch`: the entry state of the branch a branch state runs in. For a map or a parallel state, `output`
    validates one element of the output list."""

    name: str
    kind: str
    final: bool = False
    agent: str | None = None
    model: str | None = None
    instruction: str | None = None  # Jinja2 template source
    output: type | None = None  # a pydantic model class; None for plain text / a tool's raw result
    output_wrapped: bool = False  # the model wraps a non-object type in a single field named `value`
    output_variant: bool = False  # the output is one of several declared types (a VariantOutput class)
    tell: tuple[str, ...] = ()
    visits: int | str | None = None  # a str: the int input the run reads the bound from
    retries: int = 2
    call: ToolCallSpec | None = None
    result: str | None = None  # Jinja2 template source, for final states
    fail: str | None = None  # Jinja2 template source: the reason of a failing final state
    transitions: tuple[TransitionSpec, ...] = ()
    origin: str = ""
    parallel: ParallelSpec | None = None
    each: EachSpec | None = None
    branch: str | None = None
    run: CallSpec | None = None
    updates: tuple[UpdateSpec, ...] = ()  # run variables updated after the step (a map's: each element's)
    ask_before: tuple[str, ...] = ()  # tools whose calls by the agent wait for a person's approval
    tool_rounds: int | None = None  # the most rounds of tool calls the agent makes in one step (None: 8)


@dataclass(frozen=True, slots=True)
class AgentSpec:
    name: str
    prompt: str  # Jinja2 template source (rendered with the inputs)
    model: str
    temperature: float | None = None
    tools: tuple[str, ...] = ()
    memory: str = "all"  # "all" | "none" | "last"
    memory_count: int | None = None
    fallbacks: tuple[str, ...] = ()
    origin: str = ""


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool the machine enables: std.* by name, user tools by "pkg.mod:func".

    `secrets` are names of environment variables, never values (tool_secrets.py reads them when a run
    starts); `headers` and `query` are std.http_get's (name, text) pairs, the text with `${NAME}` in it."""

    name: str
    import_path: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    secrets: tuple[str, ...] = ()
    headers: tuple[tuple[str, str], ...] = ()
    query: tuple[tuple[str, str], ...] = ()
    origin: str = ""


@dataclass(frozen=True, slots=True)
class InputSpec:
    name: str
    annotation: Any  # a Python type for pydantic's TypeAdapter: str, int, list[str], Optional[...], Literal[...]
    required: bool = True
    default: Any = None


@dataclass(frozen=True, slots=True)
class LimitsSpec:
    steps: int = 100
    cost_usd: float | None = None
    tokens: int | None = None
    seconds: float | None = None


@dataclass(frozen=True, slots=True)
class ExpectationSpec:
    """`expect output` (kind "output") or `expect instruction` (kind "instruction") of a test block: what
    `state` gave at its `visit` (1-based); with `contains`, `value` is text it must contain."""

    kind: str
    state: str
    visit: int = 1
    contains: bool = False
    value: Any = None
    origin: str = ""


@dataclass(frozen=True, slots=True)
class VarExpectationSpec:
    """`expect var NAME VALUE` of a test block: run variable `name`'s value when the run ended (an object
    checks only the fields it names)."""

    name: str
    value: Any = None
    origin: str = ""


@dataclass(frozen=True, slots=True)
class TestSpec:
    """A `test` block: inputs, the scripted replies and verdicts in source order, expectations."""

    __test__ = False

    name: str
    inputs: Mapping[str, Any]
    # ("reply", state, value) for an agent's, tool's or person's reply; ("calls", state, [{"name", "arguments"}])
    # for an agent's reply that asks for tool calls; ("verdict", state, condition-or-None);
    # ("timeout", state, None) for a person who does not answer in time; ("approval", state, answer) for a
    # person's answer to a tool call that waits (approvals.py: {"decision": ..., ...})
    steps: tuple[tuple[str, str, Any], ...]
    expect_path: tuple[str, ...] | None = None
    expect_final: str | None = None
    expect_result: Any = None
    has_expect_result: bool = False
    expect_failure: str | None = None
    origin: str = ""
    expectations: tuple[ExpectationSpec, ...] = ()
    allow_unused: bool = False  # replies and verdicts the run never used do not fail the test
    step_origins: tuple[str, ...] = ()  # the .fsm position of each of `steps`
    expect_vars: tuple[VarExpectationSpec, ...] = ()  # `expect var NAME VALUE`, in source order


@dataclass(frozen=True, slots=True)
class MachineSpec:
    name: str
    description: str
    inputs: tuple[InputSpec, ...]
    model: str
    verifier_model: str
    temperature: float | None
    limits: LimitsSpec
    agents: Mapping[str, AgentSpec]
    states: Mapping[str, StateSpec]  # in source order
    start: str
    tools: Mapping[str, ToolSpec] = field(default_factory=dict)
    tests: tuple[TestSpec, ...] = ()
    source_sha256: str = ""
    source_path: str = ""
    # the declared types that variant outputs offer, by name: templates test them with `is NAME`
    variant_types: Mapping[str, type] = field(default_factory=dict)
    # the machines this one runs (`run NAME(...)`), by the name it calls them; each carries its own
    machines: Mapping[str, MachineSpec] = field(default_factory=dict)
    # `returns T`: the class a result is validated against (wrapped in `{"value": ...}` like an output
    # when T is not a record), or None for a machine that declares none
    result_type: type | None = None
    result_wrapped: bool = False
    variables: tuple[VariableSpec, ...] = ()  # run variables, in the order declared


def every_machine(machine: MachineSpec) -> Iterator[MachineSpec]:
    """`machine` and every machine it runs, directly or through others, each once (in depth-first order)."""
    seen: set[int] = set()
    stack = [machine]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        stack.extend(reversed(list(current.machines.values())))


def state_at(machine: MachineSpec, path: str) -> StateSpec | None:
    """The state a path names: `draft`, or `investigate/draft` (state `draft` of the machine that state
    `investigate` runs), `investigate[2]/draft` (the same, for a map's element), nested `a/b/c`; None when
    the path leads nowhere."""
    *calls, name = path.split("/")
    current: MachineSpec | None = machine
    for step in calls:
        state = current.states.get(step.split("[", 1)[0]) if current is not None else None
        if state is None or state.run is None:
            return None
        current = current.machines.get(state.run.machine) if current is not None else None
    return current.states.get(name) if current is not None else None
