"""Shape checks: what each kind of state may hold, that it moves on, and that its bounds allow a run.

A final state does no work; any other state does work (an agent, or a tool call, not both), has
transitions, and bounds (`visits`, `max`, `retries`) that leave it runnable (SW3009-SW3018).
"""

from __future__ import annotations

from ...diagnostics import Diagnostics
from .. import ir
from .resolve import StateView, Symbols


def check_shapes(symbols: Symbols, diagnostics: Diagnostics) -> None:
    """Report each state whose items do not fit its kind, or whose bounds make it or an edge unusable."""
    for view in symbols.states.values():
        _check_shape(view, diagnostics)


def _check_shape(view: StateView, diags: Diagnostics) -> None:
    name = view.name
    if view.decl.final:
        for item, word in ((view.agent, "agent"), (view.instruction, "do"), (view.output, "output"),
                           (view.call, "call"), (view.tell, "tell"), (view.visits, "visits"),
                           (view.retries, "retries")):
            if item is not None:
                diags.report("SW3011", f"final state '{name}' cannot have '{word}'", item.span,
                             label="a final state ends the run and does no work",
                             help="move the work into a state before it; a final state may only have a "
                                  "'result'")
        return
    if view.kind == "none":
        has_do = view.instruction is not None
        diags.report("SW3009", f"state '{name}' does no work", view.decl.name.span,
                     label="no agent and no tool call",
                     help="add 'agent NAME' to say who carries out its 'do'" if has_do
                     else "give it 'agent NAME' and 'do \"...\"', or a tool 'call'; or mark it 'final'")
    if view.agent is not None and view.call is not None:
        diags.report("SW3010", f"state '{name}' has both an agent and a tool call", view.call.tool.span,
                     label=f"the state already has 'agent {view.agent.name.value}'",
                     help="split it in two: an action state for the call and an agent state")
    if view.agent is not None and view.instruction is None:
        diags.report("SW3014", f"agent state '{name}' has no instruction", view.agent.span,
                     label="what should the agent do here?", help="add 'do \"...\"' to the state")
    if view.agent is None and view.call is not None and view.instruction is not None:
        diags.report("SW3017", f"action state '{name}' has an instruction", view.instruction.span,
                     label="no agent reads it: the state only calls a tool",
                     help="remove 'do', or add a separate agent state")
    if view.result is not None:
        diags.report("SW3018", f"state '{name}' is not final, so its result is never used", view.result.span,
                     label="only final states have a result",
                     help=f"mark it 'final state {name}', or remove 'result'")
    if not view.transitions:
        diags.report("SW3012", f"state '{name}' has no transitions", view.decl.name.span,
                     label="where does the run go next?",
                     help="add a transition such as '-> NEXT', or mark the state 'final'")
    if view.visits is not None and int(view.visits.count.value) < 1:
        diags.report("SW3013", f"'visits {view.visits.count.value}' means state '{name}' can never run",
                     view.visits.count.span, label="must be at least 1",
                     help="remove the state, or allow at least one visit")
    if view.retries is not None and int(view.retries.count.value) > ir.MAX_RETRIES:
        diags.report("SW3015", f"'retries {view.retries.count.value}' in state '{name}' is more than the most "
                     f"a state may retry ({ir.MAX_RETRIES})", view.retries.count.span,
                     label=f"at most {ir.MAX_RETRIES}",
                     help=f"write 'retries N' with N from 0 to {ir.MAX_RETRIES} (the default is "
                          f"{ir.DEFAULT_RETRIES}); each retry sends the whole exchange again")
    for t in view.transitions:
        if t.max is not None and int(t.max.value) < 1:
            diags.report("SW3013", f"'max {t.max.value}' disables this transition", t.max.span,
                         label="must be at least 1", help="remove the transition, or allow it once")
        if t.kind == "stay" and t.max is None and view.visits is None:
            diags.report("SW3016", f"'otherwise stay' in state '{name}' has no bound", t.span,
                         label="could re-run the state forever",
                         help=f"write 'otherwise stay max N', or give state '{name}' 'visits N'")
