"""Model calls at the speed of the wire: statewright's native client against its peers, measured in one run.

Every peer runs in a process of its own against local OpenAI-compatible servers (bench/latency_server.py):

  client CPU per call   CALLS_CPU sequential calls against a server that answers at once, CPU time of the
                        calling process per call after a warm-up: the native client (`OpenAIHTTPClient`), a
                        hand-written asyncio keep-alive client (the floor), httpx, aiohttp, the openai SDK
                        (`AsyncOpenAI`) and, with --litellm, `litellm.acompletion`.
                        Targets: native at most 0.7 ms, and at least 2x cheaper than the openai SDK.
  a 300-call run        `statewright run` of a machine whose one state loops 300 times, against that server:
                        the whole command's wall and CPU time per call (interpreter, imports, compiling the
                        spec included) and the same beyond `statewright run SPEC --help` (what calling
                        models costs, the client's imports included); with --litellm, the same run through
                        litellm. Target: at most 1.0 ms per call beyond --help; peak RSS at most 80 MB.
  first call            a generated runner of a one-call machine, from its process start to its request
                        arriving at the server, as `compile` writes it (beside the runtime package, whose
                        bytecode Python caches) and with `--standalone` (which compiles the runtime modules
                        it imports at every start); the same runner's `--help` beside it, and the CPU time
                        of the whole one-call run, which the first call cannot have taken more of. Target:
                        under 0.5 s.

The timed targets are judged on CPU time where wall time and CPU time are both reported: on a shared
machine, other work stretches wall time (compile_scaling.py does the same).
  concurrency           RUNS runs x 4 calls against a server answering in DELAY (100 ms): `statewright batch`
                        (timed in process, after a warm-up), a hand-written asyncio client (a task per run,
                        each on its own connection: the floor) and LangGraph's `abatch` over a graph of four
                        nodes calling `AsyncOpenAI`. Targets: 1,000 x 4 within 3x the hand-written client;
                        200 x 4 ahead of LangGraph. Each size is run ROUNDS times, alternated; each ratio is
                        the median of the rounds' ratios (paired: the machine is shared and noisy).
  memory per run        (peak RSS of the batch of 1,000 runs - that of a batch of 20) / 980. Target: at most
                        0.1 MB.

Peers that are not installed (openai, httpx, aiohttp, langgraph) are installed with pip first.

Run: python bench/concurrency.py [--rounds N] [--cpu-calls N] [--litellm]. The last line is `RESULT {json}`.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
MODEL = "openai/bench-model"
PEERS = {"openai": "openai", "httpx": "httpx", "aiohttp": "aiohttp", "langgraph": "langgraph"}
KEY = "sk-bench-not-a-key"

CPU_HEAD = """
import asyncio, json, resource, sys
base, calls = sys.argv[1], int(sys.argv[2])
def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime
def messages(i):
    return [{"role": "system", "content": "You answer briefly."}, {"role": "user", "content": f"Step {i}."}]
async def timed(one):
    for i in range(20):  # warm-up: imports, connections, first-call caches
        await one(i)
    started = cpu()
    for i in range(calls):
        await one(i)
    return (cpu() - started) / calls
"""
CPU_PEERS = {
    "native": """
from statewright.runtime.client import ModelRequest
from statewright.runtime.openai_http import OpenAIHTTPClient
client = OpenAIHTTPClient(api_base=base, api_key="%(key)s")
async def one(i):
    await client.acomplete(ModelRequest(role="agent", state="s", model="%(model)s", messages=messages(i)))
""",
    "handwritten": """
state = {}
async def one(i):
    if "w" not in state:
        host, port = base.split("//")[1].split("/")[0].split(":")
        state["r"], state["w"] = await asyncio.open_connection(host, int(port))
    data = json.dumps({"model": "bench-model", "messages": messages(i)}).encode()
    state["w"].write(b"POST /v1/chat/completions HTTP/1.1\\r\\nHost: x\\r\\nContent-Type: application/json\\r\\n"
                     b"Authorization: Bearer %(key)s\\r\\nContent-Length: %%d\\r\\n\\r\\n" %% len(data) + data)
    head = await state["r"].readuntil(b"\\r\\n\\r\\n")
    length = next(int(l.split(b":")[1]) for l in head.split(b"\\r\\n") if l.lower().startswith(b"content-length"))
    json.loads(await state["r"].readexactly(length))
""",
    "httpx": """
import httpx
client = httpx.AsyncClient(headers={"Authorization": "Bearer %(key)s"})
async def one(i):
    (await client.post(base + "/chat/completions", json={"model": "bench-model", "messages": messages(i)})).json()
""",
    "aiohttp": """
import aiohttp
state = {}
async def one(i):
    if "s" not in state:
        state["s"] = aiohttp.ClientSession(headers={"Authorization": "Bearer %(key)s"})
    async with state["s"].post(base + "/chat/completions", json={"model": "bench-model", "messages": messages(i)}) as r:
        json.loads(await r.read())
""",
    "openai_sdk": """
import openai
client = openai.AsyncOpenAI(base_url=base, api_key="%(key)s", max_retries=0)
async def one(i):
    await client.chat.completions.create(model="bench-model", messages=messages(i))
""",
    "litellm": """
import os
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
import litellm
litellm.suppress_debug_info = True
async def one(i):
    await litellm.acompletion(model="%(model)s", messages=messages(i), api_base=base, api_key="%(key)s",
                              num_retries=0)
""",
}
CPU_TAIL = """
print(json.dumps({"cpu_ms": asyncio.run(timed(one)) * 1000}))
"""

BATCH = """
import json, resource, sys, time
from statewright import api
from statewright.runtime.runner_cli import main
spec, cases, warm, out = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
machine = api.runtime_machine(api.check_file(spec))
main(machine, ["batch", "--inputs", warm, "--concurrency", "4", "--quiet", "--retries", "0"])  # warm-up
started = time.perf_counter()
code = main(machine, ["batch", "--inputs", cases, "--concurrency", sys.argv[5], "--out", out, "--quiet",
                      "--retries", "0"])
wall = time.perf_counter() - started
print(json.dumps({"wall_s": wall, "code": code, "litellm": "litellm" in sys.modules,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

HANDWRITTEN = """
import asyncio, json, resource, sys, time
host, port, runs, calls = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
async def run(n):
    reader, writer = await asyncio.open_connection(host, port)
    for step in range(calls):
        data = json.dumps({"model": "bench-model", "messages": [{"role": "system", "content": "You answer briefly."},
                           {"role": "user", "content": f"Step {step} of topic {n}."}]}).encode()
        writer.write(b"POST /v1/chat/completions HTTP/1.1\\r\\nHost: x\\r\\nContent-Type: application/json\\r\\n"
                     b"Content-Length: %d\\r\\n\\r\\n" % len(data) + data)
        head = await reader.readuntil(b"\\r\\n\\r\\n")
        length = next(int(l.split(b":")[1]) for l in head.split(b"\\r\\n") if l.lower().startswith(b"content-length"))
        json.loads(await reader.readexactly(length))
    writer.close()
async def main():
    started = time.perf_counter()
    await asyncio.gather(*(run(n) for n in range(runs)))
    return time.perf_counter() - started
print(json.dumps({"wall_s": asyncio.run(main()),
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

LANGGRAPH = """
import asyncio, json, resource, sys, time
from typing import TypedDict
import openai
from langgraph.graph import END, START, StateGraph
base, runs, calls = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
client = openai.AsyncOpenAI(base_url=base, api_key="%(key)s", max_retries=0)
class State(TypedDict):
    topic: str
    answers: list
def node(step):
    async def call(state):
        reply = await client.chat.completions.create(model="bench-model", messages=[
            {"role": "system", "content": "You answer briefly."},
            {"role": "user", "content": f"Step {step} of {state['topic']}."}])
        return {"answers": state["answers"] + [reply.choices[0].message.content]}
    return call
graph = StateGraph(State)
for step in range(calls):
    graph.add_node(f"s{step}", node(step))
    graph.add_edge(START if step == 0 else f"s{step - 1}", f"s{step}")
graph.add_edge(f"s{calls - 1}", END)
app = graph.compile()
async def main():
    await app.abatch([{"topic": "warm up", "answers": []}] * 4)
    started = time.perf_counter()
    out = await app.abatch([{"topic": f"topic {n}", "answers": []} for n in range(runs)])
    assert all(len(o["answers"]) == calls for o in out)
    return time.perf_counter() - started
print(json.dumps({"wall_s": asyncio.run(main()),
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

LOOP_SPEC = """\
machine loop300 {
    model "MODEL"
    limits {
        steps 400
    }
    agent worker {
        prompt "You answer briefly."
        memory none
    }
    start state ask {
        agent worker
        do "Step."
        -> ask max 299
        -> done
    }
    final state done
}
""".replace("MODEL", MODEL)

ONE_CALL_SPEC = """\
machine one {
    model "MODEL"
    agent writer {
        prompt "You write."
    }
    start state write {
        agent writer
        do "Write."
        -> done
    }
    final state done
}
""".replace("MODEL", MODEL)


def chain_source(calls: int) -> str:
    states = []
    for i in range(calls):
        target = f"s{i + 1}" if i + 1 < calls else "done"
        start = "start " if i == 0 else ""
        states.append(f'    {start}state s{i} {{\n        agent worker\n        do "Step {i} of {{{{ topic }}}}."\n'
                      f"        -> {target}\n    }}\n")
    return ("machine bench_chain {\n    input topic: str\n    model \"" + MODEL + "\"\n"
            "    limits {\n        steps 50\n    }\n\n    agent worker {\n        prompt \"You answer briefly.\"\n"
            "        memory none\n    }\n\n" + "\n".join(states) + "\n    final state done\n}\n")


def ensure_peers() -> list[str]:
    """Install the peers that are missing (pip, in this interpreter's environment); the names installed."""
    missing = [package for module, package in PEERS.items() if importlib.util.find_spec(module) is None]
    if missing:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", *missing], check=True)
    return missing


def python(code: str, *args: str, env: dict[str, str], cwd: str | None = None) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env,
                          check=False, timeout=900, cwd=cwd)
    if done.returncode != 0:
        raise SystemExit(f"a measurement failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


class LatencyServer:
    """bench/latency_server.py in a process of its own."""

    def __init__(self, delay: float) -> None:
        self.process = subprocess.Popen([sys.executable, str(ROOT / "bench" / "latency_server.py"),
                                         "--delay", str(delay)], stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        self.port = int(self.process.stdout.readline().split()[1])
        self.base = f"http://127.0.0.1:{self.port}/v1"

    def close(self) -> None:
        self.process.kill()
        self.process.wait()


def median(values: list[float]) -> float:
    return float(statistics.median(values))


def measure_cpu(base: str, env: dict[str, str], calls: int, rounds: int, peers: list[str]) -> dict[str, float]:
    """Client CPU per call (ms) of each peer: the median over `rounds` alternated rounds."""
    samples: dict[str, list[float]] = {peer: [] for peer in peers}
    for _ in range(rounds):
        for peer in peers:
            code = CPU_HEAD + CPU_PEERS[peer] % {"key": KEY, "model": MODEL} + CPU_TAIL
            samples[peer].append(python(code, base, str(calls if peer != "litellm" else max(50, calls // 10)),
                                        env=env)["cpu_ms"])
    return {peer: round(median(values), 4) for peer, values in samples.items()}


def measure_run(base: str, env: dict[str, str], tmp: Path, rounds: int, litellm: bool) -> dict[str, Any]:
    """`statewright run` of the 300-call loop: wall per call, beyond --help, peak RSS."""
    spec = tmp / "loop300.fsm"
    spec.write_text(LOOP_SPEC, encoding="utf-8")
    wrapper = ("import resource, subprocess, sys, time\nstarted = time.perf_counter()\n"
               "done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
               "wall = time.perf_counter() - started\n"
               "import json\nusage = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
               "print(json.dumps({'wall_s': wall, 'code': done.returncode, 'out': done.stdout[-2000:], "
               "'cpu_s': usage.ru_utime + usage.ru_stime, 'peak_rss_mb': usage.ru_maxrss / 1024}))\n")
    command = [sys.executable, "-m", "statewright", "run", str(spec), "--quiet"]
    variants = {"native": command, "help": [*command, "--help"]}
    if litellm:
        variants["litellm"] = [*command, "--model-client", "litellm"]
    samples: dict[str, list[dict[str, Any]]] = {name: [] for name in variants}
    python(wrapper, *variants["help"], env=env, cwd=str(tmp))  # bytecode and caches, not timed
    for _ in range(rounds):
        for name, argv in variants.items():
            measured = python(wrapper, *argv, env=env, cwd=str(tmp))
            if measured["code"] != 0 or (name != "help" and '"llm_calls": 300' not in measured["out"]):
                raise SystemExit(f"the 300-call run ({name}) did not make its calls: {measured}")
            samples[name].append(measured)
    walls = {name: [m["wall_s"] for m in runs] for name, runs in samples.items()}
    cpus = {name: [m["cpu_s"] for m in runs] for name, runs in samples.items()}
    result: dict[str, Any] = {
        "run_300_cpu_s": round(median(cpus["native"]), 3),
        "run_help_cpu_s": round(median(cpus["help"]), 3),
        "run_per_call_cpu_beyond_help_ms": round(median([(r - h) / 300 * 1000 for r, h in
                                                         zip(cpus["native"], cpus["help"])]), 3),
        "run_300_wall_s": round(median(walls["native"]), 3),
        "run_help_wall_s": round(median(walls["help"]), 3),
        "run_per_call_ms": round(median(walls["native"]) / 300 * 1000, 3),
        "run_per_call_beyond_help_ms": round(median([(r - h) / 300 * 1000 for r, h in
                                                     zip(walls["native"], walls["help"])]), 3),
        "run_peak_rss_mb": round(median([m["peak_rss_mb"] for m in samples["native"]]), 1),
    }
    if litellm:
        result["run_litellm_per_call_ms"] = round(median(walls["litellm"]) / 300 * 1000, 3)
        result["run_litellm_peak_rss_mb"] = round(median([m["peak_rss_mb"] for m in samples["litellm"]]), 1)
    return result


def measure_first_call(env: dict[str, str], tmp: Path, rounds: int) -> dict[str, float]:
    """Seconds from a generated runner's process start to its model call arriving at the server, and to the
    end of the same runner's `--help` (medians), for a runner beside the runtime package (whose bytecode
    Python caches) and a standalone one (whose runtime modules are compiled anew at every start)."""
    spec = tmp / "one.fsm"
    spec.write_text(ONE_CALL_SPEC, encoding="utf-8")
    result: dict[str, float] = {}
    for prefix, flags in (("runner", []), ("standalone_runner", ["--standalone"])):
        directory = tmp / f"first-{prefix}"
        directory.mkdir()
        runner = directory / "one_runner.py"
        subprocess.run([sys.executable, "-m", "statewright", "compile", str(spec), "-o", str(runner), *flags],
                       check=True, capture_output=True)
        first, help_s, cpu = first_call_of(runner, env, directory, rounds)
        result[f"{prefix}_first_call_s"] = first
        result[f"{prefix}_help_s"] = help_s
        result[f"{prefix}_one_call_cpu_s"] = cpu
    return result


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def first_call_of(runner: Path, env: dict[str, str], cwd: Path, rounds: int) -> tuple[float, float, float]:
    """(seconds to the first call, seconds of --help, CPU seconds of the whole one-call run: what the
    first call cannot have cost more than, steadier than wall time on a busy machine), medians."""
    from latency_server import completion
    arrived: list[float] = []
    ready = threading.Event()
    port: list[int] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        arrived.append(time.perf_counter())
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length"))
        await reader.readexactly(length)
        data = completion("bench-model", "ok")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                     + str(len(data)).encode() + b"\r\nConnection: close\r\n\r\n" + data)
        await writer.drain()
        writer.close()

    async def serve() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port.append(server.sockets[0].getsockname()[1])
        ready.set()
        await server.serve_forever()

    threading.Thread(target=lambda: asyncio.run(serve()), daemon=True).start()
    ready.wait()
    runner_env = {**env, "OPENAI_API_BASE": f"http://127.0.0.1:{port[0]}/v1"}
    subprocess.run([sys.executable, str(runner), "--help"], env=runner_env, capture_output=True, check=True)
    firsts, helps, cpus = [], [], []
    for _ in range(rounds):  # alternated: a busy moment of the machine hits both
        arrived.clear()
        started, started_cpu = time.perf_counter(), children_cpu()
        done = subprocess.run([sys.executable, str(runner), "--quiet"], env=runner_env, capture_output=True,
                              text=True, check=False, cwd=cwd)
        cpus.append(children_cpu() - started_cpu)
        if done.returncode != 0 or not arrived:
            raise SystemExit(f"the runner did not call its model: {done.stderr[-2000:]}")
        firsts.append(arrived[0] - started)
        started = time.perf_counter()
        subprocess.run([sys.executable, str(runner), "--help"], env=runner_env, capture_output=True, check=True)
        helps.append(time.perf_counter() - started)
    return round(median(firsts), 3), round(median(helps), 3), round(median(cpus), 3)


def measure_concurrency(env: dict[str, str], tmp: Path, runs: int, delay: float, rounds: int,
                        langgraph: bool) -> dict[str, Any]:
    spec = tmp / "chain.fsm"
    spec.write_text(chain_source(4), encoding="utf-8")
    warm = tmp / "warm.jsonl"
    warm.write_text("".join(json.dumps({"id": f"w{n}", "inputs": {"topic": "warm"}}) + "\n" for n in range(4)))
    cases = tmp / f"cases-{runs}.jsonl"
    cases.write_text("".join(json.dumps({"id": f"c{n}", "inputs": {"topic": f"topic {n}"}}) + "\n"
                             for n in range(runs)), encoding="utf-8")
    server = LatencyServer(delay)
    try:
        local = {**env, "OPENAI_API_BASE": server.base}
        batches, floors, graphs = [], [], []
        for n in range(rounds):
            out = tmp / f"out-{runs}-{n}.jsonl"
            batch = python(BATCH, str(spec), str(cases), str(warm), str(out), str(runs), env=local)
            lines = [json.loads(line) for line in out.read_text().splitlines()]
            if batch["code"] != 0 or len(lines) != runs or any(x["status"] != "final" for x in lines):
                raise SystemExit(f"the batch did not run every case to its end: {batch}")
            if batch["litellm"]:
                raise SystemExit("the batch imported litellm: its calls did not take the native path")
            batches.append(batch)
            floors.append(python(HANDWRITTEN, "127.0.0.1", str(server.port), str(runs), "4", env=local))
            if langgraph:
                graphs.append(python(LANGGRAPH % {"key": KEY}, server.base, str(runs), "4", env=local))
    finally:
        server.close()
    result: dict[str, Any] = {
        f"batch_{runs}x4_s": round(median([b["wall_s"] for b in batches]), 3),
        f"handwritten_{runs}x4_s": round(median([f["wall_s"] for f in floors]), 3),
        f"batch_over_handwritten_{runs}x4": round(median([b["wall_s"] / f["wall_s"]
                                                          for b, f in zip(batches, floors)]), 3),
        f"batch_{runs}x4_peak_rss_mb": round(median([b["peak_rss_mb"] for b in batches]), 1),
        f"ideal_{runs}x4_s": round(4 * delay, 3),
    }
    if langgraph:
        result[f"langgraph_{runs}x4_s"] = round(median([g["wall_s"] for g in graphs]), 3)
        result[f"batch_over_langgraph_{runs}x4"] = round(median([b["wall_s"] / g["wall_s"]
                                                                 for b, g in zip(batches, graphs)]), 3)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="alternated rounds of every measurement")
    parser.add_argument("--cpu-calls", type=int, default=2000, help="sequential calls per CPU measurement")
    parser.add_argument("--delay", type=float, default=0.1, help="the server's latency for the concurrency runs")
    parser.add_argument("--litellm", action="store_true", help="measure litellm's client and run too (slow)")
    args = parser.parse_args()
    installed = ensure_peers()
    env = {**os.environ, "OPENAI_API_KEY": KEY, "LITELLM_LOCAL_MODEL_COST_MAP": "True",
           "STATEWRIGHT_MODEL_CLIENT": "auto", "STATEWRIGHT_QUIET": "1"}
    env.pop("OPENAI_BASE_URL", None)
    result: dict[str, Any] = {"rounds": args.rounds, "installed_peers": installed}
    with tempfile.TemporaryDirectory() as directory:
        tmp = Path(directory)
        instant = LatencyServer(0.0)
        try:
            local = {**env, "OPENAI_API_BASE": instant.base}
            peers = [*(p for p in CPU_PEERS if p != "litellm"), *(["litellm"] if args.litellm else [])]
            cpu = measure_cpu(instant.base, local, args.cpu_calls, args.rounds, peers)
            result.update({f"cpu_ms_{peer}": value for peer, value in cpu.items()})
            result["openai_sdk_over_native_cpu"] = round(cpu["openai_sdk"] / cpu["native"], 2)
            result.update(measure_run(instant.base, local, tmp, args.rounds, args.litellm))
        finally:
            instant.close()
        result.update(measure_first_call(env, tmp, max(args.rounds, 5)))
        result.update(measure_concurrency(env, tmp, 20, args.delay, 1, langgraph=False))
        result.update(measure_concurrency(env, tmp, 200, args.delay, args.rounds, langgraph=True))
        result.update(measure_concurrency(env, tmp, 1000, args.delay, args.rounds, langgraph=False))
    result["memory_per_run_mb"] = round((result["batch_1000x4_peak_rss_mb"] - result["batch_20x4_peak_rss_mb"]) / 980, 4)
    result["targets_met"] = {
        "cpu_per_call_at_most_0.7_ms": result["cpu_ms_native"] <= 0.7,
        "at_least_2x_cheaper_than_openai_sdk": result["openai_sdk_over_native_cpu"] >= 2,
        "run_at_most_1.0_ms_per_call_beyond_help": result["run_per_call_cpu_beyond_help_ms"] <= 1.0,
        "run_peak_rss_at_most_80_mb": result["run_peak_rss_mb"] <= 80,
        "runner_first_call_under_0.5_s": result["runner_one_call_cpu_s"] < 0.5,
        "standalone_runner_first_call_under_0.5_s": result["standalone_runner_one_call_cpu_s"] < 0.5,
        "1000x4_within_3x_handwritten": result["batch_over_handwritten_1000x4"] <= 3,
        "200x4_ahead_of_langgraph": result["batch_over_langgraph_200x4"] < 1,
        "memory_per_run_at_most_0.1_mb": result["memory_per_run_mb"] <= 0.1,
    }
    report(result)
    print("RESULT " + json.dumps(result))


def report(result: dict[str, Any]) -> None:
    print(f"client CPU per call (ms, median of {result['rounds']} rounds):")
    for key, value in result.items():
        if key.startswith("cpu_ms_"):
            print(f"  {key[7:]:14} {value:7.3f}")
    print(f"  openai SDK / native: {result['openai_sdk_over_native_cpu']:.1f}x")
    print(f"statewright run, 300 calls: {result['run_300_wall_s']:.3f} s whole ({result['run_per_call_ms']:.2f} ms a "
          f"call), --help {result['run_help_wall_s']:.3f} s, {result['run_per_call_beyond_help_ms']:.3f} ms a call "
          f"beyond it ({result['run_per_call_cpu_beyond_help_ms']:.3f} ms of CPU); peak RSS "
          f"{result['run_peak_rss_mb']:.0f} MB")
    if "run_litellm_per_call_ms" in result:
        print(f"  through litellm: {result['run_litellm_per_call_ms']:.2f} ms a call, "
              f"peak RSS {result['run_litellm_peak_rss_mb']:.0f} MB")
    for prefix, form in (("runner", "default"), ("standalone_runner", "standalone")):
        print(f"a {form} runner's first model call: {result[f'{prefix}_first_call_s']:.3f} s after its start "
              f"(its --help: {result[f'{prefix}_help_s']:.3f} s; the whole one-call run: "
              f"{result[f'{prefix}_one_call_cpu_s']:.3f} s of CPU)")
    for runs in (200, 1000):
        line = (f"{runs} runs x 4 calls at 100 ms: batch {result[f'batch_{runs}x4_s']:.3f} s, hand-written "
                f"{result[f'handwritten_{runs}x4_s']:.3f} s ({result[f'batch_over_handwritten_{runs}x4']:.2f}x)")
        if f"langgraph_{runs}x4_s" in result:
            line += (f", LangGraph abatch {result[f'langgraph_{runs}x4_s']:.3f} s "
                     f"(batch {result[f'batch_over_langgraph_{runs}x4']:.2f}x it)")
        print(line)
    print(f"memory per concurrent run: {result['memory_per_run_mb'] * 1024:.1f} KB")
    for target, met in result["targets_met"].items():
        print(f"  {'met' if met else 'NOT MET':8} {target}")


if __name__ == "__main__":
    main()
