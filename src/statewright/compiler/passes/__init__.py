"""Optimization passes over the IR. Each pass has a name and a pure, idempotent `run(ir) -> ir`.

`compile`, `run` and `dump --stage optimized` apply them in the order below; `-O0` turns all off and
`--no-pass NAME` one of them.
"""

from __future__ import annotations

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


def run_passes(machine: ir.Machine, *, level: int = 1, disabled: Sequence[str] = ()) -> ir.Machine:
    known = {p.name for p in PASSES}
    unknown = [name for name in disabled if name not in known]
    if unknown:
        raise UnknownPass(f"unknown pass {unknown[0]!r}; passes are: {', '.join(sorted(known))}")
    if level <= 0:
        return machine
    for p in PASSES:
        if p.name not in disabled:
            machine = p.run(machine)
    return machine
