"""The test block every import gets: one scripted reply per state on the shortest path to a final state.

With the verdicts that steer the run along that path, `statewright test` runs on an import at once; the
replies are placeholders to replace with real ones. A final state that stands for a failure of the original
(an AutoAgent ABORT) is chosen only when no other final state can be reached.
"""

from __future__ import annotations

import heapq

from .model import Machine, State, TestBlock, TestStep

Verdicts = list[str | None]  # the verifier's answers during one run of a state (None: 'none')
Route = tuple[str, list[Verdicts]]  # the next state, and the verdicts of each run of this state on the way


def routes(state: State) -> list[Route]:
    """Where a run can go from `state`, entering it once, and which verifier answers send it there.

    Consecutive conditions are one verifier call: taking the k-th group's condition needs a 'none' for each
    group before it. An unconditional transition fires the first time evaluation reaches it, so nothing
    after it is a route. `otherwise stay max N` runs the state N more times before evaluation gets past it,
    each run answering 'none' to the conditions before it.
    """
    found: list[Route] = []
    earlier_runs: list[Verdicts] = []
    this_run: Verdicts = []
    group: list[str] = []  # the conditions of the group being read
    for t in state.transitions:
        if t.condition is not None:
            assert t.target is not None
            if t.condition not in group:  # a verdict names a condition by its text: the first one wins
                found.append((t.target, [*earlier_runs, [*this_run, t.condition]]))
            group.append(t.condition)
            continue
        if group:
            this_run.append(None)
            group = []
        if t.stay:
            if t.bound is None:
                break
            earlier_runs += [list(this_run) for _ in range(t.bound)]
            continue
        assert t.target is not None
        found.append((t.target, [*earlier_runs, list(this_run)]))
        break
    return found


def shortest_path_test(machine: Machine, inputs: dict[str, str], step_limit: int | None = None
                       ) -> TestBlock | None:
    """A test that follows the shortest path (in steps) from the start state to a final state, or None
    when no final state can be reached. A path longer than `step_limit` ends in the step limit, and the
    test says so."""
    start = machine.start
    if start is None:
        return None
    names = {s.name for s in machine.states}
    order = {s.name: i for i, s in enumerate(machine.states)}
    came_from: dict[str, tuple[str, list[Verdicts]] | None] = {start.name: None}
    steps_to: dict[str, int] = {start.name: 0}
    queue = [(0, order[start.name], start.name)]
    reached: list[tuple[int, str]] = []
    done: set[str] = set()
    while queue:
        steps, _, name = heapq.heappop(queue)
        if name in done:
            continue
        done.add(name)
        state = machine.state(name)
        if state.final:
            reached.append((steps, name))
            continue
        for target, runs in routes(state):
            cost = steps + len(runs)
            if target in names and target not in done and cost < steps_to.get(target, cost + 1):
                steps_to[target] = cost
                came_from[target] = (name, runs)
                heapq.heappush(queue, (cost, order[target], target))
    if not reached:
        return None
    # the nearest final state that is not a failure of the original, if there is one
    _, goal = min(reached, key=lambda r: (machine.state(r[1]).failing, r))
    hops: list[tuple[str, list[Verdicts]]] = []
    node = goal
    while (hop := came_from[node]) is not None:
        hops.append(hop)
        node = hop[0]
    hops.reverse()
    path: list[str] = []
    steps_list: list[TestStep] = []
    for name, runs in hops:
        branches = machine.state(name).parallel
        if branches:  # a parallel state takes no reply: each of its branches' states does, in written order
            for step in [name, *branches]:
                if step_limit is not None and len(path) == step_limit:
                    return TestBlock(f"the step limit ends the run before {goal}", inputs, steps_list, path,
                                     goal, failure="steps")
                path.append(step)
                if step != name:
                    steps_list.append(TestStep("reply", step, f"A reply for {step}."))
            continue
        for verdicts in runs:
            if step_limit is not None and len(path) == step_limit:
                return TestBlock(f"the step limit ends the run before {goal}", inputs, steps_list, path, goal,
                                 failure="steps")
            path.append(name)
            steps_list.append(TestStep("reply", name, f"A reply for {name}."))
            steps_list.extend(TestStep("verdict", name, v) for v in verdicts)
    ending = machine.state(goal)
    if ending.agent is not None:  # a final state that does work answers too
        steps_list.append(TestStep("reply", goal, f"A reply for {goal}."))
    return TestBlock(f"the shortest path reaches {goal}", inputs, steps_list, [*path, goal], goal,
                     failure="final" if ending.failing else None)
