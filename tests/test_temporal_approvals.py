"""Run variables and approval between tool calls on Temporal (a real dev server): the workflow waits for each
tool call a person must approve, answered by its path through the same signal as a question (an edit that
does not fit the tool is refused and the wait goes on), and the run ends with the variables a local run
ends with."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.e2e_runs import ROOT
from support.temporal_server import DevServer, temporal_cli

from statewright import api
from statewright.runtime.engine import Engine
from statewright.runtime.scripted import Script
from statewright.runtime.temporal import (
    TemporalMachines,
    TemporalRunner,
    temporal_answer,
    temporal_connect,
    temporal_copy_trace,
    temporal_result,
    temporal_status,
)
from statewright.runtime.temporal_worker import temporal_serve
from statewright.runtime.trace import Trace

temporalio = pytest.importorskip("temporalio")
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(temporal_cli() is None, reason="no `temporal` program (statewright[temporal])")]

SPEC = '''machine ops {
    input hosts: list[str]

    var log: list[str] = []

    tool std.shell

    agent dev {
        prompt "You operate hosts."
        tools [std.shell]
    }

    start state both {
        parallel [left, right]
        -> each
    }

    branch state left {
        agent dev
        do "Left."
        ask before [std.shell]
        append log <- "left: " + output
    }

    branch state right {
        agent dev
        do "Right."
        append log <- "right: " + output
    }

    state each {
        for host in hosts max 4 concurrency 4
        agent dev
        do "Check {{ host }}."
        ask before [std.shell]
        append log <- host + ": " + output
        -> done
    }

    final state done {
        result "{{ log | join(';') }}"
    }
}
'''

SCRIPT = {"agent": {
    "left": [{"tool_calls": [{"name": "std_shell", "arguments": {"command": "echo L"}}]}, "L done"],
    "right": ["R done"],
    "each[0]": [{"tool_calls": [{"name": "std_shell", "arguments": {"command": "echo a"}}]}, "a done"],
    "each[1]": [{"tool_calls": [{"name": "std_shell", "arguments": {"command": "rm -rf b"}}]}, "b done"]}}


@pytest.fixture(scope="module")
def server() -> Iterator[DevServer]:
    with DevServer() as running:
        yield running


class Worker:
    """A worker in a thread of this process, serving the machines given."""

    def __init__(self, address: str, queue: str, *machines: Any) -> None:
        self.stop: asyncio.Event | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        ready = threading.Event()

        async def serve() -> None:
            self.loop, self.stop = asyncio.get_running_loop(), asyncio.Event()
            await temporal_serve([], address, task_queue=queue, registry=TemporalMachines(machines), stop=self.stop,
                                 announce=lambda text: ready.set())

        self.thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
        self.thread.start()
        assert ready.wait(60), "the worker did not start"

    def close(self) -> None:
        assert self.loop is not None and self.stop is not None
        self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(30)


async def wait_for_paths(address: str, run_id: str, count: int) -> dict[str, Any]:
    for _ in range(300):
        status = await temporal_status(address, run_id)
        if status.get("status") == "waiting" and len(status.get("waits") or []) == count:
            return status
        await asyncio.sleep(0.1)
    raise AssertionError(f"run {run_id} never waited at {count} places: {status}")


@pytest.mark.parametrize("durability", ["call", "segment"])
def test_tool_calls_wait_for_approval_by_path_and_the_run_ends_with_the_local_variables(
        server: DevServer, tmp_path: Path, durability: str) -> None:
    """Approvals in parallel branches and map elements, answered by path (with each call an activity, and with
    the calls made in segments, which stop at each wait and drive the run past its answers)."""
    spec = tmp_path / "ops.fsm"
    spec.write_text(SPEC, encoding="utf-8")
    machine = api.runtime_machine(api.check_path(str(spec)))
    script = Script.from_json(SCRIPT)
    queue = run_id = f"approvals-{durability}"
    worker = Worker(server.address, queue, machine)
    try:
        async def go() -> Any:
            runner = TemporalRunner(machine, server.address, task_queue=queue, script=script, durability=durability)
            await runner.start({"hosts": ["a", "b"]}, run_id=run_id, trace=True, trace_content=True)
            status = await wait_for_paths(server.address, run_id, 1)
            assert status["waiting"]["path"] == "left" and status["waiting"]["state"] == "left"
            assert await temporal_answer(server.address, run_id, "approve", state="left") is None
            status = await wait_for_paths(server.address, run_id, 2)
            assert sorted(w["path"] for w in status["waits"]) == ["each[0]", "each[1]"]
            refused = await temporal_answer(server.address, run_id,
                                            {"decision": "edit", "arguments": {"cmd": "ls b"}}, state="each[1]")
            assert refused is not None and "`cmd` is not one of its parameters" in refused
            assert await temporal_answer(server.address, run_id,
                                         {"decision": "reject", "reason": "not on b"}, state="each[1]") is None
            assert await temporal_answer(server.address, run_id, {"decision": "edit", "arguments": {
                "command": "echo A"}}, state="each[0]") is None
            client = await temporal_connect(server.address)
            handle = client.get_workflow_handle(run_id)
            result = await asyncio.wait_for(temporal_result(handle), 60)
            events: list[dict[str, Any]] = []
            await temporal_copy_trace(handle, Trace(sink=events, content=True))
            return result, events

        result, trace = asyncio.run(go())
        assert result.ok, result.failure
        assert result.variables == {"log": ["left: L done", "right: R done", "a: a done", "b: b done"]}
        decisions = sorted((e.get("state"), e.get("item"), e.get("decision")) for e in trace
                           if e.get("event") == "approval")
        assert decisions == [("each", 0, "edit"), ("each", 1, "reject"), ("left", None, "approve")]
        local = Engine(machine, script=script).run({"hosts": ["a", "b"]})
        assert local.status == "waiting"  # locally the same script pauses at the same call
    finally:
        worker.close()


def test_statewright_resume_sends_an_approval_to_a_run_on_temporal(server: DevServer, tmp_path: Path) -> None:
    spec = tmp_path / "ops.fsm"
    spec.write_text(SPEC.replace("ask before [std.shell]\n        append log <- host", "append log <- host"),
                    encoding="utf-8")
    machine = api.runtime_machine(api.check_path(str(spec)))
    script = Script.from_json({"agent": {**SCRIPT["agent"], "each": ["a done", "b done"]}})
    worker = Worker(server.address, "approvals-cli", machine)
    try:
        async def start() -> None:
            runner = TemporalRunner(machine, server.address, task_queue="approvals-cli", script=script)
            await runner.start({"hosts": ["a", "b"]}, run_id="approvals-cli-1")
            await wait_for_paths(server.address, "approvals-cli-1", 1)

        asyncio.run(start())
        bad = subprocess.run([sys.executable, "-m", "statewright", "resume", "approvals-cli-1", "--temporal",
                              server.address, "--answer", "maybe"], capture_output=True, text=True, check=False,
                             timeout=120, cwd=ROOT)
        assert bad.returncode == 2 and "decision" in bad.stderr, bad.stderr
        done = subprocess.run([sys.executable, "-m", "statewright", "resume", "approvals-cli-1", "--temporal",
                               server.address, "--answer", '{"decision": "approve", "tool": "std.shell"}'],
                              capture_output=True, text=True, check=False, timeout=120, cwd=ROOT)
        assert done.returncode == 0, done.stderr

        async def end() -> Any:
            client = await temporal_connect(server.address)
            return await asyncio.wait_for(temporal_result(client.get_workflow_handle("approvals-cli-1")), 60)

        result = asyncio.run(end())
        assert result.ok and result.variables["log"] == ["left: L done", "right: R done", "a: a done", "b: b done"]
    finally:
        worker.close()
