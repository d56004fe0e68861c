"""The source rewrite of the exact passes keeps what a run sees: the rewritten source runs like the source.

`statewright design` optimizes the machine it writes by deleting states in favour of equivalent ones
(designer/source_edit.py). A deleted state's path is taken by the one it was merged into, so everything a
run shows must be the same on both: the model of every call and what it is sent, the result, the failure, the
final state, and the path but for the names of the deleted states. Random machines with near twins — states
alike but for their model, or a failing final state's reason — are run on both sources with the same replies.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from support.machines import runtime_of

from statewright import api
from statewright.compiler.passes.merge_equivalent import equivalence_classes
from statewright.designer.source_edit import _keep_declared, apply_exact_passes_to_source, what_a_run_sees
from statewright.runtime.client import ModelResponse
from statewright.runtime.engine import Engine

MODELS = ["", 'model "openai/gpt-4o-mini"', 'model "openai/gpt-4o"']


class SeededReplies:
    """Answers every call from one seeded stream and records what each call asked, on which model."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.calls: list[tuple[str, str, list[dict[str, Any]]]] = []

    def complete(self, request: Any) -> ModelResponse:
        self.calls.append((request.role, request.model, list(request.messages)))
        if request.role == "verifier":
            choice = self.rng.choice(request.response_schema["properties"]["choice"]["enum"])
            content = json.dumps({"choice": choice, "reason": "r", "feedback": "f"})
        else:
            content = self.rng.choice(["ok", "no", "route 0", "route 1", "ok route 1"])
        return ModelResponse(content=content, model=request.model, prompt_tokens=1, completion_tokens=1)


@st.composite
def machines_with_near_twins(draw: Any) -> str:
    """A chain of agent states with copies of some of them, each copy alike but for what `variation` gives
    it: nothing (a true twin), another model, or none."""
    n = draw(st.integers(2, 6))
    bodies: list[list[str]] = []
    for i in range(n):
        later = [f"s{j}" for j in range(i + 1, n)] + ["done", "gave_up", "report"]
        lines = [f"agent {draw(st.sampled_from(['a', 'b']))}", draw(st.sampled_from(MODELS)),
                 f'do "{draw(st.sampled_from(["Plan.", "Check."]))}"']
        words = draw(st.lists(st.sampled_from(["ok", "route 1", "it is done", "it failed"]), max_size=2,
                              unique=True))
        for word in words:
            target = draw(st.sampled_from(later))
            lines.append(f'when "{word}" in output -> {target}' if word in ("ok", "route 1")
                         else f'when "{word}" -> {target}')
        lines.append(f"otherwise -> {later[0] if draw(st.booleans()) else draw(st.sampled_from(later))}")
        bodies.append([line for line in lines if line])
    states = [(f"s{i}", lines) for i, lines in enumerate(bodies)]
    for d in draw(st.lists(st.integers(1, n - 1), max_size=3, unique=True)):
        copy = [line for line in bodies[d] if not line.startswith("model ")]
        model = draw(st.sampled_from(MODELS))
        if model:
            copy.insert(1, model)
        states.append((f"s{d}_copy", copy))
        states[0][1].insert(-1, f'when "route 0" in output -> s{d}_copy')
    report_model = draw(st.sampled_from(MODELS))
    text = ["machine m {", '    agent a {\n        prompt "A."\n    }', '    agent b {\n        prompt "B."\n    }']
    for i, (name, lines) in enumerate(states):
        head = "start state" if i == 0 else "state"
        text.append(f"    {head} {name} {{\n" + "\n".join(f"        {x}" for x in lines) + "\n    }")
    text += ["    final state done",
             '    final state gave_up {\n        fail "gave up"\n    }',
             "    final state report {\n        agent a\n" + (f"        {report_model}\n" if report_model else "")
             + '        do "Report."\n    }',
             "}"]
    return "\n\n".join(text) + "\n"


def run(text: str, seed: int) -> tuple[Any, list[Any], list[str]]:
    comp = api.check_text(text, "m.fsm")
    assert comp.ok and comp.ir is not None, [d.message for d in comp.diagnostics]
    client = SeededReplies(seed)
    result = Engine(runtime_of(comp.ir), client=client).run({})
    outcome = (result.status, result.final_state, result.result,
               result.failure.kind if result.failure is not None else None)
    return outcome, client.calls, list(result.path)


@pytest.mark.slow
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(machines_with_near_twins(), st.integers(0, 10_000))
def test_the_rewritten_source_runs_like_the_source(text: str, seed: int) -> None:
    assume(api.check_text(text, "m.fsm").ok)
    rewritten, _ = apply_exact_passes_to_source(text, "m.fsm")
    kept = {s.name for s in api.check_text(rewritten, "m.fsm").ir.states}  # type: ignore[union-attr]
    for replies in range(seed, seed + 8):  # several runs each, so that runs reach the copies
        before, after = run(text, replies), run(rewritten, replies)
        assert after[0] == before[0]
        assert after[1] == before[1]  # every call: its role, its model and every message it was sent
        assert len(after[2]) == len(before[2])
        for was, now in zip(before[2], after[2], strict=True):
            assert was == now or (was not in kept and now in kept), (before[2], after[2])


def test_two_questions_with_different_deadlines_are_kept_apart() -> None:
    text = """machine m {
    agent a {
        prompt "A."
    }

    start state s0 {
        agent a
        do "Plan."
        when "x" in output -> ask_soon
        -> ask_later
    }

    state ask_soon {
        ask "Go on?"
        after 1h -> done
        -> done
    }

    state ask_later {
        ask "Go on?"
        after 2h -> done
        -> done
    }

    final state done
}
"""
    machine = api.check_text(text, "m.fsm").ir
    assert machine is not None
    assert equivalence_classes(machine, keep_apart=_keep_declared(machine)) == {"ask_soon": ["ask_soon", "ask_later"]}
    assert equivalence_classes(machine, keep_apart=_keep_declared(machine), apart_by=what_a_run_sees) == {}
    assert apply_exact_passes_to_source(text, "m.fsm") == (text, [])
