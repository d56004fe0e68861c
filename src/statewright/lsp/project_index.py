"""The names of one file that stand for declarations of other files.

They are its `use` lines, the machines its `run` states run, the called machines' states its test paths
name, and the declarations it imports."""

from __future__ import annotations

from collections.abc import Iterator

from ..compiler.checks.resolve import Symbols
from ..grammar import ast
from .keys import Key, Occurrence


def imported_from(symbols: Symbols) -> dict[tuple[str, str], str]:
    """(kind, name) -> the file that declares it, for every declaration this machine imports."""
    return {(i.kind, i.declared_name): i.path for i in symbols.imports}


def foreign_occurrences(machine: ast.Machine, symbols: Symbols) -> Iterator[Occurrence]:
    for used in symbols.uses:
        decl = used.decl
        if decl.path.span is not None:
            yield Occurrence(Key("file", used.path), decl.path.span)
        if decl.alias is not None and decl.alias.span is not None:
            yield Occurrence(Key("callee", decl.alias.value), decl.alias.span, True)
        other = used.compilation.symbols if used.compilation is not None else None
        for name in decl.names or ():
            for kind, table in (("type", other.types), ("agent", other.agents), ("tool", other.tools)) if other else ():
                if name.dotted in table and name.span is not None:
                    yield Occurrence(Key(kind, name.dotted, used.path), name.span)
    for state in machine.of(ast.StateDecl):
        for item in state.items:
            if isinstance(item, ast.RunCall) and item.machine.span is not None:
                yield from _run(item, symbols)
    for test in machine.of(ast.TestDecl):
        for item in test.items:
            if isinstance(item, (ast.Reply, ast.ReplyCalls, ast.Verdict, ast.TestTimeout, ast.Approval)):
                yield from _path(item.state, symbols)


def _run(run: ast.RunCall, symbols: Symbols) -> Iterator[Occurrence]:
    """`run research(...)`: the machine research.fsm declares; `run writers(...)` for a machine used under
    another name: that name, declared by its `use` line."""
    name, span = run.machine, run.machine.span
    assert span is not None
    callee = symbols.callees.get(name.value)
    if callee is None:
        return
    if callee.decl.alias is not None:
        yield Occurrence(Key("callee", name.value), span)
    else:
        yield Occurrence(Key("machine", callee.machine_name, callee.path), span)


def _path(name: ast.Name, symbols: Symbols) -> Iterator[Occurrence]:
    """Each state a test path names (`investigate[2]/draft`), in the machine it is a state of."""
    steps = ast.state_path(name)
    span = name.span
    if steps is None or span is None:
        return
    here, file, offset = symbols, "", span.start
    for step in steps:
        yield Occurrence(Key("state", step.state, file), span.source.span(offset, offset + len(step.state)))
        offset += len(step.state) + (len(f"[{step.element}]") if step.element is not None else 0) + 1
        view = here.states.get(step.state)
        callee = here.callees.get(view.run.machine.value) if view is not None and view.run is not None else None
        if callee is None:
            return
        here, file = callee.symbols, callee.path
