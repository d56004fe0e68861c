"""Equivalent-state merging: states that do the same work and move the same way share one body.

Two states are equivalent when everything they do is the same — agent, instruction, output type,
listeners, tool call, retries, visit bound, result — and their transitions, in order, have the same kinds,
guards, conditions and bounds and lead to equivalent states. The coarsest such partition (the states of
the minimal machine) is computed by Hopcroft's partition refinement in O(m log n) for m transitions and n
states.

A merged state keeps its identity: every member of a block stays in the IR under its own name, with its
own position, transitions, counters and schema name, and marks the block's first member (the start
state, when it is in the block) as the one whose work it `shares`. Code generation then writes the
block's work once — its guards and tool-call argument builders — for all its members. So nothing a user or
a model sees differs between -O0 and -O1 (paths, traces, script keys, failures, positions, schema names,
every request), a checkpoint resumes across levels, and the pass needs no exceptions: a final state, a
bounded state, a state read by name, with listeners or on a cycle is merged like any other. For the same
reason the signature leaves out what a merged state keeps of its own here — its model, a failing final
state's reason, `per visit` and deadlines on its edges — which a source rewrite, deleting states, must not
(`apart_by`, designer/source_edit.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from ...grammar import ast
from ...grammar.parser import paused_gc
from .. import ir


def merge_equivalent_states(machine: ir.Machine) -> ir.Machine:
    # The pass allocates a few small objects per state and transition; a full collection rescanning all of
    # them (and the IR) now and then would make large machines cost more than O(m log n).
    with paused_gc():
        groups, marked = _equivalence_classes(machine, None)
        shares = {name: rep for rep, members in groups.items() for name in members if name != rep}
        if not shares and not marked:
            return machine  # nothing to merge, and nothing was: the common case, decided without a second look
        if all(s.shares == shares.get(s.name) for s in machine.states):
            return machine  # already marked as the partition says: the pass is idempotent
        states = tuple(dataclasses.replace(s, shares=shares.get(s.name)) if s.shares != shares.get(s.name) else s
                       for s in machine.states)
        return dataclasses.replace(machine, states=states)


def equivalence_classes(machine: ir.Machine, keep_apart: Sequence[bool] | None = None, *,
                        apart_by: Callable[[ir.State], object] | None = None) -> dict[str, list[str]]:
    """Representative name -> the names of all states in its class (source order), for classes of two or
    more, ordered by the representative's position in the source.

    `keep_apart[i]` puts state i in a class of its own (a source rewrite deletes merged states, and some
    states must keep their declaration: see source_edit). `apart_by(state)` adds to the signature: states
    it tells apart are never in one class (a source rewrite must keep apart what this pass may share)."""
    with paused_gc():
        return _equivalence_classes(machine, keep_apart, apart_by)[0]


def _equivalence_classes(machine: ir.Machine, keep_apart: Sequence[bool] | None,
                         apart_by: Callable[[ir.State], object] | None = None
                         ) -> tuple[dict[str, list[str]], bool]:
    """The classes, and whether some state is marked as sharing another's work already."""
    states = machine.states
    n = len(states)
    index = {s.name: i for i, s in enumerate(states)}
    targets = [[index.get(t.target, -1) for t in s.transitions] for s in states]

    # initial partition: by everything a state does, except where its edges lead. States are grouped by
    # the fields of their signature that hash cheaply first; the whole signature (guards, types and tool
    # calls, each hashed node by node) is only read within a group of two or more: the same blocks
    initial = [0] * n
    groups: dict[object, list[int]] = {}
    marked = False
    for i, s in enumerate(states):
        key: object = ("alone", i) if keep_apart is not None and keep_apart[i] else _plain_signature(s)
        if apart_by is not None:
            key = (key, apart_by(s))
        groups.setdefault(key, []).append(i)
        marked = marked or s.shares is not None
    count = 0
    for members in groups.values():
        if len(members) == 1:
            initial[members[0]] = count
            count += 1
            continue
        signature_block: dict[object, int] = {}
        for i in members:
            number = signature_block.get(sig := _signature(states[i]))
            if number is None:
                number = signature_block[sig] = count
                count += 1
            initial[i] = number
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
    return dict(sorted(result.items(), key=lambda kv: index[kv[0]])), marked


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


def _plain_signature(state: ir.State) -> object:
    """What a state does and how its edges are labelled, in the fields that are text and numbers (cheap to
    hash); `_signature` adds the rest, so equal signatures have equal plain ones."""
    return (state.kind, state.agent, state.instruction, state.tell, state.visits, state.retries, state.result,
            state.branch, state.run.machine if state.run is not None else None,
            tuple((t.kind, t.condition, t.max) for t in state.transitions),
            tuple((u.reducer, u.var) for u in state.updates), state.ask_before, state.tool_rounds)


def _signature(state: ir.State) -> object:
    """Everything a state does, except where its edges lead: the plain part, then its output type, tool
    call, run, branches, map, guards and the values its updates of run variables give (syntax trees, hashed
    node by node). States that write different variables, or the same ones differently, are never one."""
    return (_plain_signature(state), state.output, state.call, state.run, state.parallel, state.each,
            tuple(t.guard for t in state.transitions), tuple(u.value for u in state.updates))


def referenced_state_names(machine: ir.Machine) -> set[str]:
    """Every state name that a guard, tool-call argument or template reads."""
    names = {s.name for s in machine.states}
    found: set[str] = set()
    for s in machine.states:
        found |= state_mentions(s, names)
    return found


def state_mentions(state: ir.State, names: set[str]) -> set[str]:
    """The state names one state's guards, tool-call arguments and templates read."""
    return mentioned_names(state) & names


def mentioned_names(state: ir.State) -> set[str]:
    """Every name one state's guards, tool-call arguments, updates of run variables and templates read: the
    states among them are the states it reads (inputs, run variables and a map's element names are the
    others).

    Templates are not searched here: the template check recorded the states each one reads from its Jinja
    parse (`State.template_reads`). An agent's prompt reads no state (SW2008).
    """
    found = {read.state for read in state.template_reads}
    stack: list[ast.Expr] = [t.guard for t in state.transitions if t.guard is not None]
    if state.call is not None:
        stack.extend(arg.value for arg in state.call.args)
    if state.run is not None:
        stack.extend(arg.value for arg in state.run.args)
    if state.parallel is not None and state.parallel.join.guard is not None:
        stack.append(state.parallel.join.guard)
    if state.each is not None:
        stack.append(state.each.items)
    stack.extend(update.value for update in state.updates)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.NameExpr):
            found.add(node.name)
        elif isinstance(node, ast.BinaryOp):  # the common shapes first, without building a tuple of children
            stack.append(node.left)
            stack.append(node.right)
        elif isinstance(node, ast.Attribute):
            stack.append(node.value)
        elif not isinstance(node, ast.Literal):
            stack.extend(ast.expr_children(node))
    return found
