"""Optimization passes over the IR. Each pass has a name and a pure, idempotent `run(ir) -> ir`.

`compile`, `run` and `dump --stage optimized` apply them in the order below; `-O0` turns all off and
`--no-pass NAME` one of them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .. import ir
from .dead_states import eliminate_dead_states
from .merge_equivalent import merge_equivalent_states


@dataclass(frozen=True)
class Pass:
    name: str
    summary: str
    run: Callable[[ir.Machine], ir.Machine]


PASSES: tuple[Pass, ...] = (
    Pass("dead-states", "remove states that no run can reach", eliminate_dead_states),
    Pass("merge-equivalent", "merge states that behave identically (partition refinement)",
         merge_equivalent_states),
)


class UnknownPass(ValueError):
    pass


def run_passes(machine: ir.Machine, *, level: int = 1, disabled: Sequence[str] = (),
               log: list[str] | None = None) -> ir.Machine:
    """Run the enabled passes in order; `log`, when given, receives one line per pass saying what it did.

    The machines a machine runs are optimized the same way, each once (a machine two callers run stays one
    machine), before it: a pass works within one machine, and a call is a state like any other to it."""
    known = {p.name for p in PASSES}
    unknown = [name for name in disabled if name not in known]
    if unknown:
        raise UnknownPass(f"unknown pass {unknown[0]!r}; passes are: {', '.join(sorted(known))}")
    if not machine.machines:
        return _run_passes(machine, level, disabled, log)
    done: dict[int, ir.Machine] = {}
    for m in ir.iter_machines(machine):
        machines = tuple((name, done[id(callee)]) for name, callee in m.machines)
        changed = any(new is not old for (_, new), (_, old) in zip(machines, m.machines))  # by identity: cheap
        own = dataclasses.replace(m, machines=machines) if changed else m
        done[id(m)] = _run_passes(own, level, disabled, log if m is machine else None)
    return done[id(machine)]


def _run_passes(machine: ir.Machine, level: int, disabled: Sequence[str], log: list[str] | None) -> ir.Machine:
    for p in PASSES:
        if level <= 0 or p.name in disabled:
            if log is not None:
                log.append(f"{p.name}: off")
            continue
        before = machine
        machine = p.run(machine)
        if log is not None:
            log.append(f"{p.name}: {describe_change(before, machine)}")
    return machine


def describe_change(before: ir.Machine, after: ir.Machine) -> str:
    """What a pass did to the states, in words: removed ones, and those that now share another's work."""
    kept = {s.name for s in after.states}
    removed = [f"'{s.name}'" for s in before.states if s.name not in kept]
    was = {s.name: s.shares for s in before.states}
    shared = [f"'{s.name}' shares the work of '{s.shares}'" for s in after.states
              if s.shares is not None and was.get(s.name) != s.shares]
    parts = []
    if removed:
        parts.append("removed " + ", ".join(removed))
    if shared:
        parts.append(", ".join(shared))
    return "; ".join(parts) or "no change"
