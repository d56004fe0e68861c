"""Benchmark: how the time to parse and check a machine grows with its number of states.

Generates machines of 100, 1,000 and 10,000 states with a realistic shape — agent states with templated
instructions, typed outputs, guards, bounded back-edges, natural-language conditions, listeners and test
blocks — and times `statewright.api.check_text` on each. Checking should be close to linear: the target
is a 10k/1k per-state ratio of at most 1.5.

    python bench/compile_scaling.py [--repeat N] [--sizes 100,1000,10000]

The last line is `RESULT {json}`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

from statewright import api

STATES_PER_AGENT = 10
STATES_PER_TYPE = 20


def generate_machine(n_states: int) -> str:
    """A valid machine of `n_states` working states (plus two final states) and a test per 100 states."""
    n_types = max(1, n_states // STATES_PER_TYPE)
    n_agents = max(2, n_states // STATES_PER_AGENT)
    out = [
        f"# generated: {n_states} working states",
        f"machine scaling_{n_states} {{",
        '    description "A long review pipeline, generated to measure how checking scales."',
        "",
        "    input topic: str",
        "    input threshold: int = 80",
        "",
        '    model "openai/gpt-4o-mini"',
        "    limits {",
        f"        steps {n_states * 4}",
        "    }",
        "",
    ]
    for t in range(n_types):
        out += [
            f"    type Report{t} {{",
            '        score: int "0-100"',
            '        fixes: list[str] "one per item"',
            '        level: "low" | "medium" | "high"',
            "        note: str?",
            "    }",
            "",
        ]
    for a in range(n_agents):
        out += [
            f"    agent worker{a} {{",
            f'        prompt "You are worker {a}. You write about {{{{ topic }}}} for careful readers."',
            "        memory last 6",
            "    }",
            "",
        ]
    for i in range(n_states):
        agent = f"worker{i % n_agents}"
        listener = f"worker{(i + 1) % n_agents}"
        nxt = f"s{i + 1}" if i + 1 < n_states else "done"
        typed = i % 2 == 0
        head = "start state" if i == 0 else "state"
        out.append(f"    {head} s{i} {{")
        out.append(f"        agent {agent}")
        if i == 0:
            out.append('        do "Write the first section about {{ topic }}."')
        elif (i - 1) % 2 == 0:
            out.append(f'        do "Continue about {{{{ topic }}}}. Apply these fixes: {{{{ s{i - 1}.output.fixes }}}}"')
        else:
            out.append(f'        do "Continue about {{{{ topic }}}} after this: {{{{ s{i - 1}.output }}}}"')
        if typed:
            out.append(f"        output Report{(i // 2) % n_types}")
        if i + 1 < n_states:  # the last state's listener would never run again (SW7009)
            out.append(f"        tell [{listener}]")
        if typed:
            out.append(f"        when output.score >= threshold and len(output.fixes) == 0 -> {nxt}")
            if i % 10 == 4:
                out.append(f'        when "the section contradicts an earlier one" -> s{i - 3} max 1')
            if i >= 2:
                out.append(f"        when output.level == \"high\" -> s{i - 2} max 2")
            out.append(f"        -> {nxt}")
        else:
            if i % 10 == 7:
                out.append('        when "the section is off topic" -> failed')
            out.append(f"        -> {nxt} max 3")
            out.append("        otherwise -> failed")
        out.append("    }")
        out.append("")
    out += [
        '    final state done {',
        '        result "{{ topic }}: finished"',
        "    }",
        "",
        "    final state failed",
        "",
    ]
    for t in range(max(1, n_states // 100)):
        out += [
            f'    test "first steps {t}" {{',
            "        input {",
            '            topic "FSMs"',
            "        }",
            "        reply s0 {",
            "            score 90",
            "            fixes []",
            '            level "low"',
            "            note none",
            "        }",
            '        reply s1 "text"',
            "        expect failure script",
            "    }",
            "",
        ]
    out[-1] = "}"
    return "\n".join(out) + "\n"


def time_check(text: str, repeat: int) -> tuple[list[float], list[float]]:
    """Wall-clock and CPU seconds of each run; CPU time is steadier on a busy machine."""
    wall, cpu = [], []
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        compilation = api.check_text(text, "generated.fsm")
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
        if not compilation.ok or compilation.diagnostics:
            problems = [f"{d.code} {d.message}" for d in compilation.diagnostics[:5]]
            raise SystemExit(f"the generated machine does not check clean: {problems}")
    return wall, cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per size (the median is reported)")
    parser.add_argument("--sizes", default="100,1000,10000")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]

    time_check(generate_machine(10), 1)  # warm-up: builds or loads the cached parse table, imports modules
    result: dict[str, float] = {}
    per_state: dict[int, float] = {}
    per_state_cpu: dict[int, float] = {}
    for n in sizes:
        text = generate_machine(n)
        repeat = args.repeat if n < 10_000 else max(3, args.repeat // 2)
        wall, cpu = time_check(text, repeat)
        median, median_cpu = statistics.median(wall), statistics.median(cpu)
        per_state[n] = median / n * 1e6
        per_state_cpu[n] = median_cpu / n * 1e6
        result[f"seconds_{n}"] = round(median, 4)
        result[f"per_state_us_{n}"] = round(per_state[n], 1)
        result[f"cpu_per_state_us_{n}"] = round(per_state_cpu[n], 1)
        print(f"{n:>6} states  {len(text):>10,} chars  median {median:8.3f} s wall "
              f"(min {min(wall):.3f}, max {max(wall):.3f}, n={repeat}), {median_cpu:.3f} s cpu  "
              f"{per_state[n]:8.1f} us/state wall  {per_state_cpu[n]:8.1f} us/state cpu")
    if 1000 in per_state and 10_000 in per_state:
        ratio = per_state[10_000] / per_state[1000]
        ratio_cpu = per_state_cpu[10_000] / per_state_cpu[1000]
        result["ratio_10k_1k"] = round(ratio, 3)
        result["cpu_ratio_10k_1k"] = round(ratio_cpu, 3)
        print(f"per-state ratio 10k/1k: {ratio:.2f} wall, {ratio_cpu:.2f} cpu (target <= 1.5)")
    print("RESULT " + json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
