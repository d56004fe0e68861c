"""A run of examples/approved_steps.fsm through the command line, answered one call at a time with `statewright
resume`: approved, then killed while the approved command runs, edited, rejected and approved. The process
killed after the answer and before the call's result was checkpointed asks for the answer again (the call
may have run in part: the person decides again), with the variables it had; the run ends with the result
and the variables of a run whose answers were scripted, and its trace has each answer once after the kill."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.e2e_runs import ROOT, cli, read_events, wait_for

pytestmark = pytest.mark.slow

EXAMPLE = ROOT / "examples" / "approved_steps.fsm"


def shell(command: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "std.shell", "arguments": {"command": command}}]}


AGENT = {
    "plan": [{"steps": ["Write the greeting.", "Show it."]}],
    "execute": [shell("sleep 30; echo late > greeting.txt"), {"step": "Write the greeting.", "ok": True,
                                                                "summary": "written"},
                shell("rm -rf /"), shell("cat greeting.txt"), {"step": "Show it.", "ok": True, "summary": "hello"}],
    "check": [{"finished": True, "answer": "hello"}],
}
EDIT = {"decision": "edit", "arguments": {"command": "echo hello > greeting.txt"}}
REJECT = {"decision": "reject", "reason": "never outside the workspace"}


def test_a_run_killed_after_an_approval_asks_again_and_ends_as_a_scripted_run(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"agent": AGENT}), encoding="utf-8")
    whole_script = tmp_path / "whole.json"
    whole_script.write_text(json.dumps({"agent": AGENT, "person": {"execute": [
        {"answer": EDIT}, {"answer": REJECT}, {"answer": {"decision": "approve"}}]}}), encoding="utf-8")
    whole = cli("run", str(EXAMPLE), "--input", "task=greet", "--script", str(whole_script), "--quiet",
                cwd=tmp_path)
    assert whole.returncode == 0, whole.stderr
    db, trace = tmp_path / "runs.db", tmp_path / "trace.jsonl"
    common = ["--checkpoint", str(db), "--script", str(script), "--quiet", "--trace", str(trace)]

    first = cli("run", str(EXAMPLE), "--input", "task=greet", "--run-id", "r1", *common, cwd=tmp_path)
    assert first.returncode == 4, first.stderr
    paused = json.loads(first.stdout)
    assert paused["waiting"]["arguments"] == {"command": "sleep 30; echo late > greeting.txt"}
    assert paused["variables"] == {"todo": ["Write the greeting.", "Show it."], "next": 0, "past_steps": []}

    # approved, and killed (the whole process group: the jailed command too) while the command sleeps
    victim = subprocess.Popen([sys.executable, "-m", "statewright", "resume", "r1", "--answer", "approve",
                               *common], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              start_new_session=True)
    try:
        wait_for(lambda: any(e["event"] == "approval" for e in read_events(trace)), "the approval in the trace")
        os.killpg(victim.pid, signal.SIGKILL)
        victim.communicate(timeout=60)
    finally:
        if victim.poll() is None:
            os.killpg(victim.pid, signal.SIGKILL)
    again = cli("resume", "r1", *common, cwd=tmp_path)
    assert again.returncode == 4, again.stderr
    asked = json.loads(again.stdout)
    assert asked["waiting"]["arguments"] == paused["waiting"]["arguments"]
    assert asked["variables"] == paused["variables"]

    answers = [json.dumps(EDIT), json.dumps(REJECT), "approve"]
    for index, answer in enumerate(answers):
        step = cli("resume", "r1", "--answer", answer, *common, cwd=tmp_path)
        assert step.returncode == (0 if index == len(answers) - 1 else 4), step.stderr
    ended, reference = json.loads(step.stdout), json.loads(whole.stdout)
    assert ended["status"] == "final" and ended["result"] == reference["result"] == "hello"
    assert ended["variables"] == reference["variables"]
    assert [s["summary"] for s in ended["variables"]["past_steps"]] == ["written", "hello"]
    decisions = [e["decision"] for e in read_events(trace) if e["event"] == "approval"]
    assert decisions == ["approve", "edit", "reject", "approve"]  # the killed one, then one per answer
    shell_calls = [e for e in read_events(trace) if e["event"] == "tool_call"]
    assert [e["ok"] for e in shell_calls] == [True, True]  # the edited command and the approved one
