"""Runs as Temporal workflows, on a real dev server (`temporal server start-dev`, one for this module):
the same results, paths and transition causes as local runs; a worker killed mid-run is replaced without
any completed model call being made again; a run waiting for a person survives every worker's restart."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.e2e_runs import ROOT
from support.fake_openai_server import FakeOpenAIServer, Reply, Slow
from support.temporal_server import DevServer, temporal_cli

from statewright import api
from statewright.runtime.runner_cli import run_machine
from statewright.runtime.scripted import Script
from statewright.runtime.temporal import (
    TemporalMachines,
    TemporalRunError,
    TemporalRunner,
    temporal_connect,
    temporal_result,
    temporal_status,
)
from statewright.runtime.temporal_worker import temporal_workflow_class
from statewright.runtime.trace import Trace

temporalio = pytest.importorskip("temporalio")
pytestmark = pytest.mark.skipif(temporal_cli() is None, reason="no `temporal` program (statewright[temporal])")

CONTENT = ROOT / "examples" / "content_pipeline.fsm"
EVALUATOR = ROOT / "examples" / "evaluator_optimizer.fsm"
LINEAR = """machine linear {
    description "Four steps, each one model call, for counting calls at a fake server."
    input topic: str
    model "openai/fake-model"
    agent worker { prompt "You do one step at a time." }
    start state one { agent worker  do "Step one about {{ topic }}."  -> two }
    state two { agent worker  do "Step two about {{ topic }}."  -> three }
    state three { agent worker  do "Step three about {{ topic }}."  -> four }
    state four { agent worker  do "Step four about {{ topic }}."  -> done }
    final state done
}
"""
SHORT = """machine short {
    description "A loop the step limit ends."
    input topic: str
    model "openai/gpt-4o-mini"
    limits { steps 3 }
    agent a { prompt "p" }
    start state ask { agent a  do "Say something about {{ topic }}."  -> again }
    state again { agent a  do "Again."  -> ask max 5  otherwise -> done }
    final state done
}
"""


@pytest.fixture(scope="module")
def server() -> Iterator[DevServer]:
    with DevServer() as running:
        yield running


# How long after a worker is killed a request it sent just before may still be read by the fake server.
KILL_SLACK = 0.25


class Workers:
    """Worker processes: `statewright worker` or the test helper with its stand-in human state."""

    def __init__(self, address: str, cwd: Path) -> None:
        self.address = address
        self.cwd = cwd
        self.processes: list[subprocess.Popen[str]] = []

    def start(self, *args: str, helper: bool = False, env: dict[str, str] | None = None,
              runner: Path | None = None) -> subprocess.Popen[str]:
        """`statewright worker ARGS`, the test helper (`helper`), or a generated runner's own `worker`."""
        if helper:
            command = [sys.executable, "-m", "support.temporal_worker", "--temporal", self.address, *args]
        elif runner is not None:
            command = [sys.executable, str(runner), "worker", *args, "--temporal", self.address]
        else:
            command = [sys.executable, "-m", "statewright", "worker", *args, "--temporal", self.address]
        environment = {**os.environ, "PYTHONPATH": f"{ROOT / 'tests'}{os.pathsep}{ROOT}", **(env or {})}
        process = subprocess.Popen(command, cwd=self.cwd, env=environment, text=True, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT)
        self.processes.append(process)
        assert process.stdout is not None
        deadline = time.monotonic() + 60
        seen = []
        while time.monotonic() < deadline:  # a worker announces each task queue it polls
            line = process.stdout.readline()
            seen.append(line)
            if not line and process.poll() is not None:
                raise AssertionError("the worker exited: " + "".join(seen))
            if "serving" in line:
                return process
        raise AssertionError("the worker did not start: " + "".join(seen))

    def kill(self, process: subprocess.Popen[str]) -> None:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)

    def close(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


@pytest.fixture()
def workers(server: DevServer, tmp_path: Path) -> Iterator[Workers]:
    group = Workers(server.address, tmp_path)
    try:
        yield group
    finally:
        group.close()


def cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "statewright", *args], cwd=cwd, text=True, capture_output=True,
                          check=False, timeout=300)


def machine(path: Path, level: int = 1) -> Any:
    return api.runtime_machine(api.check_path(path), level=level)


def transitions(events: list[dict[str, Any]]) -> list[tuple[Any, Any, Any]]:
    return [(e["from"], e["to"], e["cause"]) for e in events if e["event"] == "transition"]


def comparable(result: Any) -> dict[str, Any]:
    data = result.to_json()
    return {k: v for k, v in data.items() if k not in ("run_id", "workspace")}


# ---- the commands --------------------------------------------------------------------------------------


def test_test_blocks_on_the_cluster_print_the_local_summary(server: DevServer, workers: Workers,
                                                            tmp_path: Path) -> None:
    workers.start(str(CONTENT))
    local = cli("test", str(CONTENT), "--color", "never")
    remote = cli("test", str(CONTENT), "--color", "never", "--temporal", server.address,
                 "--trace", str(tmp_path / "traces"))
    assert remote.returncode == local.returncode == 0, remote.stderr
    assert remote.stdout == local.stdout
    assert remote.stderr.splitlines()[-1] == local.stderr.splitlines()[-1] == "3 passed, 0 failed"
    traces = sorted((tmp_path / "traces").glob("*.jsonl"))
    assert len(traces) == 3
    shown = cli("trace", "show", str(traces[0]))
    assert shown.returncode == 0 and "end: final state" in shown.stdout, shown.stderr
    # the same with the calls made in segments
    segments = cli("test", str(CONTENT), "--color", "never", "--temporal", server.address, "--durability", "segment")
    assert segments.returncode == 0, segments.stderr
    assert segments.stdout == local.stdout
    # a generated runner runs its own test blocks on the cluster too, by default and in segments
    runner = tmp_path / "runner.py"
    assert cli("compile", str(CONTENT), "-o", str(runner)).returncode == 0
    for durability in ("call", "segment"):
        proc = subprocess.run([sys.executable, str(runner), "--selftest", "--temporal", server.address,
                               "--durability", durability], cwd=tmp_path, text=True, capture_output=True,
                              check=False, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == local.stdout


@pytest.mark.parametrize("form", ["package", "standalone"])
def test_a_runner_serves_its_own_machine_and_runs_its_tests_on_it(server: DevServer, workers: Workers,
                                                                   tmp_path: Path, form: str) -> None:
    """A runner's own `worker` command serves its machine on the runtime it carries — the package beside it,
    or a one-file runner's own — and the runner's self-test runs there as it runs locally."""
    runner = tmp_path / "runner.py"
    done = cli("compile", str(CONTENT), "-o", str(runner), *(["--standalone"] if form == "standalone" else []))
    assert done.returncode == 0, done.stderr
    queue = f"runner-{form}"
    workers.start("--task-queue", queue, runner=runner, env={"PYTHONPATH": ""})
    local = subprocess.run([sys.executable, str(runner), "--selftest"], cwd=tmp_path, text=True,
                           capture_output=True, check=False, timeout=120)
    remote = subprocess.run([sys.executable, str(runner), "--selftest", "--temporal", server.address, "--task-queue",
                             queue], cwd=tmp_path, text=True, capture_output=True, check=False, timeout=120)
    assert remote.returncode == local.returncode == 0, remote.stderr
    assert remote.stdout == local.stdout and "PASS" in remote.stdout


def test_run_detach_status_and_trace_on_the_cluster(server: DevServer, workers: Workers, tmp_path: Path) -> None:
    workers.start(str(CONTENT))
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"agent": {"harvest": [{"key_points": ["k"], "open_questions": []}],
                                            "draft": ["A draft."], "review": [{"score": 90, "fixes": []}]}}))
    local_trace, remote_trace = tmp_path / "local.jsonl", tmp_path / "remote.jsonl"
    common = ["--input", "topic=x", "--script", str(script), "--quiet"]
    local = cli("run", str(CONTENT), *common, "--trace", str(local_trace))
    remote = cli("run", str(CONTENT), *common, "--trace", str(remote_trace), "--temporal", server.address,
                 "--run-id", "cli-run-1")
    assert remote.returncode == local.returncode == 0, remote.stderr
    assert {k: v for k, v in json.loads(remote.stdout).items() if k not in ("run_id", "workspace")} == {
        k: v for k, v in json.loads(local.stdout).items() if k not in ("run_id", "workspace")}

    def shape(path: Path) -> list[dict[str, Any]]:
        drop = ("time", "latency_ms", "run_id", "workspace", "seconds")
        return [{k: v for k, v in json.loads(line).items() if k not in drop} for line in path.read_text().splitlines()]

    assert shape(remote_trace) == shape(local_trace)
    detached = cli("run", str(CONTENT), *common, "--temporal", server.address, "--detach", "--run-id", "cli-run-2")
    assert detached.returncode == 0 and detached.stdout.strip() == "cli-run-2", detached.stderr
    status: dict[str, Any] = {}
    for _ in range(50):
        shown = cli("status", "cli-run-2", "--temporal", server.address)
        assert shown.returncode == 0, shown.stderr
        status = json.loads(shown.stdout)
        if status.get("status") == "final":
            break
        time.sleep(0.2)
    assert status["path"] == ["harvest", "draft", "review", "publish"]
    assert status["result"]["result"] == "A draft."
    missing = cli("status", "no-such-run", "--temporal", server.address)
    assert missing.returncode == 1 and "no run 'no-such-run'" in missing.stderr
    # a batch whose case is already running on the cluster (an interrupted batch, resumed) waits for it
    slow = tmp_path / "slow.json"
    slow.write_text(json.dumps({"agent": {"harvest": [{"key_points": ["k"], "open_questions": []}],
                                          "draft": [{"value": "Slow.", "delay": 2}],
                                          "review": [{"score": 90, "fixes": []}]}}))
    first = cli("run", str(CONTENT), "--input", "topic=y", "--script", str(slow), "--temporal", server.address,
                "--detach", "--run-id", "case-1")
    assert first.returncode == 0, first.stderr
    cases = tmp_path / "cases.jsonl"
    cases.write_text('{"id": "case-1", "inputs": {"topic": "y"}}\n{"id": "case-2", "inputs": {"topic": "z"}}\n')
    batch = cli("batch", str(CONTENT), "--inputs", str(cases), "--script", str(slow), "--temporal", server.address,
                "--quiet")
    assert batch.returncode == 0, batch.stderr
    lines = [json.loads(line) for line in batch.stdout.splitlines()]
    assert sorted((line["id"], line["result"]) for line in lines) == [("case-1", "Slow."), ("case-2", "Slow.")]

    async def runs_of_case_1() -> int:
        client = await temporal_connect(server.address)
        return len([w async for w in client.list_workflows('WorkflowId = "case-1"')])

    assert asyncio.run(runs_of_case_1()) == 1  # waited for, not started again


def test_limits_are_the_cores_and_a_worker_refuses_a_machine_it_does_not_serve(
        server: DevServer, workers: Workers, tmp_path: Path) -> None:
    spec = tmp_path / "short.fsm"
    spec.write_text(SHORT)
    workers.start(str(spec))
    short = machine(spec)
    script = Script.from_json({"agent": {"ask": ["a", "b", "c"], "again": ["x", "y", "z"]}})
    local = run_machine(short, {"topic": "t"}, script=script)
    remote = asyncio.run(TemporalRunner(short, server.address, script=script).arun({"topic": "t"}))
    assert local.failure is not None and local.failure.limit == "steps"
    assert comparable(remote) == comparable(local)
    # a changed source on the same task queue: the worker names what it serves and how to serve this one
    changed = dataclasses.replace(short, source_sha256="f" * 64)
    runner = TemporalRunner(changed, server.address, task_queue=TemporalRunner(short, server.address).task_queue,
                            script=script)
    with pytest.raises(TemporalRunError, match="does not serve machine 'short'.*start a worker for that version"):
        asyncio.run(runner.arun({"topic": "t"}))


@pytest.mark.parametrize("durability", ["call", "segment"])
def test_a_history_replays_to_the_same_run_and_a_changed_spec_refuses_it(server: DevServer, workers: Workers,
                                                                         tmp_path: Path, durability: str) -> None:
    """A run's history replays through the workflow without a difference (with its calls as activities, and
    taken from segments: what the workflow does with a segment's answers is replay-safe)."""
    from temporalio.worker import Replayer, UnsandboxedWorkflowRunner

    workers.start(str(EVALUATOR))
    evaluator = machine(EVALUATOR)
    script = Script.from_json({
        "agent": {"outline": ["1. Loops", "1. Loops (10 min)"],
                  "evaluate": [{"decision": "accept", "strengths": ["s"], "problems": []}]},
        "verifier": {"outline": [{"choice": "none", "reason": "r", "feedback": "f"},
                                 {"choice": "every section has a length in minutes", "reason": "r", "feedback": ""}]},
    })

    async def go() -> None:
        runner = TemporalRunner(evaluator, server.address, script=script, durability=durability)
        handle = await runner.start({"subject": "FSMs"}, run_id=f"replay-{durability}")
        result = await temporal_result(handle)
        assert result.path == ["outline", "outline", "evaluate", "accepted"]
        history = await handle.fetch_history()
        kinds = {e.activity_task_scheduled_event_attributes.activity_type.name for e in history.events
                 if e.HasField("activity_task_scheduled_event_attributes")}
        assert ("statewright.run_segment" in kinds) == (durability == "segment"), kinds
        same = Replayer(workflows=[temporal_workflow_class(TemporalMachines([evaluator]))],
                        workflow_runner=UnsandboxedWorkflowRunner())
        await same.replay_workflow(history)  # raises on any nondeterminism
        edited = dataclasses.replace(evaluator, source_sha256="e" * 64)
        other = Replayer(workflows=[temporal_workflow_class(TemporalMachines([edited]))],
                         workflow_runner=UnsandboxedWorkflowRunner())
        replayed = await other.replay_workflow(history, raise_on_replay_failure=False)
        assert replayed.replay_failure is not None

    asyncio.run(go())


def test_branches_whose_calls_come_from_segments_replay_and_end_as_locally(server: DevServer, workers: Workers,
                                                                          tmp_path: Path) -> None:
    """parallel_review's test blocks with --durability segment: branches take their calls from one segment at
    once, the run ends as locally, and its history replays through the workflow without a difference."""
    from temporalio.worker import Replayer, UnsandboxedWorkflowRunner

    from statewright.runtime.engine import Engine

    parallel = ROOT / "examples" / "parallel_review.fsm"
    workers.start(str(parallel))
    review = machine(parallel)

    async def go() -> None:
        replayer = Replayer(workflows=[temporal_workflow_class(TemporalMachines([review]))],
                            workflow_runner=UnsandboxedWorkflowRunner())
        for index, test in enumerate(review.tests):
            script = Script.from_test(review, test)
            local = Engine(review, script=script, workspace=str(tmp_path / f"local-{index}")).run(dict(test.inputs))
            runner = TemporalRunner(review, server.address, script=script, durability="segment")
            handle = await runner.start(dict(test.inputs), run_id=f"segment-branches-{index}")
            remote = await asyncio.wait_for(temporal_result(handle), 60)
            assert (remote.status, remote.path, remote.result) == (local.status, local.path, local.result)
            assert remote.usage.llm_calls == local.usage.llm_calls
            history = await handle.fetch_history()
            await replayer.replay_workflow(history)  # raises on any nondeterminism

    asyncio.run(go())


# ---- a person's answer ---------------------------------------------------------------------------------


HUMAN = """machine approval {
    input topic: str

    agent writer {
        prompt "You write."
    }

    start state draft {
        agent writer
        do "Draft a note on {{ topic }}."
        -> approve
    }

    state approve {
        ask "Publish this draft? {{ draft.output }}"
        output "yes" | "no"
        after DEADLINE -> late
        when output == "yes" -> publish
        otherwise -> rejected
    }

    final state publish {
        result "{{ draft.output }}"
    }

    final state rejected

    final state late
}
"""
HUMAN_SCRIPT = Script.from_json({"agent": {"draft": ["A draft about x."]}})


def human_spec(tmp_path: Path, deadline: str) -> Path:
    path = tmp_path / "approval.fsm"
    path.write_text(HUMAN.replace("DEADLINE", deadline), encoding="utf-8")
    return path


def test_a_wait_for_a_person_ends_at_its_durable_timeout(server: DevServer, workers: Workers,
                                                         tmp_path: Path) -> None:
    spec = human_spec(tmp_path, "1s")
    workers.start("--spec", str(spec), "--task-queue", "human-timeout", helper=True)
    runner = TemporalRunner(machine(spec), server.address, task_queue="human-timeout", script=HUMAN_SCRIPT)
    result = asyncio.run(runner.arun({"topic": "x"}))
    assert result.ok and result.path == ["draft", "approve", "late"]


def test_scripted_answers_run_on_the_cluster_as_locally(server: DevServer, workers: Workers,
                                                        tmp_path: Path) -> None:
    spec = human_spec(tmp_path, "24h")
    workers.start("--spec", str(spec), "--task-queue", "human-scripted", helper=True)
    script = Script.from_json({"agent": {"draft": ["A draft."]}, "person": {"approve": [{"answer": "no"}]}})
    runner = TemporalRunner(machine(spec), server.address, task_queue="human-scripted", script=script)
    remote = asyncio.run(runner.arun({"topic": "x"}))
    local = run_machine(machine(spec), {"topic": "x"}, script=script)
    assert (remote.status, remote.path) == (local.status, local.path) == ("final", ["draft", "approve", "rejected"])


async def waiting(address: str, run_id: str) -> dict[str, Any]:
    """The status of a run once it waits for a person (within 30 s)."""
    status: dict[str, Any] = {}
    for _ in range(300):
        status = await temporal_status(address, run_id)
        if status.get("status") == "waiting":
            return status
        await asyncio.sleep(0.1)
    raise AssertionError(f"the run never waited: {status}")


def test_a_machine_that_asks_starts_detached_and_ends_with_the_answer_given_by_resume(
        server: DevServer, workers: Workers, tmp_path: Path) -> None:
    spec = human_spec(tmp_path, "24h")
    workers.start(str(spec))
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"agent": {"draft": ["A draft about x."]}}), encoding="utf-8")
    started = cli("run", str(spec), "--input", "topic=x", "--script", str(script), "--temporal", server.address,
                  "--detach", "--run-id", "asks-1", cwd=tmp_path)
    assert started.returncode == 0, started.stderr  # no default checkpoint is forced on a run on the cluster
    assert started.stdout.strip() == "asks-1"
    assert not (tmp_path / ".statewright" / "checkpoints.sqlite").exists()

    assert asyncio.run(waiting(server.address, "asks-1"))["waiting"]["state"] == "approve"
    answered = cli("resume", "asks-1", "--answer", "yes", "--temporal", server.address)
    assert answered.returncode == 0, answered.stderr

    async def result() -> Any:
        client = await temporal_connect(server.address)
        return await asyncio.wait_for(temporal_result(client.get_workflow_handle("asks-1")), 60)

    final = asyncio.run(result())
    assert (final.status, final.final_state, final.result) == ("final", "publish", "A draft about x.")


def test_a_batch_resumed_takes_the_result_of_a_case_that_finished_while_it_was_away(
        server: DevServer, workers: Workers, tmp_path: Path) -> None:
    workers.start(str(CONTENT))
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"agent": {"harvest": [{"key_points": ["k"], "open_questions": []}],
                                            "draft": ["A draft."], "review": [{"score": 90, "fixes": []}]}}))
    cases = tmp_path / "cases.jsonl"
    cases.write_text('{"id": "away-1", "inputs": {"topic": "y"}}\n{"id": "away-2", "inputs": {"topic": "z"}}\n')
    out = tmp_path / "results.jsonl"
    common = ["batch", str(CONTENT), "--inputs", str(cases), "--script", str(script), "--temporal",
              server.address, "--out", str(out), "--quiet"]
    first = cli(*common)
    assert first.returncode == 0, first.stderr
    lines = out.read_text().splitlines()
    # the batch's client died after both workflows finished but before it wrote the second case's line
    out.write_text(lines[0] + "\n")
    again = cli(*common, "--resume")
    assert again.returncode == 0, again.stderr
    resumed = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(line["id"] for line in resumed) == ["away-1", "away-2"]
    assert all(line["status"] == "final" for line in resumed)

    async def runs_of(run_id: str) -> int:
        client = await temporal_connect(server.address)
        return len([w async for w in client.list_workflows(f'WorkflowId = "{run_id}"')])

    assert asyncio.run(runs_of("away-2")) == 1  # its result taken, the workflow not started again
    started_again = cli("run", str(CONTENT), "--input", "topic=z", "--script", str(script), "--temporal",
                        server.address, "--run-id", "away-2")
    assert started_again.returncode == 1 and "already exists on the cluster" in started_again.stderr


@pytest.mark.slow
def test_a_run_waiting_for_a_person_survives_a_restart_of_every_worker(server: DevServer, workers: Workers,
                                                                       tmp_path: Path) -> None:
    spec = human_spec(tmp_path, "24h")
    ask = ("--spec", str(spec), "--task-queue", "human")
    first = [workers.start(*ask, helper=True), workers.start(*ask, helper=True)]
    runner = TemporalRunner(machine(spec), server.address, task_queue="human", script=HUMAN_SCRIPT)

    async def started() -> Any:
        await runner.start({"topic": "x"}, run_id="waits-1", trace=True)
        for _ in range(100):
            status = await temporal_status(server.address, "waits-1")
            if status.get("status") == "waiting":
                return status
            await asyncio.sleep(0.1)
        raise AssertionError(f"the run never waited: {status}")

    status = asyncio.run(started())
    assert status["waiting"]["state"] == "approve" and status["path"] == ["draft", "approve"]
    assert status["waiting"]["question"] == "Publish this draft? A draft about x."
    for process in first:
        workers.kill(process)
    workers.start(*ask, helper=True)
    refused = cli("resume", "waits-1", "--answer", "maybe", "--temporal", server.address)
    assert refused.returncode == 2 and "keeps waiting" in refused.stderr, refused.stderr
    answered = cli("resume", "waits-1", "--answer", "yes", "--by", "ed", "--temporal", server.address)
    assert answered.returncode == 0, answered.stderr

    async def finished() -> tuple[Any, list[dict[str, Any]]]:
        client = await temporal_connect(server.address)
        handle = client.get_workflow_handle("waits-1")
        result = await asyncio.wait_for(temporal_result(handle), 60)
        sink: list[dict[str, Any]] = []
        from statewright.runtime.temporal import temporal_copy_trace

        await temporal_copy_trace(handle, Trace(sink=sink))
        return result, sink

    result, events = asyncio.run(finished())
    assert result.ok and result.path == ["draft", "approve", "publish"]
    assert result.result == "A draft about x."
    assert [e["event"] for e in events if e["event"].startswith("answer")] == ["answer_refused", "answered_by",
                                                                               "answer"]


# ---- many runs, two workers ----------------------------------------------------------------------------


def evaluator_script(index: int) -> Script:
    """Scripts that take different paths: timed at once or after a `stay`, accepted or revised."""
    stays = index % 2
    revisions = index % 3
    outline = [f"1. Loops, take {index}"] * stays + [f"1. Loops (10 min), take {index}"]
    verdicts = [{"choice": "none", "reason": "untimed", "feedback": "time it"}] * stays + [
        {"choice": "every section has a length in minutes", "reason": "timed", "feedback": ""}]
    evaluations = [{"decision": "revise", "strengths": ["s"], "problems": [f"p{index}"]}] * revisions + [
        {"decision": "accept", "strengths": ["s"], "problems": []}]
    return Script.from_json({"agent": {"outline": outline, "evaluate": evaluations,
                                       "revise": [f"revised {index}.{n}" for n in range(revisions)]},
                             "verifier": {"outline": verdicts}})


@pytest.mark.slow
def test_fifty_runs_through_two_workers_match_local_runs(server: DevServer, workers: Workers,
                                                         tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    for _ in range(2):
        workers.start("--spec", str(EVALUATOR), "--task-queue", "fifty", helper=True,
                      env={"STATEWRIGHT_SCRIPT_LOG": str(log)})
    evaluator = machine(EVALUATOR)
    scripts = [evaluator_script(i) for i in range(50)]
    local = []
    for i, script in enumerate(scripts):
        sink: list[dict[str, Any]] = []
        result = run_machine(evaluator, {"subject": f"s{i}"}, script=script, trace=Trace(sink=sink))
        local.append((comparable(result), transitions(sink)))

    async def remote() -> list[tuple[dict[str, Any], list[Any]]]:
        runner = TemporalRunner(evaluator, server.address, task_queue="fifty")

        async def one(i: int) -> tuple[dict[str, Any], list[Any]]:
            sink: list[dict[str, Any]] = []
            result = await runner.arun({"subject": f"s{i}"}, run_id=f"fifty-{i}", script=scripts[i],
                                       trace=Trace(sink=sink))
            return comparable(result), transitions(sink)

        return list(await asyncio.gather(*(one(i) for i in range(50))))

    assert asyncio.run(remote()) == local
    assert len({tuple(path) for (result, _), in zip(local) for path in [result["path"]]}) >= 4
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert len({call["pid"] for call in calls}) == 2  # both workers made calls


@pytest.mark.slow
@pytest.mark.parametrize("durability", ["call", "segment"])
def test_a_worker_killed_mid_runs_leaves_them_to_the_other_and_no_completed_call_is_made_again(
        server: DevServer, workers: Workers, tmp_path: Path, durability: str) -> None:
    """With each call an activity (`call`) and with a run's calls made in a segment activity that records
    each by its heartbeat (`segment`): only the calls the killed worker had in flight are made again."""
    queue = f"kill-{durability}"
    spec = tmp_path / "linear.fsm"
    spec.write_text(LINEAR)
    delay = 0.5
    with FakeOpenAIServer(default=Slow(delay, Reply(text="done"))) as fake:
        def env(name: str) -> dict[str, str]:  # each worker's calls come to their own path
            return {"OPENAI_API_KEY": "sk-fake-key-for-tests", "OPENAI_API_BASE": f"{fake.url}/{name}/v1"}

        doomed = workers.start("--spec", str(spec), "--task-queue", queue, "--concurrency", "4", helper=True,
                               env=env("doomed"))
        workers.start("--spec", str(spec), "--task-queue", queue, "--concurrency", "4", helper=True,
                      env=env("other"))
        linear = machine(spec)
        runs = 12

        async def go() -> tuple[list[Any], float]:
            runner = TemporalRunner(linear, server.address, task_queue=queue, heartbeat=4.0, durability=durability)
            handles = [await runner.start({"topic": f"topic-{i}"}, run_id=f"{queue}-{i}") for i in range(runs)]
            def doomed_in_flight() -> bool:  # a call the doomed worker began less than half a reply ago
                now = time.monotonic()
                return any(r.path.startswith("/doomed/") and now - r.at < delay / 2 for r in fake.requests)

            while len(fake.requests) < 12 or not doomed_in_flight():
                await asyncio.sleep(0.02)
            workers.kill(doomed)  # SIGKILL, and waited for: nothing is sent by it after this
            # (a request it sent just before reaches the fake server a moment later: KILL_SLACK)
            killed_at = time.monotonic()
            results = await asyncio.wait_for(asyncio.gather(*(temporal_result(h) for h in handles)), 120)
            return list(results), killed_at

        results, killed_at = asyncio.run(go())
    assert all(r.ok and r.path == ["one", "two", "three", "four", "done"] for r in results)

    def key(request: Any) -> tuple[str, str]:
        text = request.body["messages"][-1]["content"]
        return text.split(" about ")[1], text.split(" about ")[0]

    counts = Counter(key(r) for r in fake.requests)
    assert set(counts) == {(f"topic-{i}.", step) for i in range(runs)
                           for step in ("Step one", "Step two", "Step three", "Step four")}
    repeated = {k for k, n in counts.items() if n > 1}
    # only calls the killed worker had in flight were made again: each first made by that worker, begun
    # within one reply's time before the kill; every call the other worker made was made once
    assert repeated
    for call in repeated:
        first, *again = [r for r in fake.requests if key(r) == call]
        assert first.path.startswith("/doomed/") and killed_at - delay - 1.0 <= first.at <= killed_at + KILL_SLACK, call
        assert [r.path.startswith("/other/") for r in again] == [True], call
    assert all(n <= 2 for n in counts.values())
    assert len([r for r in fake.requests if r.path.startswith("/doomed/") and r.at > killed_at + KILL_SLACK]) == 0
    assert sum(r.usage.llm_calls for r in results) == runs * 4


LEAD = """use "linear.fsm"

machine lead {
    description "A step of its own, the four steps of `linear` as a call, and a step after it."
    input topic: str
    model "openai/fake-model"
    agent planner { prompt "You plan." }
    start state plan { agent planner  do "Plan about {{ topic }}."  -> work }
    state work {
        run linear(topic = topic)
        when output.ok -> wrap
        otherwise -> failed
    }
    state wrap { agent planner  do "Wrap up about {{ topic }}."  -> done }
    final state done
    final state failed { fail "the call failed" }
}
"""


@pytest.mark.slow
@pytest.mark.parametrize("durability", ["call", "segment"])
def test_a_worker_killed_inside_calls_leaves_them_to_the_other_and_no_completed_call_is_made_again(
        server: DevServer, workers: Workers, tmp_path: Path, durability: str) -> None:
    """Runs whose workers die while they are inside a call of another machine go on at the other worker,
    inside the call: only calls the killed worker had in flight are made again, each once."""
    queue = f"kill-calls-{durability}"
    (tmp_path / "linear.fsm").write_text(LINEAR)
    spec = tmp_path / "lead.fsm"
    spec.write_text(LEAD)
    delay = 0.5
    with FakeOpenAIServer(default=Slow(delay, Reply(text="done"))) as fake:
        def env(name: str) -> dict[str, str]:
            return {"OPENAI_API_KEY": "sk-fake-key-for-tests", "OPENAI_API_BASE": f"{fake.url}/{name}/v1"}

        doomed = workers.start("--spec", str(spec), "--task-queue", queue, "--concurrency", "4",
                               helper=True, env=env("doomed"))
        workers.start("--spec", str(spec), "--task-queue", queue, "--concurrency", "4", helper=True,
                      env=env("other"))
        lead = machine(spec)
        runs = 8

        async def go() -> tuple[list[Any], float]:
            runner = TemporalRunner(lead, server.address, task_queue=queue, heartbeat=4.0, durability=durability)
            handles = [await runner.start({"topic": f"topic-{i}"}, run_id=f"{queue}-{i}") for i in range(runs)]

            def doomed_inside_a_call() -> bool:  # a call of `linear` the doomed worker began just now
                now = time.monotonic()
                return any(r.path.startswith("/doomed/") and now - r.at < delay / 2
                           and r.body["messages"][-1]["content"].startswith("Step") for r in fake.requests)

            while len(fake.requests) < runs + 4 or not doomed_inside_a_call():
                await asyncio.sleep(0.02)
            workers.kill(doomed)  # SIGKILL, and waited for: nothing is sent by it after this
            # (a request it sent just before reaches the fake server a moment later: KILL_SLACK)
            killed_at = time.monotonic()
            results = await asyncio.wait_for(asyncio.gather(*(temporal_result(h) for h in handles)), 180)
            return list(results), killed_at

        results, killed_at = asyncio.run(go())
    assert all(r.ok and r.path == ["plan", "work", "wrap", "done"] for r in results), [r.failure for r in results]

    def key(request: Any) -> tuple[str, str]:
        text = request.body["messages"][-1]["content"]
        return text.split(" about ")[1], text.split(" about ")[0]

    counts = Counter(key(r) for r in fake.requests)
    assert set(counts) == {(f"topic-{i}.", step) for i in range(runs)
                           for step in ("Plan", "Step one", "Step two", "Step three", "Step four", "Wrap up")}
    repeated = {k for k, n in counts.items() if n > 1}
    assert any(step.startswith("Step") for _, step in repeated)  # the kill came inside a call
    for call in repeated:  # made again only if the killed worker had it in flight, and then once
        first, *again = [r for r in fake.requests if key(r) == call]
        assert first.path.startswith("/doomed/") and killed_at - delay - 1.0 <= first.at <= killed_at + KILL_SLACK, call
        assert [r.path.startswith("/other/") for r in again] == [True], call
    assert not [r for r in fake.requests if r.path.startswith("/doomed/") and r.at > killed_at + KILL_SLACK]
    assert sum(r.usage.llm_calls for r in results) == runs * 6


ASK_THEN_REVISE = """machine ask_revise {
    description "A call, a person's answer, and calls after it: what a segment drives a run past."
    input topic: str
    model "openai/fake-model"
    agent writer { prompt "You write." }
    start state draft { agent writer  do "Draft about {{ topic }}."  -> approve }
    state approve {
        ask "Go on with {{ draft.output }}?"
        output "yes" | "no"
        when output == "yes" -> revise
        otherwise -> done
    }
    state revise { agent writer  do "Revise about {{ topic }}."  -> polish }
    state polish { agent writer  do "Polish about {{ topic }}."  -> done }
    final state done
}
"""


def test_segments_drive_a_run_past_a_persons_answer_and_make_each_call_once(
        server: DevServer, workers: Workers, tmp_path: Path) -> None:
    """--durability segment through the command line: a run waits for a person (its segment ends there),
    the answer comes with `resume`, and the next segment drives the run past the draft and the answer to
    the calls after them; every call reaches the model once, the result is the local run's."""
    spec = tmp_path / "ask_revise.fsm"
    spec.write_text(ASK_THEN_REVISE)
    with FakeOpenAIServer(default=Reply(text="text")) as fake:
        workers.start("--spec", str(spec), "--task-queue", "segments", helper=True,
                      env={"OPENAI_API_KEY": "sk-fake-key-for-tests", "OPENAI_API_BASE": f"{fake.url}/v1"})
        started = cli("run", str(spec), "--input", "topic=x", "--temporal", server.address, "--task-queue",
                      "segments", "--durability", "segment", "--detach", "--run-id", "segment-asks", cwd=tmp_path)
        assert started.returncode == 0, started.stderr

        assert asyncio.run(waiting(server.address, "segment-asks"))["waiting"]["state"] == "approve"
        answered = cli("resume", "segment-asks", "--answer", "yes", "--temporal", server.address)
        assert answered.returncode == 0, answered.stderr

        async def result() -> Any:
            client = await temporal_connect(server.address)
            handle = client.get_workflow_handle("segment-asks")
            final = await asyncio.wait_for(temporal_result(handle), 60)
            history = await handle.fetch_history()
            return final, history

        final, history = asyncio.run(result())
        prompts = [r.body["messages"][-1]["content"] for r in fake.requests]
    assert (final.status, final.path) == ("final", ["draft", "approve", "revise", "polish", "done"])
    assert sorted(prompts) == sorted(["Draft about x.", "Revise about x.", "Polish about x."])
    assert final.usage.llm_calls == 3
    kinds = [e.activity_task_scheduled_event_attributes.activity_type.name for e in history.events
             if e.HasField("activity_task_scheduled_event_attributes")]
    assert kinds == ["statewright.run_segment", "statewright.run_segment"]  # no call an activity of its own


def test_the_status_of_a_run_nobody_started(server: DevServer) -> None:
    with pytest.raises(TemporalRunError, match="no run"):
        asyncio.run(temporal_status(server.address, "never-started"))


# ---- tool secrets on a worker ----------------------------------------------------------------------------


def test_a_worker_reads_the_tool_secrets_and_no_result_or_event_holds_them(server: DevServer, workers: Workers,
                                                                           tmp_path: Path) -> None:
    from support.echo_server import echo_server
    from test_e2e_tool_secrets import NAME, SPEC

    spec = tmp_path / "keyed_search.fsm"
    spec.write_text(SPEC, encoding="utf-8")
    no_proxy = {v: "" for v in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY")}
    worker = [sys.executable, "-m", "statewright", "worker", str(spec), "--temporal", server.address, "--task-queue",
              "keyed"]
    lacking = subprocess.run(worker, cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
                             env={k: v for k, v in os.environ.items() if k != NAME})
    assert lacking.returncode == 2 and f"the environment variable {NAME} is not set" in lacking.stderr
    value = f"cred-{os.getpid()}-{time.monotonic_ns()}"
    workers.start(str(spec), "--task-queue", "keyed", env={NAME: value, **no_proxy})
    with echo_server() as echo:
        runner = TemporalRunner(machine(spec), server.address, task_queue="keyed",
                                script=Script.from_json({"agent": {"read": ["A summary."]}}))

        async def go() -> tuple[Any, list[dict[str, Any]]]:
            handle = await runner.start({"url": f"{echo.url}/echo"}, run_id="keyed-1", trace=True,
                                        trace_content=True)
            result = await asyncio.wait_for(temporal_result(handle), 60)
            from statewright.runtime.temporal import temporal_copy_trace

            sink: list[dict[str, Any]] = []
            await temporal_copy_trace(handle, Trace(sink=sink))
            return result, sink

        result, events = asyncio.run(go())
        [request] = echo.requests
    assert request["headers"]["x-search-credential"] == value  # the worker's secret reached the service
    assert result.ok and json.loads(result.result)["headers"]["x-search-credential"] == "[REDACTED]"
    assert value not in json.dumps(result.to_json()) and value not in json.dumps(events)
    assert any(e["event"] == "tool_call" for e in events)


# ---- parallel branches and maps ---------------------------------------------------------------------------


FAN_OUT = """machine panel {
    description "Three reviewers at once, then one note per finding."
    input draft: str
    type Review {
        approve: bool
        findings: list[str]
    }
    agent reviewer { prompt "You review drafts." }
    agent writer { prompt "You write notes." }
    start state review {
        parallel [accuracy, structure, style]
        join all
        when count(r.approve for r in output) >= 2 -> notes
        otherwise -> rejected
    }
    branch state accuracy { agent reviewer  model "openai/gpt-4o"  do "Check {{ draft }}."  output Review }
    branch state structure { agent reviewer  model "openai/gpt-4o-mini"  do "Structure {{ draft }}."  output Review }
    branch state style { agent reviewer  do "Style {{ draft }}."  output Review }
    state notes {
        for i, finding in accuracy.output.findings max 5 concurrency 3
        agent writer
        do "Note {{ i + 1 }}: {{ finding }}"
        -> done
    }
    final state done { result "{{ notes.output | join(' / ') }}" }
    final state rejected
}
"""
FAN_OUT_SCRIPT = Script.from_json({"agent": {
    "accuracy": [{"value": {"approve": True, "findings": ["a", "b", "c"]}, "delay": 1.0}],
    "structure": [{"value": {"approve": True, "findings": []}, "delay": 1.0}],
    "style": [{"value": {"approve": False, "findings": []}, "delay": 1.0}],
    "notes": [{"value": f"note {n}", "delay": 1.0} for n in ("a", "b", "c")],
}})


def test_branches_and_map_elements_run_as_concurrent_activities_and_end_as_locally(
        server: DevServer, workers: Workers, tmp_path: Path) -> None:
    from temporalio.worker import Replayer, UnsandboxedWorkflowRunner

    spec = tmp_path / "panel.fsm"
    spec.write_text(FAN_OUT, encoding="utf-8")
    workers.start(str(spec))
    panel = machine(spec)
    local_events: list[dict[str, Any]] = []
    local = run_machine(panel, {"draft": "d"}, script=FAN_OUT_SCRIPT, trace=Trace(sink=local_events))
    assert local.ok and local.result == "note a / note b / note c"

    async def go() -> tuple[Any, list[dict[str, Any]]]:
        runner = TemporalRunner(panel, server.address, script=FAN_OUT_SCRIPT)
        handle = await runner.start({"draft": "d"}, run_id="fan-out-1", trace=True)
        result = await temporal_result(handle)
        events: list[dict[str, Any]] = []
        from statewright.runtime.temporal import temporal_copy_trace

        await temporal_copy_trace(handle, Trace(sink=events))
        history = await handle.fetch_history()
        replayer = Replayer(workflows=[temporal_workflow_class(TemporalMachines([panel]))],
                            workflow_runner=UnsandboxedWorkflowRunner())
        await replayer.replay_workflow(history)  # the branches' interleaving replays exactly
        return result, events

    remote, remote_events = asyncio.run(go())
    assert comparable(remote) == comparable(local)
    # the same events, in the same order: each branch's together, in written order
    kinds = [(e["event"], e.get("state"), e.get("branch"), e.get("item")) for e in remote_events]
    assert kinds == [(e["event"], e.get("state"), e.get("branch"), e.get("item")) for e in local_events]
    # the three reviews' activities overlapped (each takes a second), and so did the three notes'
    calls = [e for e in remote_events if e["event"] == "llm_call"]
    from datetime import datetime

    ends = [datetime.fromisoformat(e["time"]).timestamp() for e in calls]
    assert max(ends[:3]) - min(ends[:3]) < 0.9 and max(ends[3:]) - min(ends[3:]) < 0.9


# `statewright worker ARGS` with, once it stops serving, the modules it imported written to the file $MODULES.
_WORKER_REPORTING_MODULES = """
import json, os, sys
import statewright.runtime.temporal_worker as temporal_worker

real = temporal_worker.temporal_serve

async def serve(*args, **options):
    try:
        return await real(*args, **options)
    finally:
        with open(os.environ["MODULES"], "w") as out:
            json.dump(sorted(sys.modules), out)

temporal_worker.temporal_serve = serve
from statewright.cli import main
sys.exit(main(["worker", *sys.argv[1:]]))
"""


def test_a_worker_loads_only_what_its_machines_use(server: DevServer, tmp_path: Path) -> None:
    """A worker serving a machine of text replies and templates that only print names, called through the
    native client's models, loads neither litellm, pydantic's model machinery, Jinja, SQLite nor the
    compiler, in either durability (what keeps it near a bare temporalio worker's memory, bench/temporal.py)."""
    spec = tmp_path / "linear.fsm"
    spec.write_text(LINEAR)
    modules = tmp_path / "modules.json"
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'tests'}{os.pathsep}{ROOT}", "MODULES": str(modules)}
    process = subprocess.Popen([sys.executable, "-c", _WORKER_REPORTING_MODULES, str(spec), "--temporal",
                                server.address, "--task-queue", "lean"], cwd=tmp_path, env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        assert process.stdout is not None
        seen = []
        while "serving" not in (line := process.stdout.readline()):
            seen.append(line)
            assert line or process.poll() is None, "".join(seen)
        script = Script.from_json({"agent": {name: [f"{name} done"] for name in ("one", "two", "three", "four")}})
        for durability in ("call", "segment"):
            runner = TemporalRunner(machine(spec), server.address, task_queue="lean", script=script,
                                    durability=durability)
            result = asyncio.run(runner.arun({"topic": "tea"}))
            assert result.status == "final" and result.path == ["one", "two", "three", "four", "done"]
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
    loaded = json.loads(modules.read_text())
    # (the machine modules are loaded by statewright.compiler.codegen.load, which imports no other part of it)
    unwanted = [name for name in loaded if name.split(".")[0] in ("litellm", "jinja2", "sqlite3", "lark")
                or name in ("pydantic.main", "statewright.api") or name.startswith(
                    ("statewright.compiler.checks", "statewright.grammar", "statewright.compiler.codegen.render"))]
    assert "statewright.runtime.temporal_activities" in loaded and unwanted == []
