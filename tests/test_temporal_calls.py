"""Machines that run machines, on Temporal: a call runs inside its caller's workflow (one history), a person
asked inside a call is answered by its path, and the run ends as it does locally."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from support.temporal_server import DevServer, temporal_cli
from test_calls import ParallelSpec, StateSpec, call, final, go, machine, research, scripted, supervisor

from statewright.runtime.engine import Engine
from statewright.runtime.temporal import (
    TemporalMachines,
    TemporalRunner,
    temporal_answer,
    temporal_connect,
    temporal_result,
    temporal_status,
)
from statewright.runtime.temporal_worker import temporal_serve

temporalio = pytest.importorskip("temporalio")
pytestmark = pytest.mark.skipif(temporal_cli() is None, reason="no `temporal` program (statewright[temporal])")


@pytest.fixture(scope="module")
def server() -> Iterator[DevServer]:
    with DevServer() as running:
        yield running


class Worker:
    """A worker in a thread of this process, serving hand-built machines (their guards are Python)."""

    def __init__(self, address: str, queue: str, *machines: Any) -> None:
        self.stop: asyncio.Event | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        ready = threading.Event()

        async def serve() -> None:
            self.loop, self.stop = asyncio.get_running_loop(), asyncio.Event()
            registry = TemporalMachines(machines)
            await temporal_serve([], address, task_queue=queue, registry=registry, stop=self.stop,
                                 announce=lambda text: ready.set())

        self.thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
        self.thread.start()
        assert ready.wait(60), "the worker did not start"

    def close(self) -> None:
        assert self.loop is not None and self.stop is not None
        self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(30)


def test_a_call_runs_in_its_callers_workflow_and_ends_as_locally(server: DevServer) -> None:
    top = supervisor(research())
    worker = Worker(server.address, "calls-plain", top)
    try:
        script = scripted(agent_plan=["a plan"], agent_investigate__draft=["a good draft"],
                          agent_investigate__review=["good"], agent_write=["the write-up"])
        remote = asyncio.run(TemporalRunner(top, server.address, task_queue="calls-plain", script=script).arun(
            {"topic": "FSMs"}))
        local = Engine(top, script=script).run({"topic": "FSMs"})
        assert remote.ok and (remote.path, remote.result) == (local.path, local.result)
        assert remote.outputs["investigate"]["final"] == "published"
        assert remote.usage.llm_calls == local.usage.llm_calls == 4
    finally:
        worker.close()


@pytest.mark.parametrize("durability", ["call", "segment"])
def test_questions_asked_inside_calls_are_listed_by_path_and_answered_one_at_a_time(server: DevServer,
                                                                                   durability: str) -> None:
    team = research(asks=True)
    both = machine(
        StateSpec("both", "parallel", parallel=ParallelSpec(("left", "right")), transitions=(go("done"),)),
        call("left", "research", branch="left"), call("right", "research", branch="right"),
        final("done"), name="both", machines={"research": team},
        inputs=team.inputs)
    queue = run_id = f"calls-asks-{durability}"
    worker = Worker(server.address, queue, both)
    try:
        script = scripted(agent_left__draft=["L good"], agent_left__review=["good"],
                          agent_right__draft=["R good"], agent_right__review=["good"])

        async def go_on() -> Any:
            runner = TemporalRunner(both, server.address, task_queue=queue, script=script, durability=durability)
            await runner.start({"topic": "x"}, run_id=run_id)
            for _ in range(200):
                status = await temporal_status(server.address, run_id)
                if status.get("status") == "waiting":
                    break
                await asyncio.sleep(0.1)
            first = status["waiting"]["path"]
            assert first in ("left/approve", "right/approve")
            refused = await temporal_answer(server.address, run_id, "yes", state="nowhere/approve")
            assert refused == "the machine asks no question at nowhere/approve"
            assert await temporal_answer(server.address, run_id, "no", state="right/approve") is None
            assert await temporal_answer(server.address, run_id, "yes", state="left/approve") is None
            client = await temporal_connect(server.address)
            return await asyncio.wait_for(temporal_result(client.get_workflow_handle(run_id)), 60)

        result = asyncio.run(go_on())
        assert result.ok
        left, right = result.outputs["both"]
        assert (left["final"], right["final"]) == ("published", "thin")
    finally:
        worker.close()


def test_calls_recorded_with_their_task_run_as_local_activities_and_end_the_same(server: DevServer) -> None:
    top = supervisor(research())
    worker = Worker(server.address, "calls-task", top)
    try:
        script = scripted(agent_plan=["a plan"], agent_investigate__draft=["a good draft"],
                          agent_investigate__review=["good"], agent_write=["the write-up"])

        async def go_on() -> tuple[Any, list[str]]:
            runner = TemporalRunner(top, server.address, task_queue="calls-task", script=script, durability="task")
            handle = await runner.start({"topic": "FSMs"}, run_id="calls-task-1")
            result = await temporal_result(handle)
            events = [e.WhichOneof("attributes") async for e in handle.fetch_history_events()]
            return result, events

        result, events = asyncio.run(go_on())
        assert result.ok and result.path == ["plan", "investigate", "write", "done"]
        assert "marker_recorded_event_attributes" in events  # local activities
        assert "activity_task_scheduled_event_attributes" not in events
        with pytest.raises(ValueError, match="durability is one of"):
            TemporalRunner(top, server.address, durability="never")
    finally:
        worker.close()


def test_segments_give_way_to_an_activity_per_call_past_their_bounds(server: DevServer,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """--durability segment with a segment ended after each call and a run's answers bounded low: the first
    calls come from segments, the rest are an activity each (as with `call`), and the run ends as locally."""
    import json

    from statewright.runtime import temporal_worker

    top = supervisor(research())
    script = scripted(agent_plan=["a plan"], agent_investigate__draft=["a good draft"],
                      agent_investigate__review=["good"], agent_write=["the write-up"])
    runner = TemporalRunner(top, server.address, task_queue="segment-bounds", script=script, durability="segment")
    given = len(json.dumps(runner.workflow_input({"topic": "FSMs"}), default=str))
    monkeypatch.setattr(temporal_worker, "TEMPORAL_SEGMENT_BYTES", 1)  # a segment ends after one call
    monkeypatch.setattr(temporal_worker, "TEMPORAL_SEGMENT_LOG_BYTES", given + 600)  # the input, and a little
    worker = Worker(server.address, "segment-bounds", top)
    try:
        async def go_on() -> tuple[Any, list[str]]:
            handle = await runner.start({"topic": "FSMs"}, run_id="segment-bounds-1")
            result = await asyncio.wait_for(temporal_result(handle), 60)
            history = await handle.fetch_history()
            return result, [e.activity_task_scheduled_event_attributes.activity_type.name for e in history.events
                            if e.HasField("activity_task_scheduled_event_attributes")]

        remote, kinds = asyncio.run(go_on())
        local = Engine(top, script=script).run({"topic": "FSMs"})
        assert remote.ok and (remote.path, remote.result) == (local.path, local.result)
        assert remote.usage.llm_calls == local.usage.llm_calls == 4
        assert kinds[0] == "statewright.run_segment" and kinds[-1] == "statewright.call_model", kinds
        assert kinds.count("statewright.call_model") + kinds.count("statewright.run_segment") >= 4
    finally:
        worker.close()
