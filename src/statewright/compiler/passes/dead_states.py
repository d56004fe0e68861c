"""Dead-state elimination: states that no run can reach are dropped."""

from __future__ import annotations

import dataclasses

from .. import ir
from .merge_equivalent import mentioned_names


def reachable_states(machine: ir.Machine) -> set[str]:
    """States some sequence of transitions leads to from the start state."""
    return _closure(machine.start, {s.name: s for s in machine.states}, reads=False)


def successor_names(state: ir.State) -> list[str]:
    """The states a run can go to from `state`: a parallel state's branch entries, then its transitions'
    targets."""
    branches = list(state.parallel.branches) if state.parallel is not None else []
    return [*branches, *(t.target for t in state.transitions)]


def live_states(machine: ir.Machine) -> set[str]:
    """Reachable states, and the states a live state reads by name, with what they lead to.

    Templates and guards see every state's name (`STATE.output` is none until the state runs), so a state
    that is read stays even when it can never run: dropping it would turn `none` into an undefined name.
    """
    by_name = {s.name: s for s in machine.states}
    reachable = _closure(machine.start, by_name, reads=False)
    if len(reachable) == len(by_name):
        return reachable  # every state is reached: what they read adds none (the common case)
    return _closure(machine.start, by_name, reads=True)


def _closure(start: str, by_name: dict[str, ir.State], *, reads: bool) -> set[str]:
    """The states a walk from `start` finds, following transitions and, with `reads`, the states each
    one reads by name (the set does not depend on the order of the walk)."""
    seen = {start}
    stack = [start]
    while stack:
        state = by_name[stack.pop()]
        for name in (*successor_names(state), *mentioned_names(state)) if reads else successor_names(state):
            if name not in seen and name in by_name:
                seen.add(name)
                stack.append(name)
    return seen


def eliminate_dead_states(machine: ir.Machine) -> ir.Machine:
    live = live_states(machine)
    if len(live) == len(machine.states):
        return machine
    states = tuple(s for s in machine.states if s.name in live)
    tests = tuple(_drop_dead_steps(t, live) for t in machine.tests)
    run = {s.run.machine for s in states if s.run is not None}  # a machine only a dead state ran goes too
    machines = tuple((name, m) for name, m in machine.machines if name in run)
    return dataclasses.replace(machine, states=states, tests=tests, machines=machines)


def _drop_dead_steps(test: ir.Test, live: set[str]) -> ir.Test:
    # a step for a called machine's state (`investigate[2]/draft`) goes with the state that runs it
    steps = tuple(step for step in test.steps if step.state.split("/")[0].split("[")[0] in live)
    # compared by count, not by value: replies hold plain Python values, and 1 == 1.0 == True
    return test if len(steps) == len(test.steps) else dataclasses.replace(test, steps=steps)
