"""The test block every import gets: one scripted reply per state on the shortest path to a final state.

With the verdicts that steer the run along that path, `statewright test` runs on an import at once; the
replies are placeholders to replace with real ones. A final state that stands for a failure of the original
(an AutoAgent ABORT) is chosen only when no other final state can be reached.
"""

from __future__ import annotations

import heapq

from .model import Machine, Shape, State, TestBlock, TestStep, TypeDecl

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
        if t.guard is not None:  # code decides: a route when the state's sample reply makes it hold
            if group:
                this_run.append(None)
                group = []
            if t.sample_fires:
                assert t.target is not None
                found.append((t.target, [*earlier_runs, list(this_run)]))
                break
            continue
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
    found = _shortest_hops(machine)
    if found is None:
        return None
    goal, hops = found
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
                    steps_list.append(_reply(machine, step))
            continue
        for verdicts in runs:
            if step_limit is not None and len(path) == step_limit:
                return TestBlock(f"the step limit ends the run before {goal}", inputs, steps_list, path, goal,
                                 failure="steps")
            path.append(name)
            steps_list.append(_reply(machine, name))
            steps_list.extend(TestStep("verdict", name, v) for v in verdicts)
    ending = machine.state(goal)
    if ending.agent is not None:  # a final state that does work answers too
        steps_list.append(_reply(machine, goal))
    return TestBlock(f"the shortest path reaches {goal}", inputs, steps_list, [*path, goal], goal,
                     failure="final" if ending.failing else None)


def _shortest_hops(machine: Machine) -> tuple[str, list[tuple[str, list[Verdicts]]]] | None:
    """The nearest final state (one that is not a failure of the original, if there is one) and the hops
    to it from the start state, each a state and the verdicts of its runs; None when no final state can be
    reached. Dijkstra's walk, a run of a state counting one step."""
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
    _, goal = min(reached, key=lambda r: (machine.state(r[1]).failing, r))
    hops: list[tuple[str, list[Verdicts]]] = []
    node = goal
    while (hop := came_from[node]) is not None:
        hops.append(hop)
        node = hop[0]
    hops.reverse()
    return goal, hops


def _reply(machine: Machine, name: str) -> TestStep:
    """A placeholder reply for state `name`: text, or a value of its output type."""
    shape = machine.state(name).output
    if shape is None:
        return TestStep("reply", name, f"A reply for {name}.")
    return TestStep("reply", name, None, sample_value(shape, {t.name: t for t in machine.types}))


def sample_value(shape: Shape, types: dict[str, TypeDecl], field: str = "", depth: int = 0) -> str:
    """A value of type `shape` as `.fsm` value text: the first of an enum, `true`, an empty list, `none`
    for what is optional, an object with a sample of each field. Its guards' `sample_fires` count on this."""
    from ..compiler.views.source_text import double_quoted

    kind = shape[0]
    if kind == "str":
        return double_quoted(f"An example {field.replace('_', ' ')}." if field else "An example.")
    if kind == "int":
        return "1"
    if kind == "float":
        return "1.0"
    if kind == "bool":
        return "true"
    if kind == "list" or (kind == "opt" and depth > 0):
        return "[]" if kind == "list" else "none"
    if kind == "opt":
        return sample_value(shape[1], types, field, depth)
    if kind == "enum":
        return double_quoted(shape[1][0])
    decl = types.get(shape[1])
    if decl is None or depth > 8:
        return "{}"
    parts = [f"{f.name} {sample_value(f.shape, types, f.name, depth + 1)}" for f in decl.fields]
    return "{ " + "  ".join(parts) + " }" if parts else "{}"
