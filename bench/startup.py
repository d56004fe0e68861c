"""Benchmark: start-up time of `statewright check`, measured against the floor it cannot go below.

The floor is what any Lark-based checker pays before it reads a file: the interpreter, `import lark` and
loading the grammar from Lark's cache (no statewright code at all). `check` is timed on the content
pipeline example; the target is `check` at most 1.5 times the floor. `python -c pass` is timed too, and a
generated runner's `--help` against its own floor, the interpreter importing the runner's module (target:
at most 1.5 times that).

Every command runs several times, interleaved round by round so that all of them see the same load; the
medians are reported, and each ratio is the median of the round-by-round ratios (steadier than a ratio of
medians on a busy machine). Children may write bytecode even where PYTHONDONTWRITEBYTECODE is set: an
installed package always has its bytecode, so the warm-up run writes it for a checkout too. The benchmark
also reports whether `check` imported litellm or pydantic (it should import neither).

    python bench/startup.py [--runs N]

The last line is `RESULT {json}`. To time another command, add it to `timed_commands` (and a label to
LABELS; for a ratio, a line to RATIOS).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "content_pipeline.fsm"
GRAMMAR = ROOT / "src" / "statewright" / "grammar" / "statewright.lark"

# The floor: Lark and the grammar loaded from Lark's cache, with the options statewright's parser uses.
_FLOOR = """
import sys
from lark import Lark
with open(sys.argv[1], encoding="utf-8") as f:
    grammar = f.read()
Lark(grammar, parser="lalr", lexer="contextual", propagate_positions=False, maybe_placeholders=False,
     cache=sys.argv[2])
"""

# The same floor ended as statewright's short commands end (see cli.console_main): without tearing the
# interpreter down. Reported for comparison only; the target is against the floor as any script ends.
_FLOOR_HARD_EXIT = _FLOOR + "import os\nos._exit(0)\n"

# Runs `statewright check` (or `test`) in-process and reports which heavy modules it loaded.
_IMPORT_PROBE = """
import sys
from statewright.cli import main
status = main([sys.argv[2], sys.argv[1]])
print(int("litellm" in sys.modules), int("pydantic" in sys.modules), status)
"""

# (command, the command it is measured against, the largest ratio that meets the target or None)
RATIOS = [("check", "floor", 1.5), ("check", "floor_hard_exit", None), ("test", "check", 4.0),
          ("runner_help", "runner_import", 1.5)]

LABELS = {
    "baseline": "python -c pass",
    "floor": "floor: python + lark + cached grammar",
    "floor_hard_exit": "the floor, ended with os._exit",
    "check": "statewright check",
    "check_module": "python -m statewright check",
    "test": "statewright test (the same file)",
    "runner_help": "python runner.py --help",
    "runner_import": "python -c 'import runner' (its floor)",
}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(cmd: Sequence[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """Wall-clock and CPU seconds of one run; CPU time is steadier when the machine is busy."""
    start, start_cpu = time.perf_counter(), _children_cpu()
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, check=False, env=env)
    elapsed, cpu = time.perf_counter() - start, _children_cpu() - start_cpu
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {done.returncode}:\n{done.stderr.decode(errors='replace')}")
    return elapsed, cpu


def time_rounds(commands: dict[str, list[str]], runs: int, cwd: Path, env: dict[str, str]
                ) -> dict[str, list[tuple[float, float]]]:
    """(wall, cpu) of each command in each round; every round runs every command once."""
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for cmd in commands.values():  # one untimed run each: bytecode, the file cache, Lark's cache
        _run(cmd, cwd, env)
    for _ in range(runs):
        for name, cmd in commands.items():
            samples[name].append(_run(cmd, cwd, env))
    return samples


def console_script() -> str | None:
    """The `statewright` script of this interpreter's environment, or the one on PATH."""
    beside = Path(sys.executable).parent / "statewright"
    if beside.is_file():
        return str(beside)
    return shutil.which("statewright")


def compile_runner(directory: Path) -> Path | None:
    """Generate the example's runner; None when this build of statewright cannot compile yet."""
    runner = directory / "content_pipeline_runner.py"
    done = subprocess.run([sys.executable, "-m", "statewright", "compile", str(EXAMPLE), "-o", str(runner)],
                          cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode != 0 or not runner.is_file():
        print(f"runner not measured: compile exited {done.returncode}: {done.stderr.strip()[-300:]}")
        return None
    return runner


def timed_commands(tmp: Path) -> dict[str, list[str]]:
    """Every command the benchmark times, by name."""
    commands = {
        "baseline": [sys.executable, "-c", "pass"],
        "floor": [sys.executable, "-c", _FLOOR, str(GRAMMAR), str(tmp / "floor-grammar.cache")],
        "floor_hard_exit": [sys.executable, "-c", _FLOOR_HARD_EXIT, str(GRAMMAR), str(tmp / "floor-grammar.cache")],
        "check_module": [sys.executable, "-m", "statewright", "check", str(EXAMPLE)],
    }
    script = console_script()  # what a user types; without one, `python -m` stands in for it
    commands["check"] = [script, "check", str(EXAMPLE)] if script else commands.pop("check_module")
    # a spec's own tests: scripted replies are answered in process, so litellm is never imported
    commands["test"] = [script, "test", str(EXAMPLE)] if script else [sys.executable, "-m", "statewright", "test",
                                                                       str(EXAMPLE)]
    runner = compile_runner(tmp)
    if runner is not None:
        commands["runner_help"] = [sys.executable, str(runner), "--help"]
        # the floor a runner's --help is held to: the interpreter and the import of the runner's own module
        # (with the runtime package beside it), doing nothing else
        code = f"import sys; sys.path.insert(0, {str(tmp)!r}); import {runner.stem}"
        commands["runner_import"] = [sys.executable, "-c", code]
    return commands


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args(argv)

    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    with tempfile.TemporaryDirectory() as tmp:
        commands = timed_commands(Path(tmp))
        samples = time_rounds(commands, args.runs, ROOT, env)

    result: dict[str, object] = {"runs": args.runs}
    for command in ("check", "test"):
        probe = subprocess.run([sys.executable, "-c", _IMPORT_PROBE, str(EXAMPLE), command], cwd=ROOT,
                               capture_output=True, text=True, check=False)
        litellm_loaded, pydantic_loaded, _status = (probe.stdout.split() + ["?", "?", "?"])[:3]
        result[f"{command}_imports_litellm"] = litellm_loaded == "1"
        result[f"{command}_imports_pydantic"] = pydantic_loaded == "1"
    print(f"{'':40} {'wall':>8} {'cpu':>8}")
    for name, times in samples.items():
        wall = statistics.median(t[0] for t in times)
        cpu = statistics.median(t[1] for t in times)
        result[f"{name}_s"] = round(wall, 4)
        result[f"{name}_cpu_s"] = round(cpu, 4)
        print(f"{LABELS.get(name, name):40} {wall:7.3f}s {cpu:7.3f}s")
    for name, reference, target in RATIOS:
        if name not in samples or reference not in samples:
            continue
        pairs = list(zip(samples[name], samples[reference]))
        ratio = statistics.median(a[0] / b[0] for a, b in pairs)
        cpu_ratio = statistics.median(a[1] / b[1] for a, b in pairs)
        result[f"{name}_over_{reference}"] = round(ratio, 3)
        result[f"{name}_over_{reference}_cpu"] = round(cpu_ratio, 3)
        goal = "for comparison"
        if target is not None:
            result[f"{name}_target_met"] = ratio <= target
            goal = f"target at most {target}"
        print(f"{name} / {reference}: {ratio:.2f} (cpu {cpu_ratio:.2f}); {goal}")
    print(f"check imports litellm: {litellm_loaded == '1'}, pydantic: {pydantic_loaded == '1'}")
    print("RESULT " + json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
