"""`--repair`: the changes that turn a literal import into a machine that checks. Each is listed, never silent.

Every function takes the machine, changes it in place and returns one line per change for the header.
"""

from __future__ import annotations

from .model import Machine, State, Transition
from .names import Namespace


def _edge(state: State, t: Transition) -> str:
    if t.stay:
        return f"'{state.name}' -> itself (otherwise stay)"
    if t.condition is not None:
        return f"'{state.name}' -> '{t.target}' when \"{t.condition}\""
    if t.guard is not None:
        return f"'{state.name}' -> '{t.target}' when {t.guard}"
    return f"'{state.name}' -> '{t.target}'"


def drop_listener_repeats(machine: Machine) -> list[str]:
    """A listener named twice is told everything twice; a state's own agent already keeps its exchange."""
    changes: list[str] = []
    for state in machine.states:
        kept: list[str] = []
        origins = []
        for name, origin in zip(state.tell, state.tell_origins or [None] * len(state.tell)):
            if name == state.agent:
                changes.append(f"State '{state.name}': dropped its own agent '{name}' from its listeners.")
            elif name in kept:
                changes.append(f"State '{state.name}': dropped the repeated listener '{name}'.")
            else:
                kept.append(name)
                origins.append(origin)
        state.tell, state.tell_origins = kept, origins
    return changes


def order_unconditional_last(machine: Machine) -> list[str]:
    """An unconditional transition hides every transition after it (SW3007): move it after the conditions.

    Of several unconditional transitions, those after the first unbounded one can never fire: dropped.
    """
    changes: list[str] = []
    for state in machine.states:
        ts = state.transitions
        first = next((i for i, t in enumerate(ts) if t.unconditional and not t.stay and t.bound is None), None)
        if first is None or first == len(ts) - 1:
            continue
        conditional = [t for t in ts if not t.unconditional]
        stays = [t for t in ts if t.stay]
        catch_all = [t for t in ts if t.unconditional and not t.stay]
        cut = catch_all.index(ts[first]) + 1
        if any(not t.unconditional for t in ts[first + 1 :]):
            changes.append(f"State '{state.name}': moved {_edge(state, ts[first])} after the conditions it "
                           "hid.")
        for t in catch_all[cut:]:
            changes.append(f"State '{state.name}': dropped {_edge(state, t)}, which could never fire.")
        state.transitions = [*conditional, *stays, *catch_all[:cut]]
    return changes


def bound_back_edges(machine: Machine, bound: int) -> list[str]:
    """Bound every back edge of a depth-first walk from the start state (then from states it misses).

    Every cycle holds a back edge of such a walk, so afterwards every cycle is bounded (SW3008).
    """
    changes: list[str] = []
    names = [s.name for s in machine.states]
    done: set[str] = set()
    on_path: set[str] = set()
    start = machine.start
    roots = ([start.name] if start else []) + names

    def walk(name: str) -> None:
        # iterative, so that a long chain of states cannot exhaust Python's recursion limit
        stack: list[tuple[str, int]] = [(name, 0)]
        on_path.add(name)
        while stack:
            current, index = stack[-1]
            state = machine.state(current)
            if index == len(state.transitions):
                stack.pop()
                on_path.discard(current)
                done.add(current)
                continue
            stack[-1] = (current, index + 1)
            t = state.transitions[index]
            if t.stay or t.target not in names:
                continue
            target = t.target
            assert target is not None
            if target in on_path:
                if t.bound is None:
                    t.bound = bound
                    changes.append(f"Bounded the back edge {_edge(state, t)} with max {bound}.")
            elif target not in done:
                on_path.add(target)
                stack.append((target, 0))

    for root in roots:
        if root not in done:
            walk(root)
    return changes


def end_where_stuck(machine: Machine, names: Namespace) -> list[str]:
    """A state that can reach no final state (SW3005) gets a way out: a final state `stopped`.

    The original ends such a run with the last output once the agent runs out of turns; the new final state
    has no result, so the run ends with the last output too. The way out is added only where it can fire:
    after the state's conditions, never after an unbounded unconditional transition.
    """
    changes: list[str] = []
    stopped: State | None = None
    while True:
        stuck = _stuck_states(machine)
        added = False
        for state in stuck:
            if any(t.unconditional and not t.stay and t.bound is None for t in state.transitions):
                continue
            if stopped is None:
                stopped = State(names.claim("stopped", "state"), final=True)
                stopped.comments.append("--repair: where a state that could reach no final state ends")
                machine.states.append(stopped)
            state.transitions.append(Transition(stopped.name, otherwise=True))
            changes.append(f"State '{state.name}' could reach no final state: added 'otherwise -> "
                           f"{stopped.name}', ending the run with the last output as the original does.")
            added = True
        if not added:
            return changes


def _stuck_states(machine: Machine) -> list[State]:
    finals = {s.name for s in machine.states if s.final}
    can_finish: set[str] = finals | {s.name for s in machine.states if s.branch}  # a branch ends in its last state
    changed = True
    while changed:
        changed = False
        for state in machine.states:
            if state.name not in can_finish and any(n in can_finish for n in machine.successors(state)):
                can_finish.add(state.name)
                changed = True
    return [s for s in machine.states if s.name not in can_finish]
