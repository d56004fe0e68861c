"""Equivalent-state merging: states that do the same work and move the same way become one.

Two states are equivalent when they have the same agent, instruction, output type, listeners, tool call
and retries, and the same transitions in the same order (kind, guard, condition, bound) leading to
equivalent states. The coarsest such partition is computed by Hopcroft's partition refinement in
O(m log n) for m transitions and n states; each block keeps its first state's name (the start state's,
if it is in the block) and the union of the merged states' origins, so diagnostics and source maps still
point at the source.

Only merges that cannot change what any model is sent are made. A state is left alone when
- it is final (its name is the run's observable outcome);
- it has `visits N` or an edge with `max N` (merging would pool the counters);
- its name is read anywhere (`STATE.output`, `visits(STATE)`, a template reading it);
- it has listeners (`tell [...]`): listeners receive its output tagged with its name;
- it lies on a cycle. On an acyclic part of the graph no run can enter two states of one block (their
  equivalent successors would have to lead on for ever), so no merged state is ever "visited again" where
  the original was visited for the first time — the engine tells a re-run agent which state sent the run
  back, and that message must not change.
"""

from __future__ import annotations

import dataclasses

from ...grammar import ast
from ...grammar.parser import paused_gc
from .. import ir
from ..checks.graph import strongly_connected_components


def merge_equivalent_states(machine: ir.Machine) -> ir.Machine:
    # The pass allocates a few small objects per state and transition; a full collection rescanning all of
    # them (and the IR) now and then would make large machines cost more than O(m log n).
    with paused_gc():
        groups = equivalence_classes(machine)
        merged = {name: rep for rep, members in groups.items() for name in members if name != rep}
        if not merged:
            return machine
        return _rewrite(machine, groups, merged)


def equivalence_classes(machine: ir.Machine) -> dict[str, list[str]]:
    """Representative name -> the names of all states in its class (source order), for classes of two or
    more, ordered by the representative's position in the source."""
    with paused_gc():
        return _equivalence_classes(machine)


def _equivalence_classes(machine: ir.Machine) -> dict[str, list[str]]:
    states = machine.states
    n = len(states)
    index = {s.name: i for i, s in enumerate(states)}
    targets = [[index.get(t.target, -1) for t in s.transitions] for s in states]
    alone = _unmergeable(machine, targets)

    # initial partition: by everything a state does, except where its edges lead
    signature_block: dict[object, int] = {}
    initial = [0] * n
    for i, s in enumerate(states):
        sig = ("alone", i) if alone[i] else ("mergeable", _signature(s))
        initial[i] = signature_block.setdefault(sig, len(signature_block))
    # the alphabet is the transition's position: within a block every state has the same labels at the same
    # positions (they are part of the signature), so position alone tells edges apart
    incoming: list[list[tuple[int, int]]] = [[] for _ in range(n)]  # target -> [(position, source)]
    for i, row in enumerate(targets):
        for pos, target in enumerate(row):
            if target >= 0:
                incoming[target].append((pos, i))
    blocks, _ = refine_partition(initial, incoming)

    result: dict[str, list[str]] = {}
    for block in blocks:
        members = sorted(block)
        if len(members) < 2:
            continue
        names = [states[i].name for i in members]
        rep = machine.start if machine.start in names else names[0]
        result[rep] = names
    return dict(sorted(result.items(), key=lambda kv: index[kv[0]]))


def refine_partition(initial: list[int],
                     incoming: list[list[tuple[int, int]]]) -> tuple[list[list[int]], int]:
    """The coarsest refinement of `initial` (block number per element) that is stable under the labelled
    edges `incoming[target] = [(label, source), ...]`: two elements stay together only when, for every
    label, their edges lead into the same block. Each element has at most one edge per label (the graph
    is deterministic). Hopcroft's algorithm on a refinable partition.

    Returns the blocks and the work done (edges scanned plus elements moved), which is O(m log n): every
    element re-enters the worklist only as part of the smaller half of a split.
    """
    partition = _RefinablePartition(len(initial), initial)
    work = list(range(partition.count))
    while work:
        splitter = work.pop()
        # sources grouped by label; the cost is the number of edges entering the splitter
        by_label: dict[int, list[int]] = {}
        for target in partition.members(splitter):
            for label, source in incoming[target]:
                by_label.setdefault(label, []).append(source)
                partition.work += 1
        for sources in by_label.values():
            for source in sources:
                partition.mark(source)
            # Hopcroft: a new block is always the smaller half of a split. If the old block still waits in
            # the worklist both halves must be processed; if not, the smaller one suffices. Either way
            # only the new block is added — so each element re-enters the worklist O(log n) times.
            work.extend(partition.split_marked())
    return [partition.members(b) for b in range(partition.count)], partition.work


class _RefinablePartition:
    """Blocks of 0..n-1 as contiguous ranges of one array, so marking costs O(1) and splitting a block
    costs O(number of marked members) — never the size of the block (Valmari and Lehtinen's structure)."""

    def __init__(self, n: int, initial: list[int]) -> None:
        count = max(initial, default=-1) + 1
        sizes = [0] * count
        for b in initial:
            sizes[b] += 1
        self.first = [0] * count
        for b in range(1, count):
            self.first[b] = self.first[b - 1] + sizes[b - 1]
        self.end = list(self.first)
        self.elements = [0] * n
        self.location = [0] * n
        self.block_of = list(initial)
        for element, b in enumerate(initial):
            self.elements[self.end[b]] = element
            self.location[element] = self.end[b]
            self.end[b] += 1
        self.marked = [0] * count
        self.touched: list[int] = []
        self.work = 0

    @property
    def count(self) -> int:
        return len(self.first)

    def members(self, block: int) -> list[int]:
        return self.elements[self.first[block] : self.end[block]]

    def mark(self, element: int) -> None:
        b = self.block_of[element]
        here = self.location[element]
        boundary = self.first[b] + self.marked[b]
        if here < boundary:
            return  # already marked
        other = self.elements[boundary]
        self.elements[boundary], self.elements[here] = element, other
        self.location[element], self.location[other] = boundary, here
        if self.marked[b] == 0:
            self.touched.append(b)
        self.marked[b] += 1

    def split_marked(self) -> list[int]:
        """Split every block with marked members into marked and unmarked parts; the new block (returned)
        is the smaller part, and only its members change block."""
        new_blocks = []
        for b in self.touched:
            marked, first, end = self.marked[b], self.first[b], self.end[b]
            self.marked[b] = 0
            if marked == end - first:
                continue
            z = len(self.first)
            if marked <= end - first - marked:
                self.first.append(first)
                self.end.append(first + marked)
                self.first[b] = first + marked
            else:
                self.first.append(first + marked)
                self.end.append(end)
                self.end[b] = first + marked
            self.marked.append(0)
            for element in self.elements[self.first[z] : self.end[z]]:
                self.block_of[element] = z
            self.work += self.end[z] - self.first[z]
            new_blocks.append(z)
        self.touched.clear()
        return new_blocks


def _unmergeable(machine: ir.Machine, targets: list[list[int]]) -> list[bool]:
    states = machine.states
    n = len(states)
    referenced = referenced_state_names(machine)
    alone = [
        s.kind == "final"
        or s.visits is not None
        or any(t.max is not None for t in s.transitions)
        or s.name in referenced
        or bool(s.tell)
        for s in states
    ]
    # states on a cycle (a `stay` self-loop always carries a bound, so it is covered above)
    successors = [
        [target for t, target in zip(s.transitions, row) if target >= 0 and t.kind != "stay"]
        for s, row in zip(states, targets)
    ]
    for component in strongly_connected_components(n, successors):
        if len(component) > 1:
            for i in component:
                alone[i] = True
        elif component[0] in successors[component[0]]:
            alone[component[0]] = True
    return alone


def _signature(state: ir.State) -> object:
    return (state.kind, state.agent, state.instruction, state.output, state.tell, state.retries, state.call,
            state.result, tuple(_edge_label(t) for t in state.transitions))


def _edge_label(t: ir.Transition) -> object:
    return (t.kind, t.guard, t.condition, t.max)


def referenced_state_names(machine: ir.Machine) -> set[str]:
    """Every state name that a guard, tool-call argument or template reads."""
    names = {s.name for s in machine.states}
    found: set[str] = set()
    for s in machine.states:
        found |= state_mentions(s, names)
    return found


def state_mentions(state: ir.State, names: set[str]) -> set[str]:
    """The state names one state's guards, tool-call arguments and templates read.

    Templates are not searched here: the template check recorded the states each one reads from its Jinja
    parse (`State.template_reads`). An agent's prompt reads no state (SW2008).
    """
    found = {read.state for read in state.template_reads} & names
    for t in state.transitions:
        if t.guard is not None:
            found |= _expr_names(t.guard) & names
    if state.call is not None:
        for arg in state.call.args:
            found |= _expr_names(arg.value) & names
    return found


def _expr_names(expr: ast.Expr) -> set[str]:
    return {node.name for node in ast.iter_expr(expr) if isinstance(node, ast.NameExpr)}


def _rewrite(machine: ir.Machine, groups: dict[str, list[str]], merged: dict[str, str]) -> ir.Machine:
    by_name = {s.name: s for s in machine.states}
    states = []
    for s in machine.states:
        if s.name in merged:
            continue
        changes: dict[str, object] = {}
        if any(t.target in merged for t in s.transitions):
            changes["transitions"] = tuple(
                dataclasses.replace(t, target=merged[t.target]) if t.target in merged else t
                for t in s.transitions
            )
        if s.name in groups:
            origins = s.origins or ((s.origin,) if s.origin is not None else ())
            for member in groups[s.name]:
                if member != s.name:
                    other = by_name[member]
                    origins += other.origins or ((other.origin,) if other.origin is not None else ())
            changes["origins"] = origins
        states.append(dataclasses.replace(s, **changes) if changes else s)  # type: ignore[arg-type]
    tests = tuple(_rename_in_test(t, merged) for t in machine.tests)
    return dataclasses.replace(machine, states=tuple(states), tests=tests)


def _rename_in_test(test: ir.Test, merged: dict[str, str]) -> ir.Test:
    steps = tuple(
        dataclasses.replace(step, state=merged.get(step.state, step.state)) for step in test.steps
    )
    path = tuple(merged.get(s, s) for s in test.expect_path) if test.expect_path is not None else None
    final = merged.get(test.expect_final, test.expect_final) if test.expect_final is not None else None
    return dataclasses.replace(test, steps=steps, expect_path=path, expect_final=final)
