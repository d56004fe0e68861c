"""Benchmark: how the time of the equivalent-state merging pass grows with the number of states.

Times `statewright.compiler.passes.merge_equivalent.merge_equivalent_states` on IR machines of 1,000 and
10,000 states of two shapes:

- layered: layers of agent states whose instructions come from a small set and whose guarded and
  `otherwise` edges lead to pseudo-random states of the next layer, so most states have equivalent twins
  (the pass merges roughly nine in ten of them);
- chain: one long chain of identical-looking states ending in a final state, the case where a careless
  partition refinement splits one state off a block of n at a time and costs O(n^2).

The pass is O(m log n); the target is a 10k/1k per-state time ratio of at most 1.5 (the median of several
runs; the machine this runs on is shared, so the CPU time is reported beside the wall-clock time, and each
sample of a small machine repeats the pass until it has covered as many states as one 10k run; the sizes
take turns, so a busy spell on the machine slows both alike).

    python bench/merge_scaling.py [--repeat N] [--sizes 1000,10000]

The last line is `RESULT {json}`.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time

from statewright.compiler import ir
from statewright.compiler.passes.merge_equivalent import equivalence_classes, merge_equivalent_states
from statewright.grammar import ast

LAYER_WIDTH = 50
SAMPLE_STATES = 10_000
INSTRUCTIONS = ("Check the draft.", "Fix the draft.")
OK_GUARD = ast.BinaryOp("in", ast.Literal("ok"), ast.NameExpr("output"))


def _machine(name: str, states: list[ir.State]) -> ir.Machine:
    agents = (ir.Agent("worker", "You work.", ir.DEFAULT_MODEL, None, ()),)
    return ir.Machine(
        name=name, description="", inputs=(), model=ir.DEFAULT_MODEL, verifier_model=ir.DEFAULT_MODEL,
        temperature=None, limits=ir.Limits(steps=len(states) + 10), types=(), tools=(), agents=agents,
        states=tuple(states), start=states[0].name,
    )


def _agent_state(name: str, instruction: str, transitions: tuple[ir.Transition, ...]) -> ir.State:
    return ir.State(name=name, kind="agent", agent="worker", instruction=instruction, transitions=transitions)


def _finals() -> list[ir.State]:
    return [ir.State(name="done", kind="final"), ir.State(name="failed", kind="final")]


def layered_machine(n_states: int, seed: int = 7) -> ir.Machine:
    """`n_states` agent states in layers of LAYER_WIDTH, each with a guarded and an `otherwise` edge."""
    rng = random.Random(seed)
    layers = max(1, n_states // LAYER_WIDTH)
    names = [[f"s{layer}_{i}" for i in range(LAYER_WIDTH)] for layer in range(layers)]
    states = [_agent_state("start", "Plan.", (
        ir.Transition("guard", names[0][0], guard=OK_GUARD), ir.Transition("otherwise", names[0][1])))]
    for layer in range(layers):
        for i, name in enumerate(names[layer]):
            if layer + 1 < layers:
                # a few targets per layer: many states in a layer lead to the same places
                ok, other = names[layer + 1][rng.randrange(3)], names[layer + 1][3 + rng.randrange(3)]
            else:
                ok, other = "done", "failed"
            instruction = INSTRUCTIONS[i % 2]
            states.append(_agent_state(name, instruction, (
                ir.Transition("guard", ok, guard=OK_GUARD), ir.Transition("otherwise", other))))
    return _machine(f"layered_{n_states}", states + _finals())


def chain_machine(n_states: int) -> ir.Machine:
    """A chain s0 -> s1 -> ... -> done of states that differ only in where they lead."""
    states = [_agent_state(f"s{i}", INSTRUCTIONS[0], (ir.Transition("always", f"s{i + 1}" if i + 1 < n_states
                                                                      else "done"),))
              for i in range(n_states)]
    return _machine(f"chain_{n_states}", states + _finals())


SHAPES = {"layered": layered_machine, "chain": chain_machine}


def time_pass(machine: ir.Machine) -> tuple[float, float]:
    """Wall-clock and CPU seconds of one run of the pass, measured over as many runs as it takes to cover
    about SAMPLE_STATES states, so a small machine's sample is not a few milliseconds that one scheduler
    hiccup doubles."""
    runs = max(1, SAMPLE_STATES // len(machine.states))
    start, start_cpu = time.perf_counter(), time.process_time()
    for _ in range(runs):
        merge_equivalent_states(machine)
    return (time.perf_counter() - start) / runs, (time.process_time() - start_cpu) / runs


def time_sizes(machines: dict[int, ir.Machine], repeat: int) -> dict[int, tuple[list[float], list[float]]]:
    """`repeat` samples per machine, the sizes taking turns so that a busy spell slows them all alike."""
    samples: dict[int, tuple[list[float], list[float]]] = {n: ([], []) for n in machines}
    for _ in range(repeat):
        for n, machine in machines.items():
            wall, cpu = time_pass(machine)
            samples[n][0].append(wall)
            samples[n][1].append(cpu)
    return samples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=11, help="timed runs per size (the median is reported)")
    parser.add_argument("--sizes", default="1000,10000")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]

    time_pass(layered_machine(200))  # warm-up: imports, caches
    result: dict[str, float] = {}
    ratios: list[float] = []
    for shape, build in SHAPES.items():
        machines = {n: build(n) for n in sizes}
        samples = time_sizes(machines, args.repeat)
        per_state: dict[int, float] = {}
        per_state_cpu: dict[int, float] = {}
        for n, machine in machines.items():
            merged = sum(len(members) - 1 for members in equivalence_classes(machine).values())
            wall, cpu = samples[n]
            median, median_cpu = statistics.median(wall), statistics.median(cpu)
            states = len(machine.states)
            per_state[n] = median / states * 1e6
            per_state_cpu[n] = median_cpu / states * 1e6
            result[f"{shape}_seconds_{n}"] = round(median, 4)
            result[f"{shape}_per_state_us_{n}"] = round(per_state[n], 2)
            result[f"{shape}_merged_{n}"] = merged
            print(f"{shape:>8} {states:>6} states, {merged:>6} merged away: median {median:7.4f} s wall "
                  f"(min {min(wall):.4f}, max {max(wall):.4f}, n={args.repeat}), {median_cpu:.4f} s cpu  "
                  f"{per_state[n]:6.2f} us/state wall  {per_state_cpu[n]:6.2f} us/state cpu")
        if 1000 in per_state and 10_000 in per_state:
            ratio = per_state[10_000] / per_state[1000]
            ratio_cpu = per_state_cpu[10_000] / per_state_cpu[1000]
            ratios.append(ratio)
            result[f"{shape}_ratio_10k_1k"] = round(ratio, 3)
            result[f"{shape}_cpu_ratio_10k_1k"] = round(ratio_cpu, 3)
            print(f"{shape:>8} per-state ratio 10k/1k: {ratio:.2f} wall, {ratio_cpu:.2f} cpu (target <= 1.5)")
    if ratios:
        result["ratio_10k_1k"] = round(max(ratios), 3)
        print(f"worst per-state ratio 10k/1k: {max(ratios):.2f} (target <= 1.5)")
    print("RESULT " + json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
