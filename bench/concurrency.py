"""`statewright batch` against raw litellm: the same calls, at the same concurrency, over the same server.

A local OpenAI-compatible server (bench/latency_server.py) answers every call after 100 ms. Measured in
one run, each in a process of its own:
  raw       CASES tasks at once, each making CALLS sequential `litellm.acompletion` calls — the floor
  batch     `statewright batch --concurrency CASES` over CASES cases of a machine of CALLS agent states,
            timed inside the process after a warm-up (importing litellm takes seconds and is not the
            batch's doing); `cli_wall_s` is the whole command, start-up included
  raw frozen  raw again, with `gc.freeze()` after the warm-up, as the batch command does before its runs
            (runner_cli: the objects loaded before the runs are kept out of the cyclic collector's
            sight); batch over this one is what statewright's own work costs at the same collector cost
The ideal is CALLS x 100 ms. Target: batch within 1.1x of raw. The three are run ROUNDS times,
alternated; each ratio reported is the median of each round's batch over the raw run of that round (a
paired comparison: on a shared machine one run alone can be off by 30 %), with the ratio of the median
runs beside it.

Run: python bench/concurrency.py [--cases N] [--calls N] [--delay S] [--rounds N]. The last line is `RESULT {json}`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODEL = "openai/bench-model"


def machine_source(calls: int) -> str:
    states = []
    for i in range(calls):
        target = f"s{i + 1}" if i + 1 < calls else "done"
        start = "start " if i == 0 else ""
        states.append(f'    {start}state s{i} {{\n        agent worker\n        do "Step {i} of {{{{ topic }}}}."\n'
                      f"        -> {target}\n    }}\n")
    return ("machine bench_chain {\n    input topic: str\n    model \"" + MODEL + "\"\n"
            "    limits {\n        steps 50\n    }\n\n    agent worker {\n        prompt \"You answer briefly.\"\n"
            "        memory none\n    }\n\n" + "\n".join(states) + "\n    final state done\n}\n")


RAW = """
import asyncio, json, os, resource, sys, time
import litellm
litellm.suppress_debug_info = True
cases, calls = int(sys.argv[1]), int(sys.argv[2])
litellm.completion(model=sys.argv[3], messages=[{"role": "user", "content": "warm up"}])  # imports, not timed
if sys.argv[4:] == ["frozen"]:
    import gc
    gc.freeze()

async def case(n):
    for step in range(calls):
        await litellm.acompletion(model=sys.argv[3], messages=[
            {"role": "system", "content": "You answer briefly."},
            {"role": "user", "content": f"Step {step} of topic {n}."}], num_retries=0)

async def main():
    started = time.perf_counter()
    await asyncio.gather(*(case(n) for n in range(cases)))
    return time.perf_counter() - started

wall = asyncio.run(main())
print(json.dumps({"wall_s": wall, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

BATCH = """
import json, resource, sys, time
import litellm
litellm.suppress_debug_info = True
from statewright import api
from statewright.runtime.runner_cli import main
spec, cases, out, model = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
litellm.completion(model=model, messages=[{"role": "user", "content": "warm up"}])  # imports, not timed
machine = api.runtime_machine(api.check_file(spec))
started = time.perf_counter()
code = main(machine, ["batch", "--inputs", cases, "--concurrency", sys.argv[5], "--out", out, "--quiet",
                      "--retries", "0"])
wall = time.perf_counter() - started
print(json.dumps({"wall_s": wall, "code": code,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def python(code: str, *args: str, env: dict[str, str]) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env,
                          check=False, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"a measurement failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _median_run(runs: list[dict[str, float]]) -> dict[str, float]:
    """The run of median wall time (the machine is shared: one run can be slowed by another's work)."""
    return sorted(runs, key=lambda r: r["wall_s"])[len(runs) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--calls", type=int, default=4)
    parser.add_argument("--delay", type=float, default=0.1)
    parser.add_argument("--rounds", type=int, default=5, help="raw and batch runs, alternated; medians compared")
    args = parser.parse_args()
    server = subprocess.Popen([sys.executable, str(ROOT / "bench" / "latency_server.py"), "--delay", str(args.delay)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline().split()[1])
        env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "OPENAI_API_KEY": "sk-bench-not-a-key",
               "OPENAI_API_BASE": f"http://127.0.0.1:{port}/v1", "OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1"}
        with tempfile.TemporaryDirectory() as tmp:
            spec = Path(tmp, "chain.fsm")
            spec.write_text(machine_source(args.calls), encoding="utf-8")
            cases = Path(tmp, "cases.jsonl")
            cases.write_text("".join(json.dumps({"id": f"c{n}", "inputs": {"topic": f"topic {n}"}}) + "\n"
                                     for n in range(args.cases)), encoding="utf-8")
            raws, frozen, batches = [], [], []
            for n in range(args.rounds):  # alternated, so that a busy moment of the machine hits all three
                raws.append(python(RAW, str(args.cases), str(args.calls), MODEL, env=env))
                frozen.append(python(RAW, str(args.cases), str(args.calls), MODEL, "frozen", env=env))
                out = Path(tmp, f"out-{n}.jsonl")
                batch = python(BATCH, str(spec), str(cases), str(out), MODEL, str(args.cases),
                               env={**env, "STATEWRIGHT_QUIET": "1"})
                lines = [json.loads(line) for line in out.read_text().splitlines()]
                if batch["code"] != 0 or len(lines) != args.cases or any(x["status"] != "final" for x in lines):
                    raise SystemExit(f"the batch did not run every case to its end: exit {batch['code']}, "
                                     f"{len(lines)} lines")
                batches.append(batch)
            raw = _median_run(raws)
            batch = _median_run(batches)
            started = time.perf_counter()
            cli = subprocess.run([sys.executable, "-m", "statewright", "batch", str(spec), "--inputs", str(cases),
                                  "--concurrency", str(args.cases), "--out", str(Path(tmp, "cli.jsonl")),
                                  "--quiet", "--retries", "0"], env=env, capture_output=True, text=True,
                                 check=False, cwd=tmp, timeout=600)
            cli_wall = time.perf_counter() - started
            if cli.returncode != 0:
                raise SystemExit(f"statewright batch failed:\n{cli.stderr[-3000:]}")
    finally:
        server.kill()
        server.wait()
    ideal = args.calls * args.delay
    result = {
        "cases": args.cases, "calls_per_case": args.calls, "delay_s": args.delay, "ideal_s": round(ideal, 3),
        "rounds": args.rounds, "raw_litellm_walls_s": [round(r["wall_s"], 3) for r in raws],
        "batch_walls_s": [round(b["wall_s"], 3) for b in batches],
        "wall_s": round(batch["wall_s"], 3), "raw_litellm_wall_s": round(raw["wall_s"], 3),
        # each round's batch against the raw run just before it, the median of those: a paired comparison,
        # which the machine's slow and fast moments disturb least
        "ratio_vs_raw_litellm": round(statistics.median(b["wall_s"] / r["wall_s"] for r, b in zip(raws, batches)), 3),
        "ratio_of_medians": round(batch["wall_s"] / raw["wall_s"], 3),
        "raw_frozen_walls_s": [round(r["wall_s"], 3) for r in frozen],
        "raw_frozen_wall_s": round(_median_run(frozen)["wall_s"], 3),
        "ratio_vs_raw_frozen": round(statistics.median(b["wall_s"] / r["wall_s"] for r, b in zip(frozen, batches)), 3),
        "cli_wall_s": round(cli_wall, 3), "peak_rss_mb": round(batch["peak_rss_mb"], 1),
        "raw_peak_rss_mb": round(raw["peak_rss_mb"], 1),
    }
    print(f"{args.cases} cases x {args.calls} calls, {args.delay * 1000:.0f} ms per call (ideal {ideal:.2f} s), "
          f"median of {args.rounds} alternated rounds:")
    print(f"  raw litellm.acompletion   {raw['wall_s']:7.3f} s")
    print(f"  the same, gc.freeze()     {result['raw_frozen_wall_s']:7.3f} s  (batch is "
          f"{result['ratio_vs_raw_frozen']:.2f}x this, paired: statewright's own work)")
    print(f"  statewright batch         {batch['wall_s']:7.3f} s  ({result['ratio_vs_raw_litellm']:.2f}x raw paired, "
          f"peak RSS {batch['peak_rss_mb']:.0f} MB)")
    print(f"  the whole command         {cli_wall:7.3f} s  (start-up and litellm's import included)")
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main()
