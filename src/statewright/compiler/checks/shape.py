"""Shape checks: what each kind of state may hold, that it moves on, and that its bounds allow a run.

A final state may do work and ends the run; any other state does work (an agent, or a tool call, not
both), has transitions, and bounds (`visits`, `max`, `retries`) that leave it runnable (SW3009-SW3022).
"""

from __future__ import annotations

from ...diagnostics import Diagnostics
from ...grammar import ast
from .. import ir
from .resolve import StateView, Symbols


def check_shapes(symbols: Symbols, diagnostics: Diagnostics) -> None:
    """Report each state whose items do not fit its kind, or whose bounds make it or an edge unusable."""
    for view in symbols.states.values():
        _check_shape(view, diagnostics)


def _check_shape(view: StateView, diags: Diagnostics) -> None:
    name = view.name
    _check_work(view, diags)
    if view.model is not None and view.agent is None:
        diags.report("SW3022", f"state '{name}' has a model but no agent", view.model.span,
                     label="no agent here calls a model",
                     help="give the state 'agent NAME', or remove 'model'")
    if view.retries is not None and int(view.retries.count.value) > ir.MAX_RETRIES:
        diags.report("SW3015", f"'retries {view.retries.count.value}' in state '{name}' is more than the most "
                     f"a state may retry ({ir.MAX_RETRIES})", view.retries.count.span,
                     label=f"at most {ir.MAX_RETRIES}",
                     help=f"write 'retries N' with N from 0 to {ir.MAX_RETRIES} (the default is "
                          f"{ir.DEFAULT_RETRIES}); each retry sends the whole exchange again")
    _check_timeouts(view, diags)
    if view.decl.final:
        _check_final(view, diags)
    else:
        _check_moving(view, diags)


def _check_timeouts(view: StateView, diags: Diagnostics) -> None:
    """A state that asks a person has nothing of an agent's, and at most one deadline."""
    name = view.name
    if view.ask is not None:
        for item, word in ((view.agent, "agent"), (view.call, "call"), (view.instruction, "do"),
                           (view.model, "model"), (view.retries, "retries")):
            if item is not None:
                diags.report("SW3023", f"state '{name}' asks a person, so it cannot have '{word}'", item.span,
                             label="a person answers this state, not a model or a tool",
                             help=f"remove '{word}', or split the state: one that asks, one that works")
    timeouts = [t for t in view.transitions if t.kind == "timeout"]
    for t in timeouts:
        if view.ask is None:
            diags.report("SW3024", f"state '{name}' asks no person, so nothing can time out", t.span,
                         label="no deadline to miss",
                         help="give the state 'ask \"...\"', or remove the transition")
        elif t.after is not None and t.after.seconds <= 0:
            diags.report("SW3013", f"'after {t.after.text}' leaves a person no time to answer", t.after.span,
                         label="must be more than 0", help="give a deadline such as 'after 24h'")
    for t in timeouts[1:]:
        diags.report("SW3025", f"state '{name}' has more than one 'after'", t.span,
                     label="a second deadline for the same question",
                     help="keep one 'after DURATION -> s'; to remind and wait again, lead to a state that "
                          "reminds and asks again")


def _check_work(view: StateView, diags: Diagnostics) -> None:
    """What a state does, final or not: an agent with an instruction, or a tool call, never both."""
    name = view.name
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
    if view.agent is None and view.call is None and view.decl.final:
        for item, word in ((view.instruction, "do"), (view.output, "output"), (view.retries, "retries")):
            if item is not None:
                diags.report("SW3009", f"final state '{name}' has '{word}' but does no work", item.span,
                             label="no agent and no tool call here",
                             help="give the state 'agent NAME' to do this work before the run ends, or "
                                  f"remove '{word}'")


def _check_final(view: StateView, diags: Diagnostics) -> None:
    name = view.name
    for item, word, why in ((view.tell, "tell", "no state runs after it to hear"),
                            (view.visits, "visits", "it runs once, and then the run ends")):
        if item is not None:
            diags.report("SW3011", f"final state '{name}' cannot have '{word}'", item.span,
                         label=why, help=f"remove '{word}'")
    if view.fail is not None and view.result is not None:
        diags.report("SW3020", f"failing final state '{name}' cannot have a result", view.result.span,
                     label="a failed run has no result",
                     help="put what the reader needs into the 'fail' reason, or drop 'fail' to make "
                          "this an ending that succeeds")


def _check_moving(view: StateView, diags: Diagnostics) -> None:
    """A state that is not final: it does work, moves on, and its bounds leave it runnable."""
    name = view.name
    if view.fail is not None:
        diags.report("SW3019", f"state '{name}' is not final, so it cannot fail the run", view.fail.span,
                     label="only a final state can declare a failing end",
                     help=f"move 'fail' into a final state, e.g. 'final state {name}_failed {{ fail ... }}', "
                          "and lead there")
    if view.kind == "none":
        has_do = view.instruction is not None
        diags.report("SW3009", f"state '{name}' does no work", view.decl.name.span,
                     label="no agent and no tool call",
                     help="add 'agent NAME' to say who carries out its 'do'" if has_do
                     else "give it 'agent NAME' and 'do \"...\"', or a tool 'call'; or mark it 'final'")
    if view.result is not None:
        diags.report("SW3018", f"state '{name}' is not final, so its result is never used", view.result.span,
                     label="only final states have a result",
                     help=f"mark it 'final state {name}', or remove 'result'")
    if not view.transitions and not view.decl.branch:  # a branch state without transitions ends its branch
        diags.report("SW3012", f"state '{name}' has no transitions", view.decl.name.span,
                     label="where does the run go next?",
                     help="add a transition such as '-> NEXT', or mark the state 'final'")
    elif view.transitions and all(t.kind == "timeout" for t in view.transitions):
        diags.report("SW3012", f"state '{name}' has no transition for when the person answers",
                     view.decl.name.span, label="only 'after' leads on",
                     help="add a transition such as '-> NEXT' for the answer")
    if view.visits is not None and isinstance(view.visits.count, ast.Number) and int(view.visits.count.value) < 1:
        diags.report("SW3013", f"'visits {view.visits.count.value}' means state '{name}' can never run",
                     view.visits.count.span, label="must be at least 1",
                     help="remove the state, or allow at least one visit")
    for t in view.transitions:
        if isinstance(t.max, ast.Number) and int(t.max.value) < 1:
            diags.report("SW3013", f"'max {t.max.value}' disables this transition", t.max.span,
                         label="must be at least 1", help="remove the transition, or allow it once")
        if t.kind == "stay" and t.max is None and view.visits is None:
            diags.report("SW3016", f"'otherwise stay' in state '{name}' has no bound", t.span,
                         label="could re-run the state forever",
                         help=f"write 'otherwise stay max N', or give state '{name}' 'visits N'")
        if t.per_visit is not None and t.kind != "stay":
            diags.report("SW3021", "'per visit' applies only to 'otherwise stay'", t.per_visit,
                         label="this transition leaves the state",
                         help="write 'max N' to count over the whole run, or use 'otherwise stay max N per "
                              "visit' to retry within one visit")
