"""Benchmark: the size of a generated runner against the size of its source, for wide fan-out.

A parallel state with N branches, each a state of its own (`wide`), and the same with an output type of
its own per branch (`typed`), compiled with `statewright compile` as a user compiles them: the runner
module in its default form (beside the `statewright_runtime/` package, which is the same for every
runner and not counted) and with `--standalone` (the runtime inside the module, counted). Target: the
default runner at most 3 times its source's size at the largest N.

    python bench/runner_size.py [--sizes 1000,5000]

The last line is `RESULT {json}`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

TARGET = 3.0


def wide(n: int, typed: bool) -> str:
    names = [f"b{i}" for i in range(n)]
    lines = ["machine wide {", '    model "openai/gpt-4o-mini"', '    agent a { prompt "You check one thing." }']
    if typed:
        for name in names:
            lines += [f"    type R{name} {{", "        ok: bool", "        note: str", "    }"]
    lines += ["    start state fan {", f"        parallel [{', '.join(names)}]", "        join all", "        -> done",
              "    }"]
    for name in names:
        lines += [f"    branch state {name} {{", "        agent a", f'        do "Check aspect {name} of the plan."']
        if typed:
            lines.append(f"        output R{name}")
        lines.append("    }")
    lines += ["    final state done", "}"]
    return "\n".join(lines) + "\n"


def runner_size(source: Path, standalone: bool) -> int:
    out = source.with_name(source.stem + ("_standalone" if standalone else "") + "_runner.py")
    done = subprocess.run([sys.executable, "-m", "statewright", "compile", str(source), "-o", str(out), "--force",
                           *(["--standalone"] if standalone else [])], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"compile {source.name} exited {done.returncode}: {done.stderr[-500:]}")
    return out.stat().st_size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,5000")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    result: dict[str, object] = {"sizes": sizes, "target": TARGET}
    with tempfile.TemporaryDirectory() as tmp:
        for shape in ("wide", "typed"):
            for n in sizes:
                source = Path(tmp) / f"{shape}{n}.fsm"
                source.write_text(wide(n, shape == "typed"), encoding="utf-8")
                size = source.stat().st_size
                default, standalone = runner_size(source, False), runner_size(source, True)
                result[f"{shape}_{n}_source_bytes"] = size
                result[f"{shape}_{n}_ratio"] = round(default / size, 2)
                result[f"{shape}_{n}_standalone_ratio"] = round(standalone / size, 2)
                print(f"{shape:6} {n:6} branches: source {size:>10,} B, runner {default:>10,} B "
                      f"({default / size:.2f}x), standalone {standalone:>10,} B ({standalone / size:.2f}x)")
    largest = max(sizes)
    met = all(float(result[f"{shape}_{largest}_ratio"]) <= TARGET for shape in ("wide", "typed"))  # type: ignore[arg-type]
    result["target_met"] = met
    print(f"runner at most {TARGET:g}x its source at {largest} branches: {'met' if met else 'NOT met'}")
    print("RESULT " + json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
