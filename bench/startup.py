"""Benchmark: start-up time of `statewright check` and of a generated runner's `--help`.

Each command runs several times, interleaved with `python -c pass` so that the baseline is measured under
the same load; the medians are reported, and the difference is what statewright itself costs. The target
for `check` is 0.25 s above the interpreter's own start-up. The benchmark also reports whether the check
path imported litellm or pydantic (it should import neither).

    python bench/startup.py [--runs N]

The last line is `RESULT {json}`.
"""

from __future__ import annotations

import argparse
import json
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

# Runs `statewright check` in-process and reports which heavy modules it loaded.
_IMPORT_PROBE = """
import sys
from statewright.cli import main
status = main(["check", sys.argv[1]])
print(int("litellm" in sys.modules), int("pydantic" in sys.modules), status)
"""


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(cmd: Sequence[str], cwd: Path) -> tuple[float, float]:
    """Wall-clock and CPU seconds of one run; CPU time is steadier when the machine is busy."""
    start, start_cpu = time.perf_counter(), _children_cpu()
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, check=False)
    elapsed, cpu = time.perf_counter() - start, _children_cpu() - start_cpu
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {done.returncode}:\n{done.stderr.decode(errors='replace')}")
    return elapsed, cpu


def median_times(commands: dict[str, list[str]], runs: int, cwd: Path) -> dict[str, tuple[float, float]]:
    """The median wall and CPU time of each command, the commands interleaved run by run."""
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for name, cmd in commands.items():  # one untimed run each: warm the file cache and the parse table
        _run(cmd, cwd)
    for _ in range(runs):
        for name, cmd in commands.items():
            samples[name].append(_run(cmd, cwd))
    return {
        name: (statistics.median(s[0] for s in times), statistics.median(s[1] for s in times))
        for name, times in samples.items()
    }


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args(argv)

    commands = {
        "baseline": [sys.executable, "-c", "pass"],
        "check": [sys.executable, "-m", "statewright", "check", str(EXAMPLE)],
    }
    script = console_script()
    if script is not None:
        commands["check_script"] = [script, "check", str(EXAMPLE)]
    with tempfile.TemporaryDirectory() as tmp:
        runner = compile_runner(Path(tmp))
        if runner is not None:
            commands["runner_help"] = [sys.executable, str(runner), "--help"]
        medians = median_times(commands, args.runs, ROOT)

    probe = subprocess.run([sys.executable, "-c", _IMPORT_PROBE, str(EXAMPLE)], cwd=ROOT, capture_output=True,
                           text=True, check=False)
    litellm_loaded, pydantic_loaded, _status = (probe.stdout.split() + ["?", "?", "?"])[:3]

    baseline, baseline_cpu = medians["baseline"]
    result: dict[str, object] = {
        "baseline_s": round(baseline, 4),
        "baseline_cpu_s": round(baseline_cpu, 4),
        "check_imports_litellm": litellm_loaded == "1",
        "check_imports_pydantic": pydantic_loaded == "1",
        "runs": args.runs,
    }
    print(f"{'':36} {'wall':>8} {'cpu':>8} {'wall - baseline':>16}")
    labels = {
        "baseline": ("python -c pass", "baseline"),
        "check": ("python -m statewright check", "check"),
        "check_script": ("statewright check (console script)", "check_script"),
        "runner_help": ("python runner.py --help", "runner_help"),
    }
    for name, (label, key) in labels.items():
        if name not in medians:
            continue
        wall, cpu = medians[name]
        if name != "baseline":
            result[f"{key}_s"] = round(wall, 4)
            result[f"{key}_cpu_s"] = round(cpu, 4)
            result[f"{key}_minus_baseline_s"] = round(wall - baseline, 4)
        print(f"{label:36} {wall:7.3f}s {cpu:7.3f}s {wall - baseline:+15.3f}s")
    print("target: check at most 0.25 s above the baseline")
    print(f"check imports litellm: {litellm_loaded == '1'}, pydantic: {pydantic_loaded == '1'}")
    print("RESULT " + json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
