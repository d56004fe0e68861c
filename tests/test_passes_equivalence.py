"""Issue 9, item 5: over random machines — mixed int, float and bool literals, strings holding `}}` and `{%`,
typed outputs, listeners, bounded loops, verifier groups, twins the merge pass folds, and test blocks —
everything a model or a user sees is the same at -O0 and -O1: every request (messages, schema and schema
name), the result, the path and every transition with its cause; and `statewright test` and a generated
runner's `--selftest` agree at both levels."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import random
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from support.e2e_runs import runtime_module_of

from statewright import api
from statewright.runtime.client import ModelResponse
from statewright.runtime.engine import Engine
from statewright.runtime.trace import Trace

TYPED_GUARDS = ["output.n == 1", "output.n == 1.0", "output.x == 1", "output.x == 2.5", "output.ok == true",
                "output.ok", 'output.note == "}}"', 'output.note == "{%"']
TEXT_GUARDS = ['"ok" in output', 'output == "1"', '"}}" in output']
INT_GUARDS = ["output == 1", "output == 1.0", "output > 0.5"]  # a state's own `output int`: wrapped for the model
CONDITIONS = ["it is done", "it failed", "The draft is good.", "the draft is good"]
INSTRUCTIONS = ["Plan.", 'Fix {{ \\"}}\\" ~ s0.output }}.', '{% raw %}{%{% endraw %} Check {{ \\"{%\\" }}.',
                'Check {{ s0.visits }} {{ \\"}}\\" }}.', "Go."]


@st.composite
def rich_machines(draw: Any) -> str:
    n = draw(st.integers(3, 5))
    states: list[tuple[str, list[str], list[str], str]] = []  # name, declarations, transitions, output type
    for i in range(n):
        later = [f"s{j}" for j in range(i + 1, n)] + ["done", "failed"]
        typed = draw(st.sampled_from(["", "Rec", "int"]))
        head = [f"agent {draw(st.sampled_from(['a', 'b']))}",
                f'do "{draw(st.sampled_from(INSTRUCTIONS if i else INSTRUCTIONS[:1] + INSTRUCTIONS[2:]))}"']
        if typed:
            head.append(f"output {typed}")
        if draw(st.booleans()):
            head.append(f"tell [{draw(st.sampled_from(['a', 'b']))}]")
        edges = []
        guards = {"Rec": TYPED_GUARDS, "int": INT_GUARDS, "": TEXT_GUARDS}[typed]
        for guard in draw(st.lists(st.sampled_from(guards), max_size=2,
                                   unique_by=lambda g: g.split(" ==")[0])):  # no guard repeats another
            edges.append(f"when {guard} -> {draw(st.sampled_from(later))}")
        for condition in draw(st.lists(st.sampled_from(CONDITIONS), max_size=2, unique=True)):
            edges.append(f'when "{condition}" -> {draw(st.sampled_from(later))}')
        if i and draw(st.booleans()):  # a loop back, bounded on its edge
            back = draw(st.integers(0, i))
            loop = draw(st.sampled_from([{"Rec": "output.n == 0", "int": "output == 0", "": '"redo" in output'}[typed],
                                         '"it must be redone"']))
            edges.append(f"when {loop} -> s{back} max {draw(st.integers(1, 2))}")
        edges.append(f"otherwise -> {later[0] if draw(st.booleans()) else draw(st.sampled_from(later))}")
        states.append((f"s{i}", head, edges, typed))
    for d in draw(st.lists(st.integers(1, n - 1), min_size=1, max_size=2, unique=True)):  # twins to fold
        name, head, edges, typed = states[d]
        states.append((f"{name}_twin", list(head), list(edges), typed))
        source = draw(st.sampled_from(range(d)))  # an earlier state: the route closes no unbounded cycle
        route = {"Rec": 'output.note == "route"', "int": "output == 2", "": '"route 0" in output'}[states[source][3]]
        states[source][2].insert(0, f"when {route} -> {name}_twin")
    text = ["machine m {", '    limits {\n        steps 25\n    }',
            "    type Rec {\n        n: int\n        x: float\n        ok: bool\n        note: str\n    }"]
    text += [f'    agent {x} {{\n        prompt "{x.upper()}."\n    }}' for x in "ab"]
    for index, (name, head, edges, _typed) in enumerate(states):
        body = "\n".join(f"        {line}" for line in [*head, *edges])
        text.append(f"    {'start state' if index == 0 else 'state'} {name} {{\n{body}\n    }}")
    text += ['    final state done {\n        result "{{ \\"}}\\" }} {{ s0.visits }}"\n    }', "    final state failed",
             "}"]
    return "\n\n".join(text) + "\n"


class Recorder:
    """Replies that depend only on the seed and what the model is sent, and a record of every request."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.requests: list[tuple[Any, ...]] = []
        self.replies: list[tuple[str, str, Any]] = []  # role, state, reply (an agent's, or a verdict number)

    def complete(self, request: Any) -> ModelResponse:
        key = (request.role, request.model, json.dumps(request.messages, sort_keys=True),
               json.dumps(request.response_schema, sort_keys=True), request.schema_name, request.temperature)
        self.requests.append(key)
        rng = random.Random(hashlib.sha256(f"{self.seed}{key}".encode()).digest())
        value: Any
        if request.role == "verifier":
            value = rng.choice(request.response_schema["properties"]["choice"]["enum"])
            content = json.dumps({"choice": value, "reason": "r", "feedback": "f"})
        elif request.response_schema is not None and "value" in request.response_schema["properties"]:
            value = rng.choice([0, 1, 2])
            content = json.dumps({"value": value})
        elif request.response_schema is not None:
            value = {"n": rng.choice([0, 1]), "x": rng.choice([1.0, 2.5]), "ok": rng.choice([True, False]),
                     "note": rng.choice(["}}", "{%", "route", "x"])}
            content = json.dumps(value)
        else:
            value = content = rng.choice(["ok", "no", "1", "}}", "route 0", "redo", "ok redo"])
        self.replies.append((request.role, request.state, value))
        return ModelResponse(content=content, model=request.model, prompt_tokens=1, completion_tokens=1)


def observed(machine: Any, seed: int) -> tuple[Recorder, tuple[Any, ...]]:
    client = Recorder(seed)
    events: list[dict[str, Any]] = []
    result = Engine(machine, client=client, trace=Trace(sink=events)).run({}, run_id="r")
    moves = [(e["from"], e["to"], e["cause"], e.get("reason")) for e in events if e["event"] == "transition"]
    verdicts = [e["choice"] for e in events if e["event"] == "verdict"]
    failure = result.failure.to_json() if result.failure is not None else None
    return client, (result.status, result.final_state, result.result, result.path, moves, failure, verdicts)


def fsm_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    return "{ " + "  ".join(f"{k} {fsm_value(v)}" for k, v in value.items()) + " }"


def recorded_test_block(client: Recorder, outcome: tuple[Any, ...]) -> str:
    """A test block that scripts exactly what the recorded run was answered, and expects what it did."""
    status, final, _result, path, _moves, failure, verdicts = outcome
    chosen = iter(verdicts)
    lines = []
    for role, state, value in client.replies:
        if role == "verifier":
            choice = next(chosen)
            lines.append(f"verdict {state} none" if choice == "none" else f"verdict {state} {json.dumps(choice)}")
        else:
            lines.append(f"reply {state} {fsm_value(value)}")
    lines.append(f"expect path [{', '.join(path)}]")
    lines.append(f"expect final {final}" if status == "final" else f"expect failure {failure['limit'] or failure['kind']}")
    return '    test "as recorded" {\n' + "".join(f"        {line}\n" for line in lines) + "    }\n"


def import_runner(text: str, directory: Path, name: str) -> Any:
    path = directory / f"{name}.py"
    path.write_text(text, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # pydantic resolves the module's annotations through sys.modules
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[name]
    return module


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(rich_machines(), st.integers(0, 10_000))
def test_every_request_result_path_and_cause_is_the_same_at_both_levels(text: str, seed: int) -> None:
    comp = api.check_text(text, "m.fsm")
    assume(comp.ok)
    source, optimized = api.runtime_machine(comp, level=0), api.runtime_machine(comp, level=1)
    for run in range(4):
        plain, plain_outcome = observed(source, seed + run)
        fast, fast_outcome = observed(optimized, seed + run)
        assert plain.requests == fast.requests
        assert plain_outcome == fast_outcome


_RUNNER_NAMES = iter(f"equivalence_runner_{i}" for i in range(1_000_000))


@pytest.mark.slow
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(rich_machines(), st.integers(0, 10_000))
def test_a_recorded_run_as_a_test_block_passes_in_statewright_test_and_selftest_at_both_levels(
        tmp_path_factory: Any, text: str, seed: int) -> None:
    comp = api.check_text(text, "m.fsm")
    assume(comp.ok)
    client, outcome = observed(api.runtime_machine(comp, level=0), seed)
    tested = re.sub(r"\n}\n$", "\n\n" + recorded_test_block(client, outcome) + "}\n", text)
    comp = api.check_text(tested, "m.fsm")
    assert comp.ok, [d.message for d in comp.diagnostics if d.severity == "error"]
    directory = tmp_path_factory.mktemp("runners")
    for level in (0, 1):
        [outcome_of_test] = api.run_tests(comp, level=level)
        assert outcome_of_test.passed, (level, outcome_of_test.messages, tested)
        runner = import_runner(api.generate_runner(comp, level=level, standalone=True), directory,
                               next(_RUNNER_NAMES))
        [selftest] = runtime_module_of(runner, "testing").run_tests(runner.MACHINE)
        assert selftest.passed, (level, selftest.messages)
        assert selftest.actual_path == outcome_of_test.actual_path == list(outcome[3])
