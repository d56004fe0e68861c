"""The test block every import gets: one scripted reply per state on the shortest path to a final state.

A final state that stands for a failure of the original (an AutoAgent ABORT) is chosen only when no other
final state can be reached.

With the verdicts that steer the run along that path, `statewright test` runs on an import at once; the
replies are placeholders to replace with real ones.
"""

from __future__ import annotations

from .model import Machine, State, TestBlock, TestStep

Route = tuple[str, list[str | None]]  # the next state, and the verdicts that lead there


def first_visit_routes(state: State) -> list[Route]:
    """Where a run can go from `state` on its first visit, and which verifier answers send it there.

    Consecutive conditions are one verifier call: taking the k-th group's condition needs a 'none' for each
    group before it. An unconditional transition fires the first time evaluation reaches it, so nothing
    after it is a first-visit route.
    """
    routes: list[Route] = []
    before: list[str | None] = []  # the answers that pass the condition groups already seen
    in_group = False
    for t in state.transitions:
        if t.stay:
            continue
        if t.condition is not None:
            assert t.target is not None
            routes.append((t.target, [*before, t.condition]))
            in_group = True
            continue
        if in_group:
            before.append(None)
            in_group = False
        assert t.target is not None
        routes.append((t.target, list(before)))
        break
    return routes


def shortest_path_test(machine: Machine, inputs: dict[str, str], step_limit: int | None = None
                       ) -> TestBlock | None:
    """A test that follows the shortest path from the start state to a final state (None: there is none).

    A path longer than `step_limit` ends in the step limit, and the test says so.
    """
    start = machine.start
    if start is None:
        return None
    names = {s.name for s in machine.states}
    came_from: dict[str, tuple[str, list[str | None]] | None] = {start.name: None}
    queue = [start.name]
    reached: list[str] = []  # final states, nearest first
    while queue:
        name = queue.pop(0)
        state = machine.state(name)
        if state.final:
            reached.append(name)
            continue
        for target, verdicts in first_visit_routes(state):
            if target in names and target not in came_from:
                came_from[target] = (name, verdicts)
                queue.append(target)
    if not reached:
        return None
    # the nearest final state that is not a failure of the original, if there is one
    goal = min(reached, key=lambda n: (machine.state(n).failing, reached.index(n)))
    path = [goal]
    hops: list[tuple[str, list[str | None]]] = []
    while (hop := came_from[path[-1]]) is not None:
        path.append(hop[0])
        hops.append(hop)
    path.reverse()
    hops.reverse()
    steps: list[TestStep] = []
    for name, verdicts in hops:
        steps.append(TestStep("reply", name, f"A reply for {name}."))
        steps.extend(TestStep("verdict", name, v) for v in verdicts)
    if step_limit is not None and len(hops) > step_limit:
        kept = path[:step_limit]
        steps = [s for s in steps if s.state in kept]
        return TestBlock(f"the step limit ends the run before {goal}", inputs, steps, kept, goal,
                         failure="steps")
    return TestBlock(f"the shortest path reaches {goal}", inputs, steps, path, goal)
