"""Name resolution: symbol tables for the machine's declarations, and every reference checked against them.

Each declaration kind gets one table; the first declaration of a name wins and later ones are reported
(SW2001), so a duplicate never hides the checks of what follows. Blocks whose settings may appear once
(machine, agent, state, test) are read into views that keep the first occurrence and report the rest
(SW2010). Unknown references are reported here once; later stages treat them as `any` and stay quiet.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import field
from typing import TYPE_CHECKING, Any

from ...diagnostics import Diagnostics, Span, close_names, did_you_mean, quoted_list
from ...grammar import ast
from ...grammar.node import Node
from ...runtime.tool_signatures import STD_TOOLS
from .. import ir

if TYPE_CHECKING:
    from ..project import UsedFile
    from .callees import Callee, ForeignType
    from .imports import Import

BUILTIN_TYPES = {"str": ir.STR, "int": ir.INT, "float": ir.FLOAT, "bool": ir.BOOL}
GUARD_OUTPUT = "output"  # the name of the current state's output in guards
LIMIT_NAMES = ("steps", "cost_usd", "tokens", "seconds")  # what `limits { ... }` may bound
# Names a template cannot read as a variable, so no input or state may take them: the ones Jinja binds
# itself (`self` always; `loop`, `varargs`, `kwargs`, `caller` and `super` inside loops, macros and
# blocks), its globals (`range(3)` would stop working), its constants, and `not` (always an operator).
JINJA_NAMES = frozenset({
    "self", "loop", "varargs", "kwargs", "caller", "super",
    "range", "dict", "lipsum", "cycler", "joiner", "namespace",
    "true", "false", "none", "True", "False", "None", "not",
})
IMPORT_PATH = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


def closest(name: str, candidates: Iterable[str]) -> str | None:
    """The likeliest intended name for a misspelling, or None.

    A misspelled reference counts as a use of the name it most likely meant, so one typo does not also
    produce an 'unused' warning for the declaration it was meant to reach.
    """
    close = close_names(name, candidates)
    return close[0] if close else None


# ---- views: one block's settings, first occurrence kept ------------------------------------------


class MachineView(Node, frozen=False):
    description: ast.Description | None = None
    model: ast.ModelSetting | None = None
    verifier_model: ast.VerifierModelSetting | None = None
    temperature: ast.TemperatureSetting | None = None
    limits: ast.Limits | None = None
    returns: ast.ReturnsSetting | None = None


class AgentView(Node, frozen=False):
    decl: ast.AgentDecl
    prompt: ast.PromptSetting | None = None
    model: ast.ModelSetting | None = None
    temperature: ast.TemperatureSetting | None = None
    tools: ast.ToolsSetting | None = None
    memory: ast.MemorySetting | None = None
    fallbacks: ast.FallbacksSetting | None = None


class StateView(Node, frozen=False):
    decl: ast.StateDecl
    agent: ast.AgentRef | None = None
    model: ast.ModelSetting | None = None
    instruction: ast.Instruction | None = None
    ask: ast.Ask | None = None
    output: ast.OutputDecl | None = None
    tell: ast.Tell | None = None
    visits: ast.Visits | None = None
    retries: ast.Retries | None = None
    call: ast.ToolCall | None = None
    result: ast.Result | None = None
    fail: ast.Fail | None = None
    parallel: ast.Parallel | None = None
    join: ast.Join | None = None
    each: ast.ForEach | None = None
    ask_before: ast.AskBefore | None = None
    tool_rounds: ast.ToolRounds | None = None
    run: ast.RunCall | None = None

    @property
    def name(self) -> str:
        return self.decl.name.value

    @property
    def updates(self) -> tuple[ast.Update, ...]:
        """The state's updates of run variables, in the order they are applied."""
        return self.decl.updates

    @property
    def kind(self) -> str:
        """Who does the state's step: "parallel" (its branches), "agent", "action" (a tool call), "call" (it
        runs another machine), "human" (a person answers `ask`), "final" for a final state that does no
        work, or "none" for any other state that does none (already reported). A final state may do work: `decl.final` says that the run ends
        there. A state with `for` is an agent or action state that runs once per element."""
        if self.parallel is not None:
            return "parallel"
        if self.agent is not None:
            return "agent"
        if self.call is not None:
            return "action"
        if self.run is not None:
            return "call"
        if self.ask is not None:
            return "human"
        if self.decl.final:
            return "final"
        return "none"

    @property
    def transitions(self) -> tuple[ast.Transition, ...]:
        return self.decl.transitions

    @property
    def conditions(self) -> list[str]:
        return [t.condition.value for t in self.transitions if t.kind == "condition" and t.condition]


class TestView(Node, frozen=False):
    decl: ast.TestDecl
    input: ast.TestInput | None = None
    expect_path: ast.ExpectPath | None = None
    expect_final: ast.ExpectFinal | None = None
    expect_result: ast.ExpectResult | None = None
    expect_failure: ast.ExpectFailure | None = None
    allow_unused: ast.AllowUnused | None = None

    @property
    def expectations(self) -> list[ast.ExpectOutput | ast.ExpectInstruction]:
        """The test's `expect output` and `expect instruction` lines, in source order (any number of each)."""
        return [i for i in self.decl.items if isinstance(i, (ast.ExpectOutput, ast.ExpectInstruction))]

    @property
    def expect_vars(self) -> list[ast.ExpectVar]:
        """The test's `expect var` lines, in source order."""
        return [i for i in self.decl.items if isinstance(i, ast.ExpectVar)]

    @property
    def has_expectation(self) -> bool:
        return any(x is not None for x in (self.expect_path, self.expect_final, self.expect_result,
                                           self.expect_failure)) or bool(self.expectations) or bool(self.expect_vars)


class InputRead(Node):
    """A guard or template reads input `name`; `origin` is the name's exact place in the source."""

    name: str
    origin: Span | None = field(default=None, compare=False)


class FieldRead(Node):
    """A guard or template reads field `name` of a value of the declared type `type`, at `origin`."""

    type: str
    name: str
    origin: Span | None = field(default=None, compare=False)


class Symbols(Node, frozen=False):
    """Every declared name, by kind, plus what the checks learn about which declarations are used.

    Declarations imported with `use ... { names }` are in the tables as if declared here (`imports` says
    which); `callees` are the machines `run` may name, and `foreign_types` the types of theirs that guards
    and templates read (checks/callees.py)."""

    machine: MachineView
    inputs: dict[str, ast.InputDecl] = field(default_factory=dict)
    variables: dict[str, ast.VarDecl] = field(default_factory=dict)  # run variables (`var`)
    types: dict[str, ast.TypeDecl] = field(default_factory=dict)
    tools: dict[str, ast.ToolDecl] = field(default_factory=dict)  # declared with `tool`
    agents: dict[str, AgentView] = field(default_factory=dict)
    states: dict[str, StateView] = field(default_factory=dict)
    tests: list[TestView] = field(default_factory=list)
    # std tools referenced without a declaration, in order of first reference (lowered as implicit tools)
    implicit_tools: list[str] = field(default_factory=list)
    used_types: set[str] = field(default_factory=set)
    used_tools: set[str] = field(default_factory=set)
    used_agents: set[str] = field(default_factory=set)
    used_inputs: set[str] = field(default_factory=set)
    used_variables: set[str] = field(default_factory=set)  # run variables a guard, template or test reads
    # the states each state's templates read, recorded by the template check for the IR
    state_reads: dict[str, list[ir.StateRead]] = field(default_factory=dict)
    # the inputs and the fields of declared types that guards and templates read, recorded by the type
    # and template checks for tools that navigate a file (the language server)
    input_reads: list[InputRead] = field(default_factory=list)
    variable_reads: list[InputRead] = field(default_factory=list)  # run variables, by name, where read
    field_reads: list[FieldRead] = field(default_factory=list)
    # parallel state -> its branches, in `parallel [...]` order: (entry state, the states that can end the
    # branch); recorded from the machine's flow (checks/fanout.py) before the type checks read it
    branches: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = field(default_factory=dict)
    branch_of: dict[str, str] = field(default_factory=dict)  # branch state -> the entry of its branch
    # parallel state -> the type of its output, worked out from its branches on the first read of it (each
    # read of `STATE.output` asks for it again)
    parallel_outputs: dict[str, ir.Type] = field(default_factory=dict, compare=False, repr=False)
    # map state -> the types of its index and element names (checker types), recorded by the type check
    # for the template check
    each_names: dict[str, dict[str, Any]] = field(default_factory=dict)
    # state -> what every transition into it shows about other states' outputs (flow.EntryFacts),
    # recorded by entry_facts.py for the type and template checks
    entry_facts: dict[str, Any] = field(default_factory=dict)
    # declared type -> the first declaration of each of its fields, and their types, by name: built on the
    # first look after resolution, as object literals and field reads look up fields one at a time
    field_tables: dict[str, tuple[dict[str, ast.FieldDecl], dict[str, ir.Type]]] = field(
        default_factory=dict, compare=False, repr=False)
    machine_name: str = ""
    # the files the machine's `use` lines name; the machines it may run by the names `run` gives them, and
    # the names of uses whose file cannot be used (reported at the `use` line: a `run` of one is not unknown)
    uses: list[UsedFile] = field(default_factory=list, compare=False, repr=False)
    callees: dict[str, Callee] = field(default_factory=dict, compare=False, repr=False)
    broken_callees: set[str] = field(default_factory=set, compare=False, repr=False)
    broken_imports: set[str] = field(default_factory=set, compare=False, repr=False)  # names such a use imports
    used_callees: set[str] = field(default_factory=set, compare=False, repr=False)
    imports: list[Import] = field(default_factory=list, compare=False, repr=False)
    foreign_types: dict[str, ForeignType] = field(default_factory=dict, compare=False, repr=False)
    decl_names: dict[int, str] | None = field(default=None, compare=False, repr=False)

    def type_names_by_decl(self) -> dict[int, str]:
        """The name each type declaration has here, by the declaration's identity (a type imported from
        another file is the same declaration there and here)."""
        if self.decl_names is None:
            self.decl_names = {id(decl): name for name, decl in self.types.items()}
        return self.decl_names

    def known_tool(self, name: str) -> bool:
        return name in self.tools or name in STD_TOOLS

    def resolve_type(self, ref: ast.TypeRef) -> ir.Type:
        """The IR type a reference denotes; unknown names (reported during resolution) become `any`."""
        if isinstance(ref, ast.NamedType):
            name = ref.name.value
            if name in BUILTIN_TYPES:
                return BUILTIN_TYPES[name]
            return ir.Named(name) if name in self.types else ir.ANY
        if isinstance(ref, ast.ListType):
            return ir.ListOf(self.resolve_type(ref.item))
        if isinstance(ref, ast.OptionalType):
            inner = self.resolve_type(ref.inner)
            return inner if isinstance(inner, ir.Optional_) else ir.Optional_(inner)
        return ir.Enum(tuple(dict.fromkeys(v.value for v in ref.values)))

    def resolve_output(self, ref: ast.TypeRef | ast.VariantType) -> ir.Type:
        """The type of `output ...`: a type, or a variant of declared types (`any` while one of its names is
        not a declared type: reported during resolution)."""
        if not isinstance(ref, ast.VariantType):
            return self.resolve_type(ref)
        names = tuple(dict.fromkeys(n.value for n in ref.options))
        if not all(n in self.types for n in names):
            return ir.ANY
        return ir.Variant(names)

    def variant_types(self) -> list[str]:
        """Every declared type some state's output offers as a variant, in order of first mention."""
        found: dict[str, None] = {}
        for view in self.states.values():
            if view.output is not None and isinstance(view.output.type, ast.VariantType):
                found.update((n.value, None) for n in view.output.type.options if n.value in self.types)
        return list(found)

    def field_decl(self, type_name: str, field: str) -> ast.FieldDecl | None:
        """The first declaration of field `field` in declared type `type_name`."""
        foreign = self.foreign_types.get(type_name) if type_name not in self.types else None
        if foreign is not None:
            return foreign.field_decl(field)
        return self._field_table(type_name)[0].get(field)

    def fields_of(self, type_name: str) -> dict[str, ir.Type]:
        """The fields of declared type `type_name` and their types, in declaration order (the first
        declaration of a name); {} for a name that is no declared type. Do not change the dict. A foreign
        type (a call's outcome, a callee's type) has its fields too."""
        foreign = self.foreign_types.get(type_name) if type_name not in self.types else None
        if foreign is not None:
            return foreign.fields()
        return self._field_table(type_name)[1]

    def _field_table(self, type_name: str) -> tuple[dict[str, ast.FieldDecl], dict[str, ir.Type]]:
        table = self.field_tables.get(type_name)
        if table is None:
            decl = self.types.get(type_name)
            if decl is None:
                return {}, {}
            decls: dict[str, ast.FieldDecl] = {}
            for f in decl.fields:
                decls.setdefault(f.name.value, f)  # a duplicate is reported (SW2001); the first is the field
            table = decls, {name: self.resolve_type(f.type) for name, f in decls.items()}
            self.field_tables[type_name] = table
        return table


# For each block kind: the setting classes read into its view, each with the view attribute it fills and
# the word it is written with (for "given twice" messages).
_MACHINE_SETTINGS: dict[type, tuple[str, str]] = {
    ast.Description: ("description", "description"), ast.ModelSetting: ("model", "model"),
    ast.VerifierModelSetting: ("verifier_model", "verifier model"),
    ast.TemperatureSetting: ("temperature", "temperature"), ast.Limits: ("limits", "limits"),
    ast.ReturnsSetting: ("returns", "returns"),
}
_AGENT_SETTINGS: dict[type, tuple[str, str]] = {
    ast.PromptSetting: ("prompt", "prompt"), ast.ModelSetting: ("model", "model"),
    ast.TemperatureSetting: ("temperature", "temperature"), ast.ToolsSetting: ("tools", "tools"),
    ast.MemorySetting: ("memory", "memory"), ast.FallbacksSetting: ("fallbacks", "fallbacks"),
}
_STATE_SETTINGS: dict[type, tuple[str, str]] = {
    ast.AgentRef: ("agent", "agent"), ast.ModelSetting: ("model", "model"), ast.Instruction: ("instruction", "do"),
    ast.Ask: ("ask", "ask"),
    ast.OutputDecl: ("output", "output"), ast.Tell: ("tell", "tell"),
    ast.Visits: ("visits", "visits"), ast.Retries: ("retries", "retries"),
    ast.ToolCall: ("call", "call"), ast.Result: ("result", "result"), ast.Fail: ("fail", "fail"),
    ast.Parallel: ("parallel", "parallel"), ast.Join: ("join", "join"), ast.ForEach: ("each", "for"),
    ast.AskBefore: ("ask_before", "ask before"), ast.ToolRounds: ("tool_rounds", "tool_rounds"),
    ast.RunCall: ("run", "run"),
}
_TEST_SETTINGS: dict[type, tuple[str, str]] = {
    ast.TestInput: ("input", "input"), ast.ExpectPath: ("expect_path", "expect path"),
    ast.ExpectFinal: ("expect_final", "expect final"), ast.ExpectResult: ("expect_result", "expect result"),
    ast.ExpectFailure: ("expect_failure", "expect failure"), ast.AllowUnused: ("allow_unused", "allow unused replies"),
}


# ---- resolution ----------------------------------------------------------------------------------


class _Resolver:
    def __init__(self, machine: ast.Machine, diags: Diagnostics) -> None:
        self.machine = machine
        self.diags = diags
        self.symbols = Symbols(MachineView(), machine_name=machine.name.value)
        self._test_names: dict[str, TestView] = {}  # the first test of each name

    # -- helpers

    def _duplicate(self, kind: str, name: ast.Name, first: Span | None) -> None:
        where = f" (line {first.start_pos.line})" if first is not None else ""
        self.diags.report("SW2001", f"{kind} '{name.value}' is declared twice", name.span,
                          label=f"a second {kind} with this name",
                          help=f"rename one of them; the first declaration{where} is the one used")

    def _read_settings(self, view: object, items: Iterable[object], slots: dict[type, tuple[str, str]],
                       where: str) -> None:
        """Fill `view` from the settings among `items`: the first of each kind is kept, a repeat reported."""
        for item in items:
            slot = slots.get(type(item))
            if slot is None:
                continue
            attr, setting = slot
            if getattr(view, attr) is None:
                setattr(view, attr, item)
            else:
                self.diags.report("SW2010", f"'{setting}' is given twice in {where}",
                                  getattr(item, "span", None), label="second occurrence",
                                  help=f"keep one '{setting}'; the first one is used")

    # -- declarations

    def declare(self) -> None:
        s = self.symbols
        self._read_settings(s.machine, self.machine.items, _MACHINE_SETTINGS,
                            f"machine '{self.machine.name.value}'")
        for item in self.machine.items:
            if isinstance(item, ast.InputDecl):
                self._declare(s.inputs, "input", item.name, item)
            elif isinstance(item, ast.VarDecl):
                self._declare(s.variables, "variable", item.name, item)
            elif isinstance(item, ast.TypeDecl):
                self._declare(s.types, "type", item.name, item)
                self._check_fields(item)
            elif isinstance(item, ast.ToolDecl):
                name = item.name.dotted
                if name in s.tools:
                    self._duplicate_tool(item, s.tools[name])
                else:
                    s.tools[name] = item
            elif isinstance(item, ast.AgentDecl):
                if self._declare(s.agents, "agent", item.name, None):
                    s.agents[item.name.value] = self.agent_view(item)
            elif isinstance(item, ast.StateDecl):
                if self._declare(s.states, "state", item.name, None):
                    s.states[item.name.value] = self._state_view(item)
            elif isinstance(item, ast.TestDecl):
                self._declare_test(item)
        self._check_reserved_and_collisions()

    def _declare(self, table: dict[str, Any], kind: str, name: ast.Name, value: object) -> bool:
        existing = table.get(name.value)
        if existing is not None:
            first = getattr(existing, "decl", existing)
            self._duplicate(kind, name, getattr(getattr(first, "name", None), "span", None))
            return False
        if value is not None:
            table[name.value] = value
        return True

    def _duplicate_tool(self, item: ast.ToolDecl, first: ast.ToolDecl) -> None:
        self.diags.report("SW2001", f"tool '{item.name.dotted}' is declared twice", item.name.span,
                          label="a second tool with this name",
                          help="merge the two declarations; the first (line "
                               f"{first.name.span.start_pos.line}) "
                               "is the one used")

    def _check_fields(self, decl: ast.TypeDecl) -> None:
        seen: dict[str, ast.FieldDecl] = {}
        for f in decl.fields:
            if f.name.value in seen:
                self.diags.report("SW2001", f"field '{f.name.value}' is declared twice in type "
                                  f"'{decl.name.value}'", f.name.span, label="a second field with this name",
                                  help="rename or remove one of the fields")
            else:
                seen[f.name.value] = f

    def agent_view(self, decl: ast.AgentDecl) -> AgentView:
        view = AgentView(decl)
        self._read_settings(view, decl.items, _AGENT_SETTINGS, f"agent '{decl.name.value}'")
        return view

    def _state_view(self, decl: ast.StateDecl) -> StateView:
        view = StateView(decl)
        self._read_settings(view, decl.items, _STATE_SETTINGS, f"state '{decl.name.value}'")
        return view

    def _declare_test(self, decl: ast.TestDecl) -> None:
        other = self._test_names.get(decl.name.value)
        if other is not None:
            self.diags.report("SW2001", f"test \"{decl.name.value}\" is declared twice", decl.name.span,
                              label="a second test with this name",
                              help=f"give each test its own name (the first is at line "
                                   f"{other.decl.name.span.start_pos.line})")
        view = TestView(decl)
        self._test_names.setdefault(decl.name.value, view)
        self._read_settings(view, decl.items, _TEST_SETTINGS, f'test "{decl.name.value}"')
        self.symbols.tests.append(view)

    def _check_reserved_and_collisions(self) -> None:
        s = self.symbols
        # Guards and templates see inputs and states in one namespace, next to the reserved `output`.
        for name, decl in s.inputs.items():
            if name in s.states:
                state = s.states[name].decl
                self.diags.report("SW2001", f"input '{name}' has the same name as a state", decl.name.span,
                                  label="also a state name",
                                  help=f"guards and templates could not tell '{name}' the input from "
                                       f"'{name}' the state (line {state.name.span.start_pos.line}); "
                                       "rename one")
        for table, kind in ((s.inputs, "input"), (s.states, "state")):
            for name in sorted(set(table) & JINJA_NAMES):
                item = table[name]
                name_node = item.decl.name if isinstance(item, StateView) else item.name
                self.diags.report("SW2014", f"{kind} name '{name}' is one of Jinja's own names",
                                  name_node.span, label="templates cannot read it",
                                  help=f"in a template '{name}' means {_JINJA_MEANINGS.get(name, 'a constant')}, "
                                       f"not this {kind}; choose another name, e.g. '{name}_{kind}'")
            if GUARD_OUTPUT in table:
                item = table[GUARD_OUTPUT]
                name_node = item.decl.name if isinstance(item, StateView) else item.name
                self.diags.report("SW2001", f"{kind} name 'output' is reserved", name_node.span,
                                  label="reserved name",
                                  help="'output' names the current state's output in guards; "
                                       "choose another name")

    # -- references

    def check_references(self) -> None:
        s = self.symbols
        for item in self.machine.items:
            if isinstance(item, (ast.InputDecl, ast.VarDecl, ast.ReturnsSetting)):
                self._type_ref(item.type)
            elif isinstance(item, ast.TypeDecl):
                for f in item.fields:
                    self._type_ref(f.type, owner=item.name.value)
            elif isinstance(item, ast.ToolDecl):
                self._tool_decl(item)
        for agent in s.agents.values():
            if agent.tools is not None:
                seen: set[str] = set()
                for tool in agent.tools.tools:
                    if tool.dotted in seen:
                        self.diags.report("SW2001", f"tool '{tool.dotted}' is listed twice", tool.span,
                                          label="listed again", help="list each tool once")
                        continue
                    seen.add(tool.dotted)
                    self._tool_ref(tool)
        for view in s.states.values():
            self._state_refs(view)
        for test in s.tests:
            self._test_refs(test)

    def _type_ref(self, ref: ast.TypeRef, owner: str | None = None) -> None:
        """Check the names in a type reference; `owner` is the type whose field it is (not a use of it)."""
        for node in ast.iter_type_ref(ref):
            if not isinstance(node, ast.NamedType) or node.name.value in BUILTIN_TYPES:
                continue
            name = node.name.value
            if name in self.symbols.types:
                if name != owner:
                    self.symbols.used_types.add(name)
                continue
            if name in self.symbols.broken_imports:
                continue  # imported from a file that cannot be used (reported at its `use` line)
            hint = did_you_mean(name, list(BUILTIN_TYPES) + list(self.symbols.types))
            self.symbols.used_types.add(closest(name, self.symbols.types) or "")
            if name == "list":
                hint = "write the item type in brackets: list[str]"
            elif name in ("string", "integer", "number", "boolean", "dict", "object", "any", "none"):
                hint = hint or ("the built-in types are str, int, float, bool, list[T] and T?; "
                                "declare a 'type' for structured values")
            self.diags.report("SW2004", f"unknown type '{name}'", node.name.span,
                              label="no type with this name",
                              help=hint or "the built-in types are str, int, float, bool, list[T] "
                                           "and T?; declare other types with 'type NAME { ... }'")

    def _variant_type(self, ref: ast.VariantType) -> None:
        """`output A | B`: each a declared type, each once, none named like one of Jinja's tests."""
        seen: set[str] = set()
        for name in ref.options:
            if name.value in seen:
                self.diags.report("SW4030", f"variant '{name.value}' is listed twice", name.span,
                                  label="listed again", help="list each type of the output once")
                continue
            seen.add(name.value)
            if name.value in BUILTIN_TYPES:
                self.diags.report("SW4030", f"'{name.value}' cannot be a variant of an output", name.span,
                                  label="a built-in type",
                                  help="each variant is a declared type, so that a guard can tell which one "
                                       f"arrived (`output is NAME`): declare e.g. type {name.value.title()}"
                                       f"Reply {{ value: {name.value} }}")
                continue
            self._type_ref(ast.NamedType(name, name.span))
            if name.value in self.symbols.types and name.value in _jinja_tests():
                self.diags.report("SW2020", f"variant type '{name.value}' has the name of a Jinja test",
                                  name.span, label=f"'{{% if x is {name.value} %}}' would run Jinja's own test",
                                  help=f"templates test a variant with `is {name.value}`, and Jinja already "
                                       f"has a test called '{name.value}'; rename the type, e.g. "
                                       f"'{name.value[:1].upper()}{name.value[1:]}'")

    def _tool_decl(self, decl: ast.ToolDecl) -> None:
        name = decl.name.dotted
        if decl.name.parts[0] == "std":
            if name not in STD_TOOLS:
                self.diags.report("SW2005", f"unknown standard tool '{name}'", decl.name.span,
                                  label="not a standard tool",
                                  help=did_you_mean(name, STD_TOOLS) or _standard_tools())
            elif decl.import_path is not None:
                self.diags.report("SW2013", f"standard tool '{name}' cannot take an import path",
                                  decl.import_path.span, label="not allowed for std.* tools",
                                  help=f"write 'tool {name}' (std.* names are reserved for the standard "
                                       "tools); give a user tool a name of its own")
            return
        if decl.import_path is None:
            self.diags.report("SW2013", f"tool '{name}' has no import path", decl.name.span,
                              label="where is this tool's code?",
                              help=f'name the Python function: tool {name} = "package.module:function"')
        elif not IMPORT_PATH.match(decl.import_path.value):
            self.diags.report("SW2013", f"'{decl.import_path.value}' is not an import path",
                              decl.import_path.span, label="expected \"package.module:function\"",
                              help='write the module and the function separated by a colon, e.g. '
                                   '"mypkg.tools:lookup"')

    def _tool_ref(self, tool: ast.ToolName) -> None:
        """A tool used by an agent or a `call`: declared, or a standard tool enabled by default."""
        name = tool.dotted
        s = self.symbols
        s.used_tools.add(name)
        if name in s.tools:
            return
        if name in s.broken_imports:
            return
        if name in STD_TOOLS:
            if not STD_TOOLS[name]["enabled_by_default"]:
                self.diags.report("SW2012", f"'{name}' is not enabled", tool.span,
                                  label="declare it to enable it",
                                  help=f"add 'tool {name}' to the machine"
                                       + (" with an 'allow' list of hosts" if name == "std.http_get" else ""))
            elif name not in s.implicit_tools:
                s.implicit_tools.append(name)
            return
        candidates = list(s.tools) + list(STD_TOOLS)
        hint = did_you_mean(name, candidates)
        s.used_tools.add(closest(name, s.tools) or "")
        if not hint:
            hint = (_standard_tools() if tool.parts[0] == "std"
                    else f'declare it first: tool {name} = "package.module:function"')
        self.diags.report("SW2005", f"unknown tool '{name}'", tool.span, label="no tool with this name",
                          help=hint)

    def _state_ref(self, name: ast.Name, code: str = "SW2002", context: str = "") -> None:
        if name.value not in self.symbols.states:
            self.diags.report(code, f"unknown state '{name.value}'{context}", name.span,
                              label="no state with this name",
                              help=unknown_state_help(name.value, self.symbols))

    def _agent_ref(self, name: ast.Name) -> None:
        s = self.symbols
        if name.value in s.agents:
            s.used_agents.add(name.value)
            return
        if name.value in s.broken_imports:
            return
        s.used_agents.add(closest(name.value, s.agents) or "")
        declare = f"declare it: agent {name.value} {{ prompt \"...\" }}"
        self.diags.report("SW2003", f"unknown agent '{name.value}'", name.span,
                          label="no agent with this name",
                          help=did_you_mean(name.value, s.agents)
                          or (f"the agents are {quoted_list(s.agents)}, or {declare}" if s.agents
                              else declare))

    def _state_refs(self, view: StateView) -> None:
        if view.agent is not None:
            self._agent_ref(view.agent.name)
        if view.output is not None:
            if isinstance(view.output.type, ast.VariantType):
                self._variant_type(view.output.type)
            else:
                self._type_ref(view.output.type)
        if view.call is not None:
            self._tool_ref(view.call.tool)
        if view.run is not None:
            self._machine_ref(view.run.machine)
        if view.tell is not None:
            seen: set[str] = set()
            for name in view.tell.agents:
                if name.value in seen:
                    self.diags.report("SW2001", f"agent '{name.value}' is listed twice", name.span,
                                      label="listed again", help="list each listener once")
                    continue
                seen.add(name.value)
                self._agent_ref(name)
        for t in view.transitions:
            if t.target is not None and t.target.value not in self.symbols.states \
                    and t.target.value in ast.STATE_ITEM_KEYWORDS \
                    and t.target.span.start_pos.line > t.span.start_pos.line:
                self.diags.report("SW2002", f"'->' has no target state: '{t.target.value}' on the next line was "
                                  "read as its target", t.target.span, label="read as the target",
                                  help="write the state this transition goes to after '->', on the same line")
            elif t.target is not None:
                self._state_ref(t.target)
        if view.parallel is not None:
            for entry in view.parallel.branches:
                self._state_ref(entry, context=" in 'parallel'")

    def _machine_ref(self, name: ast.Name) -> None:
        """A machine a `run` names: one a `use` line makes callable by this name."""
        s = self.symbols
        s.used_callees.add(name.value)
        if name.value in s.callees or name.value in s.broken_callees or "" in s.broken_callees:
            return  # ("": a `use` whose file could not be read, so the name it gives is not known)
        s.used_callees.add(closest(name.value, s.callees) or "")
        if s.callees:
            help = did_you_mean(name.value, s.callees) or f"the machines it may run are {quoted_list(s.callees)}"
        else:
            help = (f'a machine runs the machines of the files its \'use\' lines name: use "{name.value}.fsm" '
                    "before 'machine'")
        self.diags.report("SW2107", f"unknown machine '{name.value}'", name.span, label="no machine by this name",
                          help=help)

    def _test_refs(self, test: TestView) -> None:
        for item in test.decl.items:
            if isinstance(item, (ast.Reply, ast.ReplyCalls, ast.Verdict, ast.TestTimeout, ast.Approval)):
                if ast.state_path(item.state) is None:  # a path into a called machine: checks/calls.py
                    self._state_ref(item.state, "SW6001", " in a test")
            elif isinstance(item, ast.ExpectPath):
                for name in item.states:
                    self._state_ref(name, "SW6001", " in a test")
            elif isinstance(item, (ast.ExpectFinal, ast.ExpectOutput, ast.ExpectInstruction)):
                self._state_ref(item.state, "SW6001", " in a test")


_JINJA_MEANINGS = {
    "self": "the template itself", "loop": "the current loop", "varargs": "a macro's extra arguments",
    "kwargs": "a macro's keyword arguments", "caller": "the block calling a macro", "super": "the parent "
    "block", "range": "the range() function", "dict": "the dict() function", "lipsum": "the lipsum() "
    "function", "cycler": "the cycler() function", "joiner": "the joiner() function", "namespace": "the "
    "namespace() function", "not": "the operator 'not'",
}


def _jinja_tests() -> frozenset[str]:
    """The names of Jinja's built-in tests (`defined`, `number`, ...), as templates are checked with them."""
    from .template_source import check_environment  # here: only a machine with variant outputs needs it

    return frozenset(check_environment().tests)


def unknown_state_help(name: str, symbols: Symbols) -> str:
    """Help for a reference to a state that does not exist: the likely one, or the states there are."""
    if not symbols.states:
        return "the machine declares no states"
    return did_you_mean(name, symbols.states) or f"the states are {quoted_list(symbols.states)}"


def _standard_tools() -> str:
    return f"the standard tools are {quoted_list(sorted(STD_TOOLS), limit=len(STD_TOOLS))}"


def resolve_names(machine: ast.Machine, diagnostics: Diagnostics, uses: list[UsedFile] | None = None) -> Symbols:
    """Build the symbol tables and check every reference to a state, agent, type, tool or machine; the
    files `uses` names bring the machines `run` may name and the declarations the `use` lines import."""
    resolver = _Resolver(machine, diagnostics)
    resolver.declare()
    if uses:
        from .imports import declare_imports

        declare_imports(resolver.symbols, uses, diagnostics, resolver.agent_view)
    resolver.check_references()
    return resolver.symbols
