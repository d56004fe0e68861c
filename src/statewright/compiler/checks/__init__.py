"""The checks: one parsed machine through every check in order, all into one Diagnostics.

    resolve -> flow -> typecheck -> templates -> testblocks -> lower -> graph -> listeners -> unused

Every stage reports into one Diagnostics and none stops the others, so a single run shows every problem.
"""

from __future__ import annotations

from ...diagnostics import Diagnostics, SourceFile
from ...grammar import ast
from .. import ir
from ..lower import lower_machine
from .flow import Flow
from .graph import check_graph
from .listeners import check_conditions, check_listeners
from .resolve import JINJA_NAMES, Symbols, resolve_names
from .templates import check_templates
from .testblocks import check_tests
from .typecheck import check_types


def check_machine(source: SourceFile, machine: ast.Machine, diagnostics: Diagnostics) -> ir.Machine | None:
    """Check one parsed machine; its IR, or None when any error was reported.

    A bug in a check must not cost the user the other diagnostics of this file, nor those of the other
    files checked with it: it becomes an SW9001 error for this file, after what was found up to there."""
    try:
        return _check_machine(machine, diagnostics)
    except Exception as e:  # noqa: BLE001 - reported as a diagnostic: `check` always gives its answer
        diagnostics.report("SW9001", f"internal compiler error while checking this file: {type(e).__name__}: "
                           f"{str(e)[:200]}", machine.name.span, label="the compiler failed while checking this",
                           help="this is a bug in statewright; please report it with this file")
        return None


def _check_machine(machine: ast.Machine, diagnostics: Diagnostics) -> ir.Machine | None:
    symbols = resolve_names(machine, diagnostics)
    flow = Flow(machine)
    check_types(machine, symbols, diagnostics, flow)
    check_templates(machine, symbols, diagnostics, flow)
    check_tests(symbols, diagnostics)
    lowered = lower_machine(machine, symbols, diagnostics)
    check_graph(machine, diagnostics, flow)
    check_listeners(symbols, flow, diagnostics)
    check_conditions(symbols, diagnostics)
    report_unused(symbols, diagnostics)
    if diagnostics.has_errors:
        return None
    return lowered


def report_unused(symbols: Symbols, diagnostics: Diagnostics) -> None:
    """Warnings for declarations nothing uses (read after every other check has recorded its uses)."""
    for name, agent in symbols.agents.items():
        if name not in symbols.used_agents:
            diagnostics.report("SW7001", f"agent '{name}' is never used", agent.decl.name.span,
                               label="no state runs it and no state tells it anything",
                               help=f"use it with 'agent {name}' in a state, or remove it")
    for name, type_decl in symbols.types.items():
        if name not in symbols.used_types:
            diagnostics.report("SW7002", f"type '{name}' is never used", type_decl.name.span,
                               label="nothing refers to this type",
                               help="use it with 'output NAME' in a state, in an input or a field, "
                                    "or remove it")
    for name, tool in symbols.tools.items():
        if name not in symbols.used_tools:
            diagnostics.report("SW7003", f"tool '{name}' is never used", tool.name.span,
                               label="no agent lists it and no state calls it",
                               help=f"add it to an agent's 'tools [...]' or 'call {name}(...)' in a state, "
                                    "or remove it")
    for name, decl in symbols.inputs.items():
        if name not in symbols.used_inputs and name not in JINJA_NAMES:  # those have SW2014 already
            diagnostics.report("SW7005", f"input '{name}' is never used", decl.name.span,
                               label="no template or guard reads it",
                               help=f"read it in an instruction as '{{{{ {name} }}}}', or remove it")
