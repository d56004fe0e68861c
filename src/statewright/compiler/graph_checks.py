"""Machine-structure checks over the state graph: start and final states, reachability, transitions
that always or never fire, and cycles that nothing bounds.

Works on the syntax tree, so it runs even when other checks fail. Unknown transition targets are
reported elsewhere (SW2002); here they are skipped. Every walk is iterative and linear in the size of
the machine, so a generated machine of many thousands of states checks quickly and without recursion.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..diagnostics import Diagnostics, quoted_list
from ..grammar import ast

_SHOWN_NAMES = 12  # longer lists of states in a message are cut in the middle


@dataclass(frozen=True)
class _Edge:
    source: int
    target: int
    transition: ast.Transition
    fires: bool  # False when an earlier transition always takes precedence, or its guard is always false


@dataclass
class _Graph:
    """States by index in source order (the first declaration of each name) and their edges."""

    states: list[ast.StateDecl]
    index: dict[str, int]
    edges: list[list[_Edge]]  # per state, in source order; `stay` is an edge to the state itself
    names_unknown_target: list[bool]  # the state has a transition to a name that is no state
    final: list[bool]  # some declaration of the name is final
    duplicated: list[bool]  # the name is declared more than once (SW2001 elsewhere)

    def bounded(self, i: int) -> bool:
        return any(isinstance(item, ast.Visits) for item in self.states[i].items)


def check_graph(machine: ast.Machine, diagnostics: Diagnostics) -> None:
    """Report SW3001-SW3003, SW3005-SW3008, SW7004 and SW7007 for `machine`."""
    decls: list[ast.StateDecl] = machine.of(ast.StateDecl)
    _check_start_and_final(machine, decls, diagnostics)
    for decl in decls:
        if decl.final:
            _check_final_has_no_transitions(decl, diagnostics)
    never = _check_never_firing(decls, diagnostics)
    graph = _build_graph(decls, never)
    start = next((d for d in decls if d.start), None)
    if start is not None:
        reachable = _reachable_from(graph, graph.index[start.name.value])
        _report_unreachable(graph, reachable, diagnostics)
        if any(graph.final):
            _check_finals_reachable(graph, reachable, diagnostics)
    _check_cycles_bounded(graph, diagnostics)


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


def _check_never_firing(decls: list[ast.StateDecl], diagnostics: Diagnostics) -> set[int]:
    """Report guards whose value is known (SW7007) and transitions that an earlier, always-firing one
    shadows (SW3007); return the ids of the transitions that never fire.

    A transition always fires when it is `-> s`, `otherwise -> s`, `otherwise stay` or a guard that is
    always true, with no `max N` and no `visits N` on its target: a bound on either lets evaluation fall
    through once exhausted. A guard that is always false never fires.
    """
    visits_bounded = {d.name.value for d in decls if any(isinstance(i, ast.Visits) for i in d.items)}
    never: set[int] = set()
    for decl in decls:
        if decl.final:
            continue  # SW3006 already covers every transition here
        shadow: ast.Transition | None = None
        for t in decl.transitions:
            if shadow is not None:
                never.add(id(t))
                diagnostics.report(
                    "SW3007", f"transition in state '{decl.name.value}' can never fire", t.span,
                    label="never tried",
                    help=f"{_line_of(shadow)}'{transition_text(shadow)}' always fires before it; move this "
                         "transition above that one, or bound that one with 'max N'",
                )
                continue
            always = t.kind in ("always", "otherwise", "stay")
            if t.kind == "guard" and t.guard is not None:
                value = _report_known_guard(t, t.guard, diagnostics)
                always = value is True
                if value is False:
                    never.add(id(t))
            target = decl.name.value if t.kind == "stay" else (t.target.value if t.target else "")
            if always and t.max is None and target not in visits_bounded:
                shadow = t
    return never


def _report_known_guard(t: ast.Transition, guard: ast.Expr, diagnostics: Diagnostics) -> bool | None:
    """SW7007 when `guard` is always true or always false; that value, or None when the run decides it."""
    known = known_value(guard)
    if known is None or not isinstance(known.value, bool):
        return None  # a guard that is not a boolean is SW4004's to report
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
    return known.value


@dataclass(frozen=True)
class Known:
    """The value of an expression, known before the machine runs."""

    value: Any


_FAILURES = (TypeError, ValueError, ArithmeticError, LookupError)


def known_value(expr: ast.Expr) -> Known | None:
    """The value of an expression that reads nothing a run decides, or None when it does or may fail.

    Only literals and operators on them qualify (`true`, `1 == 1`, `"a" in "abc"`, `len([1, 2]) > 1`):
    any name (`output`, an input, `STATE.output`, `visits(STATE)`) makes the value unknown. Operators mean
    what they mean at run time (Python's, `ast.BINARY_OPERATORS`, as in the guard interpreter). An operation
    that would fail at run time leaves it unknown too, and `*` and `%` are only applied to numbers, so a
    file cannot make the compiler build a huge string (`"a" * 1000000000`).
    """
    values: dict[int, Any] = {}  # id of a sub-expression -> its value; sub-expressions come first
    for e in reversed(list(ast.iter_expr(expr))):
        if isinstance(e, ast.Literal):
            values[id(e)] = e.value
        elif isinstance(e, ast.ListExpr):
            values[id(e)] = [values[id(i)] for i in e.items]
        elif isinstance(e, ast.UnaryOp):
            operand = values[id(e.operand)]
            if e.op == "not":
                values[id(e)] = not operand
            elif _is_number(operand):
                values[id(e)] = -operand
            else:
                return None
        elif isinstance(e, ast.BinaryOp):
            left, right = values[id(e.left)], values[id(e.right)]
            if e.op == "and":
                values[id(e)] = left and right
            elif e.op == "or":
                values[id(e)] = left or right
            else:
                apply = ast.BINARY_OPERATORS.get(e.op)
                if apply is None or (e.op in ("*", "%") and not (_is_number(left) and _is_number(right))):
                    return None
                try:
                    values[id(e)] = apply(left, right)
                except _FAILURES:
                    return None
        elif isinstance(e, ast.Index):
            try:
                values[id(e)] = values[id(e.value)][values[id(e.index)]]
            except _FAILURES:
                return None
        elif isinstance(e, ast.Call) and e.func.value == "len" and len(e.args) == 1:
            try:
                values[id(e)] = len(values[id(e.args[0])])
            except _FAILURES:
                return None
        else:
            return None  # a name, a field read or another call: the run decides
    return Known(values[id(expr)])


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float))


# ---- reachability ---------------------------------------------------------------------------------


def _build_graph(decls: list[ast.StateDecl], never: set[int]) -> _Graph:
    index: dict[str, int] = {}
    states: list[ast.StateDecl] = []
    for decl in decls:
        if decl.name.value not in index:  # a duplicate declaration is reported as SW2001 elsewhere
            index[decl.name.value] = len(states)
            states.append(decl)
    edges: list[list[_Edge]] = [[] for _ in states]
    unknown = [False] * len(states)
    final = [False] * len(states)
    duplicated = [False] * len(states)
    for decl in decls:
        i = index[decl.name.value]
        final[i] = final[i] or decl.final
        duplicated[i] = duplicated[i] or decl is not states[i]
    for i, decl in enumerate(states):
        for t in decl.transitions:
            if t.kind == "stay":
                target: int | None = i
            else:
                target = index.get(t.target.value) if t.target is not None else None
            if target is None:
                unknown[i] = True
                continue
            edges[i].append(_Edge(i, target, t, id(t) not in never))
    return _Graph(states, index, edges, unknown, final, duplicated)


def _reachable_from(graph: _Graph, start: int) -> list[bool]:
    """States some sequence of written transitions leads to from `start` (bounds and order ignored)."""
    seen = [False] * len(graph.states)
    seen[start] = True
    queue = deque([start])
    while queue:
        for edge in graph.edges[queue.popleft()]:
            if not seen[edge.target]:
                seen[edge.target] = True
                queue.append(edge.target)
    return seen


def _report_unreachable(graph: _Graph, reachable: list[bool], diagnostics: Diagnostics) -> None:
    for i, decl in enumerate(graph.states):
        if not reachable[i] and not decl.start:  # an extra start state already has SW3002
            diagnostics.report(
                "SW7004", f"state '{decl.name.value}' is unreachable", decl.name.span,
                label="no path from the start state leads here",
                help=f"add a transition to '{decl.name.value}' from a reachable state, or delete it",
            )


def _check_finals_reachable(graph: _Graph, reachable: list[bool], diagnostics: Diagnostics) -> None:
    """SW3005 for each reachable state from which no final state can be reached.

    A state with no transitions, with one naming an unknown state, or declared twice is given the benefit
    of the doubt: SW3012/SW2002/SW2001 already point at it, and reporting everything upstream of it would
    bury that.
    """
    n = len(graph.states)
    predecessors: list[list[int]] = [[] for _ in range(n)]
    for edges in graph.edges:
        for edge in edges:
            predecessors[edge.target].append(edge.source)
    finishes = [
        graph.final[i] or graph.names_unknown_target[i] or graph.duplicated[i] or not s.transitions
        for i, s in enumerate(graph.states)
    ]
    queue = deque(i for i in range(n) if finishes[i])
    while queue:
        for p in predecessors[queue.popleft()]:
            if not finishes[p]:
                finishes[p] = True
                queue.append(p)
    stuck = [reachable[i] and not finishes[i] for i in range(n)]
    if not any(stuck):
        return
    # Every successor of a stuck state is stuck too, so the stuck states form a closed subgraph. Its
    # components come out of Tarjan's algorithm sinks first; the run ends up in a sink component.
    successors = [[e.target for e in graph.edges[i]] if stuck[i] else [] for i in range(n)]
    components = strongly_connected_components(n, successors, include=stuck)
    component_of = [-1] * n
    for c, members in enumerate(components):
        for m in members:
            component_of[m] = c
    sink_of: list[int] = []
    for c, members in enumerate(components):
        onward = next(
            (component_of[t] for m in members for t in successors[m] if component_of[t] != c), None
        )
        sink_of.append(c if onward is None else sink_of[onward])
    first_final = next(s.name.value for i, s in enumerate(graph.states) if graph.final[i])
    for i in range(n):
        if not stuck[i]:
            continue
        name = graph.states[i].name.value
        sink = components[sink_of[component_of[i]]]
        sink_names = [graph.states[m].name.value for m in sink]
        if len(sink) == 1 and sink[0] == i:
            note = f"'{name}' only leads back to itself"
        elif len(sink) == 1:
            note = f"from here the run ends in '{sink_names[0]}', which only leads back to itself"
        else:
            note = f"from here the run ends up going round {quoted_list(sink_names, _SHOWN_NAMES)}"
        way_out = f"'{sink_names[0]}'" if len(sink) == 1 else "one of those states"
        diagnostics.report(
            "SW3005", f"no final state can be reached from '{name}'", graph.states[i].name.span,
            label="a run that gets here can only end by exhausting a bound or limit",
            notes=[note],
            help=f"add a transition from {way_out} to a final state, e.g. 'otherwise -> {first_final}'",
        )


# ---- cycles ---------------------------------------------------------------------------------------


def _check_cycles_bounded(graph: _Graph, diagnostics: Diagnostics) -> None:
    """SW3008 for every group of states that can loop for ever.

    Only transitions that can fire and carry no `max N` count, between non-final states without
    `visits N`. `otherwise stay` self-loops are left to SW3016, and names declared twice to SW2001.
    """
    n = len(graph.states)
    looping = [
        not (graph.final[i] or graph.duplicated[i] or graph.bounded(i)) for i in range(n)
    ]
    unbounded: list[list[_Edge]] = [
        [
            e for e in graph.edges[i]
            if e.fires and e.transition.max is None and e.transition.kind != "stay" and looping[e.target]
        ] if looping[i] else []
        for i in range(n)
    ]
    successors = [[e.target for e in edges] for edges in unbounded]
    for component in strongly_connected_components(n, successors, include=looping):
        first = component[0]
        if len(component) == 1 and not any(e.target == first for e in unbounded[first]):
            continue
        cycle, closing = _cycle_through(first, set(component), unbounded)
        names = [graph.states[i].name.value for i in cycle]
        notes = []
        if len(component) > len(cycle):
            on_cycle = set(cycle)
            others = [graph.states[i].name.value for i in component if i not in on_cycle]
            verb = "loops" if len(others) == 1 else "loop"
            notes.append(f"{quoted_list(others, _SHOWN_NAMES)} also {verb} with these states without a bound")
        diagnostics.report(
            "SW3008", "cycle with no bound: " + _path_text(names), graph.states[first].name.span,
            label="this state is on a cycle that nothing bounds",
            notes=notes,
            help=f"add 'max N' to one of its edges (e.g. {_line_of(closing.transition)}"
                 f"'{transition_text(closing.transition)}') or 'visits N' to one of its states",
        )


def _cycle_through(first: int, members: set[int], edges: list[list[_Edge]]) -> tuple[list[int], _Edge]:
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


def strongly_connected_components(
    count: int, successors: Sequence[Sequence[int]], include: Sequence[bool] | None = None
) -> list[list[int]]:
    """Tarjan's algorithm with an explicit stack (no recursion), over nodes 0..count-1.

    Components come out in reverse topological order — each after every component it can reach — and
    each lists its members in ascending order. Nodes with `include[i]` false are left out.
    """
    index = [-1] * count
    low = [0] * count
    on_stack = [False] * count
    stack: list[int] = []
    components: list[list[int]] = []
    counter = 0
    for root in range(count):
        if index[root] != -1 or (include is not None and not include[root]):
            continue
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack[root] = True
        work = [(root, 0)]
        while work:
            node, position = work[-1]
            out = successors[node]
            if position < len(out):
                work[-1] = (node, position + 1)
                nxt = out[position]
                if include is not None and not include[nxt]:
                    continue
                if index[nxt] == -1:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack[nxt] = True
                    work.append((nxt, 0))
                elif on_stack[nxt]:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                members = []
                while True:
                    m = stack.pop()
                    on_stack[m] = False
                    members.append(m)
                    if m == node:
                        break
                members.sort()
                components.append(members)
    return components


# ---- wording --------------------------------------------------------------------------------------


def transition_text(t: ast.Transition) -> str:
    """A transition as it reads in source, on one line and shortened: `when output.ok -> done max 2`."""
    from .formatter import expr_to_source  # here, not at import: only messages need the printer
    from .graph import shorten

    target = t.target.value if t.target is not None else "?"
    if t.kind == "guard" and t.guard is not None:
        text = f"when {shorten(expr_to_source(t.guard), 40)} -> {target}"
    elif t.kind == "condition" and t.condition is not None:
        text = f'when "{shorten(t.condition.value, 40)}" -> {target}'
    elif t.kind == "otherwise":
        text = f"otherwise -> {target}"
    elif t.kind == "stay":
        text = "otherwise stay"
    else:
        text = f"-> {target}"
    if t.max is not None:
        text += f" max {t.max.value}"
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
