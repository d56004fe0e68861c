"""Equivalent-state merging: states that do the same work and move the same way become one.

Two states are equivalent when they have the same agent, instruction, output type, listeners, tool call
and retries, and the same transitions in the same order (kind, guard, condition) leading to equivalent
states. The coarsest such partition is computed by Hopcroft-style partition refinement in
O(m log n) for m transitions and n states; each block keeps its first state's name (the start state's,
if it is in the block) and the union of the merged states' origins, so diagnostics and source maps still
point at the source.

Only merges that cannot change behaviour are made. A state is left alone when
- it is final (its name is the run's observable outcome),
- it has `visits N` or an edge with `max N` (merging would pool the counters),
- its name is read anywhere (`STATE.output`, `visits(STATE)`, a template mentioning it).
"""

from __future__ import annotations

import dataclasses
import re
from collections import defaultdict, deque

from ...grammar import ast
from .. import ir


def merge_equivalent_states(machine: ir.Machine) -> ir.Machine:
    groups = equivalence_classes(machine)
    merged = {name: rep for rep, members in groups.items() for name in members if name != rep}
    if not merged:
        return machine
    return _rewrite(machine, groups, merged)


def equivalence_classes(machine: ir.Machine) -> dict[str, list[str]]:
    """Representative name -> the names of all states in its class, for classes of two or more."""
    states = machine.states
    index = {s.name: i for i, s in enumerate(states)}
    n = len(states)
    referenced = _referenced_state_names(machine)

    # initial partition: by everything a state does, except where its edges lead
    signature_block: dict[object, int] = {}
    block_of = [0] * n
    for i, s in enumerate(states):
        sig: object
        if _mergeable(s, referenced):
            sig = ("mergeable", _signature(s))
        else:
            sig = ("alone", s.name)
        block_of[i] = signature_block.setdefault(sig, len(signature_block))
    blocks: list[list[int]] = [[] for _ in signature_block]
    for i in range(n):
        blocks[block_of[i]].append(i)

    # the alphabet: (position, label) of each transition; inverse edges per symbol
    symbol_ids: dict[object, int] = {}
    inverse: list[dict[int, list[int]]] = []
    incoming: list[list[tuple[int, int]]] = [[] for _ in range(n)]  # target -> [(symbol, source)]
    for i, s in enumerate(states):
        for pos, t in enumerate(s.transitions):
            target = index.get(t.target)
            if target is None:
                continue
            sym = symbol_ids.setdefault((pos, _edge_label(t)), len(symbol_ids))
            if sym == len(inverse):
                inverse.append({})
            inverse[sym].setdefault(target, []).append(i)
            incoming[target].append((sym, i))

    work: deque[tuple[int, int]] = deque()
    queued: set[tuple[int, int]] = set()

    def enqueue(block: int, sym: int) -> None:
        if (block, sym) not in queued:
            queued.add((block, sym))
            work.append((block, sym))

    for target in range(n):
        for sym, _ in incoming[target]:
            enqueue(block_of[target], sym)

    while work:
        splitter = work.popleft()
        queued.discard(splitter)
        block, sym = splitter
        preimage: list[int] = []
        for target in blocks[block]:
            preimage.extend(inverse[sym].get(target, ()))
        touched: dict[int, list[int]] = defaultdict(list)
        for src in preimage:
            touched[block_of[src]].append(src)
        for y, inside in sorted(touched.items()):
            inside_set = set(inside)
            if len(inside_set) == len(blocks[y]):
                continue
            outside = [s for s in blocks[y] if s not in inside_set]
            inside_sorted = sorted(inside_set)
            smaller, larger = (inside_sorted, outside) if len(inside_sorted) <= len(outside) else (outside, inside_sorted)
            z = len(blocks)
            blocks.append(smaller)
            blocks[y] = larger
            for s in smaller:
                block_of[s] = z
            # Hopcroft: the new (smaller) block becomes a splitter for every symbol entering it
            for s in smaller:
                for in_sym, _ in incoming[s]:
                    enqueue(z, in_sym)

    result: dict[str, list[str]] = {}
    for members in blocks:
        if len(members) < 2:
            continue
        ordered = sorted(members)
        names = [states[i].name for i in ordered]
        rep = machine.start if machine.start in names else names[0]
        result[rep] = names
    return dict(sorted(result.items(), key=lambda kv: index[kv[0]]))


def _mergeable(state: ir.State, referenced: set[str]) -> bool:
    return (
        state.kind != "final"
        and state.visits is None
        and all(t.max is None for t in state.transitions)
        and state.name not in referenced
    )


def _signature(state: ir.State) -> object:
    return (state.kind, state.agent, state.instruction, state.output, state.tell, state.retries, state.call,
            state.result, len(state.transitions))


def _edge_label(t: ir.Transition) -> object:
    return (t.kind, t.guard, t.condition, t.max)


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _referenced_state_names(machine: ir.Machine) -> set[str]:
    """Every state name that a guard, tool-call argument or template mentions."""
    names = {s.name for s in machine.states}
    found: set[str] = set()
    texts = [a.prompt for a in machine.agents]
    for s in machine.states:
        texts.extend(x for x in (s.instruction, s.result) if x)
        for t in s.transitions:
            if t.guard is not None:
                found |= _expr_names(t.guard) & names
        if s.call is not None:
            for arg in s.call.args:
                found |= _expr_names(arg.value) & names
    for text in texts:
        found |= set(_WORD.findall(text)) & names
    return found


def _expr_names(expr: ast.Expr) -> set[str]:
    out: set[str] = set()
    stack: list[object] = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.NameExpr):
            out.add(node.name)
        elif isinstance(node, ast.Attribute):
            stack.append(node.value)
        elif isinstance(node, ast.Index):
            stack.extend((node.value, node.index))
        elif isinstance(node, ast.Call):
            stack.extend(node.args)
        elif isinstance(node, ast.UnaryOp):
            stack.append(node.operand)
        elif isinstance(node, ast.BinaryOp):
            stack.extend((node.left, node.right))
        elif isinstance(node, ast.ListExpr):
            stack.extend(node.items)
    return out


def _rewrite(machine: ir.Machine, groups: dict[str, list[str]], merged: dict[str, str]) -> ir.Machine:
    by_name = {s.name: s for s in machine.states}
    states = []
    for s in machine.states:
        if s.name in merged:
            continue
        transitions = tuple(
            dataclasses.replace(t, target=merged.get(t.target, t.target)) for t in s.transitions
        )
        origins = s.origins or ((s.origin,) if s.origin is not None else ())
        for member in groups.get(s.name, ()):
            if member != s.name:
                other = by_name[member]
                origins += other.origins or ((other.origin,) if other.origin is not None else ())
        states.append(dataclasses.replace(s, transitions=transitions, origins=origins))
    tests = tuple(_rename_in_test(t, merged) for t in machine.tests)
    return dataclasses.replace(machine, states=tuple(states), tests=tests)


def _rename_in_test(test: ir.Test, merged: dict[str, str]) -> ir.Test:
    steps = tuple(
        dataclasses.replace(step, state=merged.get(step.state, step.state)) for step in test.steps
    )
    path = tuple(merged.get(s, s) for s in test.expect_path) if test.expect_path is not None else None
    return dataclasses.replace(test, steps=steps, expect_path=path)
