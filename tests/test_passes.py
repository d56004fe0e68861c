"""Optimization passes: dead-state elimination and equivalent-state merging keep behaviour identical."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from statewright import api
from statewright.compiler.passes import PASSES, UnknownPass, run_passes
from statewright.compiler.passes.merge_equivalent import equivalence_classes
from statewright.runtime.client import ModelResponse

EXAMPLES = sorted(Path(__file__).parent.parent.joinpath("examples").glob("*.fsm"))


def compile_ok(text: str):
    comp = api.check_text(text, "m.fsm")
    assert comp.ok, [d.message for d in comp.diagnostics]
    return comp


def chain_with_duplicates(k: int) -> str:
    """A start state fanning out to k+1 identical 'review' states that all go on to the same place."""
    branches = "\n".join(f'        when "route {i}" in output -> review{i}' for i in range(k))
    reviews = "\n".join(
        f"""    state review{i} {{
        agent critic
        do "Review the draft."
        when "ok" in output -> done
        otherwise -> failed
    }}
""" for i in range(k + 1))
    return f"""machine m {{
    agent writer {{
        prompt "You write."
    }}

    agent critic {{
        prompt "You review."
    }}

    start state draft {{
        agent writer
        do "Write."
{branches}
        otherwise -> review{k}
    }}

{reviews}
    final state done

    final state failed
}}
"""


@pytest.mark.parametrize("k", [1, 2, 5])
def test_k_duplicated_states_shrink_the_machine_by_exactly_k(k: int) -> None:
    comp = compile_ok(chain_with_duplicates(k))
    before = len(comp.ir.states)
    after = api.optimize(comp)
    assert len(after.states) == before - k
    survivor = next(s for s in after.states if s.name.startswith("review"))
    assert survivor.name == "review0"  # the first name is kept
    assert len(survivor.origins) == k + 1  # and the origins of every merged state
    assert {t.target for t in after.state("draft").transitions} == {"review0"}


def test_unreachable_states_are_removed() -> None:
    text = chain_with_duplicates(1).replace("    final state done", """    state orphan {
        agent critic
        do "Never runs."
        -> done
    }

    final state done""")
    comp = compile_ok(text)
    assert "orphan" in {s.name for s in comp.ir.states}
    assert "orphan" not in {s.name for s in api.optimize(comp).states}


def test_states_whose_names_are_read_are_not_merged() -> None:
    text = chain_with_duplicates(1).replace('final state done', 'final state done {\n        result "{{ review1.output }}"\n    }')
    comp = compile_ok(text)
    assert equivalence_classes(comp.ir) == {}


def test_bounded_states_are_not_merged() -> None:
    text = chain_with_duplicates(1).replace('when "ok" in output -> done', 'when "ok" in output -> done max 3')
    comp = compile_ok(text)
    assert equivalence_classes(comp.ir) == {}


def test_passes_are_idempotent_and_can_be_turned_off() -> None:
    comp = compile_ok(chain_with_duplicates(3))
    once = api.optimize(comp)
    assert run_passes(once) == once
    assert api.optimize(comp, level=0) == comp.ir
    assert api.optimize(comp, disabled=["merge-equivalent"]) == comp.ir
    with pytest.raises(UnknownPass):
        api.optimize(comp, disabled=["no-such-pass"])
    assert [p.name for p in PASSES] == ["dead-states", "merge-equivalent"]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_keep_their_meaning_under_the_passes(path: Path) -> None:
    comp = api.check_file(path)
    assert comp.ok
    optimized = api.optimize(comp)
    assert run_passes(optimized) == optimized
    assert {s.name for s in optimized.states} <= {s.name for s in comp.ir.states}


def test_merging_scales_to_ten_thousand_states_without_recursion() -> None:
    comp = compile_ok(chain_with_duplicates(2000))
    after = api.optimize(comp)
    assert len(after.states) == len(comp.ir.states) - 2000


# ---- behaviour: same agent calls and same result, optimized or not --------------------------------


class RandomReplies:
    """Answers every call from one seeded stream, so two equivalent machines see identical replies."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.agent_calls: list[tuple[str, str]] = []

    def complete(self, request):  # type: ignore[no-untyped-def]
        if request.role == "verifier":
            choices = request.response_schema["properties"]["choice"]["enum"]
            choice = self.rng.choice(choices)
            content = '{"choice": %s, "reason": "r", "feedback": "f"}' % __import__("json").dumps(choice)
        else:
            self.agent_calls.append((request.model, request.messages[-1]["content"]))
            content = self.rng.choice(["ok", "no", "route 0", "route 1", "ok route 1"])
        return ModelResponse(content=content, model=request.model, prompt_tokens=1, completion_tokens=1)


@st.composite
def machines_with_duplicates(draw):  # type: ignore[no-untyped-def]
    n = draw(st.integers(2, 7))
    instructions = ["Plan.", "Check.", "Fix."]
    bodies = []
    for i in range(n):
        agent = draw(st.sampled_from(["a", "b"]))
        instr = draw(st.sampled_from(instructions))
        later = [f"s{j}" for j in range(i + 1, n)] + ["done", "failed"]
        lines = [f"agent {agent}", f'do "{instr}"']
        for _ in range(draw(st.integers(0, 2))):
            kind = draw(st.sampled_from(["guard", "condition"]))
            target = draw(st.sampled_from(later))
            if kind == "guard":
                lines.append(f'when "{draw(st.sampled_from(["ok", "route 1"]))}" in output -> {target}')
            else:
                lines.append(f'when "{draw(st.sampled_from(["it is done", "it failed"]))}" -> {target}')
        lines.append(f"otherwise -> {draw(st.sampled_from(later))}")
        bodies.append(lines)
    # duplicate some states: same body, reachable through a redirected edge
    dups = draw(st.lists(st.integers(0, n - 1), max_size=3, unique=True))
    states = []
    for i, lines in enumerate(bodies):
        states.append((f"s{i}", lines))
    for d in dups:
        name = f"s{d}_copy"
        states.append((name, list(bodies[d])))
        # the start (or an earlier state) now reaches the copy
        redirect_from = 0 if d > 0 else None
        if redirect_from is None:
            continue
        src_lines = states[redirect_from][1]
        src_lines.insert(2, f'when "route 0" in output -> {name}')
    text = ["machine m {", '    agent a {\n        prompt "A."\n    }', '    agent b {\n        prompt "B."\n    }']
    for i, (name, lines) in enumerate(states):
        head = "start state" if i == 0 else "state"
        text.append(f"    {head} {name} {{\n" + "\n".join(f"        {x}" for x in lines) + "\n    }")
    text += ["    final state done", "    final state failed", "}"]
    return "\n\n".join(text) + "\n"


def _run(machine, seed: int):  # type: ignore[no-untyped-def]
    from statewright.runtime.engine import Engine

    client = RandomReplies(seed)
    result = Engine(machine, client=client).run({})
    return client.agent_calls, result.status, result.final_state, result.result


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(machines_with_duplicates(), st.integers(0, 10_000))
def test_optimized_and_unoptimized_machines_behave_identically(text: str, seed: int) -> None:
    from statewright.compiler.to_runtime import to_runtime

    comp = api.check_text(text, "m.fsm")
    assume(comp.ok)
    plain = to_runtime(comp.ir)
    optimized_ir = api.optimize(comp)
    optimized = to_runtime(optimized_ir)
    assert run_passes(optimized_ir) == optimized_ir
    assert _run(plain, seed) == _run(optimized, seed)
