"""Runs seen where teams look: a real Arize Phoenix server (`phoenix serve` on 127.0.0.1, its own working
directory, offline) takes a run's spans over OTLP, and the test reads them back through Phoenix's REST API —
the tree, the names, the GenAI attributes, one trace across a pause resumed in another process, no secret
anywhere — for `statewright run` (scripted, and through litellm against a fake OpenAI-compatible server),
for `trace export`, and for the Temporal face with two workers. Headless Chromium photographs the trace in
Phoenix's UI for docs/observability.md."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.e2e_runs import ROOT
from support.fake_openai_server import FakeOpenAIServer, Reply
from support.temporal_server import DevServer, temporal_cli

import statewright
from statewright.runtime.scripted import Script
from statewright.runtime.temporal import script_to_json

pytestmark = pytest.mark.slow

PARALLEL = ROOT / "examples" / "parallel_review.fsm"
SCREENSHOT = ROOT / "docs" / "images" / "phoenix-trace.png"
CANARY_KEY = "sk-canary" + "7" * 24  # the model key: it reaches the fake server, never a span
CANARY_SECRET = "phoenix-canary-secret-9931"  # an environment secret the reply echoes
APPROVAL = '''machine refund {
    description "A clerk checks a refund; a person approves it."
    input amount: int
    model "openai/fake-model"
    type Decision {
        approved: bool
        note: str
    }
    agent clerk { prompt "You handle refunds." }
    start state check {
        agent clerk
        do "Check the refund of {{ amount }} USD."
        -> approve
    }
    state approve {
        ask "Refund {{ amount }} USD? The clerk says: {{ check.output }}"
        output Decision
        when output.approved -> pay
        otherwise -> refuse
    }
    final state pay { result "paid {{ amount }}: {{ approve.output.note }}" }
    final state refuse
}
'''


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Phoenix:
    """`phoenix serve` on free 127.0.0.1 ports with a working directory of its own, kept offline."""

    def __init__(self) -> None:
        binary = shutil.which("phoenix", path=os.path.dirname(sys.executable)) or shutil.which("phoenix")
        if binary is None:
            pytest.skip("arize-phoenix is not installed (pip install 'statewright[phoenix]')")
        self.binary = binary
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.dir = tempfile.mkdtemp(prefix="statewright-phoenix-")
        self.log = Path(self.dir) / "phoenix.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 240.0) -> Phoenix:
        env = {**os.environ, "PHOENIX_WORKING_DIR": self.dir, "PHOENIX_PORT": str(self.port),
               "PHOENIX_GRPC_PORT": str(free_port()), "PHOENIX_HOST": "127.0.0.1",
               "PHOENIX_TELEMETRY_ENABLED": "false", "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false"}
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen([self.binary, "serve"], cwd=self.dir, env=env, stdout=log,
                                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError("phoenix serve exited: " + self.log.read_text(errors="replace")[-2000:])
            try:
                with urllib.request.urlopen(f"{self.url}/v1/projects", timeout=2) as answer:
                    if answer.status == 200:
                        return self
            except OSError:
                time.sleep(0.5)
        raise AssertionError(f"phoenix did not start in {timeout:g} s: " + self.log.read_text(errors="replace")[-2000:])

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(self.url + path, timeout=30) as answer:
            return json.loads(answer.read())

    def spans(self, project: str, expect: int = 1, timeout: float = 60.0) -> list[dict[str, Any]]:
        """The spans of a project, once at least `expect` arrived (Phoenix writes them in the background)."""
        deadline = time.monotonic() + timeout
        found: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            found, cursor = [], None
            try:
                while True:
                    page = self.get(f"/v1/projects/{project}/spans/otlpv1?limit=1000"
                                    + (f"&cursor={cursor}" if cursor else ""))
                    found += page["data"]
                    cursor = page.get("next_cursor")
                    if not cursor:
                        break
            except OSError:
                found = []
            if len(found) >= expect:
                time.sleep(1.0)  # the rest of a batch
                return self.spans_now(project)
            time.sleep(0.5)
        raise AssertionError(f"only {len(found)} spans of project {project} reached Phoenix")

    def spans_now(self, project: str) -> list[dict[str, Any]]:
        return list(self.get(f"/v1/projects/{project}/spans/otlpv1?limit=1000")["data"])

    def project_id(self, name: str) -> str:
        return next(p["id"] for p in self.get("/v1/projects")["data"] if p["name"] == name)

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def phoenix() -> Iterator[Phoenix]:
    server = Phoenix()
    try:
        yield server.start()
    finally:
        server.close()


def attributes(span: dict[str, Any]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for item in span.get("attributes") or ():
        value = item["value"]
        found = next((v for k, v in value.items() if v is not None and k != "array_value"), None)
        if value.get("array_value") is not None:
            found = [next(v for v in x.values() if v is not None) for x in value["array_value"]["values"]]
        values[item["key"]] = found
    return values


def shape(spans: list[dict[str, Any]]) -> list[tuple[int, str]]:
    children: dict[Any, list[dict[str, Any]]] = {}
    ids = {s["span_id"] for s in spans}
    for span in spans:
        parent = span.get("parent_span_id") if span.get("parent_span_id") in ids else None
        children.setdefault(parent, []).append(span)
    lines: list[tuple[int, str]] = []

    def walk(parent: Any, depth: int) -> None:
        for span in sorted(children.get(parent, []), key=lambda s: (int(s["start_time_unix_nano"]), s["name"])):
            lines.append((depth, span["name"]))
            walk(span["span_id"], depth + 1)

    walk(None, 0)
    return lines


def otel_env(phoenix: Phoenix, project: str, **more: str) -> dict[str, str]:
    return {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": phoenix.url, "OTEL_METRICS_EXPORTER": "none",
            "OTEL_SERVICE_NAME": "statewright-tests", "OTEL_RESOURCE_ATTRIBUTES": f"openinference.project.name={project}",
            "OTEL_BSP_SCHEDULE_DELAY": "200", "LITELLM_LOCAL_MODEL_COST_MAP": "True", **more}


def statewright_cli(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "statewright", *args], cwd=cwd, env=env, text=True,
                          capture_output=True, timeout=300, check=False)


def no_secret(spans: list[dict[str, Any]], *secrets: str) -> None:
    text = json.dumps(spans)
    for secret in secrets:
        assert secret not in text


def test_parallel_review_in_phoenix_and_its_screenshot(phoenix: Phoenix, tmp_path: Path) -> None:
    machine = statewright.load(PARALLEL)
    test = machine.spec.tests[1]
    script = tmp_path / "script.json"
    script.write_text(json.dumps(script_to_json(Script.from_test(machine.spec, test))))
    trace = tmp_path / "run.jsonl"
    done = statewright_cli("run", str(PARALLEL), "--input", "topic=finite-state machines", "--script", str(script),
                           "--trace", str(trace), "--quiet", "--otel", env=otel_env(phoenix, "parallel"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    spans = phoenix.spans("parallel", expect=26)
    assert len({s["trace_id"] for s in spans}) == 1
    tree = shape(spans)
    assert tree[:3] == [(0, "invoke_agent parallel_review"), (1, "invoke_agent writer"), (2, "chat gpt-4o-mini")]
    assert tree[3:5] == [(1, "state reviews"), (2, "branch accuracy")]
    assert (3, "invoke_agent reviewer") in tree and (4, "chat claude-3-5-haiku-latest") in tree
    assert tree[-1] == (1, "state publish")
    chat = attributes(next(s for s in spans if s["name"] == "chat gpt-4o"))
    assert chat["gen_ai.operation.name"] == "chat" and chat["gen_ai.request.model"] == "gpt-4o"
    assert chat["gen_ai.usage.input_tokens"] > 0 and chat["gen_ai.response.finish_reasons"] == ["stop"]
    assert chat["openinference.span.kind"] == "LLM"  # Phoenix read the GenAI conventions
    reviews = [attributes(s) for s in spans if s["name"] == "state reviews"]
    assert sorted(a["statewright.transition.cause"] for a in reviews) == ["guard", "unconditional"]
    # the same run's trace file, exported later, is the same tree
    exported = statewright_cli("trace", "export", str(trace), "--otlp", phoenix.url,
                               env=otel_env(phoenix, "exported"), cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    assert "sent 26 spans of 1 run segment (1 trace" in exported.stderr
    assert shape(phoenix.spans("exported", expect=26)) == tree
    root = next(s for s in spans if not s.get("parent_span_id"))
    photograph(phoenix, f"/projects/{phoenix.project_id('parallel')}/traces/{root['trace_id']}")


def photograph(phoenix: Phoenix, path: str) -> None:
    """Headless Chromium (Debian's), offline, photographs a page of Phoenix's UI into docs/images."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("no chromium to photograph Phoenix's UI (apt-get install chromium)")
    with tempfile.TemporaryDirectory(prefix="statewright-chromium-") as profile:
        shot = Path(profile) / "shot.png"
        done = subprocess.run(
            [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
             "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1", "--hide-scrollbars",
             "--window-size=1500,950", "--virtual-time-budget=20000", f"--screenshot={shot}", phoenix.url + path],
            capture_output=True, text=True, timeout=180, check=False)
        assert shot.exists() and shot.stat().st_size > 20_000, done.stderr[-2000:]
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, SCREENSHOT)


def test_an_approval_paused_and_resumed_in_another_process_is_one_trace(phoenix: Phoenix, tmp_path: Path) -> None:
    spec = tmp_path / "refund.fsm"
    spec.write_text(APPROVAL)
    with FakeOpenAIServer(default=Reply(text=f"looks fine; the code is {CANARY_SECRET}")) as fake:
        env = otel_env(phoenix, "approval", OPENAI_API_KEY=CANARY_KEY, OPENAI_API_BASE=f"{fake.url}/v1",
                       REFUND_TOKEN=CANARY_SECRET)
        paused = statewright_cli("run", str(spec), "--input", "amount=30", "--run-id", "refund-1", "--otel",
                                 "--trace-content", "--quiet", env=env, cwd=tmp_path)
        assert paused.returncode == 4, paused.stderr
        assert fake.requests, "the model call did not reach the fake server"
    resumed = statewright_cli("resume", "refund-1", "--answer", '{"approved": true, "note": "ok"}', "--otel",
                              "--quiet", env=env, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    spans = phoenix.spans("approval", expect=8)
    assert len({s["trace_id"] for s in spans}) == 1  # the resumed process continued the paused one's trace
    tree = shape(spans)
    assert tree[0] == (0, "invoke_agent refund")
    assert (1, "invoke_agent refund") in tree  # the resumed segment, under the run's first span
    names = {s["name"] for s in spans}
    assert {"invoke_agent clerk", "chat fake-model", "state approve", "await_person approve"} <= names
    chat = attributes(next(s for s in spans if s["name"] == "chat fake-model"))
    assert chat["gen_ai.system"] == "openai" and chat["gen_ai.usage.output_tokens"] == 7
    assert "[REDACTED]" in chat["gen_ai.output.messages"]  # content, asked for, with the secret taken out
    wait = next(s for s in spans if s["name"] == "await_person approve")
    first_end = max(int(s["end_time_unix_nano"]) for s in spans if s["name"] == "invoke_agent clerk")
    assert int(wait["start_time_unix_nano"]) <= int(wait["end_time_unix_nano"])
    assert int(wait["start_time_unix_nano"]) >= first_end - 1_000_000  # asked after the clerk's step
    no_secret(spans, CANARY_KEY, CANARY_SECRET)


@pytest.mark.skipif(temporal_cli() is None, reason="no `temporal` program (statewright[temporal])")
def test_a_run_on_temporal_with_two_workers_is_one_tree(phoenix: Phoenix, tmp_path: Path) -> None:
    """The client's span travels into the workflow and its activities; the worker that ran the first part of a
    run is killed while the run waits for a person, another replays the run and finishes it, and the spans
    both made are one tree in Phoenix, none of them twice."""
    spec = tmp_path / "refund.fsm"
    spec.write_text(APPROVAL)
    with DevServer() as server:
        env = otel_env(phoenix, "temporal", REFUND_TOKEN=CANARY_SECRET,
                       PYTHONPATH=f"{ROOT / 'tests'}{os.pathsep}{ROOT}")
        workers: list[subprocess.Popen[str]] = []

        def worker() -> subprocess.Popen[str]:
            process = subprocess.Popen([sys.executable, "-m", "statewright", "worker", str(spec), "--temporal",
                                        server.address, "--otel"], cwd=tmp_path, env=env, text=True,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            assert process.stderr is not None
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:
                line = process.stderr.readline()
                if "serving" in line:
                    workers.append(process)
                    return process
                if not line and process.poll() is not None:
                    break
            raise AssertionError("the worker did not start")

        try:
            first = worker()
            script = tmp_path / "script.json"
            script.write_text(json.dumps({"agent": {"check": [{"value": "fine", "delay": 0}]}}))
            started = statewright_cli("run", str(spec), "--input", "amount=12", "--temporal", server.address,
                                      "--script", str(script), "--run-id", "refund-t", "--detach", "--otel",
                                      env=env, cwd=tmp_path)
            assert started.returncode == 0, started.stderr
            wait_for_waiting(server.address, "refund-t", env, tmp_path)
            first.kill()  # the run waits for a person; its worker dies; another takes the run over
            first.wait(timeout=10)
            worker()
            answered = statewright_cli("resume", "refund-t", "--temporal", server.address, "--answer",
                                       '{"approved": true, "note": "ok"}', env=env, cwd=tmp_path)
            assert answered.returncode == 0, answered.stderr
            status = wait_for_status(server.address, "refund-t", env, tmp_path, "final")
            assert status["result"]["final_state"] == "pay"
        finally:
            for process in workers:
                if process.poll() is None:
                    process.terminate()
                    process.wait(timeout=30)
    spans = phoenix.spans("temporal", expect=8)
    assert len({s["trace_id"] for s in spans}) == 1
    tree = shape(spans)
    assert tree[0] == (0, "start_run refund") and tree[1] == (1, "invoke_agent refund")
    names = [s["name"] for s in spans]
    assert names.count("invoke_agent refund") == 1 and names.count("chat fake-model") == 1  # none twice
    assert "await_person approve" in names and "RunActivity:statewright.call_model" in names
    activity = next(s for s in spans if s["name"] == "RunActivity:statewright.call_model")
    chat_parent = next(s for s in spans if s["span_id"] == activity["parent_span_id"])
    assert chat_parent["name"] == "invoke_agent clerk"
    root = attributes(next(s for s in spans if s["name"] == "invoke_agent refund"))
    assert root["statewright.status"] == "final"
    no_secret(spans, CANARY_SECRET)


def wait_for_status(address: str, run_id: str, env: dict[str, str], cwd: Path, wanted: str) -> dict[str, Any]:
    deadline = time.monotonic() + 120
    data: dict[str, Any] = {}
    while time.monotonic() < deadline:
        done = statewright_cli("status", run_id, "--temporal", address, env=env, cwd=cwd)
        if done.returncode == 0:
            data = json.loads(done.stdout)
            if data.get("status") == wanted:
                return data
        time.sleep(0.5)
    raise AssertionError(f"run {run_id} never reached {wanted}: {data}")


def wait_for_waiting(address: str, run_id: str, env: dict[str, str], cwd: Path) -> None:
    wait_for_status(address, run_id, env, cwd, "waiting")
