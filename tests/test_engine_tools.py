"""Tools: an agent's bounded tool-call loop, and action states that call a tool without a model."""

from __future__ import annotations

import json
from typing import Any

from support.fake_client import FakeClient, tool_calls
from support.machines import action, agent, final, go, machine, state, when

from statewright.runtime.agent_steps import MAX_TOOL_ROUNDS
from statewright.runtime.engine import Engine
from statewright.runtime.scripted import Script
from statewright.runtime.tools import ToolError
from statewright.runtime.trace import Trace


class Registry:
    """A stand-in ToolRegistry: `add` answers with a sum, `fail` always raises ToolError."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def schema(self, name: str) -> dict[str, Any]:
        return {"type": "function", "function": {"name": name.replace(".", "_"), "description": name,
                                                 "parameters": {"type": "object", "properties": {}}}}

    def call(self, name: str, args: dict[str, Any]) -> Any:
        self.calls.append((name, args))
        if name == "fail":
            raise ToolError("the service is down", tool=name)
        return {"sum": args["a"] + args["b"]}


def calculator_machine():
    return machine(state("solve", go("done"), agent="solver"), final("done"),
                   agents=[agent("solver", tools=("math.add", "fail"))])


def test_an_agent_calls_tools_until_it_answers_and_only_the_answer_stays_in_memory():
    registry = Registry()
    client = FakeClient({("agent", "solve"): [tool_calls(("math_add", {"a": 2, "b": 3})), "The sum is 5."]})
    events: list[dict] = []
    result = Engine(calculator_machine(), client=client, tools=registry, trace=Trace(sink=events)).run({})
    assert result.result == "The sum is 5."
    assert registry.calls == [("math.add", {"a": 2, "b": 3})]
    first, second = client.calls("agent", "solve")
    assert [t["function"]["name"] for t in first.tools] == ["math_add", "fail"]
    assistant, tool_message = second.messages[-2:]
    assert assistant["tool_calls"][0]["function"]["name"] == "math_add"
    assert tool_message == {"role": "tool", "tool_call_id": "call_0", "content": '{"sum": 5}'}
    assert [(e["tool"], e["ok"]) for e in events if e["event"] == "tool_call"] == [("math.add", True)]


def test_bad_arguments_and_tool_errors_are_fed_back_to_the_model():
    registry = Registry()
    client = FakeClient({("agent", "solve"): [
        tool_calls(("math_add", "{not json"), ("fail", {}), ("nonexistent", {})),
        "I could not compute it.",
    ]})
    result = Engine(calculator_machine(), client=client, tools=registry).run({})
    assert result.ok
    replies = [m for m in client.calls("agent", "solve")[1].messages if m["role"] == "tool"]
    assert "not a valid JSON object" in replies[0]["content"]
    assert "the service is down" in replies[1]["content"]
    assert "no tool named 'nonexistent'" in replies[2]["content"]


def test_the_tool_loop_is_bounded():
    client = FakeClient(default=lambda request: tool_calls(("math_add", {"a": 1, "b": 1})))
    result = Engine(calculator_machine(), client=client, tools=Registry()).run({})
    assert result.failure.kind == "tool"
    assert f"{MAX_TOOL_ROUNDS} rounds" in result.failure.message
    assert len(client.requests) == MAX_TOOL_ROUNDS + 1


def test_action_states_call_their_tool_with_arguments_from_the_scope(tmp_path):
    spec = machine(
        state("write", go("save")),
        action("save", "std.write_file", lambda s: {"path": "out.txt", "content": s.outputs["write"]}, go("load")),
        action("load", "std.read_file", lambda s: {"path": "out.txt"},
               when(lambda s: s.output == "hello", "done", "output == 'hello'")),
        final("done"),
    )
    client = FakeClient({("agent", "write"): ["hello"]})
    result = Engine(spec, client=client, workspace=str(tmp_path)).run({})
    assert result.ok, result.failure
    assert (tmp_path / "out.txt").read_text() == "hello"
    assert result.outputs["load"] == "hello"
    assert len(client.requests) == 1  # action states make no model call


def test_a_failing_action_tool_is_a_typed_failure(tmp_path):
    spec = machine(action("load", "std.read_file", lambda s: {"path": "missing.txt"}, go("done")), final("done"))
    result = Engine(spec, client=FakeClient(), workspace=str(tmp_path)).run({})
    assert result.failure.kind == "tool"
    assert result.failure.state == "load"


def test_a_script_can_stand_in_for_an_action_states_tool():
    registry = Registry()
    spec = machine(action("check", "fail", lambda s: {}, when(lambda s: s.output["exit_code"] == 0, "done",
                                                            "output.exit_code == 0")), final("done"))
    script = Script({("tool", "check"): [{"exit_code": 0}]})
    events: list[dict] = []
    result = Engine(spec, client=FakeClient(), tools=registry, script=script, trace=Trace(sink=events)).run({})
    assert result.ok
    assert registry.calls == []
    assert [e.get("scripted") for e in events if e["event"] == "tool_call"] == [True]


def test_listeners_hear_a_tool_result_as_json():
    spec = machine(action("probe", "math.add", lambda s: {"a": 1, "b": 2}, go("report"), tell=["reporter"]),
                   state("report", go("done"), agent="reporter"), final("done"))
    client = FakeClient({("agent", "report"): ["3"]})
    Engine(spec, client=client, tools=Registry()).run({})
    heard = client.calls("agent", "report")[0].messages[1]["content"]
    assert heard == "[output of state 'probe']\n" + json.dumps({"sum": 3})
