"""What `use` lines bring into a machine: the machines it may run, and the declarations it imports.

`use "teams/research.fsm"` makes that file's machine callable by its name (`as NAME`: by another one).
`use "common.fsm" { Critique, editor, std.http_get }` imports declarations of that file's machine —
types, agents and tools — into this one, as if declared here: a type with the types its fields use, an
agent with the tools it lists (an agent runs with this machine's run, so its prompt is checked against
this machine's inputs). A name no declaration there has, and a clash with a declaration here or with
another import, are reported at the imported name.

The checks run over imported declarations as over local ones; what they find there is positioned in the
other file, so `rehome_foreign` moves it to the imported name here (dropping what that file reports of
itself, and saying "imported but never used" for an unused import).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ...diagnostics import Diagnostic, Diagnostics, SourceFile, Span, did_you_mean, quoted_list
from ...grammar import ast
from .callees import Callee

if TYPE_CHECKING:  # (resolve.py calls this module while it builds the tables)
    from ..project import UsedFile
    from .resolve import AgentView, Symbols

KINDS = ("type", "agent", "tool")


@dataclass
class Import:
    """A declaration imported into this machine: by `name` (the name in the braces; for a declaration
    brought along by another, the name of that one), of `kind`, from the file at `path`."""

    name: ast.ToolName
    kind: str
    decl: ast.TypeDecl | ast.AgentDecl | ast.ToolDecl
    path: str
    explicit: bool = True
    declared_name: str = field(default="")

    @property
    def span(self) -> Span | None:
        return self.decl.span


def declare_imports(symbols: Symbols, uses: list[UsedFile], diags: Diagnostics,
                    agent_view: Callable[[ast.AgentDecl], AgentView]) -> None:
    """Record the callees of `uses` and declare what their braces import."""
    symbols.uses = list(uses)
    for used in symbols.uses:
        if not used.usable:
            symbols.broken_callees.add(used.name)
            symbols.broken_imports.update(n.dotted for n in used.decl.names or ())
            continue
        assert used.compilation is not None and used.compilation.symbols is not None
        other = used.compilation.symbols
        name = used.name
        clash = symbols.callees.get(name)
        if clash is not None and clash.used.compilation is not used.compilation:
            where = used.decl.alias if used.decl.alias is not None else used.decl.path
            diags.report("SW2106", f"two 'use' lines make a machine callable as '{name}'", where.span,
                         label=f"'{name}' already runs the machine of {clash.path}",
                         help=f'name this one otherwise: use "{used.decl.path.value}" as {name}_2')
        elif clash is None:
            symbols.callees[name] = Callee(name, used, other)
        for imported in used.decl.names or ():
            _import(symbols, other, used.path, imported, diags, agent_view)


def _import(symbols: Symbols, other: Symbols, path: str, name: ast.ToolName, diags: Diagnostics,
            agent_view: Callable[[ast.AgentDecl], AgentView]) -> None:
    dotted = name.dotted
    found = False
    if dotted in other.types:
        found = True
        _declare_type(symbols, other, path, name, dotted, diags, explicit=True)
    if dotted in other.agents:
        found = True
        _declare_agent(symbols, other, path, name, other.agents[dotted].decl, diags, agent_view)
    if dotted in other.tools:
        found = True
        _declare_tool(symbols, path, name, other.tools[dotted], diags, explicit=True)
    if not found:
        _unknown(other, path, name, diags)


def _unknown(other: Symbols, path: str, name: ast.ToolName, diags: Diagnostics) -> None:
    dotted = name.dotted
    machine = other.machine_name
    if dotted in other.states or dotted in other.inputs:
        what = "a state" if dotted in other.states else "an input"
        diags.report("SW2104", f"'{dotted}' is {what} of machine '{machine}', which cannot be imported",
                     name.span, label="only types, agents and tools are imported",
                     help=f"run the machine ('run {machine}(...)') and read its outcome")
        return
    importable = [*other.types, *other.agents, *other.tools]
    from ...runtime.tool_signatures import STD_TOOLS

    if dotted in STD_TOOLS:
        help = f"'{dotted}' is a standard tool: list it in an agent's tools without importing it"
    else:
        help = did_you_mean(dotted, importable) or (
            f"{path} declares {quoted_list(importable)}" if importable else f"{path} declares no types, agents or tools")
    diags.report("SW2104", f"machine '{machine}' has no type, agent or tool '{dotted}'", name.span,
                 label=f"not declared in {path}", help=help)


def _clash(symbols: Symbols, kind: str, key: str, decl: object, name: ast.ToolName, diags: Diagnostics,
           why: str = "") -> bool:
    """Whether `key` is taken in the table of `kind` by another declaration (reported at `name`)."""
    table: dict[str, object] = {"type": symbols.types, "agent": symbols.agents, "tool": symbols.tools}[kind]  # type: ignore[assignment]
    existing = table.get(key)
    if existing is None:
        return False
    first = getattr(existing, "decl", existing)
    if first is decl:
        return True  # the same declaration, imported again (or brought along twice): nothing to add
    span = getattr(getattr(first, "name", None), "span", None)
    where = (f"line {span.start_pos.line}" if span is not None and span.source is name.span.source
             else span.path if span is not None else "another import")
    diags.report("SW2105", f"{why}{kind} '{key}' is declared twice", name.span,
                 label=f"a {kind} '{key}' is there already ({where})",
                 help=f"rename one of them, or leave '{name.dotted}' out of the braces if they are meant to be "
                      "the same")
    return True


def _declare_type(symbols: Symbols, other: Symbols, path: str, name: ast.ToolName, type_name: str,
                  diags: Diagnostics, *, explicit: bool) -> None:
    """Import a type and, unnamed, the types its fields use (each once)."""
    pending = [(type_name, explicit)]
    while pending:
        current, named = pending.pop()
        decl = other.types[current]
        why = "" if named else f"'{name.dotted}' uses the type '{current}': "
        if _clash(symbols, "type", current, decl, name, diags, why):
            continue
        symbols.types[current] = decl
        symbols.imports.append(Import(name, "type", decl, path, named, current))
        if not named:
            symbols.used_types.add(current)  # used by the type that brought it
        for f in decl.fields:
            for ref in ast.iter_type_ref(f.type):
                if isinstance(ref, ast.NamedType) and ref.name.value in other.types:
                    pending.append((ref.name.value, False))


def _declare_agent(symbols: Symbols, other: Symbols, path: str, name: ast.ToolName, decl: ast.AgentDecl,
                   diags: Diagnostics, agent_view: Callable[[ast.AgentDecl], AgentView]) -> None:
    key = decl.name.value
    if _clash(symbols, "agent", key, decl, name, diags):
        return
    symbols.agents[key] = agent_view(decl)
    symbols.imports.append(Import(name, "agent", decl, path, True, key))
    view = other.agents[key]
    for tool in view.tools.tools if view.tools is not None else ():
        if tool.dotted in other.tools:
            _declare_tool(symbols, path, name, other.tools[tool.dotted], diags, explicit=False)


def _declare_tool(symbols: Symbols, path: str, name: ast.ToolName, decl: ast.ToolDecl, diags: Diagnostics, *,
                  explicit: bool) -> None:
    key = decl.name.dotted
    why = "" if explicit else f"'{name.dotted}' uses the tool '{key}': "
    if _clash(symbols, "tool", key, decl, name, diags, why):
        return
    symbols.tools[key] = decl
    symbols.imports.append(Import(name, "tool", decl, path, explicit, key))


# ---- what the checks found in another file ---------------------------------------------------------


def rehome_foreign(source: SourceFile, symbols: Symbols, diags: Diagnostics) -> None:
    """Move each diagnostic positioned in another file to the imported name that brought it here (what
    that file reports of itself is left to it)."""
    if not symbols.imports:
        return
    kept: list[Diagnostic] = []
    own: dict[str, set[tuple[str, int, int]]] = {}
    for d in diags.items:
        if d.span is None or d.span.source is source:
            kept.append(d)
            continue
        imported = _import_at(symbols, d.span)
        if imported is None:
            kept.append(d)
            continue
        if (d.code, d.span.start, d.span.end) in _reported_by(imported.path, symbols, own):
            continue  # that file's own problem, reported against it
        brought = "" if imported.explicit else f" (brought along by '{imported.name.dotted}')"
        kept.append(Diagnostic(d.code, f"in the imported {imported.kind} '{imported.declared_name}'{brought}: "
                               f"{d.message}", imported.name.span, label=d.label, help=d.help,
                               notes=(*d.notes, f"at {d.span.label()}"), severity=d.severity))
    diags.items[:] = kept


def report_unused_imports(symbols: Symbols, diags: Diagnostics) -> None:
    """SW7101 for a declaration imported by name that nothing in this machine uses (the warnings of
    unused.py are for declarations made here)."""
    used = {"type": symbols.used_types, "agent": symbols.used_agents, "tool": symbols.used_tools}
    for imported in symbols.imports:
        if imported.explicit and imported.declared_name not in used[imported.kind]:
            diags.report("SW7101", f"imported {imported.kind} '{imported.declared_name}' is never used",
                         imported.name.span, label="nothing in this machine uses it",
                         help=f"use it, or leave '{imported.name.dotted}' out of the braces")


def _import_at(symbols: Symbols, span: Span) -> Import | None:
    for imported in symbols.imports:
        own = imported.span
        if own is not None and own.source is span.source and own.start <= span.start <= own.end:
            return imported
    return None


def _reported_by(path: str, symbols: Symbols, cache: dict[str, set[tuple[str, int, int]]]
                 ) -> set[tuple[str, int, int]]:
    found = cache.get(path)
    if found is None:
        found = set()
        for used in symbols.uses:
            if used.path == path and used.compilation is not None:
                found |= {(d.code, d.span.start, d.span.end) for d in used.compilation.diagnostics
                          if d.span is not None}
        cache[path] = found
    return found


def unused_callees(symbols: Symbols, diags: Diagnostics) -> None:
    """SW7100 for a `use` without braces whose machine no state runs."""
    for used in symbols.uses:
        if used.decl.names is None and used.usable and used.name and used.name not in symbols.used_callees:
            where = used.decl.alias if used.decl.alias is not None else used.decl.path
            diags.report("SW7100", f"machine '{used.name}' is never run", where.span,
                         label="no state runs it",
                         help=f"run it in a state ('run {used.name}(...)'), or remove the 'use' line")
