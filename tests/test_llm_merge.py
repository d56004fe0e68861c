"""LLM-judged merging: a linear number of questions, a reviewable diff, and nothing lost or unbounded."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from support.scripted_litellm import Served, register_scripted_provider

from statewright import api
from statewright.cli import main
from statewright.designer.llm_merge import candidate_pairs
from statewright.runtime.scripted import Script
from statewright.runtime.trace import Trace
from tests.test_passes import machines_with_duplicates

MODEL = "scripted/merge"
NO = {"merge": False, "reason": "different work"}
YES = {"merge": True, "reason": "both check the facts"}


def fifty_state_machine() -> str:
    """48 working states in six stages of eight, plus two final states: a long editorial pipeline."""
    topics = ["facts", "style", "structure", "sources", "tone", "length", "examples", "summary"]
    agents = ["researcher", "writer", "checker", "editor", "reviewer", "publisher"]
    out = ["machine long_pipeline {", "    input topic: str", ""]
    for a in agents:
        out += [f"    agent {a} {{", f'        prompt "You are the {a}."', "    }", ""]
    names = [f"{agents[i // 8]}_{topics[i % 8]}" for i in range(48)]
    for i, name in enumerate(names):
        nxt = names[i + 1] if i + 1 < len(names) else "done"
        head = "start state" if i == 0 else "state"
        out += [f"    {head} {name} {{", f"        agent {agents[i // 8]}",
                f'        do "Work on the {topics[i % 8]} of the article about {{{{ topic }}}}, step {i}."']
        if i % 3 == 1:
            out.append(f'        when "the {topics[i % 8]} cannot be fixed" -> failed')
            out.append(f"        otherwise -> {nxt}")
        else:
            out.append(f"        -> {nxt}")
        out += ["    }", ""]
    out += ["    final state done", "", "    final state failed", "}"]
    return "\n".join(out) + "\n"


PIPELINE = """machine pipeline {
    input topic: str

    type Check {
        ok: bool
        problems: list[str]
    }

    agent writer {
        prompt "You write."
    }

    agent checker {
        prompt "You check articles."
    }

    start state draft {
        agent writer
        do "Write an article about {{ topic }}."
        when "the article cites sources" -> check_sources
        otherwise -> check_facts
    }

    state check_facts {
        agent checker
        do "Check the facts of the article."
        output Check
        when output.ok -> publish
        when "the article is about another topic" -> failed
        -> draft max 2
        otherwise -> failed
    }

    state check_sources {
        agent checker
        do "Check the facts and the sources of the article."
        output Check
        visits 3
        when output.ok and len(output.problems) == 0 -> publish
        when "a source is a press release" -> draft max 1
        otherwise -> failed
    }

    final state publish {
        result "{{ draft.output }}"
    }

    final state failed

    test "a sound article is published" {
        input {
            topic "FSMs"
        }
        reply draft "An article."
        verdict draft "the article cites sources"
        reply check_sources {
            ok true
            problems []
        }
        expect path [draft, check_sources, publish]
    }
}
"""


def scripted(replies: list[dict[str, object]]) -> Served:
    """The merge judge's replies, served through litellm's real call path (the scripted provider)."""
    return register_scripted_provider(Script.from_json({"designer": {"merge": replies}}))


def guards_and_conditions(text: str, state: str) -> list[str]:
    machine = api.parse_text(text, "m.fsm").machine
    decl = next(s for s in machine.items if type(s).__name__ == "StateDecl" and s.name.value == state)
    out = []
    for t in decl.transitions:
        node = t.guard if t.guard is not None else t.condition
        if node is not None:
            out.append(text[node.span.start : node.span.end])
    return out


# ---- candidates ----------------------------------------------------------------------------------


def test_a_fifty_state_machine_gets_at_most_three_questions_per_state() -> None:
    comp = api.check_text(fifty_state_machine(), "long.fsm")
    assert comp.ok and len(comp.ir.states) == 50
    pairs = candidate_pairs(comp.ir)
    assert 0 < len(pairs) <= 3 * 50 < 50 * 49 // 2


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(machines_with_duplicates())
def test_candidates_are_linear_unique_and_never_involve_a_final_or_drop_the_start(text: str) -> None:
    comp = api.check_text(text, "m.fsm")
    assume(comp.ok)
    machine = comp.ir
    pairs = candidate_pairs(machine)
    assert len(pairs) <= 3 * len(machine.states)
    assert len({(c.first, c.second) for c in pairs}) == len(pairs)
    finals = {s.name for s in machine.states if s.kind == "final"}
    for c in pairs:
        assert c.first != c.second
        assert c.first not in finals and c.second not in finals
        assert c.second != machine.start


# ---- through the model ---------------------------------------------------------------------------


def test_every_candidate_is_one_model_call_and_rejections_change_nothing(tmp_path: Path) -> None:
    text = fifty_state_machine()
    comp = api.check_text(text, "long.fsm")
    script = scripted([NO] * 150)
    events: list[dict[str, object]] = []
    trace = Trace(sink=events)
    from statewright.designer.llm_merge import judge_and_merge

    report = judge_and_merge(text, "long.fsm", model=MODEL, trace=trace)
    assert report.ok
    n_candidates = len(report.candidates)
    assert n_candidates <= 150
    assert len(script.calls) == report.calls == n_candidates
    assert sum(1 for e in events if e["event"] == "llm_call" and e["role"] == "designer") == n_candidates
    assert f"{n_candidates} candidate pair(s) for 50 states (all pairs would be 1225)" in report.log
    assert report.source == text  # byte for byte
    assert report.diff == ""
    assert not report.accepted and len(report.rejected) == n_candidates
    assert comp.ok


def test_the_command_reports_as_many_candidates_as_it_asks_questions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "long.fsm"
    path.write_text(fifty_state_machine())
    script = scripted([NO] * 150)
    assert main(["optimize", str(path), "--llm", MODEL]) == 0
    captured = capsys.readouterr()
    reported = int(re.search(r"^(\d+) candidate pair\(s\) for 50 states", captured.err, re.MULTILINE).group(1))
    assert reported == len(script.calls) <= 150
    assert f"asked the model {reported} time(s): 0 merge(s) accepted, {reported} rejected" in captured.err
    assert captured.out == ""
    assert path.read_text() == fifty_state_machine()


def test_an_accepted_merge_is_a_diff_that_applies_and_checks(tmp_path: Path) -> None:
    comp = api.check_text(PIPELINE, "pipeline.fsm")
    assert comp.ok
    pairs = [(c.first, c.second) for c in candidate_pairs(comp.ir)]
    assert ("check_facts", "check_sources") in pairs
    script = scripted([YES if p == ("check_facts", "check_sources") else NO for p in pairs])
    from statewright.designer.llm_merge import judge_and_merge

    report = judge_and_merge(PIPELINE, "pipeline.fsm", model=MODEL)
    assert len(script.calls) == report.calls == len(pairs)
    assert [(c.first, c.second) for c, _ in report.accepted] == [("check_facts", "check_sources")]
    merged = report.source
    # the diff turns the original into the merged source
    original = tmp_path / "pipeline.fsm"
    original.write_text(PIPELINE)
    (tmp_path / "change.diff").write_text(report.diff)
    subprocess.run(["patch", "-p1", "-i", "change.diff"], cwd=tmp_path, check=True, capture_output=True)
    assert original.read_text() == merged
    # it checks, it is formatted, and no distinct condition of the dropped state is lost
    merged_comp = api.check_text(merged, "pipeline.fsm")
    assert merged_comp.ok, [d.message for d in merged_comp.diagnostics]
    assert api.format_text(merged, "pipeline.fsm").text == merged
    assert "state check_sources" not in merged
    for text in guards_and_conditions(PIPELINE, "check_sources"):
        assert text in merged
    # bounds are kept: check_sources' visits now bound check_facts, and both bounded edges are there
    kept = merged_comp.ir.state("check_facts")
    assert kept.visits == 3
    assert {t.max for t in kept.transitions} >= {1, 2}
    # the test block, scripted for check_sources, now scripts the merged state and still passes
    assert "expect path [draft, check_facts, publish]" in merged
    assert report.failing_tests == []
    assert [o.passed for o in api.run_tests(merged_comp)] == [True]


@pytest.mark.slow
def test_a_model_that_accepts_everything_never_joins_start_and_final_and_keeps_every_cycle_bounded() -> None:
    text = fifty_state_machine()
    script = scripted([YES] * 150)
    from statewright.designer.llm_merge import judge_and_merge

    report = judge_and_merge(text, "long.fsm", model=MODEL)
    assert report.ok and report.accepted
    assert report.calls == len(script.calls) <= len(report.candidates) <= 150
    comp = api.check_text(report.source, "long.fsm")
    assert comp.ok  # SW3008 (an unbounded cycle) would be an error
    states = {s.name: s for s in comp.ir.states}
    assert comp.ir.start == "researcher_facts"
    assert states["done"].kind == "final" and states["failed"].kind == "final"
    for cand, _ in report.accepted:
        assert cand.second != "researcher_facts"
        for condition in guards_and_conditions(text, cand.second):
            assert condition in report.source


def test_a_failing_model_leaves_the_file_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "pipeline.fsm"
    path.write_text(PIPELINE)
    scripted([])  # has no answer at all
    assert main(["optimize", str(path), "--llm", MODEL, "--write"]) == 1
    assert path.read_text() == PIPELINE
    assert "error: the model failed, nothing was changed" in capsys.readouterr().err


# ---- the command ---------------------------------------------------------------------------------


def test_optimize_prints_the_diff_and_the_candidate_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "pipeline.fsm"
    path.write_text(PIPELINE)
    pairs = [(c.first, c.second) for c in candidate_pairs(api.check_file(path).ir)]
    scripted([YES if p == ("check_facts", "check_sources") else NO for p in pairs])
    assert main(["optimize", str(path), "--llm", MODEL, "--diff"]) == 0
    captured = capsys.readouterr()
    assert f"{len(pairs)} candidate pair(s) for 5 states (all pairs would be 10)" in captured.err
    assert "merged 'check_sources' into 'check_facts'" in captured.err
    assert captured.out.startswith("--- a/pipeline.fsm\n+++ b/pipeline.fsm\n")
    assert "-    state check_sources {" in captured.out
    assert path.read_text() == PIPELINE  # --diff never writes


def test_optimize_write_applies_the_merge(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "pipeline.fsm"
    path.write_text(PIPELINE)
    pairs = [(c.first, c.second) for c in candidate_pairs(api.check_file(path).ir)]
    trace_path = tmp_path / "merge.jsonl"
    scripted([YES if p == ("check_facts", "check_sources") else NO for p in pairs])
    assert main(["optimize", str(path), "--llm", MODEL, "--write", "--trace", str(trace_path)]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"wrote {path}" in captured.err
    assert "state check_sources" not in path.read_text()
    assert main(["check", str(path)]) == 0
    calls = [json.loads(line) for line in trace_path.read_text().splitlines()]
    assert [c["role"] for c in calls if c["event"] == "llm_call"] == ["designer"] * len(pairs)


def test_optimize_with_every_merge_rejected_prints_no_diff(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "pipeline.fsm"
    path.write_text(PIPELINE)
    scripted([NO] * 15)
    assert main(["optimize", str(path), "--llm", MODEL, "--write"]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "0 merge(s) accepted" in captured.err
    assert path.read_text() == PIPELINE


def test_optimize_refuses_a_machine_with_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "broken.fsm"
    path.write_text(PIPELINE.replace("-> publish", "-> pubish"))
    assert main(["optimize", str(path), "--llm", MODEL]) == 1
    assert re.search(r"error\[SW2002\]", capsys.readouterr().err)
