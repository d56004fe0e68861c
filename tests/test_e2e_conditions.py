"""Natural-language conditions, end to end: every decision is one verifier call followed by a transition
with cause "verifier", and no agent ever reads a transition's condition — not even when the verifier
quotes it back in its reason or feedback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.e2e_runs import ROOT, cli, read_events

from statewright import api
from statewright import cli as statewright_cli

WITH_CONDITIONS = [ROOT / "examples" / name for name in
                   ("evaluator_optimizer.fsm", "ml_pipeline.fsm", "trivia_writing.fsm")]


def transition_texts(example: Path) -> list[str]:
    """The texts of every condition and guard of the machine."""
    machine: Any = api.runtime_machine(api.check_file(example))
    texts = [t.text for s in machine.states.values() for t in s.transitions if t.kind in ("condition", "guard")]
    assert any(t.kind == "condition" for s in machine.states.values() for t in s.transitions)
    return texts


def agent_message_texts(events: list[dict[str, Any]]) -> list[str]:
    calls = [e for e in events if e["event"] == "llm_call" and e["role"] == "agent"]
    assert calls and all("messages" in e for e in calls), "the trace must hold message content"
    return [str(m.get("content") or "") for e in calls for m in e["messages"]]


def check_decisions(events: list[dict[str, Any]]) -> int:
    """Every verifier transition comes right after its state's verifier call and verdict; every verdict
    that chose a condition is followed by that transition. Returns the number of verifier decisions."""
    decisions = 0
    since_enter: list[dict[str, Any]] = []
    for event in events:
        if event["event"] == "state_enter":
            since_enter = []
        if event["event"] == "transition" and event["cause"] == "verifier":
            decisions += 1
            calls = [e for e in since_enter if e["event"] == "llm_call"]
            assert calls and calls[-1]["role"] == "verifier" and calls[-1]["state"] == event["from"], event
            verdict = [e for e in since_enter if e["event"] == "verdict"][-1]
            assert verdict["state"] == event["from"] and verdict["choice"] != "none"
            assert since_enter.index(verdict) > since_enter.index(calls[-1])
        since_enter.append(event)
    for index, event in enumerate(events):
        if event["event"] == "verdict" and event["choice"] != "none":
            following = next(e for e in events[index + 1:] if e["event"] == "transition")
            assert (following["from"], following["cause"]) == (event["state"], "verifier"), following
    return decisions


@pytest.mark.parametrize("example", WITH_CONDITIONS, ids=lambda p: p.stem)
def test_test_block_traces_show_verifier_decisions_and_agents_never_see_conditions(example: Path,
                                                                                   tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    done = cli("test", str(example), "--trace", str(traces), "--trace-content")
    assert done.returncode == 0, done.stdout + done.stderr
    texts = transition_texts(example)
    decisions = 0
    files = sorted(traces.glob("*.jsonl"))
    assert files
    for trace in files:
        events = read_events(trace)
        decisions += check_decisions(events)
        for message in agent_message_texts(events):
            leaked = [t for t in texts if t.casefold() in message.casefold()]
            assert leaked == [], (trace.name, leaked)
        for call in (e for e in events if e["event"] == "llm_call" and e["role"] == "verifier"):
            shown = json.dumps(call["messages"], ensure_ascii=False)
            assert any(t in shown for t in texts), "the verifier is the one that reads the conditions"
    assert decisions >= 1, "the example's test blocks should make at least one verifier decision"


def test_a_verifier_quoting_its_condition_reaches_the_agent_with_the_condition_removed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    example = ROOT / "examples" / "trivia_writing.fsm"
    leaves_out = "the story leaves out at least one answer"
    states_all = "the story states every answer in the list"
    script = {
        "agent": {"research": [{"value": [{"question": "Who first walked on the Moon?", "answer": "Armstrong"}]}],
                  "write": ["A story without the name.", "A story naming Armstrong."]},
        "verifier": {"write": [
            {"choice": leaves_out, "reason": "The story leaves out at least one answer: Armstrong is missing",
             "feedback": f"Rewrite it so that {states_all.upper()}, Armstrong included."},
            {"choice": states_all, "reason": "It names Armstrong.", "feedback": ""},
        ]},
    }
    (tmp_path / "script.json").write_text(json.dumps(script), encoding="utf-8")
    trace = tmp_path / "trace.jsonl"
    code = statewright_cli.main(["run", str(example), "--input", "theme=the Apollo programme",
                                 "--input", "question_count=1", "--script", str(tmp_path / "script.json"),
                                 "--trace", str(trace), "--trace-content", "--workspace", str(tmp_path / "ws")])
    result = json.loads(capsys.readouterr().out)
    assert code == 0 and result["path"] == ["research", "write", "write", "done"]
    events = read_events(trace)
    assert check_decisions(events) == 2

    rerun = [e for e in events if e["event"] == "llm_call" and e["role"] == "agent" and e["state"] == "write"][1]
    told = rerun["messages"][-1]["content"]
    assert "Armstrong is missing" in told and "Armstrong included" in told  # the reason arrived ...
    assert "(...)" in told  # ... with the quoted condition cut out
    for message in agent_message_texts(events):
        assert leaves_out not in message.casefold() and states_all not in message.casefold()
