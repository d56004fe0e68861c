"""Runs on Temporal with `--durability segment` against the default, one activity per call: the same end,
every call the run takes made once, and no call made that the run does not take — for map elements whose
agents call tools, runs with a time limit, a parallel state that takes the first branch to finish, and a
segment whose only attempt dies (its recorded calls are taken, not made again)."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.temporal_server import DevServer, temporal_cli
from test_temporal_calls import Worker

from statewright import api
from statewright.runtime.engine import Engine
from statewright.runtime.scripted import Script
from statewright.runtime.temporal import TemporalRunner, temporal_copy_trace, temporal_result
from statewright.runtime.trace import Trace

temporalio = pytest.importorskip("temporalio")
pytestmark = pytest.mark.skipif(temporal_cli() is None, reason="no `temporal` program (statewright[temporal])")


@pytest.fixture(scope="module")
def server() -> Iterator[DevServer]:
    with DevServer() as running:
        yield running


def compile_fsm(tmp_path: Path, text: str, name: str = "spec.fsm") -> Any:
    path = tmp_path / name
    path.write_text(text)
    return api.runtime_machine(api.check_path(path), level=1)


def tool_log(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


async def activity_kinds(handle: Any) -> list[str]:
    history = await handle.fetch_history()
    return [e.activity_task_scheduled_event_attributes.activity_type.name for e in history.events
            if e.HasField("activity_task_scheduled_event_attributes")]


# ---- an agent's tool calls in map elements: each element's call is its own (its element in its key)

MAP_AGENT_TOOLS_SPEC = """machine mapper {
    input items: list[str]
    model "openai/fake-model"
    agent worker {
        prompt "You record things."
        tools [record]
    }
    start state work {
        for item in items max 4 concurrency 4
        agent worker
        do "Record {{ item }}."
        -> done
    }
    final state done {
        result "{{ work.output | join(' | ') }}"
    }
    tool record = "support.segment_tools:record"
}
"""


def map_agent_tools_script(delay: float = 0.0) -> Script:
    """Element 0's first reply may come `delay` seconds late (so element 1's tool call is made first)."""
    def calls(text: str) -> dict[str, Any]:
        return {"tool_calls": [{"name": "record", "arguments": {"text": text}}]}
    return Script.from_json({"agent": {"work[0]": [{"value": calls("A"), "delay": delay}, "done A"],
                                       "work[1]": [calls("B"), "done B"]}})


def tool_results(events: list[dict[str, Any]]) -> list[Any]:
    return sorted(str(e.get("result")) for e in events if e["event"] == "tool_call")


@pytest.mark.parametrize("delay", [0.0, 0.3])
@pytest.mark.parametrize("durability", ["call", "segment"])
def test_map_elements_agent_tool_calls_each_made_once(server: DevServer, tmp_path: Path, monkeypatch,
                                                       durability: str, delay: float) -> None:
    log = tmp_path / "tools.jsonl"
    monkeypatch.setenv("SEGMENT_TOOL_LOG", str(log))
    mapper = compile_fsm(tmp_path, MAP_AGENT_TOOLS_SPEC)
    local_events: list[dict[str, Any]] = []
    local = Engine(mapper, script=map_agent_tools_script(delay), trace=Trace(sink=local_events, content=True),
                   workspace=str(tmp_path / "local")).run({"items": ["a", "b"]})
    assert local.ok, local.failure
    assert Counter(r["text"] for r in tool_log(log)) == {"A": 1, "B": 1}
    log.unlink()
    queue = f"segment-map-{durability}-{delay}"
    worker = Worker(server.address, queue, mapper)
    try:
        async def go() -> Any:
            runner = TemporalRunner(mapper, server.address, task_queue=queue, script=map_agent_tools_script(delay),
                                    durability=durability, workspace=str(tmp_path / "remote"))
            sink: list[dict[str, Any]] = []
            handle = await runner.start({"items": ["a", "b"]}, run_id=queue, trace=True, trace_content=True)
            from statewright.runtime.temporal import temporal_copy_trace, temporal_result
            result = await asyncio.wait_for(temporal_result(handle), 60)
            await temporal_copy_trace(handle, Trace(sink=sink, content=True))
            return result, sink

        remote, events = asyncio.run(go())
    finally:
        worker.close()
    made = Counter(r["text"] for r in tool_log(log))
    assert remote.ok and remote.result == local.result
    # each element's agent was given the result of its own call
    per_element = sorted((e.get("item"), str(e.get("result"))) for e in events if e["event"] == "tool_call")
    assert tool_results(events) == tool_results(local_events) == ["recorded A", "recorded B"], per_element
    assert made == {"A": 1, "B": 1}, f"tool calls made: {made}"


# ---- a time limit: a segment would decide by the wall clock, its workflow by Temporal's: each call an activity

TIME_LIMIT_SPEC = """machine timed {
    limits { seconds 2.5 }
    start state one { call slow_record(text = "one")  -> two }
    state two { call slow_record(text = "two")  -> three }
    state three { call slow_record(text = "three")  -> four }
    state four { call slow_record(text = "four")  -> done }
    final state done
    tool slow_record = "support.segment_tools:slow_record"
}
"""


def timed_run(server: DevServer, tmp_path: Path, machine: Any, durability: str) -> tuple[Any, list[dict[str, Any]]]:
    queue = f"segment-timed-{durability}"
    worker = Worker(server.address, queue, machine)
    try:
        async def go() -> Any:
            runner = TemporalRunner(machine, server.address, task_queue=queue, durability=durability,
                                    workspace=str(tmp_path / durability))
            handle = await runner.start({}, run_id=queue, trace=True)
            result = await asyncio.wait_for(temporal_result(handle), 60)
            sink: list[dict[str, Any]] = []
            await temporal_copy_trace(handle, Trace(sink=sink))
            return result, sink

        return asyncio.run(go())
    finally:
        worker.close()


def test_a_timed_run_makes_no_tool_call_it_does_not_take_and_ends_as_by_default(
        server: DevServer, tmp_path: Path, monkeypatch) -> None:
    machine = compile_fsm(tmp_path, TIME_LIMIT_SPEC)
    ends = {}
    for durability in ("call", "segment"):
        log = tmp_path / f"{durability}.jsonl"
        monkeypatch.setenv("SEGMENT_TOOL_LOG", str(log))
        result, events = timed_run(server, tmp_path, machine, durability)
        taken = [e for e in events if e["event"] == "tool_call"]
        made = tool_log(log)
        ends[durability] = (result.status, result.path, len(made), len(taken))
        print(durability, ends[durability], result.failure)
    # with each call an activity: every tool call made is one the run took
    assert ends["call"][2] == ends["call"][3]
    # with segments: so too, and the run ends as by default
    assert ends["segment"][2] == ends["segment"][3], f"tool calls made vs taken by the run: {ends}"
    assert ends["segment"][:2] == ends["call"][:2], ends


# ---- `join first`: which branch finishes first differs between a segment and its workflow: each call an activity

JOIN_FIRST_SPEC = """machine race {
    model "openai/fake-model"
    agent a { prompt "You answer." }
    start state pick {
        parallel [left, right]
        join first 1
        -> after
    }
    branch state left { agent a  do "Left."  }
    branch state right { agent a  do "Right."  }
    state after { call record(text = pick.output[0])  -> done }
    final state done { result "{{ after.output }}" }
    tool record = "support.segment_tools:record"
}
"""


@pytest.mark.parametrize("durability", ["call", "segment"])
@pytest.mark.parametrize("lag_ms", [0.5, 2.0])
def test_the_call_after_a_join_first_is_made_with_the_winner_the_run_took(
        server: DevServer, tmp_path: Path, monkeypatch, lag_ms: float, durability: str) -> None:
    log = tmp_path / "tools.jsonl"
    monkeypatch.setenv("SEGMENT_TOOL_LOG", str(log))
    machine = compile_fsm(tmp_path, JOIN_FIRST_SPEC)
    script = Script.from_json({"agent": {"left": [{"value": "LEFT", "delay": 0.2 + lag_ms / 1000}],
                                         "right": [{"value": "RIGHT", "delay": 0.2}]}})
    queue = f"segment-race-{lag_ms}-{durability}"
    worker = Worker(server.address, queue, machine)
    try:
        async def go() -> Any:
            runner = TemporalRunner(machine, server.address, task_queue=queue, durability=durability,
                                    script=script, workspace=str(tmp_path / "ws"))
            handle = await runner.start({}, run_id=queue, trace=True, trace_content=True)
            result = await asyncio.wait_for(temporal_result(handle), 60)
            sink: list[dict[str, Any]] = []
            await temporal_copy_trace(handle, Trace(sink=sink, content=True))
            return result, sink

        result, events = asyncio.run(go())
    finally:
        worker.close()
    made = [r["text"] for r in tool_log(log)]
    winner = result.outputs["pick"][0]
    assert made == [winner], f"the run took {winner!r} as the winner; the tool was called with {made}"
    assert [e["args"]["text"] for e in events if e["event"] == "tool_call"] == [winner]


# ---- a segment whose only attempt dies: the calls it recorded are taken, not made again

LAST_ATTEMPT_SPEC = """machine stalls {
    start state one { call record(text = "one")  -> two }
    state two { call stall(text = "two")  -> three }
    state three { call record(text = "three")  -> done }
    final state done
    tool record = "support.segment_tools:record"
    tool stall = "support.segment_tools:stall"
}
"""


@pytest.mark.parametrize("durability", ["call", "segment"])
def test_a_worker_that_dies_in_a_segments_only_attempt_leaves_no_completed_call_to_be_made_again(
        server: DevServer, tmp_path: Path, monkeypatch, durability: str) -> None:
    log = tmp_path / "tools.jsonl"
    monkeypatch.setenv("SEGMENT_TOOL_LOG", str(log))
    monkeypatch.setenv("SEGMENT_STALL", "6")  # > the heartbeat timeout: the worker looks dead meanwhile
    machine = compile_fsm(tmp_path, LAST_ATTEMPT_SPEC)
    queue = f"segment-stall-{durability}"
    worker = Worker(server.address, queue, machine)
    try:
        async def go() -> Any:
            runner = TemporalRunner(machine, server.address, task_queue=queue, durability=durability,
                                    retries=0, heartbeat=2.0, workspace=str(tmp_path / "ws"))
            handle = await runner.start({}, run_id=queue)
            result = await asyncio.wait_for(temporal_result(handle), 90)
            return result, await activity_kinds(handle)

        _, kinds = asyncio.run(go())
    finally:
        worker.close()
    made = Counter(r["text"] for r in tool_log(log))
    assert made["one"] == 1, f"the completed call 'one' was made {made['one']} times; activities: {kinds}"
