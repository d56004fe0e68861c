"""`statewright trace show` on the traces of the designer (`design`, `optimize --llm`) and of newer versions.

Designer calls are labelled as the designer's, with their stage; each attempt shows its errors, codes and
failing tests, and the feedback sent after it; an event this version does not know is one generic line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from statewright import api
from statewright.cli import main
from statewright.designer.llm_merge import candidate_pairs
from statewright.trace_show import render_trace
from tests.test_designer import GOOD, MODEL, TASK, THREE_ERRORS, script_for
from tests.test_llm_merge import MODEL as MERGE_MODEL
from tests.test_llm_merge import NO, PIPELINE, YES, scripted


def table(text: str, title: str) -> dict[str, list[str]]:
    """The rows of one totals table, by their first column."""
    block = text.split(f"\n\n{title} ", 1)[1].split("\n\n", 1)[0]
    return {line[:20].strip(): line[20:].split() for line in block.splitlines()[1:]}


@pytest.fixture
def design_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """A design session: three errors, then a machine whose test fails, then a good machine."""
    failing_test = GOOD.replace("expect path [triage, draft, review, send]", "expect path [triage, review, send]")
    script_for(THREE_ERRORS, [failing_test, GOOD])
    trace = tmp_path / "design.jsonl"
    assert main(["design", TASK, "-o", str(tmp_path / "support.fsm"), "--model", MODEL,
                 "--trace", str(trace)]) == 0
    capsys.readouterr()
    return trace


def test_a_design_trace_shows_designer_calls_attempts_and_feedback(design_trace: Path, tmp_path: Path) -> None:
    text = render_trace(str(design_trace))
    lines = text.splitlines()
    assert lines[0].startswith(f"design of {tmp_path / 'support.fsm'} with model {MODEL} (up to 3 repairs)")
    assert lines[1].startswith("  task: 'Answer customer support tickets")
    # the designer's calls, each labelled with its stage — never as an agent's
    calls = [line.strip().split(" via ")[0] for line in lines if " via " in line]
    assert calls == ["designer agents", "designer machine", "designer repair", "designer repair"]
    assert not any(line.startswith("      agent ") for line in lines)
    # each attempt with its error count, codes and failing tests, and the feedback it got
    assert "  attempt 1: 3 errors (SW2002, SW3008, SW4001)" in lines
    assert "  attempt 2: 1 failing test" in lines
    assert "  attempt 3: ok, the machine checks and its tests pass" in lines
    assert "      feedback on attempt 1: 3 errors" in lines
    assert any(line.startswith("        error[SW2002] support.fsm:") and line.endswith("unknown state 'sned'")
               for line in lines)
    assert "      feedback on attempt 2: 1 failing test" in lines
    assert any(line.startswith("        test failed: a how-to ticket is answered at once") for line in lines)
    assert lines.index("  attempt 1: 3 errors (SW2002, SW3008, SW4001)") < lines.index(
        "      feedback on attempt 1: 3 errors") < lines.index("  attempt 2: 1 failing test")
    assert f"end: designed {tmp_path / 'support.fsm'} after 3 attempts" in lines
    # totals: the designer as one caller, and its calls per stage (not as states of a machine)
    assert table(text, "agent")["designer"][0] == "4"
    stages = table(text, "designer stage")
    assert {name: row[0] for name, row in stages.items()} == {"agents": "1", "machine": "1", "repair": "2",
                                                              "total": "4"}
    assert "\n\nstate " not in text


def test_trace_show_prints_a_design_trace(design_trace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", "show", str(design_trace)]) == 0
    out = capsys.readouterr().out
    assert out == render_trace(str(design_trace))


def test_a_failed_designer_call_is_shown_with_its_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script_for(THREE_ERRORS, [])  # the model has no repair to give
    trace = tmp_path / "design.jsonl"
    assert main(["design", TASK, "-o", str(tmp_path / "m.fsm"), "--model", MODEL, "--trace", str(trace)]) == 1
    capsys.readouterr()
    lines = render_trace(str(trace)).splitlines()
    failed = next(line for line in lines if line.startswith("      designer repair via"))
    assert "failed: " in failed and "no reply #1 for designer of state 'repair'" in failed
    assert any(line.startswith("end: design failed after 1 attempt: ") for line in lines)


def test_an_optimize_llm_trace_labels_each_merge_question_as_the_designers(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "pipeline.fsm"
    path.write_text(PIPELINE)
    checked: Any = api.check_file(path).ir
    pairs = [(c.first, c.second) for c in candidate_pairs(checked)]
    scripted([YES if p == ("check_facts", "check_sources") else NO for p in pairs])
    trace = tmp_path / "merge.jsonl"
    assert main(["optimize", str(path), "--llm", MERGE_MODEL, "--trace", str(trace)]) == 0
    capsys.readouterr()
    assert main(["trace", "show", str(trace)]) == 0
    text = capsys.readouterr().out
    calls = [line for line in text.splitlines() if " via " in line]
    assert len(calls) == len(pairs)
    assert all(line.startswith(f"      designer merge via {MERGE_MODEL}: ") for line in calls)
    assert table(text, "agent")["designer"][0] == str(len(pairs))
    assert table(text, "designer stage")["merge"][0] == str(len(pairs))


def write_events(path: Path, *events: dict[str, object]) -> Path:
    path.write_text("".join(json.dumps({"seq": i + 1, "time": "t", **e}) + "\n" for i, e in enumerate(events)))
    return path


def test_an_event_of_a_newer_version_is_shown_as_a_generic_line(tmp_path: Path) -> None:
    trace = write_events(
        tmp_path / "newer.jsonl",
        {"event": "run_start", "run_id": "r1", "machine": "m", "inputs": {}},
        {"event": "state_enter", "state": "a", "visit": 1},
        {"event": "human_approval", "state": "a", "approved": True, "by": "reviewer@example.com"},
        {"event": "transition", "from": "a", "to": "done", "cause": "unconditional", "reason": ""},
    )
    lines = render_trace(str(trace)).splitlines()
    assert "      human_approval: state='a', approved=true, by='reviewer@example.com'" in lines
    assert lines.index("  a (visit 1)") < lines.index(
        "      human_approval: state='a', approved=true, by='reviewer@example.com'") < lines.index(
        "  -> done  (unconditional)")


def test_a_known_event_with_fields_of_an_unexpected_shape_is_shown_generically(tmp_path: Path) -> None:
    trace = write_events(
        tmp_path / "odd.jsonl",
        {"event": "llm_call", "role": "agent", "state": "a", "agent": "w", "prompt_tokens": "many"},
        {"event": "designer_attempt", "attempt": 1, "ok": False, "error_count": "three"},
        {"event": "designer_feedback", "attempt": 1, "diagnostics": "not a list"},
        {"event": "run_end", "status": "failed", "usage": ["not", "a", "dict"]},
    )
    lines = render_trace(str(trace)).splitlines()
    assert "      llm_call: role='agent', state='a', agent='w', prompt_tokens='many'" in lines
    assert "      designer_attempt: attempt=1, ok=false, error_count='three'" in lines
    assert "      designer_feedback: attempt=1, diagnostics='not a list'" in lines
    assert "      run_end: status='failed', usage=[\"not\", \"a\", \"dict\"]" in lines


def test_branches_and_map_elements_are_shown_under_their_state_with_the_join(tmp_path: Path) -> None:
    trace = write_events(
        tmp_path / "fan-out.jsonl",
        {"event": "run_start", "run_id": "r1", "machine": "m", "inputs": {}},
        {"event": "state_enter", "state": "reviews", "visit": 1},
        {"event": "fan_out", "state": "reviews", "kind": "parallel", "branches": ["a", "b"], "join": "first 1"},
        {"event": "branch_start", "state": "reviews", "branch": "a"},
        {"event": "state_enter", "state": "a", "visit": 1},
        {"event": "guard", "state": "reviews", "branch": "a", "text": "output.ok", "value": True},
        {"event": "branch_end", "state": "reviews", "branch": "a", "status": "done", "last": "a"},
        {"event": "branch_start", "state": "reviews", "branch": "b"},
        {"event": "branch_end", "state": "reviews", "branch": "b", "status": "cancelled", "last": "b"},
        {"event": "join", "state": "reviews", "join": "first 1", "finished": ["a"], "joined": ["a"],
         "cancelled": ["b"]},
        {"event": "state_enter", "state": "build", "visit": 1},
        {"event": "fan_out", "state": "build", "kind": "map", "items": 2, "max": 5, "concurrency": 2},
        {"event": "item_start", "state": "build", "item": 0},
        {"event": "item_end", "state": "build", "item": 0},
        {"event": "join", "state": "build", "items": 2},
    )
    lines = render_trace(str(trace)).splitlines()
    assert lines[2:13] == [
        "      branches a, b at once (join first 1)",
        "    branch a:",
        "  a (visit 1)",
        "      join     `output.ok` on branch a -> true",
        "    branch b:",
        "    branch b cancelled in b",
        "    joined a (finished: a; cancelled: b)",
        "  build (visit 1)",
        "      map      2 elements, 2 at a time (max 5)",
        "    element 0:",
        "    joined 2 elements of build",
    ]
