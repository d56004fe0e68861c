"""Unused declarations: agents, types, tools and inputs that nothing in the machine uses (SW7001-SW7005).

It reads what every other check recorded as used, so it runs last.
"""

from __future__ import annotations

from ...diagnostics import Diagnostics
from .resolve import JINJA_NAMES, Symbols


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
