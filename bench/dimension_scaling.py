"""Benchmark: how checking and compiling grow along the dimensions of a spec other than its states.

`compile_scaling.py` grows the number of states. A spec also grows in other directions, and a check that
compares each thing with every other thing along one of them is quadratic there while it stays linear in
states: a chain of types, the fields of one type, the branches of a parallel state, parallel states,
tests, the `elif`s of one template, the types of a variant output, mistakes against declared names, and
diagnostics on one long line. Each dimension is measured at n and 4n; the growth exponent
log(t(4n) / t(n)) / log(4) is 1 for a linear cost and 2 for a quadratic one. The target is at most 1.3
for each (what remains above 1 is the machine's caches). Times are CPU seconds of `api.check_text`, and
of `api.generate_runner` for a spec that checks, with the text rendering of the diagnostics for the
dimension that is about them.

    python bench/dimension_scaling.py [--repeat N] [--scale F]

The last line is `RESULT {json}`.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import statistics
import sys
import time
from collections.abc import Callable

from statewright import api
from statewright.diagnostics import render_text

HEAD = 'machine m {\n    input topic: str\n    agent a { prompt "p" }\n'
TAIL = "    final state done\n}\n"
TARGET = 1.3


def _start(do: str = "go {{ topic }}", output: str = "", then: str = "done") -> str:
    out = f"        output {output}\n" if output else ""
    return f'    start state s0 {{\n        agent a\n        do "{do}"\n{out}        -> {then}\n    }}\n'


def type_chain(n: int) -> str:
    """T0 holds a list of T1, which holds T2, ... T(n-1)."""
    types = "".join(f"    type T{i} {{ next: list[{f'T{i + 1}' if i + 1 < n else 'str'}] }}\n" for i in range(n))
    return HEAD + types + _start(output="T0") + TAIL


def wide_type(n: int) -> str:
    """One type of n fields, a template reading each and a test reply giving them all."""
    fields = "".join(f"        f{i}: int\n" for i in range(n))
    reads = " ".join(f"{{{{ s0.output.f{i} }}}}" for i in range(n))
    reply = "".join(f"            f{i} {i}\n" for i in range(n))
    return (HEAD + f"    type R {{\n{fields}    }}\n" + _start(output="R", then="s1")
            + f'    state s1 {{\n        agent a\n        do "{reads}"\n        -> done\n    }}\n' + TAIL[:-2]
            + f'    test "all" {{\n        input {{ topic "t" }}\n        reply s0 {{\n{reply}        }}\n'
            + '        reply s1 "ok"\n        expect final done\n    }\n}\n')


def parallel_branches(n: int) -> str:
    """One parallel state of n one-state branches."""
    branches = "".join(f'    branch state b{i} {{\n        agent a\n        do "r{i}"\n        output Ok\n    }}\n'
                       for i in range(n))
    return (HEAD + "    type Ok { ok: bool }\n" + _start(then="par")
            + f"    state par {{\n        parallel [{', '.join(f'b{i}' for i in range(n))}]\n        join all\n"
            + "        -> done\n    }\n" + branches + TAIL)


def parallel_states(n: int) -> str:
    """n parallel states in a row, of two branches each, each read by the next."""
    out = HEAD + "    type Ok { ok: bool }\n" + _start(then="p0")
    for i in range(n):
        after = f"p{i + 1}" if i + 1 < n else "done"
        out += f"    state p{i} {{\n        parallel [a{i}, b{i}]\n        join all\n        -> {after}\n    }}\n"
        read = f"{{{{ p{i - 1}.output }}}}" if i else "r"
        out += "".join(f'    branch state {b}{i} {{\n        agent a\n        do "{read}"\n        output Ok\n    }}\n'
                       for b in "ab")
    return out + TAIL


def tests(n: int) -> str:
    """n test blocks, each ending in one of n final states."""
    states = (HEAD + "    type R { pick: int }\n"
              + '    start state s0 {\n        agent a\n        do "go"\n        output R\n'
              + "".join(f"        when output.pick == {i} -> f{i}\n" for i in range(n)) + "        -> done\n    }\n"
              + "".join(f'    final state f{i} {{ result "{i}" }}\n' for i in range(n)))
    blocks = "".join(f'    test "t{i}" {{\n        input {{ topic "x" }}\n        reply s0 {{ pick {i} }}\n'
                     f'        expect final f{i}\n        expect result "{i}"\n    }}\n' for i in range(n))
    return states + TAIL[:-2] + blocks + "}\n"


def elif_chain(n: int) -> str:
    """One template of n `elif`s, each narrowing a read of a state that may not have run."""
    chain = "".join(f"{{% elif s1.output and s1.output.f == {i} %}}{{{{ s1.output.f }}}}" for i in range(n))
    return (HEAD + "    type R { f: int }\n"
            + '    start state s0 {\n        agent a\n        do "go"\n        output R\n        when output.f > 1 -> s1\n'
            + "        -> s2\n    }\n"
            + '    state s1 {\n        agent a\n        do "x"\n        output R\n        -> s2\n    }\n'
            + f'    state s2 {{\n        agent a\n        do "{{% if topic == \'a\' %}}a{chain}{{% endif %}}"\n'
            + "        -> done\n    }\n" + TAIL)


def variants(n: int) -> str:
    """An output that is one of n types."""
    types = "".join(f"    type V{i} {{ x{i}: int }}\n" for i in range(n))
    return HEAD + types + _start(output=" | ".join(f"V{i}" for i in range(n))) + TAIL


def misspellings(n: int) -> str:
    """n inputs, and a template misspelling each of them."""
    inputs = "".join(f"    input field_{i}: str\n" for i in range(n))
    reads = " ".join(f"{{{{ feild_{i} }}}}" for i in range(n))
    return HEAD + inputs + _start(do=f"{{{{ topic }}}} {reads}") + TAIL


def one_line_diagnostics(n: int) -> str:
    """n reads of a state that may not have run, on one source line: n diagnostics that show it."""
    reads = " ".join("{{ s1.output.f }}" for _ in range(n))
    return (HEAD + "    type R { f: int }\n"
            + '    start state s0 {\n        agent a\n        do "go"\n        output R\n        when output.f > 1 -> s1\n'
            + "        -> s2\n    }\n"
            + '    state s1 {\n        agent a\n        do "x"\n        output R\n        -> s2\n    }\n'
            + f'    state s2 {{\n        agent a\n        do "{reads}"\n        -> done\n    }}\n' + TAIL)


DIMENSIONS: dict[str, tuple[Callable[[int], str], int]] = {  # name -> (spec of size n, n)
    "type_chain": (type_chain, 1000),
    "wide_type": (wide_type, 1000),
    "parallel_branches": (parallel_branches, 500),
    "parallel_states": (parallel_states, 250),
    "tests": (tests, 250),
    "elif_chain": (elif_chain, 250),
    "variants": (variants, 500),
    "misspellings": (misspellings, 250),
    "one_line_diagnostics": (one_line_diagnostics, 1000),
}


def cpu_seconds(text: str) -> float:
    """CPU seconds to check `text`, then compile it when it checks or render its diagnostics when not."""
    gc.collect()
    start = time.process_time()
    compilation = api.check_text(text, "scaling.fsm")
    if compilation.ok:
        api.generate_runner(compilation)
    else:
        for diagnostic in compilation.diagnostics:
            render_text(diagnostic)
    return time.process_time() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per size (the median is reported)")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every dimension's base size")
    parser.add_argument("--only", default="", help="comma-separated dimensions to measure")
    args = parser.parse_args(argv)
    chosen = [d for d in args.only.split(",") if d] or list(DIMENSIONS)
    cpu_seconds(type_chain(5))  # warm-up: imports, the cached grammar, the runtime's index
    result: dict[str, object] = {}
    met = True
    for name in chosen:
        make, base = DIMENSIONS[name]
        n = max(2, int(base * args.scale))
        small, large = make(n), make(4 * n)
        t_small = statistics.median(cpu_seconds(small) for _ in range(args.repeat))
        t_large = statistics.median(cpu_seconds(large) for _ in range(args.repeat))
        exponent = math.log(t_large / t_small) / math.log(4)
        met = met and exponent <= TARGET
        result[f"{name}_cpu_s_{n}"] = round(t_small, 4)
        result[f"{name}_cpu_s_{4 * n}"] = round(t_large, 4)
        result[f"{name}_exponent"] = round(exponent, 3)
        print(f"{name:<22} n={n:<6} {t_small:7.3f} s   4n={4 * n:<6} {t_large:7.3f} s   "
              f"exponent {exponent:5.2f} (target <= {TARGET})")
    result["targets_met"] = met
    print("RESULT " + json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
