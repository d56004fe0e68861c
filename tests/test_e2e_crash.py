"""A run killed mid-step resumes from its checkpoint and ends as an uninterrupted run does; the script's call
log proves that no step completed before the kill ran again — only the interrupted one repeats."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.e2e_runs import ROOT, compile_runner, wait_for

from statewright import api
from statewright.runtime.checkpoint import CheckpointStore
from statewright.runtime.runner_cli import run_machine as run
from statewright.runtime.scripted import Script, ScriptedClient

EXAMPLE = ROOT / "examples" / "evaluator_optimizer.fsm"
INPUTS = {"subject": "finite-state machines"}
TIMED = "every section has a length in minutes"
DELAY = 0.3  # per reply: long enough for the kill to land while a call is in flight

# seven calls: outline, its verdict (none: stay), outline again, its verdict, evaluate, revise, evaluate
REPLIES: dict[str, dict[str, list[Any]]] = {
    "agent": {
        "outline": ["1. Why loops go wrong", "1. Why loops go wrong (10 min) 2. Bounds (15 min)"],
        "evaluate": [{"decision": "revise", "strengths": ["arc"], "problems": ["no demo"]},
                     {"decision": "accept", "strengths": ["the demo"], "problems": []}],
        "revise": ["1. Why loops go wrong (10 min) 2. Demo (15 min)"],
    },
    "verifier": {
        "outline": [{"choice": "none", "reason": "no timings", "feedback": "Give each section its minutes."},
                    {"choice": TIMED, "reason": "all timed", "feedback": ""}],
    },
}
KILL_AFTER_COMPLETED = 3


def delayed(replies: dict[str, dict[str, list[Any]]]) -> dict[str, Any]:
    return {role: {state: [{"value": r, "delay": DELAY} for r in items] for state, items in states.items()}
            for role, states in replies.items()}


def call_key(entry: dict[str, Any]) -> tuple[str, str, int]:
    return entry["role"], entry["state"], entry["seq"]


def comparable(result: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in result.items() if k not in ("run_id", "workspace")}


def command(face: str, tmp_path: Path) -> list[str]:
    if face == "statewright run":
        return [sys.executable, "-m", "statewright", "run", str(EXAMPLE)]
    return [sys.executable, str(compile_runner(EXAMPLE, tmp_path / "runner.py"))]


@pytest.mark.parametrize("face", ["statewright run", "generated runner"])
def test_a_killed_run_resumes_to_the_same_result_without_repeating_a_completed_step(face: str,
                                                                                    tmp_path: Path) -> None:
    machine: Any = api.runtime_machine(api.check_file(EXAMPLE))
    reference = ScriptedClient(Script.from_json(REPLIES))
    uninterrupted = run(machine, INPUTS, client=reference, workspace=str(tmp_path / "reference"))
    assert uninterrupted.ok and len(reference.calls) == 7

    script, log, db = tmp_path / "script.json", tmp_path / "calls.jsonl", tmp_path / "runs.db"
    script.write_text(json.dumps(delayed(REPLIES)), encoding="utf-8")
    env = {**os.environ, "STATEWRIGHT_SCRIPT_LOG": str(log)}
    base = [*command(face, tmp_path), "--script", str(script), "--checkpoint", str(db)]

    def logged() -> list[dict[str, Any]]:
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

    victim = subprocess.Popen([*base, "--input", f"subject={INPUTS['subject']}", "--run-id", "r1"], env=env,
                              cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        # calls are made one after another: once call k+1 is served, k calls have completed
        wait_for(lambda: len(logged()) > KILL_AFTER_COMPLETED, f"{KILL_AFTER_COMPLETED} completed calls")
        victim.send_signal(signal.SIGKILL)
    finally:
        victim.kill()
        victim.communicate(timeout=30)
    assert victim.returncode == -signal.SIGKILL
    before_kill = logged()
    assert {entry["pid"] for entry in before_kill} == {victim.pid}

    # what the last checkpoint before the kill holds: the step to run next and the calls committed so far
    snapshot = CheckpointStore(str(db)).load("r1")
    assert snapshot is not None and snapshot.head.status == "running"
    committed = snapshot.seqs

    resumed = subprocess.run([*base, "--resume", "r1"], env=env, cwd=tmp_path, capture_output=True, text=True,
                             check=False, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    result = json.loads(resumed.stdout)
    assert comparable(result) == comparable(uninterrupted.to_json())
    assert result["workspace"] == str(tmp_path / ".statewright" / "runs" / "r1" / "workspace")

    after_resume = logged()[len(before_kill):]
    assert after_resume and victim.pid not in {entry["pid"] for entry in after_resume}
    repeated = [call_key(e) for e in after_resume if call_key(e) in {call_key(b) for b in before_kill}]
    # only the step in flight at the kill may run again: calls of the state the checkpoint runs next,
    # made after its last commit, at the end of the killed run's log
    in_flight = [call_key(e) for e in before_kill
                 if e["state"] == snapshot.head.state and e["seq"] >= committed.get(f"{e['role']}:{e['state']}", 0)]
    assert set(repeated) <= set(in_flight), (repeated, in_flight, committed)
    assert [call_key(e) for e in before_kill[len(before_kill) - len(in_flight):]] == in_flight
    # and together the two processes made exactly the uninterrupted run's calls
    made = [call_key(e) for e in before_kill if call_key(e) not in repeated] + [call_key(e) for e in after_resume]
    assert len(made) == len(set(made)) and set(made) == set(reference.calls)


# ---- one owner per run --------------------------------------------------------------------------------


def slow_script(tmp_path: Path, delay: float) -> Path:
    path = tmp_path / "slow.json"
    path.write_text(json.dumps({role: {state: [{"value": r, "delay": delay} for r in items]
                                       for state, items in states.items()} for role, states in REPLIES.items()}),
                    encoding="utf-8")
    return path


def test_a_second_process_resuming_a_run_another_holds_is_refused(tmp_path: Path) -> None:
    db, log = tmp_path / "runs.db", tmp_path / "calls.jsonl"
    env = {**os.environ, "STATEWRIGHT_SCRIPT_LOG": str(log)}
    base = [sys.executable, "-m", "statewright", "run", str(EXAMPLE), "--script", str(slow_script(tmp_path, 1.0)),
            "--checkpoint", str(db), "--quiet"]
    holder = subprocess.Popen([*base, "--input", f"subject={INPUTS['subject']}", "--run-id", "r1"], env=env,
                              cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: log.exists() and len(log.read_text().splitlines()) >= 2, "the run under way")
        second = subprocess.run([*base, "--resume", "r1"], env=env, cwd=tmp_path, capture_output=True, text=True,
                                check=False, timeout=120)
        assert second.returncode == 2, second.stderr
        assert f"run 'r1' is being run by process {holder.pid}" in second.stderr
        assert "wait for that process to finish" in second.stderr
        out, err = holder.communicate(timeout=120)
    finally:
        holder.kill()
    assert holder.returncode == 0, err
    assert json.loads(out)["status"] == "final"
    served = [json.loads(line) for line in log.read_text().splitlines()]
    assert {entry["pid"] for entry in served} == {holder.pid}  # the refused process made no call at all


def test_sigterm_stops_a_run_cleanly_and_it_resumes_to_the_same_result(tmp_path: Path) -> None:
    db, log = tmp_path / "runs.db", tmp_path / "calls.jsonl"
    env = {**os.environ, "STATEWRIGHT_SCRIPT_LOG": str(log)}
    base = [sys.executable, "-m", "statewright", "run", str(EXAMPLE), "--script", str(slow_script(tmp_path, 0.4)),
            "--checkpoint", str(db), "--quiet"]
    victim = subprocess.Popen([*base, "--input", f"subject={INPUTS['subject']}", "--run-id", "r1"], env=env,
                              cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: log.exists() and len(log.read_text().splitlines()) >= 3, "three calls")
        victim.send_signal(signal.SIGTERM)
        out, err = victim.communicate(timeout=60)
    finally:
        victim.kill()
    assert victim.returncode == 143, err
    assert "stopped by SIGTERM" in err and "Traceback" not in err
    assert f"continue it with: statewright resume r1 --checkpoint {db}" in err  # the whole command
    assert out == ""  # no result: the run did not end
    snapshot = CheckpointStore(str(db)).load("r1")
    assert snapshot is not None and snapshot.head.status == "running"
    resumed = subprocess.run([*base, "--resume", "r1"], env=env, cwd=tmp_path, capture_output=True, text=True,
                             check=False, timeout=120)  # at once: the stopped process released its lease
    assert resumed.returncode == 0, resumed.stderr
    reference = run(api.runtime_machine(api.check_file(EXAMPLE)), INPUTS, script=REPLIES,
                    workspace=str(tmp_path / "reference"))
    assert comparable(json.loads(resumed.stdout)) == comparable(reference.to_json())


@pytest.mark.parametrize("damage", ["missing piece", "unreadable piece", "unreadable head"])
def test_a_damaged_checkpoint_is_refused_on_resume_with_an_honest_message(tmp_path: Path, damage: str) -> None:
    import sqlite3

    long = "1. Why loops go wrong (10 min) " + "x" * 3000  # each save's changes fill a piece of their own
    replies = {"agent": {"outline": [long, long], "evaluate": REPLIES["agent"]["evaluate"][:1], "revise": [long]},
               "verifier": REPLIES["verifier"]}  # the second evaluate is not scripted: the run stops there
    script = tmp_path / "script.json"
    script.write_text(json.dumps(replies), encoding="utf-8")
    db = tmp_path / "runs.db"
    base = [sys.executable, "-m", "statewright", "run", str(EXAMPLE), "--script", str(script), "--checkpoint",
            str(db), "--quiet"]
    first = subprocess.run([*base, "--input", f"subject={INPUTS['subject']}", "--run-id", "r1"], cwd=tmp_path,
                           capture_output=True, text=True, check=False, timeout=120)
    assert first.returncode == 1 and json.loads(first.stdout)["failure"]["kind"] == "script", first.stderr
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM run_pieces WHERE run_id = 'r1'").fetchone()[0] >= 3
        if damage == "missing piece":
            conn.execute("DELETE FROM run_pieces WHERE run_id = 'r1' AND piece = 1")
        elif damage == "unreadable piece":
            conn.execute("UPDATE run_pieces SET changes = substr(changes, 1, 100) WHERE run_id = 'r1' AND piece = 1")
        else:
            conn.execute("UPDATE runs SET head = '{\"state\": ' WHERE run_id = 'r1'")
    resumed = subprocess.run([*base, "--resume", "r1"], cwd=tmp_path, capture_output=True, text=True, check=False,
                             timeout=120)
    assert resumed.returncode == 2, resumed.stdout + resumed.stderr
    assert resumed.stdout == ""  # nothing ran
    assert "the checkpoint of run 'r1'" in resumed.stderr and "is damaged" in resumed.stderr
    assert "It cannot be resumed; start the run again under a new id" in resumed.stderr
    expected = {"missing piece": "piece 1 of", "unreadable piece": "piece 1 does not read as JSON",
                "unreadable head": "its record does not read as JSON"}[damage]
    assert expected in resumed.stderr
    assert "--resume r1" not in resumed.stderr and "Traceback" not in resumed.stderr
