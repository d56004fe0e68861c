"""Optimization passes: dead-state elimination and equivalent-state merging keep behaviour identical."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from support.machines import runtime_of

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
def test_k_duplicated_states_share_the_first_ones_work_and_keep_their_identity(k: int) -> None:
    comp = compile_ok(chain_with_duplicates(k))
    after = api.optimize(comp)
    assert [s.name for s in after.states] == [s.name for s in comp.ir.states]  # every state stays, by name
    assert [after.state(f"review{i}").shares for i in range(k + 1)] == [None] + ["review0"] * k
    for before, now in zip(comp.ir.states, after.states):  # ... with its own position and transitions
        assert now.origin == before.origin and now.transitions == before.transitions
    runner = api.generate_runner(comp)
    assert runner.count("def guard_") == 0 or "guard_review1" not in runner  # the work is written once


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


def test_states_whose_names_are_read_are_merged_and_still_read_by_name() -> None:
    text = chain_with_duplicates(1).replace('final state done', 'final state done {\n        result "{{ review1.output }}"\n    }')
    comp = compile_ok(text)
    assert equivalence_classes(comp.ir)["review0"] == ["review0", "review1"]
    assert api.optimize(comp).state("review1").shares == "review0"


def test_bounded_states_are_merged_and_keep_their_own_counters() -> None:
    text = chain_with_duplicates(1).replace('when "ok" in output -> done', 'when "ok" in output -> done max 3')
    comp = compile_ok(text)
    assert equivalence_classes(comp.ir)["review0"] == ["review0", "review1"]
    machine = api.runtime_machine(comp)
    assert machine.states["review1"].transitions[0].max == 3  # each member's edge keeps its own bound


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
    assert sum(1 for s in after.states if s.shares == "review0") == 2000


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
            content = __import__("json").dumps({"choice": choice, "reason": "r", "feedback": "f"})
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

    comp = api.check_text(text, "m.fsm")
    assume(comp.ok)
    plain = runtime_of(comp.ir)
    optimized_ir = api.optimize(comp)
    optimized = runtime_of(optimized_ir)
    assert run_passes(optimized_ir) == optimized_ir
    assert _run(plain, seed) == _run(optimized, seed)


# ---- behaviour, strictly: every model request is the same, word for word -------------------------


class RecordingReplies:
    """Seeded replies, and a record of everything each model is sent — what it would see, not the names
    statewright uses internally to route the call."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.requests: list[tuple[object, ...]] = []

    def complete(self, request):  # type: ignore[no-untyped-def]
        import json

        self.requests.append((request.role, request.model, json.dumps(request.messages, sort_keys=True),
                              json.dumps(request.response_schema, sort_keys=True), request.temperature))
        if request.role == "verifier":
            choice = self.rng.choice(request.response_schema["properties"]["choice"]["enum"])
            content = json.dumps({"choice": choice, "reason": "r", "feedback": "f"})
        else:
            content = self.rng.choice(["ok", "no", "redo", "route 0", "route 0 redo", "ok redo"])
        return ModelResponse(content=content, model=request.model, prompt_tokens=1, completion_tokens=1)


@st.composite
def machines_with_loops_and_listeners(draw):  # type: ignore[no-untyped-def]
    """Machines whose twins sit on bounded loops, tell listeners, or are read by name — the places where a
    careless merge changes what an agent is sent — next to twins that may be merged."""
    n = draw(st.integers(3, 6))
    bodies = []
    for i in range(n):
        later = [f"s{j}" for j in range(i + 1, n)] + ["done", "failed"]
        agent, instruction = draw(st.sampled_from(["a", "b"])), draw(st.sampled_from(["Plan.", "Fix."]))
        lines = [f"agent {agent}", f'do "{instruction}"']
        if i > 0 and draw(st.booleans()):
            lines[1] = 'do "Fix {{ s0.output }}."'  # reads s0 by name
        if draw(st.booleans()):
            lines.append(f"tell [{draw(st.sampled_from(['a', 'b']))}]")
        if i > 0 and draw(st.booleans()):  # a loop back, bounded on this edge
            back = draw(st.integers(0, i))
            kind = draw(st.sampled_from(["guard", "condition"]))
            edge = '"redo" in output' if kind == "guard" else '"it must be redone"'
            lines.append(f"when {edge} -> s{back} max {draw(st.integers(1, 2))}")
        for _ in range(draw(st.integers(0, 1))):
            lines.append(f'when "ok" in output -> {draw(st.sampled_from(later))}')
        # half the time on to the next state: long runs, where a twin's output reaches a later listener
        lines.append(f"otherwise -> {later[0] if draw(st.booleans()) else draw(st.sampled_from(later))}")
        bodies.append(lines)
    states = [(f"s{i}", lines) for i, lines in enumerate(bodies)]
    for d in draw(st.lists(st.integers(1, n - 2), max_size=3, unique=True)):  # twins with states after them
        states.append((f"s{d}_twin", list(bodies[d])))
        # some state reaches the twin: an earlier one, or a later one on a loop back through the original
        source = draw(st.sampled_from([i for i in range(n) if i != d]))
        states[source][1].insert(2, f'when "route 0" in output -> s{d}_twin')
    text = ["machine m {"] + [f'    agent {x} {{\n        prompt "{x.upper()}."\n    }}' for x in "ab"]
    for i, (name, lines) in enumerate(states):
        head = "start state" if i == 0 else "state"
        text.append(f"    {head} {name} {{\n" + "\n".join(f"        {x}" for x in lines) + "\n    }")
    text += ["    final state done", "    final state failed", "}"]
    return "\n\n".join(text) + "\n"


@st.composite
def twins_in_context(draw):  # type: ignore[no-untyped-def]
    """A start state that routes to `work` or its twin, both handing over to `check`. `check` may send the
    run back to the start (a bounded loop: a run can enter `work` and, on the next lap, `work_twin`), and
    the twins may tell `check`'s agent their output (it arrives tagged with the producing state's name)."""
    loop = draw(st.sampled_from(["", 'when "redo" in output -> plan', 'when "it must be redone" -> plan']))
    bound = draw(st.sampled_from(["edge", "visits"]))
    listener = draw(st.sampled_from(["a", "b"]))
    tell = draw(st.sampled_from(["", f"tell [{listener}]"]))
    work = [f"agent {draw(st.sampled_from(['a', 'b']))}", 'do "Fix."', tell, "-> check"]
    plan = ["agent a", 'do "Plan."'] + (["visits 3"] if loop and bound == "visits" else []) + [
        'when "route 0" in output -> work_twin', "otherwise -> work"]
    check = [f"agent {listener}", 'do "Check."', loop + (" max 2" if loop and bound == "edge" else ""),
             "otherwise -> done"]
    states = [("start state plan", plan), ("state work", work), ("state work_twin", list(work)),
              ("state check", check)]
    text = ["machine m {"] + [f'    agent {x} {{\n        prompt "{x.upper()}."\n    }}' for x in "ab"]
    for head, lines in states:
        text.append(f"    {head} {{\n" + "\n".join(f"        {x}" for x in lines if x) + "\n    }")
    text += ["    final state done", "}"]
    return "\n\n".join(text) + "\n"


def _requests(machine, seed: int):  # type: ignore[no-untyped-def]
    """Everything a run shows a model or a user: every request (messages, schema and its name), the result,
    the path, every transition with its cause, the failure and where it points."""
    from statewright.runtime.engine import Engine
    from statewright.runtime.trace import Trace

    client = RecordingReplies(seed)
    events: list[dict] = []
    result = Engine(machine, client=client, trace=Trace(sink=events)).run({}, run_id="r")
    failure = result.failure.to_json() if result.failure is not None else None
    moves = [(e["from"], e["to"], e["cause"], e.get("reason")) for e in events if e["event"] == "transition"]
    return client.requests, (result.status, result.final_state, result.result, result.path, moves, failure)


@pytest.mark.slow
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(machines_with_loops_and_listeners(), st.integers(0, 10_000))
def test_every_model_is_sent_exactly_the_same_messages_after_the_passes(text: str, seed: int) -> None:

    comp = api.check_text(text, "m.fsm")
    assume(comp.ok)
    optimized = api.optimize(comp)
    assert run_passes(optimized) == optimized
    plain, fast = runtime_of(comp.ir), runtime_of(optimized)
    for run in range(8):  # several runs per machine: the paths that tell twins apart are rare
        assert _requests(plain, seed + run) == _requests(fast, seed + run)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(twins_in_context(), st.integers(0, 10_000))
def test_twins_on_loops_or_with_listeners_keep_what_every_model_is_sent(text: str, seed: int) -> None:

    comp = compile_ok(text)
    optimized = api.optimize(comp)
    plain, fast = runtime_of(comp.ir), runtime_of(optimized)
    for run in range(8):
        assert _requests(plain, seed + run) == _requests(fast, seed + run)
    assert optimized.state("work_twin").shares == "work"  # the twin is merged, loop, listeners and all


def test_twins_on_a_bounded_loop_are_merged_and_each_keeps_its_own_sent_back_notes() -> None:
    # b and b_twin are alike, and a run can enter b, loop back, and enter b_twin: b_twin's first visit gets
    # no "sent back" note, because each member keeps its own visits
    text = """machine m {
    agent a {
        prompt "A."
    }

    start state s0 {
        agent a
        do "Plan."
        when "route 0" in output -> b_twin
        otherwise -> b
    }

    state b {
        agent a
        do "Fix."
        -> c
    }

    state b_twin {
        agent a
        do "Fix."
        -> c
    }

    state c {
        agent a
        do "Check."
        when "redo" in output -> s0 max 1
        otherwise -> done
    }

    final state done
}
"""
    comp = compile_ok(text)
    assert equivalence_classes(comp.ir) == {"b": ["b", "b_twin"]}
    plain, fast = runtime_of(comp.ir), runtime_of(api.optimize(comp))
    for seed in range(40):
        assert _requests(plain, seed) == _requests(fast, seed)


def test_twins_that_tell_listeners_are_merged_and_listeners_hear_each_by_its_own_name() -> None:
    text = chain_with_duplicates(1).replace('        do "Review the draft."\n',
                                            '        do "Review the draft."\n        tell [writer]\n')
    comp = compile_ok(text)
    assert equivalence_classes(comp.ir) == {"review0": ["review0", "review1"], "done": ["done", "failed"]}
    plain, fast = runtime_of(comp.ir), runtime_of(api.optimize(comp))
    for seed in range(20):
        assert _requests(plain, seed) == _requests(fast, seed)


def test_a_state_only_a_template_reads_is_not_removed_even_if_unreachable() -> None:
    text = chain_with_duplicates(1).replace("    final state done", """    state orphan {
        agent critic
        do "Never runs."
        -> done
    }

    final state done {
        result "{{ orphan.output }}"
    }""")
    comp = compile_ok(text)
    assert "orphan" in {s.name for s in api.optimize(comp).states}


# ---- partition refinement: exact, and O(m log n) -------------------------------------------------


def _naive_refinement(initial: list[int], edges: list[dict[int, int]]) -> set[frozenset[int]]:
    """Refine by (block, blocks of successors per label) until nothing changes — obviously right, slow."""
    block = list(initial)
    while True:
        keys = [(block[i], tuple(sorted((label, block[t]) for label, t in edges[i].items())))
                for i in range(len(block))]
        numbering: dict[object, int] = {}
        new = [numbering.setdefault(k, len(numbering)) for k in keys]
        if len(set(new)) == len(set(block)):
            groups: dict[int, set[int]] = {}
            for i, b in enumerate(new):
                groups.setdefault(b, set()).add(i)
            return {frozenset(g) for g in groups.values()}
        block = new


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_refinement_finds_the_coarsest_stable_partition(data) -> None:  # type: ignore[no-untyped-def]
    from statewright.compiler.passes.merge_equivalent import refine_partition

    n = data.draw(st.integers(1, 30))
    labels = data.draw(st.integers(1, 3))
    initial_blocks = data.draw(st.integers(1, 3))
    initial = [data.draw(st.integers(0, initial_blocks - 1)) for _ in range(n)]
    # each initial block uses the same labels for all its elements, as the pass guarantees
    block_labels = {b: data.draw(st.sets(st.integers(0, labels - 1))) for b in set(initial)}
    edges = [{label: data.draw(st.integers(0, n - 1)) for label in sorted(block_labels[initial[i]])}
             for i in range(n)]
    numbering: dict[int, int] = {}
    initial = [numbering.setdefault(b, len(numbering)) for b in initial]
    incoming: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for i, out in enumerate(edges):
        for label, target in out.items():
            incoming[target].append((label, i))
    blocks, _ = refine_partition(initial, incoming)
    assert {frozenset(b) for b in blocks} == _naive_refinement(initial, edges)


@pytest.mark.parametrize("n", [1_000, 8_000])
def test_refinement_work_is_m_log_n_on_a_chain(n: int) -> None:
    """A chain of n look-alike states splits one state off at a time: a refinement that scans the whole
    block per split does n^2/2 work; Hopcroft's smaller-half rule keeps it within m log n."""
    import math

    from statewright.compiler.passes.merge_equivalent import refine_partition

    initial = [0] * n + [1]  # n look-alikes, then the final state
    incoming: list[list[tuple[int, int]]] = [[(0, i - 1)] if i else [] for i in range(n + 1)]
    blocks, work = refine_partition(initial, incoming)
    assert len(blocks) == n + 1
    m = n
    assert work <= 4 * m * math.log2(n)


class ScriptedRecorder:
    """Answers from a test block's script (by role, state and call number) and records every request."""

    def __init__(self, script) -> None:  # type: ignore[no-untyped-def]
        self.script = script
        self.requests: list[tuple[object, ...]] = []

    def complete(self, request):  # type: ignore[no-untyped-def]
        import json

        self.requests.append((request.role, request.model, json.dumps(request.messages, sort_keys=True),
                              json.dumps(request.response_schema, sort_keys=True)))
        meta = request.metadata["statewright"]
        value = self.script.next(meta["role"], meta["state"], meta["seq"]).value
        content = value if isinstance(value, str) else json.dumps(value)
        return ModelResponse(content=content, model=request.model, prompt_tokens=1, completion_tokens=1)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_send_the_same_requests_and_pass_their_tests_when_optimized(path: Path, tmp_path: Path) -> None:
    from statewright.runtime.engine import Engine
    from statewright.runtime.scripted import Script

    comp = api.check_file(path)
    plain, optimized = runtime_of(comp.ir), runtime_of(api.optimize(comp))
    assert optimized.tests
    for test_plain, test_optimized in zip(plain.tests, optimized.tests):
        runs = []
        for machine, test in ((plain, test_plain), (optimized, test_optimized)):
            script = Script.from_test(machine, test)
            client = ScriptedRecorder(script)
            result = Engine(machine, client=client, script=script, workspace=str(tmp_path)).run(dict(test.inputs))
            if test.expect_path is not None:
                assert list(result.path) == list(test.expect_path), test.name
            runs.append((client.requests, result.status, result.final_state, result.result))
        assert runs[0] == runs[1], test.name


def test_only_template_code_reads_a_state_name_not_plain_words() -> None:
    plain = chain_with_duplicates(1).replace('prompt "You write."', 'prompt "You write what review1 reads."')
    assert compile_ok(plain).ir.state("draft").template_reads == ()
    read = chain_with_duplicates(1).replace('do "Write."', 'do "Write. {% if review1.output %}Again.{% endif %}"')
    assert [r.state for r in compile_ok(read).ir.state("draft").template_reads] == ["review1"]


# ---- issue 9, item 1: literals are compared by type and value -------------------------------------

_LITERAL_TWINS = """machine m {{
    input pick: int
    tool show = "mymod:show"
    agent critic {{
        prompt "You review."
    }}

    start state choose {{
        call show(x = 0)
        when pick == 1 -> a
        when pick == 2 -> b
        otherwise -> c
    }}

    state a {{
        {a}
        -> done
    }}

    state b {{
        {b}
        -> done
    }}

    state c {{
        {c}
        -> done
    }}

    final state done
}}
"""


@pytest.mark.parametrize(("template", "third"), [
    ("call show(x = {})", "true"),
    ("call show(x = [{}])", "true"),
    # a guard may not compare an int with a bool, so the third literal there is another number
    ('agent critic\n        do "Review."\n        output int\n        when output == {} -> done', "2"),
    ('agent critic\n        do "Review."\n        output int\n        when output + {} > 1 -> done', "2"),
], ids=["call-argument", "list-in-call-argument", "guard-comparison", "guard-arithmetic"])
def test_literals_of_different_types_are_never_taken_for_equal(template: str, third: str) -> None:
    """`1`, `1.0` and `true` are different values (Python calls them equal): states that differ only in
    which of them they use are never merged, wherever the literal appears."""
    def state(literal: str) -> str:
        return template.format(literal)
    text = _LITERAL_TWINS.format(a=state("1"), b=state("1.0"), c=state(third))
    comp = api.check_text(text, "m.fsm")
    assert comp.ir is not None, [d.message for d in comp.diagnostics]
    assert equivalence_classes(comp.ir) == {}
    same = api.check_text(_LITERAL_TWINS.format(a=state("1"), b=state("1"), c=state("2")), "m.fsm")
    assert same.ir is not None
    assert equivalence_classes(same.ir) == {"a": ["a", "b"]}


# ---- issue 9, item 2: the states a template reads come from its Jinja parse, recorded in the IR --------


def test_a_state_read_after_a_literal_holding_closing_braces_is_neither_merged_nor_removed() -> None:
    """A regex stopping at the first `}}` would miss `review1` here: the string literal holds `}}`."""
    read = chain_with_duplicates(1).replace('do "Write."', 'do "Write. {{ \\"}}\\" ~ review1.output }}"')
    comp = compile_ok(read)
    assert [r.state for r in comp.ir.state("draft").template_reads] == ["review1"]
    assert "review1" in {s.name for s in api.optimize(comp).states}  # a merged state keeps its name
    orphan = chain_with_duplicates(1).replace("    final state done", """    state orphan {
        agent critic
        do "Never runs."
        -> done
    }

    final state done {
        result "{{ '}}' ~ orphan.output }}{# {{ review0.output }} is a comment #}"
    }""")
    comp = compile_ok(orphan)
    assert [r.state for r in comp.ir.state("done").template_reads] == ["orphan"]
    assert "orphan" in {s.name for s in api.optimize(comp).states}


def test_template_reads_are_names_the_template_reads_not_words_or_local_variables() -> None:
    text = chain_with_duplicates(1).replace(
        'do "Write."',
        'do "review1 {% for review0 in [1] %}{{ review0 }}{% endfor %}{% raw %}{{ review1.output }}{% endraw %}"')
    comp = compile_ok(text)
    assert comp.ir.state("draft").template_reads == ()
    assert equivalence_classes(comp.ir) == {"review0": ["review0", "review1"], "done": ["done", "failed"]}


# ---- a checkpoint written at one level resumes at the other --------------------------------------


class _Crash(Exception):
    """The process dies during a model call."""


class ContentReplies:
    """Replies that depend only on the seed and the request, so a step re-run after a crash gets the reply
    it would have got; crashes on call number `crash_at` (counting from 0) when it is set."""

    def __init__(self, seed: int, crash_at: int | None = None) -> None:
        self.seed = seed
        self.crash_at = crash_at
        self.requests: list[tuple[object, ...]] = []

    def complete(self, request):  # type: ignore[no-untyped-def]
        import hashlib
        import json

        key = (request.role, request.model, json.dumps(request.messages, sort_keys=True),
               json.dumps(request.response_schema, sort_keys=True))
        if self.crash_at is not None and len(self.requests) == self.crash_at:
            raise _Crash
        self.requests.append(key)
        rng = random.Random(hashlib.sha256(f"{self.seed}{key}".encode()).digest())
        if request.role == "verifier":
            choice = rng.choice(request.response_schema["properties"]["choice"]["enum"])
            content = json.dumps({"choice": choice, "reason": "r", "feedback": "f"})
        else:
            content = rng.choice(["ok", "no", "redo", "route 0", "route 0 redo", "ok redo"])
        return ModelResponse(content=content, model=request.model, prompt_tokens=1, completion_tokens=1)


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(machines_with_loops_and_listeners(), st.integers(0, 10_000), st.integers(0, 6), st.booleans())
def test_a_run_checkpointed_at_one_level_resumes_at_the_other(tmp_path_factory, text: str, seed: int,
                                                              crash_at: int, upward: bool) -> None:
    from statewright.runtime.checkpoint import CheckpointStore

    comp = api.check_text(text, "m.fsm")
    assume(comp.ok)
    before, after = (api.Machine(comp, level=0), api.Machine(comp, level=1))[:: 1 if upward else -1]
    reference = ContentReplies(seed)
    expected = after.run({}, client=reference, run_id="r")
    assume(len(reference.requests) > crash_at)  # the crash comes before the run's end

    db = str(tmp_path_factory.mktemp("levels") / "runs.sqlite")
    crashing = ContentReplies(seed, crash_at=crash_at)
    with pytest.raises(_Crash):
        before.run({}, client=crashing, checkpoint=db, run_id="r")
    resumed_client = ContentReplies(seed)
    resumed = after.run(client=resumed_client, checkpoint=CheckpointStore(db), resume="r")

    # the resumed run asks what the uninterrupted one asked from the interrupted step on: the step the
    # crash cut short is asked again from its start, and no finished step is
    done, again = crashing.requests, resumed_client.requests
    assert any(done[:k] + again == reference.requests and done[k:] == again[:len(done) - k]
               for k in range(len(done) + 1))
    assert (resumed.status, resumed.final_state, resumed.result, resumed.path) == (
        expected.status, expected.final_state, expected.result, expected.path)
    assert resumed.failure == expected.failure


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_statewright_test_and_the_runners_selftest_agree_at_every_level(path: Path, tmp_path: Path,
                                                                        capsys) -> None:
    import subprocess
    import sys

    from statewright.cli import main

    comp = api.check_file(path)
    outcomes = {level: [(o.name, o.passed) for o in api.run_tests(comp, level=level)] for level in (0, 1)}
    assert outcomes[0] == outcomes[1] and all(passed for _, passed in outcomes[0])
    for flag in ([], ["-O0"]):
        assert main(["test", str(path), *flag]) == 0
        assert f"{len(outcomes[0])} passed, 0 failed" in capsys.readouterr().err
        runner = tmp_path / f"runner{len(flag)}.py"
        assert main(["compile", str(path), "-o", str(runner), *flag]) == 0
        done = subprocess.run([sys.executable, str(runner), "--selftest"], capture_output=True, text=True, check=False,
                              cwd=tmp_path, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        assert done.stdout.count("PASS") == len(outcomes[0])
