"""Unused declarations: agents, types, tools, inputs and run variables that nothing in the machine uses.

It reads what every other check recorded as used, so it runs last.
"""

from __future__ import annotations

from ...diagnostics import Diagnostics
from .resolve import JINJA_NAMES, Symbols, closest


def report_unused(symbols: Symbols, diagnostics: Diagnostics) -> None:
    """Warnings for declarations nothing uses (read after every other check has recorded its uses); an
    imported one is reported at its import (checks/imports.py)."""
    imported = {id(i.decl) for i in symbols.imports}
    for name, agent in symbols.agents.items():
        if name not in symbols.used_agents and id(agent.decl) not in imported:
            diagnostics.report("SW7001", f"agent '{name}' is never used", agent.decl.name.span,
                               label="no state runs it and no state tells it anything",
                               help=f"use it with 'agent {name}' in a state, or remove it")
    for name, type_decl in symbols.types.items():
        if name not in symbols.used_types and id(type_decl) not in imported:
            diagnostics.report("SW7002", f"type '{name}' is never used", type_decl.name.span,
                               label="nothing refers to this type",
                               help="use it with 'output NAME' in a state, in an input or a field, "
                                    "or remove it")
    for name, tool in symbols.tools.items():
        if name not in symbols.used_tools and id(tool) not in imported:
            diagnostics.report("SW7003", f"tool '{name}' is never used", tool.name.span,
                               label="no agent lists it and no state calls it",
                               help=f"add it to an agent's 'tools [...]' or 'call {name}(...)' in a state, "
                                    "or remove it")
    for name, decl in symbols.inputs.items():
        if name not in symbols.used_inputs and name not in JINJA_NAMES:  # those have SW2014 already
            diagnostics.report("SW7005", f"input '{name}' is never used", decl.name.span,
                               label="no template or guard reads it",
                               help=f"read it in an instruction as '{{{{ {name} }}}}', or remove it")
    updated = set()
    for view in symbols.states.values():
        for update in view.updates:  # a misspelled update (SW2080) counts for the variable it meant
            name = update.var.value
            updated.add(name if name in symbols.variables else closest(name, symbols.variables) or "")
    for name, var in symbols.variables.items():
        if name in symbols.inputs or name in symbols.states or name in JINJA_NAMES:
            continue  # named like something else (SW2081): its reads read that
        if name not in symbols.used_variables:
            diagnostics.report("SW7120", f"run variable '{name}' is never read", var.name.span,
                               label="no guard, template, tool argument or test reads it",
                               help=f"read it where it matters (a guard, or '{{{{ {name} }}}}' in an instruction), "
                                    "or remove it")
        elif name not in updated:
            diagnostics.report("SW7121", f"run variable '{name}' is never updated", var.name.span,
                               label="it always holds its initial value",
                               help=f"update it in a state ('set {name} <- ...'), or write the value where it "
                                    "is read")
