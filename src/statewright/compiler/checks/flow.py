"""Control flow before a run: which transitions can fire, which states a run reaches, which surely ran.

The machine's control flow before it runs: which transitions can fire, which states a run can reach, and
which states have surely run before another.

One notion of "a transition that can fire" serves every check. A transition never fires when
- an earlier transition of its state always fires first (`-> s`, `otherwise`, `otherwise stay`, or a guard
  that is always true, with no `max N` and no `visits N` on its target to make evaluation fall through),
  or has the same guard and so fires whenever this one would;
- its guard is always false;
- its state can never be entered (no transition that can fire leads there from the start state).
Reachability, "a final state can be reached", unbounded cycles, and the dominance that tells whether
`STATE.output` is there yet all follow only the transitions that can fire.

Works on the syntax tree (the first declaration of each state name), so it runs even when other checks
fail; unknown transition targets are skipped (SW2002 reports them). Every walk is iterative and near-linear.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ...grammar import ast
from ...grammar.operators import BINARY_OPERATORS
from ...runtime.guard_aggregates import guard_max, guard_min, guard_sum
from ...runtime.rendering import MAX_INT_DIGITS

_MAX_INT_BITS = int(MAX_INT_DIGITS * 3.3219)  # a constant guard's numbers stay printable
_PATHS_SHOWN = 50


@dataclass(frozen=True, slots=True)  # one for each transition: a large machine has tens of thousands
class Edge:
    source: int
    target: int
    transition: ast.Transition
    fires: bool
    fork: bool = False  # a parallel state starting one of its branches (not one of its transitions)


@dataclass(frozen=True)
class Known:
    """The value of an expression, known before the machine runs."""

    value: Any


_FAILURES = (TypeError, ValueError, ArithmeticError, LookupError)
# How many sub-expressions working out one guard may evaluate: all/any/count over literal lists multiply
# (`all(all(... for y in [...]) for x in [...])`), and a file must not make the compiler loop for long.
_MAX_EVALUATIONS = 100_000


def _outside_items(expr: ast.Expr) -> list[ast.Expr]:
    """`expr` and the expressions inside it, each before its sub-expressions, but not the tests of all,
    any and count: those are evaluated once per item, with the item bound."""
    out: list[ast.Expr] = []
    stack: list[ast.Expr] = [expr]
    while stack:
        node = stack.pop()
        out.append(node)
        stack.extend(reversed((node.items,) if isinstance(node, ast.Quantifier) else ast.expr_children(node)))
    return out


def known_value(expr: ast.Expr, _items: dict[str, Any] | None = None, _budget: list[int] | None = None
                ) -> Known | None:
    """The value of an expression that reads nothing a run decides, or None when it does or may fail.

    Only literals and operators on them qualify (`true`, `1 == 1`, `"a" in "abc"`, `len([1, 2]) > 1`):
    any name (`output`, an input, `STATE.output`, `visits(STATE)`) makes the value unknown. Operators mean
    what they mean at run time, where a guard runs as the Python code generation writes for it
    (`operators.BINARY_OPERATORS`). An operation that would fail at run time leaves it unknown too; `*`
    and `%` are only applied to numbers, so a file cannot make the compiler build a huge string
    (`"a" * 1000000000`), and a product is not worked out once it would have more digits than a number
    may print.
    """
    items = _items or {}
    budget = _budget if _budget is not None else [_MAX_EVALUATIONS]
    values: dict[int, Any] = {}  # id of a sub-expression -> its value; sub-expressions come first
    for e in reversed(_outside_items(expr)):
        budget[0] -= 1
        if budget[0] < 0:
            return None
        folded = _folded(e, values, items, budget)
        if folded is None:
            return None  # a name, a field read or another call (the run decides), or an operation that fails
        values[id(e)] = folded.value
    return Known(values[id(expr)])


def _folded(e: ast.Expr, values: dict[int, Any], items: dict[str, Any], budget: list[int]) -> Known | None:
    """The value of `e` from the values of its sub-expressions, or None when it is not known."""
    if isinstance(e, ast.Literal):
        return Known(e.value)
    if isinstance(e, ast.NameExpr) and e.name in items:
        return Known(items[e.name])
    if isinstance(e, ast.Quantifier):
        return _quantified(e, values[id(e.items)], items, budget)
    if isinstance(e, ast.ListExpr):
        return Known([values[id(i)] for i in e.items])
    if isinstance(e, ast.Conditional):
        return Known(values[id(e.then)] if values[id(e.test)] else values[id(e.orelse)])
    if isinstance(e, ast.UnaryOp):
        operand = values[id(e.operand)]
        if e.op == "not":
            return Known(not operand)
        return Known(-operand) if _is_number(operand) else None
    if isinstance(e, ast.BinaryOp):
        return _folded_binary(e.op, values[id(e.left)], values[id(e.right)])
    if isinstance(e, ast.Index):
        return _applied(lambda: values[id(e.value)][values[id(e.index)]])
    if isinstance(e, ast.Call) and e.func.value == "len" and len(e.args) == 1:
        return _applied(lambda: len(values[id(e.args[0])]))
    if isinstance(e, ast.Call) and e.func.value in _AGGREGATES and (
            len(e.args) == 1 or (e.args and e.func.value != "sum")):
        arguments = [values[id(a)] for a in e.args]
        return _aggregated(e.func.value, arguments[0] if len(arguments) == 1 else arguments)
    return None


def _folded_binary(op: str, left: Any, right: Any) -> Known | None:
    if op == "and":
        return Known(left and right)
    if op == "or":
        return Known(left or right)
    apply = BINARY_OPERATORS.get(op)
    if apply is None or (op in ("*", "%") and not (_is_number(left) and _is_number(right))):
        return None
    if op == "*" and _bits(left) + _bits(right) > _MAX_INT_BITS:
        return None
    return _applied(lambda: apply(left, right))


def _applied(compute: Callable[[], Any]) -> Known | None:
    """What `compute` gives, or None where it fails as the run would."""
    try:
        return Known(compute())
    except _FAILURES:
        return None


_AGGREGATES = {"sum": guard_sum, "min": guard_min, "max": guard_max}


def _aggregated(func: str, listed: Any) -> Known | None:
    """sum, min or max of a known list of numbers (of texts for min and max), as the run computes it."""
    if not isinstance(listed, list) or len(listed) > _MAX_EVALUATIONS:
        return None
    if not (all(_is_number(v) for v in listed) or (func != "sum" and all(isinstance(v, str) for v in listed))):
        return None
    try:
        return Known(_AGGREGATES[func](listed))
    except _FAILURES:
        return None


def _quantified(e: ast.Quantifier, listed: Any, items: dict[str, Any], budget: list[int]) -> Known | None:
    """all/any/count over a known list, item by item, stopping where the run stops (all at the first false
    test, any at the first true one): a test that would fail after that point does not make it unknown;
    sum/min/max of a value computed for each item."""
    if not isinstance(listed, list) or e.func.value not in (*ast.QUANTIFIERS, *ast.AGGREGATES):
        return None
    func = e.func.value
    if func in ast.AGGREGATES:
        elements = []
        for item in listed:
            element = known_value(e.element, {**items, e.var.value: item}, budget)
            if element is None:
                return None
            elements.append(element.value)
        return _aggregated(func, elements)
    count = 0
    for item in listed:
        test = known_value(e.element, {**items, e.var.value: item}, budget)
        if test is None:
            return None
        if func == "all" and not test.value:
            return Known(False)
        if func == "any" and test.value:
            return Known(True)
        count += bool(test.value)
    return Known(count if func == "count" else func == "all")


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float))


def _bits(value: object) -> int:
    return value.bit_length() if isinstance(value, int) else 0


def catch_all(t: ast.Transition) -> bool:
    return t.kind in ("always", "otherwise", "stay")


def immediate_dominators(successors: list[list[int]], root: int) -> tuple[list[int], list[int]]:
    """Each node's immediate dominator (the root's is itself, an unreachable node's -1), and the nodes
    reachable from `root` in depth-first preorder.

    Lengauer and Tarjan's algorithm with path compression, O(m log n): the simple iterative algorithm
    (Cooper, Harvey and Kennedy) walks up the dominator tree once per predecessor, which costs O(n^2) on
    a long chain of states whose many predecessors are spread along it — every state that may give up
    to one `failed` state, say."""
    n = len(successors)
    number, vertex, parent = _preorder(successors, root)
    count = len(vertex)
    preds: list[list[int]] = [[] for _ in range(count)]
    for v in range(count):
        for nxt in successors[vertex[v]]:
            preds[number[nxt]].append(v)
    semi = list(range(count))
    label = list(range(count))
    ancestor = [-1] * count
    dom = [0] * count
    bucket: list[list[int]] = [[] for _ in range(count)]

    def evaluate(v: int) -> int:
        if ancestor[v] == -1:
            return v
        path = []
        top = v
        while ancestor[ancestor[top]] != -1:  # compress the path above v, from the top down
            path.append(top)
            top = ancestor[top]
        for u in reversed(path):
            up = ancestor[u]
            if semi[label[up]] < semi[label[u]]:
                label[u] = label[up]
            ancestor[u] = ancestor[up]
        return label[v]

    for w in range(count - 1, 0, -1):
        for v in preds[w]:
            u = evaluate(v)
            semi[w] = min(semi[w], semi[u])
        bucket[semi[w]].append(w)
        p = parent[w]
        ancestor[w] = p
        for v in bucket[p]:
            u = evaluate(v)
            dom[v] = u if semi[u] < semi[v] else p
        bucket[p].clear()
    for w in range(1, count):
        if dom[w] != semi[w]:
            dom[w] = dom[dom[w]]
    idom = [-1] * n
    for w in range(count):
        idom[vertex[w]] = vertex[dom[w]] if w else root
    return idom, vertex


def _preorder(successors: list[list[int]], root: int) -> tuple[list[int], list[int], list[int]]:
    """A depth-first walk from `root`: each node's preorder number (-1 when unreachable), the node of each
    number, and the number of each numbered node's parent in the walk."""
    number = [-1] * len(successors)
    vertex: list[int] = []
    parent: list[int] = []
    stack = [(root, -1)]
    while stack:
        node, from_number = stack.pop()
        if number[node] != -1:
            continue
        number[node] = len(vertex)
        vertex.append(node)
        parent.append(from_number)
        stack.extend((nxt, number[node]) for nxt in reversed(successors[node]) if number[nxt] == -1)
    return number, vertex, parent


@dataclass(frozen=True)
class EntryFacts:
    """What every transition into a state shows, its guard being true: the paths (`review.output`, `tags`)
    surely not none, and which variants paths are. A state entered only by `when output is Approve -> s`
    from `review` reads `review.output` as an Approve."""

    present: frozenset[str] = frozenset()
    variants: tuple[tuple[str, frozenset[str]], ...] = ()

    def after_step(self, state: str, also: frozenset[str] = frozenset()) -> EntryFacts:
        """The facts once `state` (and the states in `also`, its branches) has run again: none about them."""
        gone = {state, *also}

        def kept(path: str) -> bool:
            return path.split(".", 1)[0] not in gone

        return EntryFacts(frozenset(p for p in self.present if kept(p)),
                          tuple((p, o) for p, o in self.variants if kept(p)))


class Flow:
    """States by index in source order (the first declaration of each name), their edges, and what can
    happen in a run."""

    def __init__(self, machine: ast.Machine) -> None:
        decls: list[ast.StateDecl] = machine.of(ast.StateDecl)
        self.states: list[ast.StateDecl] = []
        self.index: dict[str, int] = {}
        for decl in decls:
            if decl.name.value not in self.index:  # a duplicate declaration is SW2001's
                self.index[decl.name.value] = len(self.states)
                self.states.append(decl)
        n = len(self.states)
        self.final = [False] * n
        self.duplicated = [False] * n
        for decl in decls:
            i = self.index[decl.name.value]
            self.final[i] = self.final[i] or decl.final
            self.duplicated[i] = self.duplicated[i] or decl is not self.states[i]
        start = next((d for d in decls if d.start), None)
        self.start: int | None = self.index[start.name.value] if start is not None else None
        # id of a transition -> the transition that always fires before it
        self.shadowed_by: dict[int, ast.Transition] = {}
        # id of a guard transition -> the guard's value, when it reads nothing the run decides
        self.known: dict[int, Known] = {}
        self._find_dead_transitions()
        self._find_branches()
        self.unknown_target = [False] * n
        self.edges: list[list[Edge]] = [[] for _ in range(n)]
        candidates = self._candidate_edges()
        self.reachable = self._reach(candidates)
        forks = {id(t) for row in self.forks for _, t in row}
        for i, row in enumerate(candidates):
            for target, t, possible in row:
                self.edges[i].append(Edge(i, target, t, possible and self.reachable[i], id(t) in forks))
        self._successors = [[e.target for e in edges if e.fires] for edges in self.edges]
        # whether a reachable state names a transition target that does not exist (SW2002): where the run
        # goes from there is unknown, so what the checks would conclude from where it cannot go is not said
        self.goes_astray = any(unknown and reached for unknown, reached in zip(self.unknown_target, self.reachable))
        self._paths_left = _PATHS_SHOWN
        self._dominators()
        self._find_joined()

    # -- transitions that can never fire

    def _find_dead_transitions(self) -> None:
        visits_bounded = {d.name.value for d in self.states if any(isinstance(i, ast.Visits) for i in d.items)}
        for decl in self.states:
            if decl.final:
                continue  # SW3006 covers every transition there
            shadow: ast.Transition | None = None
            guards: dict[ast.Expr, ast.Transition] = {}  # earlier guards that fire whenever they are true
            for t in decl.transitions:
                if t.kind == "timeout":
                    continue  # fires when a person does not answer, whatever the order: never shadowed
                if shadow is not None:
                    self.shadowed_by[id(t)] = shadow
                    continue
                if t.kind == "guard" and t.guard is not None and t.guard in guards:
                    # guards read the same step's output: the earlier one is true exactly when this one is
                    self.shadowed_by[id(t)] = guards[t.guard]
                    continue
                always = catch_all(t)
                target = decl.name.value if t.kind == "stay" else (t.target.value if t.target else "")
                unbounded = t.max is None and target not in visits_bounded
                if t.kind == "guard" and t.guard is not None:
                    known = known_value(t.guard)
                    if known is not None and isinstance(known.value, bool):
                        self.known[id(t)] = known
                        always = known.value
                    if unbounded:
                        guards.setdefault(t.guard, t)
                if always and unbounded:
                    shadow = t

    def never_fires(self, t: ast.Transition) -> bool:
        """Whether `t` can never fire whatever the run does (its state aside: see Edge.fires)."""
        known = self.known.get(id(t))
        return id(t) in self.shadowed_by or (known is not None and known.value is False)

    def _candidate_edges(self) -> list[list[tuple[int, ast.Transition, bool]]]:
        rows: list[list[tuple[int, ast.Transition, bool]]] = []
        for i, decl in enumerate(self.states):
            # a parallel state starts each of its branches before its own transitions are tried
            row: list[tuple[int, ast.Transition, bool]] = [(entry, t, not self.final[i])
                                                           for entry, t in self.forks[i]]
            for t in decl.transitions:
                target = i if t.kind == "stay" else (self.index.get(t.target.value) if t.target else None)
                if target is None:
                    self.unknown_target[i] = True
                    continue
                row.append((target, t, not self.final[i] and not self.never_fires(t)))
            rows.append(row)
        return rows

    # -- parallel states and their branches

    def _find_branches(self) -> None:
        """Each parallel state's branches: the states a run can go through from each entry state along the
        transitions between branch states. Edges out of a branch, states in two branches and entries that
        are no branch state are kept for the fan-out checks (checks/fanout.py) to report."""
        n = len(self.states)
        # the synthesized edge from a parallel state to each entry: a run always takes it, before the
        # state's own transitions (and it carries no bound: the branch itself must be bounded)
        self.forks: list[list[tuple[int, ast.Transition]]] = [[] for _ in range(n)]
        self.branch_entries: dict[int, list[int]] = {}  # parallel state -> its entries, in written order
        self.entry_of: list[int | None] = [None] * n  # a branch state -> the entry of its branch
        self.parallel_of: list[int | None] = [None] * n  # a branch state -> its parallel state
        self.branch_conflicts: list[tuple[int, int, int]] = []  # (state, entry it is in, another entry)
        for i, decl in enumerate(self.states):
            written = next((item for item in decl.items if isinstance(item, ast.Parallel)), None)
            if written is None:
                continue
            entries: list[int] = []
            listed: set[int] = set()  # `entries` as a set: a parallel state may list thousands of branches
            for name in written.branches:
                entry = self.index.get(name.value)
                if entry is None or entry in listed:
                    continue
                entries.append(entry)
                listed.add(entry)
                self.forks[i].append((entry, ast.Transition("always", name, span=name.span)))
            self.branch_entries[i] = entries
        for parallel, entries in self.branch_entries.items():
            for entry in entries:
                if not self.states[entry].branch:
                    continue
                if self.entry_of[entry] is not None:
                    continue  # an entry listed by two parallel states: the fan-out checks report it
                self.entry_of[entry], self.parallel_of[entry] = entry, parallel
                queue = deque([entry])
                while queue:
                    for t in self.states[queue.popleft()].transitions:
                        target = self.index.get(t.target.value) if t.target is not None else None
                        if target is None or not self.states[target].branch:
                            continue
                        if self.entry_of[target] is None:
                            self.entry_of[target], self.parallel_of[target] = entry, parallel
                            queue.append(target)
                        elif self.entry_of[target] != entry:
                            self.branch_conflicts.append((target, self.entry_of[target], entry))  # type: ignore[arg-type]
        # entry -> the states of its branch, in source order: read per branch, so that no branch scans
        # every state of the machine
        self._branch_states: dict[int, list[int]] = {}
        for i, entry in enumerate(self.entry_of):
            if entry is not None:
                self._branch_states.setdefault(entry, []).append(i)

    def branch_states(self, entry: int) -> list[int]:
        """The states of an entry's branch, in source order (do not change the list)."""
        return self._branch_states.get(entry, [])

    def branch_ends(self, entry: int) -> list[int]:
        """The states of an entry's branch that can end it: those without transitions, in source order."""
        return [i for i in self.branch_states(entry) if not self.states[i].transitions]

    def _find_joined(self) -> None:
        """The branch states surely run once their parallel state has joined: with `join all`, those every
        path through the branch passes (its entry, and each state that dominates all its ends)."""
        self.joined: list[bool] = [False] * len(self.states)
        for parallel, entries in self.branch_entries.items():
            join = next((item for item in self.states[parallel].items if isinstance(item, ast.Join)), None)
            # only `join first` may leave branches unrun: a rule that is no rule at all is reported once
            # (SW3066) and read as `all`, so that it does not show again as branch outputs that may be none
            if join is not None and join.rule.value == "first":
                continue
            for entry in entries:
                if self.entry_of[entry] != entry:
                    continue
                # a state dominates every end when its interval in the dominator tree holds all of theirs:
                # it starts no later than the first of them and ends no earlier than the last
                ends = [e for e in self.branch_ends(entry) if self.reachable[e]]
                first = min((self._enter[e] for e in ends), default=len(self.states))
                last = max((self._leave[e] for e in ends), default=-1)
                for i in self.branch_states(entry):
                    if self.reachable[i]:
                        self.joined[i] = i == entry or (self._enter[i] <= first and last <= self._leave[i])

    def _dominates(self, a: int, b: int) -> bool:
        return a == b or (self._enter[a] <= self._enter[b] and self._leave[b] <= self._leave[a])

    def _reach(self, rows: list[list[tuple[int, ast.Transition, bool]]]) -> list[bool]:
        seen = [False] * len(self.states)
        if self.start is None:
            return seen
        seen[self.start] = True
        queue = deque([self.start])
        while queue:
            for target, _, possible in rows[queue.popleft()]:
                if possible and not seen[target]:
                    seen[target] = True
                    queue.append(target)
        return seen

    def successors(self, i: int) -> list[int]:
        """The states transitions that can fire lead to from state `i` (do not change the list)."""
        return self._successors[i]

    # -- dominance: which states every run has passed through before it enters a state

    def _dominators(self) -> None:
        """Immediate dominators over the transitions that can fire (immediate_dominators), then each
        state's interval in a walk of the dominator tree, so that "does a dominate b" is two comparisons."""
        n = len(self.states)
        self._enter = [-1] * n
        self._leave = [-1] * n
        if self.start is None:
            return
        idom, order = immediate_dominators(self._successors, self.start)
        children: list[list[int]] = [[] for _ in range(n)]
        for node in sorted(order):
            if node != self.start and idom[node] >= 0:
                children[idom[node]].append(node)
        clock = 0
        walk: list[tuple[int, int]] = [(self.start, 0)]
        self._enter[self.start] = clock
        while walk:
            node, k = walk[-1]
            if k < len(children[node]):
                walk[-1] = (node, k + 1)
                child = children[node][k]
                clock += 1
                self._enter[child] = clock
                walk.append((child, 0))
            else:
                walk.pop()
                self._leave[node] = clock
        self.idom = idom

    def runs_before(self, first: str, then: str) -> bool:
        """Whether every run that enters state `then` has run state `first` before (`first` strictly
        dominates `then`). True for a `then` no run enters; False for names that are no state."""
        a, b = self.index.get(first), self.index.get(then)
        if a is None or b is None:
            return False
        if not self.reachable[b]:
            return True
        if a == b or not self.reachable[a]:
            return False
        parallel = self.parallel_of[a]
        if self.joined[a] and parallel is not None and self.parallel_of[b] != parallel:
            # after the join of its parallel state: its guards, and every state that runs after it
            return parallel == b or self._dominates(parallel, b)
        return self._dominates(a, b)

    def path_avoiding(self, avoid: str, to: str) -> list[str] | None:
        """A shortest path of transitions that can fire from the start state to `to` that never enters
        `avoid` (`to` itself excluded), or None when there is none.

        For messages: each search walks the machine, so only the first _PATHS_SHOWN are made."""
        goal, skip = self.index.get(to), self.index.get(avoid)
        if self.start is None or goal is None or self.start == skip or self._paths_left <= 0:
            return None
        self._paths_left -= 1
        parent = {self.start: -1}
        queue = deque([self.start])
        while queue:
            node = queue.popleft()
            if node == goal:
                path = [node]
                while parent[path[-1]] != -1:
                    path.append(parent[path[-1]])
                return [self.states[i].name.value for i in reversed(path)]
            for nxt in self.successors(node):
                if nxt not in parent and (nxt != skip or nxt == goal):
                    parent[nxt] = node
                    queue.append(nxt)
        return None

    def later(self, marks: list[int]) -> list[int]:
        """For each state, the union (bitwise or) of `marks` over the states a run can enter after it has
        run (one transition later or more). One pass over the strongly connected components, sinks first,
        so the cost is linear in the machine times the width of the marks."""
        n = len(self.states)
        components = strongly_connected_components(n, self._successors)
        component_of = [0] * n
        for c, members in enumerate(components):
            for m in members:
                component_of[m] = c
        closure = [0] * len(components)  # marks of a component's states and of everything after them
        onward = [0] * len(components)  # marks of everything after a component's states
        for c, members in enumerate(components):  # every component comes after the ones it leads to
            after = 0
            cyclic = len(members) > 1 or members[0] in self._successors[members[0]]
            for m in members:
                for t in self._successors[m]:
                    if component_of[t] != c:
                        after |= closure[component_of[t]]
            own = 0
            for m in members:
                own |= marks[m]
            closure[c] = own | after
            onward[c] = closure[c] if cyclic else after
        return [onward[component_of[i]] for i in range(n)]

def strongly_connected_components(
    count: int, successors: Sequence[Sequence[int]], include: Sequence[bool] | None = None
) -> list[list[int]]:
    """Tarjan's algorithm with an explicit stack (no recursion), over nodes 0..count-1.

    Components come out in reverse topological order — each after every component it can reach — and
    each lists its members in ascending order. Nodes with `include[i]` false are left out.
    """
    return list(each_strongly_connected_component(count, successors, include))


def each_strongly_connected_component(
    count: int, successors: Sequence[Sequence[int]], include: Sequence[bool] | None = None
) -> Iterator[list[int]]:
    """strongly_connected_components, each component given as it is found rather than kept: in a large
    machine most states are a component of their own."""
    index = [-1] * count
    low = [0] * count
    on_stack = [False] * count
    stack: list[int] = []
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
                yield members
