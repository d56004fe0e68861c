"""Dead-state elimination: states that no run can reach are dropped."""

from __future__ import annotations

import dataclasses
from collections import deque

from .. import ir


def reachable_states(machine: ir.Machine) -> set[str]:
    names = {s.name for s in machine.states}
    seen = {machine.start}
    queue = deque([machine.start])
    while queue:
        state = machine.state(queue.popleft())
        for t in state.transitions:
            if t.target in names and t.target not in seen:
                seen.add(t.target)
                queue.append(t.target)
    return seen


def eliminate_dead_states(machine: ir.Machine) -> ir.Machine:
    live = reachable_states(machine)
    if len(live) == len(machine.states):
        return machine
    states = tuple(s for s in machine.states if s.name in live)
    tests = tuple(_drop_dead_steps(t, live) for t in machine.tests)
    return dataclasses.replace(machine, states=states, tests=tests)


def _drop_dead_steps(test: ir.Test, live: set[str]) -> ir.Test:
    steps = tuple(step for step in test.steps if step.state in live)
    return test if steps == test.steps else dataclasses.replace(test, steps=steps)
