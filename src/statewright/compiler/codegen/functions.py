"""The functions of one machine's part of a runner, named first and written when the template asks.

Its guards and join guards, its map lists, its run variables' updates and the arguments of its tool
calls and machine calls.

Their names are claimed when the part is made, state by state in a fixed order (so a name is the same
every time), and the specs the part writes refer to them by those names; their source is written when
the template asks for it, one function at a time, never held as a whole list. A state the merge pass
found equivalent to another (`shares`) uses the other's functions.
"""

from __future__ import annotations

from collections.abc import Iterator

from .. import ir
from .names_used import function_names
from .python_expr import ExprContext, GuardNames, each_names, guard_return, python_source, spec_source
from .python_literals import comment_text
from .source_layout import INDENT
from .types_py import ModelPlans, NameAllocator, py_string


class MachineFunctions:
    """The functions of `machine`, named from the module's allocator; `used` gathers the names in
    `importable` that the functions written so far use (what the module's imports are chosen for)."""

    def __init__(self, machine: ir.Machine, plans: ModelPlans, names: NameAllocator,
                 importable: frozenset[str]) -> None:
        self.machine = machine
        self.plans = plans
        self.names = names
        self.importable = importable
        self.guard_names = GuardNames.of(machine)
        self.used: set[str] = set()
        self.guard_functions: dict[tuple[str, int], str] = {}
        self.args_names: dict[str, str] = {}
        self.run_args_names: dict[str, str] = {}  # run state -> the function that builds the callee's inputs
        self.join_names: dict[str, str] = {}  # parallel state -> its join guard's function
        self.items_names: dict[str, str] = {}  # map state -> the function that builds its list
        self.update_names: dict[tuple[str, int], str] = {}  # (state, index) -> the function of its update
        for state in machine.states:
            if state.shares is None:
                self._name(state)
        for state in machine.states:
            if state.shares is not None:
                self._share(state, state.shares)

    def guard_sources(self) -> Iterator[str]:
        """Each state's join guard and guards, as functions, in state order."""
        return map(self._written, self._guards())

    def arg_builder_sources(self) -> Iterator[str]:
        """Each state's map list, updates, and the arguments of its call or run, as functions."""
        return map(self._written, self._arg_builders())

    def _written(self, source: str) -> str:
        self.used |= function_names(source) & self.importable
        return source

    def _name(self, state: ir.State) -> None:
        """The names of the functions of a state's expressions — its join guard, its map's list, its guards,
        its updates, its call's arguments — claimed in that order (so names are claimed the same way every
        time)."""
        claim = self.names.claim
        if state.parallel is not None and state.parallel.join.guard is not None:
            self.join_names[state.name] = claim(f"join_{state.name}")
        if state.each is not None:
            self.items_names[state.name] = claim(f"items_{state.name}")
        for index, t in enumerate(state.transitions):
            if t.kind == "guard" and t.guard is not None:
                self.guard_functions[(state.name, index)] = claim(f"guard_{state.name}_{index}")
        for index, _ in enumerate(state.updates):
            self.update_names[(state.name, index)] = claim(f"update_{state.name}_{index}")
        if state.run is not None:
            self.run_args_names[state.name] = claim(f"run_args_{state.name}")
        if state.call is not None:
            self.args_names[state.name] = claim(f"args_{state.name}")

    def _guards(self) -> Iterator[str]:
        """Each state's join guard and guards, as functions."""
        for state in self.machine.states:
            if state.shares is not None:
                continue
            context = ExprContext(self.machine, self.plans, self.guard_names, state)
            if state.parallel is not None and state.parallel.join.guard is not None:
                guard = state.parallel.join.guard
                join_context = ExprContext(self.machine, self.plans, self.guard_names, state, join=True)
                yield (f"# {comment_text('join first where ' + spec_source(guard))}\n"
                       f"def {self.join_names[state.name]}(s: Scope) -> bool:\n"
                       f"{INDENT}{guard_return(guard, join_context)}\n")
            for index, t in enumerate(state.transitions):
                if t.kind != "guard" or t.guard is None:
                    continue
                yield (f"# {comment_text('when ' + spec_source(t.guard))}\n"
                       f"def {self.guard_functions[(state.name, index)]}(s: Scope) -> bool:\n"
                       f"{INDENT}{guard_return(t.guard, context)}\n")

    def _arg_builders(self) -> Iterator[str]:
        """Each state's map list, updates, and the arguments of its call or run, as functions."""
        for state in self.machine.states:
            if state.shares is not None:
                continue
            if state.each is not None:
                listed = state.each.items
                context = ExprContext(self.machine, self.plans, self.guard_names, state)
                yield (f"# {comment_text('for ... in ' + spec_source(listed))}\n"
                       f"def {self.items_names[state.name]}(s: Scope) -> Any:\n"
                       f"{INDENT}return {python_source(listed, context)}\n")
            yield from self._update_sources(state)
            if state.run is not None:
                yield self._run_arguments(state, state.run)
            if state.call is not None:
                yield self._call_arguments(state, state.call)

    def _share(self, state: ir.State, shares: str) -> None:
        """An equivalent state's functions do this state's work too (the merge pass)."""
        for index, _ in enumerate(state.transitions):
            shared = self.guard_functions.get((shares, index))
            if shared is not None:
                self.guard_functions[(state.name, index)] = shared
        if state.call is not None:
            self.args_names[state.name] = self.args_names[shares]
        if state.run is not None:
            self.run_args_names[state.name] = self.run_args_names[shares]
        if shares in self.join_names:
            self.join_names[state.name] = self.join_names[shares]
        if shares in self.items_names:
            self.items_names[state.name] = self.items_names[shares]
        for index, _ in enumerate(state.updates):
            self.update_names[(state.name, index)] = self.update_names[(shares, index)]

    def _call_arguments(self, state: ir.State, call: ir.ToolCall) -> str:
        """The function that builds a tool call's arguments (in a map it sees the element)."""
        written = ", ".join(f"{a.name} = {spec_source(a.value)}" for a in call.args)
        items = ""
        call_context = ExprContext(self.machine, self.plans, self.guard_names, state,
                                   each=each_names(self.machine, state))
        for a in call.args:
            code = python_source(a.value, call_context)
            items += INDENT * 2 + f"{py_string(a.name)}: {code},\n"
        body = f"{{\n{items}{INDENT}}}" if items else "{}"
        return (f"# {comment_text('call ' + call.tool + '(' + written + ')')}\n"
                f"def {self.args_names[state.name]}(s: Scope) -> dict[str, Any]:\n"
                f"{INDENT}return {body}\n")

    def _update_sources(self, state: ir.State) -> Iterator[str]:
        """One function per update: the value it gives, over the scope after the state's step (a map's
        element's: its output, its element and position)."""
        if not state.updates:
            return
        each = state.each is not None
        context = ExprContext(self.machine, self.plans, self.guard_names, state, join=each,
                              each=each_names(self.machine, state) if each else {})
        for index, update in enumerate(state.updates):
            yield (f"# {comment_text(update.reducer + ' ' + update.var + ' <- ' + spec_source(update.value))}\n"
                   f"def {self.update_names[(state.name, index)]}(s: Scope) -> Any:\n"
                   f"{INDENT}return {python_source(update.value, context)}\n")

    def _run_arguments(self, state: ir.State, run: ir.Run) -> str:
        """The function that builds a called machine's inputs, as a tool call's arguments are built (in a
        map of calls it sees the element)."""
        written = ", ".join(f"{a.name} = {spec_source(a.value)}" for a in run.args)
        context = ExprContext(self.machine, self.plans, self.guard_names, state, each=each_names(self.machine, state))
        items = "".join(INDENT * 2 + f"{py_string(a.name)}: {python_source(a.value, context)},\n" for a in run.args)
        body = f"{{\n{items}{INDENT}}}" if items else "{}"
        return (f"# {comment_text('run ' + run.machine + '(' + written + ')')}\n"
                f"def {self.run_args_names[state.name]}(s: Scope) -> dict[str, Any]:\n"
                f"{INDENT}return {body}\n")
