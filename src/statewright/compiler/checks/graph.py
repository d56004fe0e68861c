"""Graph checks: start and final states, reachability, transitions that never fire, every cycle bounded.

Machine-structure checks over the state graph: start and final states, reachability, transitions
that always or never fire, and cycles that nothing bounds.

Works on the syntax tree, so it runs even when other checks fail. Unknown transition targets are
reported elsewhere (SW2002); here they are skipped. Every walk is iterative and linear in the size of
the machine, so a generated machine of many thousands of states checks quickly and without recursion.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from ...diagnostics import Diagnostics, quoted_list
from ...grammar import ast
from .flow import (
    Edge,
    Flow,
    Known,
    each_strongly_connected_component,
    known_value,
    strongly_connected_components,
)

__all__ = ["Known", "check_graph", "known_value", "transition_quote"]

_SHOWN_NAMES = 12  # longer lists of states in a message are cut in the middle


def check_graph(machine: ast.Machine, diagnostics: Diagnostics, flow: Flow | None = None) -> None:
    """Report SW3001-SW3003, SW3005-SW3008, SW7004 and SW7007 for `machine`.

    Every check follows only the transitions that can fire (`flow`, built here when not given)."""
    flow = flow if flow is not None else Flow(machine)
    decls: list[ast.StateDecl] = machine.of(ast.StateDecl)
    _check_start_and_final(machine, decls, diagnostics)
    for decl in decls:
        if decl.final:
            _check_final_has_no_transitions(decl, diagnostics)
    _report_never_firing(flow, diagnostics)
    if flow.start is not None:
        _report_unreachable(flow, diagnostics)
        if any(flow.final):
            _check_finals_reachable(flow, diagnostics)
    _check_cycles_bounded(flow, diagnostics)


# ---- start and final states -----------------------------------------------------------------------


def _check_start_and_final(
    machine: ast.Machine, decls: list[ast.StateDecl], diagnostics: Diagnostics
) -> None:
    name = machine.name.value
    starts = [d for d in decls if d.start]
    if not starts:
        example = f"'start state {decls[0].name.value}'" if decls else "'start state NAME'"
        diagnostics.report(
            "SW3001", f"machine '{name}' has no start state", machine.name.span,
            label="no state is marked 'start'",
            help=f"mark the state where a run begins, e.g. {example}",
        )
    for extra in starts[1:]:
        first = starts[0]
        diagnostics.report(
            "SW3002", f"more than one start state: '{extra.name.value}'", extra.name.span,
            label="another start state",
            notes=[f"the first start state is '{first.name.value}'{_at_line(first.name)}"],
            help=f"remove 'start' from '{extra.name.value}'; a machine begins in exactly one state",
        )
    if not any(d.final for d in decls):
        diagnostics.report(
            "SW3003", f"machine '{name}' has no final state", machine.name.span,
            label="no state is marked 'final'",
            help="add a state where runs end, e.g. 'final state done', and a transition to it",
        )


def _check_final_has_no_transitions(decl: ast.StateDecl, diagnostics: Diagnostics) -> None:
    for t in decl.transitions:
        diagnostics.report(
            "SW3006", f"transition out of final state '{decl.name.value}'", t.span,
            label="never taken: the run ends on entering this state",
            help=f"remove this transition, or drop 'final' if runs should go on from '{decl.name.value}'",
        )


# ---- transitions that always or never fire ---------------------------------------------------------


def _report_never_firing(flow: Flow, diagnostics: Diagnostics) -> None:
    """Report guards whose value is known (SW7007) and transitions that an earlier, always-firing one
    shadows (SW3007)."""
    for decl in flow.states:
        if decl.final:
            continue
        for t in decl.transitions:
            shadow = flow.shadowed_by.get(id(t))
            if shadow is not None and shadow.kind == "guard" and shadow.guard == t.guard:
                diagnostics.report(
                    "SW3007", f"transition in state '{decl.name.value}' can never fire", t.span,
                    label="the same guard comes first",
                    help=f"{_line_of(shadow)}'{transition_quote(shadow)}' fires whenever this guard is true; "
                         "remove this transition, or bound that one with 'max N'",
                )
                continue
            if shadow is not None:
                diagnostics.report(
                    "SW3007", f"transition in state '{decl.name.value}' can never fire", t.span,
                    label="never tried",
                    help=f"{_line_of(shadow)}'{transition_quote(shadow)}' always fires before it; move this "
                         "transition above that one, or bound that one with 'max N'",
                )
                continue
            known = flow.known.get(id(t))
            if known is not None and t.guard is not None:
                _report_known_guard(t, t.guard, known, diagnostics)


def _report_known_guard(t: ast.Transition, guard: ast.Expr, known: Known, diagnostics: Diagnostics) -> None:
    """SW7007 for a guard that is always true or always false."""
    target = t.target.value if t.target is not None else "?"
    runtime_names = "output, an input, STATE.output or visits(STATE)"
    if known.value:
        equivalent = f"-> {target}" + (f" max {t.max.value}" if t.max is not None else "")
        diagnostics.report(
            "SW7007", "the guard is always true", guard.span,
            label="nothing in it can change during a run",
            help=f"the transition always fires, like '{equivalent}': write that, or test something the run "
                 f"decides ({runtime_names})",
        )
    else:
        diagnostics.report(
            "SW7007", "the guard is always false", guard.span,
            label="nothing in it can change during a run",
            help="the transition never fires: remove it, or test something the run decides "
                 f"({runtime_names})",
        )


# ---- reachability ---------------------------------------------------------------------------------


def _report_unreachable(flow: Flow, diagnostics: Diagnostics) -> None:
    if flow.goes_astray:  # the state a mistyped target meant may be any: what it seems to leave unreached
        return
    dead_into: dict[int, list[Edge]] = {}  # the transitions of reachable states that lead on but never fire
    for edges in flow.edges:
        for e in edges:
            if e.target != e.source and flow.reachable[e.source] and not e.fires:
                dead_into.setdefault(e.target, []).append(e)
    for i, decl in enumerate(flow.states):
        if decl.branch and flow.entry_of[i] is None:
            continue  # a branch state in no branch: SW3062 says so
        if not flow.reachable[i] and not decl.start:  # an extra start state already has SW3002
            diagnostics.report(
                "SW7004", f"state '{decl.name.value}' is unreachable", decl.name.span,
                label="no path from the start state leads here",
                notes=[f"{_line_of(e.transition)}'{transition_quote(e.transition)}' leads here, but never fires"
                       for e in dead_into.get(i, [])][:3],
                help=f"add a transition to '{decl.name.value}' from a reachable state, or delete it",
            )


def _check_finals_reachable(flow: Flow, diagnostics: Diagnostics) -> None:
    """SW3005 for each reachable state from which no final state can be reached.

    A state with no transitions, with one naming an unknown state, or declared twice is given the benefit
    of the doubt: SW3012/SW2002/SW2001 already point at it, and reporting everything upstream of it would
    bury that.
    """
    finishes = _finishing(flow)
    stuck = [flow.reachable[i] and not finishes[i] for i in range(len(flow.states))]
    if not any(stuck):
        return
    sinks = _StuckSinks(flow, stuck)
    first_final = next(s.name.value for i, s in enumerate(flow.states) if flow.final[i])
    for i in range(len(flow.states)):
        if not stuck[i]:
            continue
        name = flow.states[i].name.value
        sink = sinks.sink(i)
        way_out = f"'{flow.states[sink[0]].name.value}'" if len(sink) == 1 else "one of those states"
        dead_ways_out = [f"{_line_of(e.transition)}'{transition_quote(e.transition)}' would lead on, but never "
                         "fires" for e in flow.edges[i] if not e.fires and finishes[e.target]]
        notes = [sinks.note(i), *dead_ways_out]
        if flow.states[i].branch:  # a branch ends in a state without transitions, not in a final state
            diagnostics.report(
                "SW3005", f"branch state '{name}' can never end its branch", flow.states[i].name.span,
                label="a branch that gets here can only end by exhausting a bound or limit", notes=notes,
                help=f"add a transition from {way_out} to a branch state without transitions (it ends the "
                     "branch), e.g. 'otherwise -> NAME'",
            )
            continue
        diagnostics.report(
            "SW3005", f"no final state can be reached from '{name}'", flow.states[i].name.span,
            label="a run that gets here can only end by exhausting a bound or limit", notes=notes,
            help=f"add a transition from {way_out} to a final state, e.g. 'otherwise -> {first_final}'",
        )


def _finishing(flow: Flow) -> list[bool]:
    """Which states can reach an end — a final state, or one given the benefit of the doubt — by
    transitions that can fire: a walk backwards from the ends."""
    n = len(flow.states)
    predecessors: list[list[int]] = [[] for _ in range(n)]
    for edges in flow.edges:
        for edge in edges:
            if edge.fires and not edge.fork:  # a branch that ends hands the run back to its parallel state
                predecessors[edge.target].append(edge.source)
    finishes = [
        flow.final[i] or flow.unknown_target[i] or flow.duplicated[i] or not s.transitions
        for i, s in enumerate(flow.states)
    ]
    queue = deque(i for i in range(n) if finishes[i])
    while queue:
        for p in predecessors[queue.popleft()]:
            if not finishes[p]:
                finishes[p] = True
                queue.append(p)
    return finishes


class _StuckSinks:
    """Where a run that gets stuck ends up. Every successor of a stuck state is stuck too, so the stuck
    states form a closed subgraph; its components come out of Tarjan's algorithm sinks first, and the run
    ends up in a sink component. (A stuck parallel state's branches may end: the run is stuck after the
    join, in its own transitions.)"""

    def __init__(self, flow: Flow, stuck: list[bool]) -> None:
        n = len(flow.states)
        self.flow = flow
        successors = [[t for t in flow.successors(i) if stuck[t]] if stuck[i] else [] for i in range(n)]
        self.components = strongly_connected_components(n, successors, include=stuck)
        self.component_of = [-1] * n
        for c, members in enumerate(self.components):
            for m in members:
                self.component_of[m] = c
        self.sink_of: list[int] = []
        for c, members in enumerate(self.components):
            component_of = self.component_of
            onward = next((component_of[t] for m in members for t in successors[m] if component_of[t] != c), None)
            self.sink_of.append(c if onward is None else self.sink_of[onward])
        self.going_round: dict[int, str] = {}  # sink component -> the note naming its states (made once)

    def sink(self, state: int) -> list[int]:
        """The states of the sink component a run from `state` ends up in."""
        return self.components[self.sink_of[self.component_of[state]]]

    def note(self, state: int) -> str:
        """Where a run from `state` ends up, in words."""
        flow = self.flow
        name = flow.states[state].name.value
        ends_in = self.sink_of[self.component_of[state]]
        sink = self.components[ends_in]
        if len(sink) == 1 and sink[0] == state:
            return f"'{name}' only leads back to itself"
        if len(sink) == 1:
            return (f"from here the run ends in '{flow.states[sink[0]].name.value}', which only leads back to "
                    "itself")
        if ends_in not in self.going_round:
            sink_names = [flow.states[m].name.value for m in sink]
            self.going_round[ends_in] = (f"from here the run ends up going round "
                                         f"{quoted_list(sink_names, _SHOWN_NAMES)}")
        return self.going_round[ends_in]


# ---- cycles ---------------------------------------------------------------------------------------


def _check_cycles_bounded(flow: Flow, diagnostics: Diagnostics) -> None:
    """SW3008 for every group of states that can loop for ever.

    Only transitions that can fire and carry no `max N` count, between non-final states without
    `visits N`. `otherwise stay` self-loops are left to SW3016, and names declared twice to SW2001. Guards
    are not bounds, even ones that count visits: the compiler does not work out when a guard turns false.
    """
    n = len(flow.states)
    looping = [
        not (flow.final[i] or flow.duplicated[i] or _has_visits(flow.states[i])) for i in range(n)
    ]
    # a state with no such edge (most of a large machine's) shares one empty tuple
    unbounded: list[Sequence[Edge]] = [
        [
            e for e in flow.edges[i]
            if e.fires and e.transition.max is None and e.transition.kind != "stay" and looping[e.target]
        ] or () if looping[i] else ()
        for i in range(n)
    ]
    successors = [tuple(e.target for e in edges) for edges in unbounded]
    for component in each_strongly_connected_component(n, successors, include=looping):
        first = component[0]
        if len(component) == 1 and not any(e.target == first for e in unbounded[first]):
            continue
        cycle, closing = _cycle_through(first, set(component), unbounded)
        names = [flow.states[i].name.value for i in cycle]
        notes = []
        if len(component) > len(cycle):
            on_cycle = set(cycle)
            others = [flow.states[i].name.value for i in component if i not in on_cycle]
            verb = "loops" if len(others) == 1 else "loop"
            notes.append(f"{quoted_list(others, _SHOWN_NAMES)} also {verb} with these states without a bound")
        members = set(component)
        counted = next((e for i in component for e in unbounded[i]
                        if e.target in members and _counts_visits(e.transition)), None)
        help = (f"add 'max N' to one of its edges (e.g. {_line_of(closing.transition)}"
                f"'{transition_quote(closing.transition)}') or 'visits N' to one of its states")
        if counted is not None:
            t = counted.transition
            notes.append(f"{_line_of(t)}the guard '{transition_quote(t)}' is not counted as a bound: the compiler "
                         "does not work out when a guard turns false")
            state, count = _visits_limit(t, flow.states[counted.source].name.value)
            help = (f"bound the loop where the compiler can see it: 'visits {count}' on state '{state}', or "
                    f"'max {count}' on the edge: '{transition_quote(t)} max {count}'")
        diagnostics.report(
            "SW3008", "cycle with no bound: " + _path_text(names), flow.states[first].name.span,
            label="this state is on a cycle that nothing bounds",
            notes=notes,
            help=help,
        )


def _has_visits(decl: ast.StateDecl) -> bool:
    return any(isinstance(item, ast.Visits) for item in decl.items)


def _counts_visits(t: ast.Transition) -> bool:
    """Whether a guard calls visits(): it looks like a bound but is not one."""
    return t.guard is not None and any(isinstance(e, ast.Call) and e.func.value == "visits"
                                       for e in ast.iter_expr(t.guard))


def _visits_limit(t: ast.Transition, owner: str) -> tuple[str, str]:
    """For a guard such as `visits(draft) < 3`: the state it counts and the number; else `owner` and N."""
    for e in ast.iter_expr(t.guard) if t.guard is not None else ():
        if not (isinstance(e, ast.BinaryOp) and e.op in ("<", "<=", ">", ">=")):
            continue
        sides = (e.left, e.right) if e.op in ("<", "<=") else (e.right, e.left)
        call, limit = sides
        if (isinstance(call, ast.Call) and call.func.value == "visits" and len(call.args) == 1
                and isinstance(call.args[0], ast.NameExpr) and isinstance(limit, ast.Literal)
                and isinstance(limit.value, int) and not isinstance(limit.value, bool)):
            count = limit.value + (1 if e.op in ("<=", ">=") else 0)
            return call.args[0].name, str(max(count, 1))
    return owner, "N"


def _cycle_through(first: int, members: set[int], edges: list[Sequence[Edge]]) -> tuple[list[int], Edge]:
    """A shortest cycle from `first` back to itself inside one component, and the edge that closes it.

    A self-loop is taken only when the component is that one state, so a larger cycle is named in full.
    """
    if len(members) == 1:
        return [first], next(e for e in edges[first] if e.target == first)
    parent: dict[int, int] = {first: -1}
    queue = deque([first])
    while queue:
        node = queue.popleft()
        for e in edges[node]:
            if e.target == first and node != first:
                path = [node]
                while parent[path[-1]] != -1:
                    path.append(parent[path[-1]])
                return path[::-1], e
            if e.target in members and e.target not in parent:
                parent[e.target] = node
                queue.append(e.target)
    raise AssertionError("a strongly connected component always has a cycle through each member")



# ---- wording --------------------------------------------------------------------------------------


def transition_quote(t: ast.Transition) -> str:
    """A transition quoted in a message as it reads in source, on one line and shortened:
    `when output.ok -> done max 2`."""
    from ..views.graph import shorten
    from ..views.source_text import expr_to_source  # here, not at import: only messages need the printer

    target = t.target.value if t.target is not None else "?"
    if t.kind == "guard" and t.guard is not None:
        text = f"when {shorten(expr_to_source(t.guard), 40)} -> {target}"
    elif t.kind == "condition" and t.condition is not None:
        text = f'when "{shorten(t.condition.value, 40)}" -> {target}'
    elif t.kind == "otherwise":
        text = f"otherwise -> {target}"
    elif t.kind == "stay":
        text = "otherwise stay"
    elif t.kind == "timeout" and t.after is not None:
        text = f"after {t.after.text} -> {target}"
    else:
        text = f"-> {target}"
    if t.max is not None:
        text += f" max {t.max.value}" + (" per visit" if t.per_visit is not None else "")
    return text


def _line_of(node: ast.Name | ast.Transition) -> str:
    return f"line {node.span.start_pos.line}: " if node.span is not None else ""


def _at_line(name: ast.Name) -> str:
    return f" (line {name.span.start_pos.line})" if name.span is not None else ""


def _path_text(names: list[str]) -> str:
    """`a -> b -> a`; a very long cycle keeps its ends and counts the middle."""
    if len(names) > _SHOWN_NAMES:
        head, tail = names[: _SHOWN_NAMES // 2], names[-(_SHOWN_NAMES // 2):]
        hidden = len(names) - len(head) - len(tail)
        names = [*head, f"... ({hidden} more)", *tail]
    return " -> ".join([*names, names[0]])
