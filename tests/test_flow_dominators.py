"""Dominators of the state graph: Lengauer and Tarjan's algorithm agrees with the definition on any graph."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from statewright.compiler.checks.flow import immediate_dominators


def reachable(successors: list[list[int]], root: int, removed: int = -1) -> set[int]:
    seen = {root} if root != removed else set()
    stack = list(seen)
    while stack:
        for nxt in successors[stack.pop()]:
            if nxt != removed and nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return seen


def dominators_by_definition(successors: list[list[int]], root: int) -> list[int]:
    """d dominates v when every path from the root to v passes d; the immediate one is the closest."""
    n = len(successors)
    reach = reachable(successors, root)
    strict = {v: {d for d in reach if d != v and v not in reachable(successors, root, d)} for v in reach}
    idom = [-1] * n
    for v in reach:
        if v == root:
            idom[v] = root
        else:  # the strict dominator that every other strict dominator of v dominates
            idom[v] = next(d for d in strict[v] if strict[v] - {d} <= strict[d])
    return idom


graphs = st.integers(min_value=1, max_value=12).flatmap(lambda n: st.tuples(
    st.lists(st.lists(st.integers(0, n - 1), max_size=4), min_size=n, max_size=n), st.integers(0, n - 1)))


@settings(max_examples=400, deadline=None)
@given(graphs)
def test_immediate_dominators_agree_with_the_definition(graph: tuple[list[list[int]], int]) -> None:
    successors, root = graph
    idom, order = immediate_dominators(successors, root)
    assert idom == dominators_by_definition(successors, root)
    assert order[0] == root and set(order) == reachable(successors, root) and len(order) == len(set(order))


def test_a_long_chain_with_a_shared_exit_takes_linear_time() -> None:
    """The case that made the simple algorithm quadratic: every state of a chain may leave to one state."""
    import time

    def chain(n: int) -> list[list[int]]:
        return [[i + 1, n] if i + 1 < n else [n] for i in range(n)] + [[]]

    start = time.process_time()
    idom, _ = immediate_dominators(chain(20_000), 0)
    assert idom[20_000] == 0 and idom[19_999] == 19_998
    assert time.process_time() - start < 2.0
