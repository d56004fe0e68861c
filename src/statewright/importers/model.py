"""The machine an importer builds: just enough structure to repair, lint and print a `.fsm` file.

Texts are kept as the values they stand for (`Template` for Jinja templates, plain `str` for conditions),
so the printer alone decides how to quote them. `origin` points into the imported file.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..diagnostics import Span
from .header import Header

# A type as a small tree: ("str",), ("int",), ("float",), ("bool",), ("list", T), ("opt", T),
# ("enum", ("a", "b")), ("named", "Name"), ("variant", ("A", "B")) (exactly one of the declared types A, B).
Shape = tuple


def type_text(shape: Shape) -> str:
    """The type as `.fsm` source: `list[Activity]`, `str?`, `"a" | "b"`."""
    kind = shape[0]
    if kind == "list":
        return f"list[{type_text(shape[1])}]"
    if kind == "opt":
        inner = shape[1][1] if shape[1][0] == "opt" else shape[1]
        return f"{type_text(inner)}?"  # an enum's `?` makes the whole enum optional
    if kind == "enum":
        from ..compiler.views.source_text import double_quoted

        return " | ".join(double_quoted(v) for v in shape[1])
    if kind == "named":
        return str(shape[1])
    if kind == "variant":
        return " | ".join(shape[1])
    return str(kind)


@dataclass
class FieldDecl:
    name: str
    shape: Shape
    doc: str | None = None


@dataclass
class TypeDecl:
    name: str
    fields: list[FieldDecl] = field(default_factory=list)
    comments: list[str] = field(default_factory=list)


@dataclass
class Transition:
    """`when "condition" -> target`, `-> target`, `otherwise -> target` or `otherwise stay`, with `max N`
    (`max N per visit`)."""

    target: str | None  # None for `otherwise stay`
    condition: str | None = None  # a natural-language condition, judged by the verifier
    guard: str | None = None  # a guard expression, evaluated by code
    sample_fires: bool = False  # whether the guard holds for the state's sample reply (the test skeleton's)
    otherwise: bool = False
    bound: int | None = None
    per_visit: bool = False  # `max N per visit`: the bound starts again each time the run enters the state
    origin: Span | None = None

    @property
    def stay(self) -> bool:
        return self.target is None

    @property
    def unconditional(self) -> bool:
        """Fires whenever evaluation reaches it (until its bound runs out)."""
        return self.condition is None and self.guard is None


@dataclass
class State:
    name: str
    start: bool = False
    final: bool = False
    agent: str | None = None
    instruction: str | None = None  # a Jinja template
    ask: str | None = None  # a question to a person (a Jinja template): a state that asks
    output: Shape | None = None  # the type of the state's output (None: text)
    tell: list[str] = field(default_factory=list)
    tell_origins: list[Span | None] = field(default_factory=list)
    transitions: list[Transition] = field(default_factory=list)
    result: str | None = None  # a Jinja template, for final states
    failing: bool = False  # a final state that stands for a failure of the original (AutoAgent's ABORT)
    fail_reason: str | None = None  # its `fail "reason"`
    comments: list[str] = field(default_factory=list)  # printed above the state
    origin: Span | None = None
    parallel: list[str] = field(default_factory=list)  # a parallel state's branches: their entry states
    branch: bool = False  # a branch state: it runs in a parallel state's branch, and ends it
    run: Run | None = None  # a state that runs another machine


@dataclass
class Run:
    """`run MACHINE(input = EXPR, ...)`: the machine a `use` line makes callable, and its arguments (guard
    expressions, as text)."""

    machine: str
    args: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class Agent:
    name: str
    prompt: str | None = None  # a Jinja template
    model: str | None = None
    tools: list[str] = field(default_factory=list)
    memory: str | None = None  # `memory none`, `memory last N`; None: the default (all)
    comments: list[str] = field(default_factory=list)


@dataclass
class Tool:
    name: str  # `std.python`, or the name of a user tool
    import_path: str | None = None
    comments: list[str] = field(default_factory=list)


@dataclass
class Input:
    name: str
    default: str | None = None
    comments: list[str] = field(default_factory=list)


@dataclass
class TestStep:
    kind: str  # "reply" or "verdict"
    state: str
    text: str | None  # the reply, or the verdict's condition (None: `verdict STATE none`)
    value: str | None = None  # a typed reply, as `.fsm` value text (printed as it is, in place of `text`)


@dataclass
class TestBlock:
    name: str
    inputs: dict[str, str]
    steps: list[TestStep]
    path: list[str]
    final: str
    failure: str | None = None  # a failure kind the run ends in instead of reaching `final`
    outputs: list[tuple[str, str]] = field(default_factory=list)  # `expect output STATE VALUE`, value as text


@dataclass
class Machine:
    name: str
    uses: list[str] = field(default_factory=list)  # the files of the machines it runs, from its own folder
    inputs: list[Input] = field(default_factory=list)
    returns: Shape | None = None
    model: str | None = None
    steps: int | None = None
    steps_comment: str = ""
    types: list[TypeDecl] = field(default_factory=list)
    tools: list[Tool] = field(default_factory=list)
    agents: list[Agent] = field(default_factory=list)
    states: list[State] = field(default_factory=list)
    test: TestBlock | None = None
    tests: list[TestBlock] = field(default_factory=list)  # more test blocks, after `test`
    test_comment: str = ""  # printed in place of a test block the importer could not write
    header: list[str] = field(default_factory=list)  # comment lines, without the leading '# '
    called: list[CalledFile] = field(default_factory=list)  # the machines it runs, each written to its own file

    def state(self, name: str) -> State:
        for s in self.states:
            if s.name == name:
                return s
        raise KeyError(name)

    @property
    def start(self) -> State | None:
        return next((s for s in self.states if s.start), None)

    def agent_of(self, state_name: str) -> str | None:
        return self.state(state_name).agent

    def successors(self, state: State) -> list[str]:
        names = {s.name for s in self.states}
        out: list[str] = []
        for t in state.transitions:
            target = state.name if t.stay else t.target
            if target in names and target not in out:
                out.append(target)  # type: ignore[arg-type]
        return out

    def reachable_from(self, names: list[str]) -> list[str]:
        """Every state reachable from `names` (included), in the order they are found."""
        seen: list[str] = []
        todo = list(names)
        while todo:
            name = todo.pop(0)
            if name in seen:
                continue
            seen.append(name)
            todo.extend(self.successors(self.state(name)))
        return seen

    def has_cycle(self) -> bool:
        """Whether some state can be reached again from itself."""
        return any(state.name in self.reachable_from(self.successors(state)) for state in self.states)


@dataclass
class CalledFile:
    """A machine the imported machine runs (directly or through others), written to a file of its own."""

    path: str  # from the folder of the imported machine's file: `FOLDER/NAME.fsm`
    machine: Machine
    header: Header  # its own header: the source, and how this machine differs from the original
