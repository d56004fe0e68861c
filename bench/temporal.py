"""What a run costs on Temporal, against the local backend, measured in the same run of this script.

A linear machine of STATES agent states (STATES transitions to its final state) runs with scripted replies
that answer at once, so what is timed is each backend's own work: for the local backend the core and the
in-process scripted client; for Temporal one workflow task and one activity (through the dev server's
SQLite history) per model call, on worker processes on this machine.

  per transition  RUNS runs one after another; the time of a run divided by its transitions (median), with
                  every call recorded before the run goes on as an activity (the default), with
                  `--durability segment` (the same promise: the calls made one after another in one
                  activity, each recorded by its heartbeat before the next; target at most 0.5x the
                  floor) and with `--durability task`
  the floor       a hand-written temporalio workflow making one activity call per step, in this process
                  (tests/support/temporal_floor.py): what recording each call as an activity costs
  throughput      BATCH runs submitted at once, with one worker process and then with two: runs per second

  memory         the resident memory of a `statewright worker` process (the real command, serving the
                  spec) after RUNS runs, against a bare temporalio worker process serving the floor after
                  RUNS of its workflows: `worker_memory_ratio` (the target is at most 1.1); and of the
                  spec's generated runner serving it (`runner_worker_memory_ratio`)

Ratios: `overhead_ratio` is Temporal's time per transition over the local one; `two_workers_speedup` is the
runs per second of two workers over one (on two cores shared with the server and this client, less than 2
is what to expect: the server's history writes are the bottleneck).

Where a worker's memory goes (measured on this machine): temporalio itself is most of both (about 56 MB with
the gRPC core); statewright's runtime adds 3-5 MB. A worker loads only what its machines use: this machine
(text replies, templates that only print names) needs neither pydantic's model machinery (about 5 MB, for
typed outputs, tools and calls of machines), Jinja (templates beyond `{{ name }}`) nor SQLite (a worker
never checkpoints). `statewright worker` checks its files in a child process and holds no compiler (it
held about 13 MB of it when it checked them itself).

    python bench/temporal.py [--states 8] [--runs 10] [--batch 60]

Needs the statewright[temporal] extra. The last line is `RESULT {json}`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from support.temporal_server import DevServer

from statewright import api
from statewright.runtime.engine import Engine
from statewright.runtime.scripted import Script
from statewright.runtime.temporal import TemporalRunner, temporal_result


def linear_spec(states: int) -> str:
    names = [f"s{i}" for i in range(states)]
    lines = ["machine bench_linear {", '    description "A straight line of agent states."', "    input topic: str",
             '    model "openai/gpt-4o-mini"', f"    limits {{ steps {states + 5} }}", '    agent a { prompt "p" }']
    for index, name in enumerate(names):
        target = names[index + 1] if index + 1 < states else "done"
        start = "start " if index == 0 else ""
        lines.append(f'    {start}state {name} {{ agent a  do "Step {index} about {{{{ topic }}}}."  -> {target} }}')
    lines += ["    final state done", "}"]
    return "\n".join(lines) + "\n"


def script_for(states: int) -> Script:
    return Script.from_json({"agent": {f"s{i}": [f"reply {i}"] for i in range(states)}})


def start_worker(address: str, spec: Path) -> subprocess.Popen[str]:
    return serving([sys.executable, "-m", "support.temporal_worker", "--temporal", address, "--spec", str(spec),
                    "--task-queue", "bench", "--concurrency", "64"], spec.parent)


def stop(processes: list[subprocess.Popen[str]]) -> None:
    for process in processes:
        process.terminate()
    for process in processes:
        process.wait(timeout=30)


async def temporal_runs(runner: TemporalRunner, count: int, prefix: str, concurrent: bool) -> float:
    """Seconds for `count` runs: one after another, or all submitted at once."""
    started = time.perf_counter()
    if concurrent:
        handles = [await runner.start({"topic": f"t{i}"}, run_id=f"{prefix}-{i}") for i in range(count)]
        results = await asyncio.gather(*(temporal_result(h) for h in handles))
    else:
        results = [await runner.arun({"topic": f"t{i}"}, run_id=f"{prefix}-{i}") for i in range(count)]
    assert all(r.ok for r in results), [r.failure for r in results if not r.ok][:1]
    return time.perf_counter() - started


def resident_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


def serving(command: list[str], cwd: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'tests'}{os.pathsep}{ROOT}"}
    process = subprocess.Popen(command, cwd=cwd, env=env, text=True, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT)
    assert process.stdout is not None
    while True:
        line = process.stdout.readline()
        if "serving" in line:
            return process
        if not line and process.poll() is not None:
            raise SystemExit(f"{command[:4]} did not start")


def worker_memory_mb(address: str, spec: Path, machine: object, script: Script, steps: int,
                     runs: int) -> tuple[float, float, float]:
    """The resident memory of a bare temporalio worker after `runs` floor runs, and of a `statewright
    worker` and of the spec's generated runner's `worker` after `runs` runs of the spec (each process
    serving alone)."""
    from support.temporal_floor import FloorRun
    from temporalio.client import Client

    bare = serving([sys.executable, "-m", "support.temporal_floor", "--temporal", address, "--task-queue",
                    "bench-floor-memory"], spec.parent)
    try:
        async def floor_runs() -> None:
            client = await Client.connect(address)
            for i in range(runs):
                await client.execute_workflow(FloorRun.run, steps, id=f"floor-memory-{i}-{time.time_ns()}",
                                              task_queue="bench-floor-memory")

        asyncio.run(floor_runs())
        bare_mb = resident_mb(bare.pid)
    finally:
        stop([bare])
    generated = spec.parent / "runner" / "linear_runner.py"
    generated.parent.mkdir(exist_ok=True)
    subprocess.run([sys.executable, "-m", "statewright", "compile", str(spec), "-o", str(generated)], check=True,
                   capture_output=True)
    measured = []
    for command in ([sys.executable, "-m", "statewright", "worker", str(spec)], [sys.executable, str(generated), "worker"]):
        worker = serving([*command, "--temporal", address, "--task-queue", "bench-memory"], spec.parent)
        try:
            runner = TemporalRunner(machine, address, task_queue="bench-memory", script=script)  # type: ignore[arg-type]
            for i in range(runs):
                asyncio.run(temporal_runs(runner, 1, f"memory-{len(measured)}-{i}", concurrent=False))
            measured.append(resident_mb(worker.pid))
        finally:
            stop([worker])
    return bare_mb, measured[0], measured[1]


def floor_ms_per_transition(address: str, steps: int, runs: int) -> float:
    """The hand-written floor (tests/support/temporal_floor.py): one activity per step, in this process."""
    from support.temporal_floor import FloorRun, floor_worker
    from temporalio.client import Client

    async def measure() -> float:
        client = await Client.connect(address)
        stop = asyncio.Event()
        worker = asyncio.ensure_future(floor_worker(client, "bench-floor", stop))
        await asyncio.sleep(0.5)
        times = []
        for i in range(runs + 1):
            started = time.perf_counter()
            await client.execute_workflow(FloorRun.run, steps, id=f"floor-{i}-{time.time_ns()}",
                                          task_queue="bench-floor")
            times.append((time.perf_counter() - started) / steps * 1000)
        stop.set()
        await worker
        return statistics.median(times[1:])  # (the first warms the worker)

    return asyncio.run(measure())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--states", type=int, default=8)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--batch", type=int, default=60)
    args = parser.parse_args()
    transitions = args.states
    work = Path(tempfile.mkdtemp(prefix="statewright-bench-temporal-"))
    spec = work / "linear.fsm"
    spec.write_text(linear_spec(args.states))
    machine = api.runtime_machine(api.check_path(spec))
    script = script_for(args.states)

    engine = Engine(machine, script=script, workspace=str(work / "ws"))
    local = []
    for i in range(args.runs):
        started = time.perf_counter()
        assert engine.run({"topic": f"t{i}"}).ok
        local.append((time.perf_counter() - started) / transitions)
    local_batch_started = time.perf_counter()

    async def local_batch() -> None:
        await asyncio.gather(*(engine.arun({"topic": f"t{i}"}) for i in range(args.batch)))

    asyncio.run(local_batch())
    local_rps = args.batch / (time.perf_counter() - local_batch_started)

    with DevServer() as server:
        floor = floor_ms_per_transition(server.address, args.states, args.runs)
        runner = TemporalRunner(machine, server.address, task_queue="bench", script=script)
        workers = [start_worker(server.address, spec)]
        try:
            asyncio.run(temporal_runs(runner, 3, "warm", concurrent=False))  # first tasks: caches, connections
            remote = []
            for i in range(args.runs):
                remote.append(asyncio.run(temporal_runs(runner, 1, f"seq-{i}", concurrent=False)) / transitions)
            by_task = TemporalRunner(machine, server.address, task_queue="bench", script=script, durability="task")
            asyncio.run(temporal_runs(by_task, 2, "warm-task", concurrent=False))
            task = [asyncio.run(temporal_runs(by_task, 1, f"task-{i}", concurrent=False)) / transitions
                    for i in range(args.runs)]
            by_segment = TemporalRunner(machine, server.address, task_queue="bench", script=script,
                                        durability="segment")
            asyncio.run(temporal_runs(by_segment, 2, "warm-segment", concurrent=False))
            segment = [asyncio.run(temporal_runs(by_segment, 1, f"segment-{i}", concurrent=False)) / transitions
                       for i in range(args.runs)]
            segment_rps = args.batch / asyncio.run(temporal_runs(by_segment, args.batch, "segment-one",
                                                                 concurrent=True))
            one = args.batch / asyncio.run(temporal_runs(runner, args.batch, "one", concurrent=True))
            workers.append(start_worker(server.address, spec))
            asyncio.run(temporal_runs(runner, 3, "warm2", concurrent=True))
            two = args.batch / asyncio.run(temporal_runs(runner, args.batch, "two", concurrent=True))
        finally:
            stop(workers)
        bare_mb, worker_mb, runner_mb = worker_memory_mb(server.address, spec, machine, script, args.states, args.runs)

    local_ms = statistics.median(local) * 1000
    remote_ms = statistics.median(remote) * 1000
    task_ms = statistics.median(task) * 1000
    segment_ms = statistics.median(segment) * 1000
    result = {
        "states": args.states, "runs": args.runs, "batch": args.batch,
        "local_ms_per_transition": round(local_ms, 3), "temporal_ms_per_transition": round(remote_ms, 3),
        "overhead_ratio": round(remote_ms / local_ms, 1), "added_ms_per_transition": round(remote_ms - local_ms, 2),
        "floor_ms_per_transition": round(floor, 2), "vs_floor": round(remote_ms / floor, 2),
        "task_durability_ms_per_transition": round(task_ms, 2), "task_durability_vs_floor": round(task_ms / floor, 2),
        "segment_durability_ms_per_transition": round(segment_ms, 2),
        "segment_durability_vs_floor": round(segment_ms / floor, 2), "segment_vs_floor_target": 0.5,
        "segment_one_worker_runs_per_s": round(segment_rps, 2),
        "local_runs_per_s": round(local_rps, 1), "one_worker_runs_per_s": round(one, 2),
        "two_workers_runs_per_s": round(two, 2), "two_workers_speedup": round(two / one, 2),
        "one_worker_vs_local_throughput": round(one / local_rps, 4),
        "bare_worker_mb": round(bare_mb, 1), "statewright_worker_mb": round(worker_mb, 1),
        "worker_memory_ratio": round(worker_mb / bare_mb, 2), "runner_worker_mb": round(runner_mb, 1),
        "runner_worker_memory_ratio": round(runner_mb / bare_mb, 2),
    }
    print(f"per transition: local {local_ms:.3f} ms, Temporal {remote_ms:.2f} ms "
          f"({result['overhead_ratio']}x, +{result['added_ms_per_transition']} ms); the hand-written floor "
          f"(one activity per step) {floor:.2f} ms: {result['vs_floor']}x the floor")
    print(f"with --durability task (local activities, recorded with their workflow task): {task_ms:.2f} ms per "
          f"transition, {result['task_durability_vs_floor']}x the floor")
    print(f"with --durability segment (each call recorded by the heartbeat of one activity, before the run goes "
          f"on): {segment_ms:.2f} ms per transition, {result['segment_durability_vs_floor']}x the floor (target at "
          f"most 0.5); {segment_rps:.2f} runs/s at {args.batch} at once")
    print(f"throughput ({args.batch} runs at once): local {local_rps:.1f} runs/s, one worker {one:.2f} runs/s, "
          f"two workers {two:.2f} runs/s ({result['two_workers_speedup']}x)")
    print(f"worker memory after {args.runs} runs: statewright worker {worker_mb:.1f} MB, a bare temporalio worker "
          f"{bare_mb:.1f} MB: {result['worker_memory_ratio']}x (target at most 1.1); the generated runner's worker "
          f"{runner_mb:.1f} MB: {result['runner_worker_memory_ratio']}x")
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main()
