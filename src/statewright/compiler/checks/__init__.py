"""The checks: one parsed machine through every check in order, all into one Diagnostics.

    resolve (imports) -> constraints -> flow -> fanout -> entry facts -> typecheck -> variables -> approvals
    -> secrets -> templates -> testblocks -> calls -> settings -> shape -> bounds -> graph -> listeners -> unused

Every check reports into one Diagnostics and none stops the others, so a single run shows every problem.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...diagnostics import Diagnostics, SourceFile
from ...grammar import ast
from .approvals import check_approvals
from .bounds import check_input_bounds
from .calls import check_calls
from .constraints import check_constraints
from .entry_facts import entry_facts
from .fanout import check_fanouts, record_branches
from .flow import Flow
from .graph import check_graph
from .listeners import check_conditions, check_listeners
from .resolve import Symbols, resolve_names
from .secrets import check_secrets
from .settings import check_settings
from .shape import check_shapes
from .templates import check_templates
from .testblocks import check_tests
from .typecheck import check_types
from .unused import report_unused
from .variables import check_variables

if TYPE_CHECKING:
    from ..project import UsedFile


def check_machine(source: SourceFile, machine: ast.Machine, diagnostics: Diagnostics,
                  uses: list[UsedFile] | None = None) -> Symbols | None:
    """Run every check on one parsed machine; its symbol tables, which lowering reads. `uses` are the files
    its `use` lines name, compiled already (compiler/project.py).

    A bug in a check must not cost the user the other diagnostics of this file, nor those of the other
    files checked with it: it becomes an SW9001 error for this file, after what was found up to there, and
    the result is None."""
    try:
        return _check_machine(source, machine, diagnostics, uses or [])
    except Exception as e:  # noqa: BLE001 - reported as a diagnostic: `check` always gives its answer
        diagnostics.report("SW9001", f"internal compiler error while checking this file: {type(e).__name__}: "
                           f"{str(e)[:200]}", machine.name.span, label="the compiler failed while checking this",
                           help="this is a bug in statewright; please report it with this file")
        return None


def _check_machine(source: SourceFile, machine: ast.Machine, diagnostics: Diagnostics,
                   uses: list[UsedFile]) -> Symbols:
    symbols = resolve_names(machine, diagnostics, uses)
    check_constraints(symbols, diagnostics)
    flow = Flow(machine)
    record_branches(flow, symbols)
    check_fanouts(symbols, flow, diagnostics)
    symbols.entry_facts = entry_facts(symbols, flow)
    check_types(machine, symbols, diagnostics, flow)
    check_variables(symbols, diagnostics, flow)
    check_approvals(symbols, diagnostics)
    check_secrets(machine, symbols, diagnostics)
    check_templates(machine, symbols, diagnostics, flow)
    check_tests(symbols, diagnostics)
    check_calls(symbols, diagnostics, flow)
    check_settings(machine, symbols, diagnostics)
    check_shapes(symbols, diagnostics)
    check_input_bounds(symbols, diagnostics)
    check_graph(machine, diagnostics, flow)
    check_listeners(symbols, flow, diagnostics)
    check_conditions(symbols, diagnostics)
    report_unused(symbols, diagnostics)
    if uses:
        from .imports import rehome_foreign, report_unused_imports, unused_callees

        unused_callees(symbols, diagnostics)
        report_unused_imports(symbols, diagnostics)
        rehome_foreign(source, symbols, diagnostics)
    return symbols
